from __future__ import annotations

import pytest
import torch

from tensorpose import metrics
from tensorpose.lifting.model import TemporalLifter, filter_widths_for
from tensorpose.skeleton import get_skeleton

SK = get_skeleton("h36m17")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("rf", [1, 3, 9, 27, 81, 243])
def test_receptive_field(rf):
    m = TemporalLifter(SK, rf, channels=8, head="direct")
    assert m.receptive_field() == rf
    x = torch.randn(2, rf + 4, 17, 2)
    assert m.eval()(x)["joints"].shape == (2, 5, 17, 3)


def test_bad_receptive_field_and_inputs():
    for bad in (0, 2, 28, 729):
        with pytest.raises(ValueError, match="receptive_field"):
            filter_widths_for(bad)
    with pytest.raises(ValueError, match="head"):
        TemporalLifter(SK, 27, 8, head="nope")
    m = TemporalLifter(SK, 27, 8)
    with pytest.raises(ValueError, match=r"\(B, T, 17, 2\)"):
        m(torch.randn(2, 27, 16, 2))
    with pytest.raises(ValueError, match="exactly 27"):
        m(torch.randn(2, 30, 17, 2), strided=True)


@pytest.mark.parametrize("head", ["direct", "kinematic"])
def test_shapes_and_root_relative(head):
    m = TemporalLifter(SK, 27, channels=16, head=head).eval()
    with torch.no_grad():
        out = m(torch.randn(3, 27, 17, 2), strided=True)
    assert out["joints"].shape == (3, 1, 17, 3)
    assert float(out["joints"][:, :, SK.root].abs().max()) == 0.0
    if head == "kinematic":
        assert out["lengths"].shape == (3, 1, 16, 1) and float(out["lengths"].min()) > 0
        assert out["directions"].shape == (3, 1, 16, 3)
        torch.testing.assert_close(out["directions"].norm(dim=-1), torch.ones(3, 1, 16))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("head", ["direct", "kinematic"])
@pytest.mark.parametrize("rf", [3, 27, 81])
def test_strided_equals_dense_on_the_same_windows(head, rf, device):
    torch.manual_seed(0)
    m = TemporalLifter(SK, rf, channels=16, head=head).eval().to(device)
    with torch.no_grad():  # non-trivial BN statistics
        for bn in [m.expand_bn, *m.layers_bn]:
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(1, 12 + rf - 1, 17, 2, device=device)
    windows = x[0].unfold(0, rf, 1).permute(0, 3, 1, 2)  # (12, rf, 17, 2), naive slices
    # cuDNN may use TF32 for convolutions on GPUs: compare loosely there.
    tol = {"rtol": 1e-4, "atol": 1e-5} if device == "cpu" else {"rtol": 2e-2, "atol": 2e-3}
    with torch.no_grad():
        dense_feats = m.features(x)[0].T  # (12, C)
        strided_feats = m.features(windows, strided=True)[:, :, 0]
        torch.testing.assert_close(strided_feats, dense_feats, **tol)
        dense, strided = m(x), m(windows, strided=True)
    if head == "direct":
        torch.testing.assert_close(strided["joints"][:, 0], dense["joints"][0], **tol)
    else:  # per-frame directions agree; lengths are pooled over what each call sees
        torch.testing.assert_close(strided["directions"][:, 0], dense["directions"][0], **tol)


def test_kinematic_head_has_constant_bone_lengths():
    m = TemporalLifter(SK, 27, channels=16, head="kinematic").eval()
    with torch.no_grad():
        pred = m.predict(torch.randn(2, 60, 17, 2))
    assert pred.shape == (2, 60, 17, 3)
    assert float(metrics.bone_length_std(pred, SK)) < 1e-6
    d = TemporalLifter(SK, 27, channels=16, head="direct").eval()
    with torch.no_grad():
        assert float(metrics.bone_length_std(d.predict(torch.randn(2, 60, 17, 2)), SK)) > 1e-4


@pytest.mark.parametrize("T", [1, 5, 26])
def test_short_sequences_are_edge_padded(T):
    m = TemporalLifter(SK, 27, channels=16, head="direct").eval()
    x = torch.randn(1, T, 17, 2)
    with torch.no_grad():
        pred = m.predict(x)
        padded = torch.cat([x[:, :1].expand(1, 13, 17, 2), x, x[:, -1:].expand(1, 13, 17, 2)], 1)
        ref = m(padded)["joints"]
    assert pred.shape == (1, T, 17, 3)
    torch.testing.assert_close(pred, ref)


def test_gradients_flow_through_both_heads():
    for head in ("direct", "kinematic"):
        m = TemporalLifter(SK, 9, channels=8, head=head)
        m(torch.randn(4, 9, 17, 2), strided=True)["joints"].square().sum().backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.parameters())
