"""io.videopose3d: VideoPose3D checkpoints load into VideoPose3DLifter and reproduce VideoPose3D's
own outputs (fixtures made by its code), the obvious per-frame evaluation of its model, and
refuse files that would run code."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.io.safe_pickle import RANDOM_STATE_GLOBALS, UnsafePickleError
from tensorpose.io.torch_file import torch_load
from tensorpose.lifting.videopose3d import (
    VideoPose3DLifter,
    infer_architecture,
    load_videopose3d,
    videopose3d_normalize,
)
from tensorpose.skeleton import get_skeleton

DATA = Path(__file__).resolve().parents[1] / "data" / "videopose3d"
CKPT = DATA / "vp3d_checkpoint_s0.bin"
RANDOM_STATE_CTOR = getattr(np.random, "__RandomState_ctor")  # numpy < 1.17 pickles name it


@pytest.fixture(scope="module")
def io_npz():
    with np.load(DATA / "vp3d_io_s0.npz") as z:
        return {k: z[k] for k in z.keys()}


def tol(device):
    # cuDNN may use TF32 for convolutions on GPUs: compare loosely there.
    return {"rtol": 0, "atol": 1e-5} if device.type == "cpu" else {"rtol": 1e-2, "atol": 2e-3}


# ------------------------------------------------------------------ VideoPose3D's own outputs
def test_fixture_checkpoint_reproduces_videopose3d(io_npz, device):
    m = load_videopose3d(CKPT, device)
    assert isinstance(m, VideoPose3DLifter) and not m.training
    assert m.filter_widths == io_npz["filter_widths"].tolist()
    assert m.receptive_field() == int(io_npz["receptive_field"])
    assert (m.joints_in, m.joints_out, m.expand_conv.out_channels) == (
        17,
        17,
        int(io_npz["channels"]),
    )
    kp = torch.from_numpy(io_npz["keypoints"]).to(device)
    with torch.no_grad():
        valid, dense = m(kp), m.predict(kp)
        # VideoPose3D's strided training model (TemporalModelOptimized1f), same weights:
        rf = m.receptive_field()
        windows = kp[0].unfold(0, rf, 1).permute(0, 3, 1, 2)  # (94, rf, 17, 2)
        strided = m(windows, strided=True)[:, 0]
    torch.testing.assert_close(valid.cpu(), torch.from_numpy(io_npz["valid"]), **tol(device))
    torch.testing.assert_close(dense.cpu(), torch.from_numpy(io_npz["dense"]), **tol(device))
    torch.testing.assert_close(strided.cpu(), torch.from_numpy(io_npz["valid"][0]), **tol(device))


def test_plain_torch_load_refuses_the_fixture_and_ours_reads_the_same_values():
    with pytest.raises(pickle.UnpicklingError, match="RandomState|randomstate|Unsupported global"):
        torch.load(CKPT, weights_only=True)
    ours = torch_load(CKPT, extra_globals=RANDOM_STATE_GLOBALS)
    ref = torch.load(CKPT, weights_only=False)  # trusted fixture: the reference reader
    assert list(ours) == list(ref) == [
        "epoch", "lr", "random_state", "optimizer", "model_pos", "model_traj", "random_state_semi"
    ]  # fmt: skip
    for k, v in ref["model_pos"].items():
        assert torch.equal(ours["model_pos"][k], v), k
    assert (
        ours["random_state"].get_state()[1].tolist() == ref["random_state"].get_state()[1].tolist()
    )
    assert ours["optimizer"]["param_groups"] == ref["optimizer"]["param_groups"]
    for k, v in ref["optimizer"]["state"][3].items():
        assert torch.equal(ours["optimizer"]["state"][3][k], v), k


# ------------------------------------------------------------------ naive reference
def naive_temporal_model(x, sd, widths, joints_out, causal=False, dense=False):
    """VideoPose3D's TemporalModel in eval mode, the obvious way: every output frame of every
    layer summed tap by tap. ``x (T, J_in * F)`` float64 -> ``(T - rf + 1, joints_out, 3)``."""

    def conv(h, w, dilation):  # h (T, C_in), w (C_out, C_in, K)
        K = w.shape[2]
        out = torch.zeros(h.shape[0] - (K - 1) * dilation, w.shape[0], dtype=h.dtype)
        for t in range(out.shape[0]):
            for k in range(K):
                out[t] += w[:, :, k] @ h[t + k * dilation]
        return out

    def bn(h, p):
        scale = sd[f"{p}.weight"] / torch.sqrt(sd[f"{p}.running_var"] + 1e-5)
        return (h - sd[f"{p}.running_mean"]) * scale + sd[f"{p}.bias"]

    h = torch.relu(bn(conv(x, sd["expand_conv.weight"], 1), "expand_bn"))
    dilation = widths[0]
    for i, w in enumerate(widths[1:]):
        pad = (w - 1) * dilation // 2
        shift = pad if causal else 0  # causal: the residual is the last frame of the window
        res = h[pad + shift : h.shape[0] - pad + shift]
        y = conv(h, sd[f"layers_conv.{2 * i}.weight"], 1 if dense else dilation)
        y = torch.relu(bn(y, f"layers_bn.{2 * i}"))
        y = torch.relu(
            bn(conv(y, sd[f"layers_conv.{2 * i + 1}.weight"], 1), f"layers_bn.{2 * i + 1}")
        )
        h = res + y
        dilation *= w
    out = conv(h, sd["shrink.weight"], 1) + sd["shrink.bias"]
    return out.reshape(out.shape[0], joints_out, 3)


def random_model(joints_in, joints_out, widths, channels=8, causal=False, dense=False, seed=0):
    torch.manual_seed(seed)
    m = VideoPose3DLifter(joints_in, joints_out, widths, channels, causal=causal, dense=dense)
    with torch.no_grad():
        for bn in [m.expand_bn, *m.layers_bn]:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return m.eval()


def save_vp3d_checkpoint(path, model_pos, **extra):
    """A checkpoint in the layout of VideoPose3D's run.py."""
    ckpt = {
        "epoch": 3,
        "lr": 0.00095,
        "random_state": np.random.RandomState(1234),
        "optimizer": {"state": {}, "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999)}]},
        "model_pos": model_pos,
        "model_traj": None,
        "random_state_semi": None,
    }
    ckpt.update(extra)
    torch.save(ckpt, path)


@pytest.mark.parametrize(
    "joints_in, joints_out, widths, causal, dense",
    [
        (17, 17, [3, 3, 3], False, False),
        (13, 17, [3, 5, 3], False, False),  # joints in != out, mixed widths
        (17, 16, [1, 3, 3], False, False),
        (17, 17, [3, 3, 3], True, False),  # --causal
        (17, 17, [3, 3], False, True),  # --dense
        (15, 17, [3, 5], True, True),
    ],
)
def test_loaded_model_equals_the_naive_evaluation(
    tmp_path, joints_in, joints_out, widths, causal, dense
):
    m = random_model(joints_in, joints_out, widths, causal=causal, dense=dense)
    path = tmp_path / "model.bin"
    save_vp3d_checkpoint(path, m.state_dict())
    loaded = load_videopose3d(path, causal=causal, dense=dense)
    assert loaded.filter_widths == widths and loaded.receptive_field() == m.receptive_field()
    assert (loaded.joints_in, loaded.joints_out) == (joints_in, joints_out)
    sd = {k: v.double() for k, v in m.state_dict().items()}
    rf, T = m.receptive_field(), 21
    x = torch.randn(2, T + rf - 1, joints_in, 2)
    with torch.no_grad():
        got, pred = loaded(x), loaded.predict(x[:, :T])
    for b in range(2):
        ref = naive_temporal_model(x[b].flatten(1).double(), sd, widths, joints_out, causal, dense)
        torch.testing.assert_close(got[b].double(), ref, rtol=1e-5, atol=1e-5)
        # predict: VideoPose3D's evaluation padding, (rf-1)/2 frames each side (causal: all before)
        before = rf - 1 if causal else rf // 2
        idx = [min(max(t - before, 0), T - 1) for t in range(T + rf - 1)]
        ref = naive_temporal_model(
            x[b, idx].flatten(1).double(), sd, widths, joints_out, causal, dense
        )
        torch.testing.assert_close(pred[b].double(), ref, rtol=1e-5, atol=1e-5)
    if causal:  # an output frame does not depend on later input frames
        y = x.clone()
        y[:, -1] += 1.0
        with torch.no_grad():
            torch.testing.assert_close(loaded(y)[:, :-1], got[:, :-1])
    if not dense:  # the strided training layout equals the dense evaluation on every window
        windows = x[0].unfold(0, rf, 1).permute(0, 3, 1, 2)
        with torch.no_grad():
            torch.testing.assert_close(
                loaded(windows, strided=True)[:, 0], got[0], rtol=1e-5, atol=1e-5
            )


def test_published_243_frame_model_layout(tmp_path):
    """Every key and shape of pretrained_h36m_cpn.bin / pretrained_h36m_detectron_coco.bin."""
    spec = json.loads((DATA / "pretrained_243_shapes.json").read_text())
    g = torch.Generator().manual_seed(0)
    sd = {}
    for k, shape in spec["state_dict_shapes"].items():
        if k.endswith("num_batches_tracked"):
            sd[k] = torch.tensor(1000)
        elif k.endswith("running_var"):
            sd[k] = torch.rand(shape, generator=g) + 0.5
        else:
            sd[k] = torch.randn(shape, generator=g) * 0.02
    path = tmp_path / "pretrained_h36m_like.bin"
    save_vp3d_checkpoint(path, sd)
    m = load_videopose3d(path)
    assert m.filter_widths == [3, 3, 3, 3, 3] and m.receptive_field() == spec["receptive_field"]
    assert (m.joints_in, m.joints_out, m.expand_conv.out_channels) == (17, 17, 1024)
    loaded = m.state_dict()
    assert set(loaded) == set(sd)
    for k, v in sd.items():
        assert torch.equal(loaded[k], v), k
    with torch.no_grad():
        assert m.predict(torch.randn(1, 4, 17, 2)).shape == (1, 4, 17, 3)


# ------------------------------------------------------------------ no code execution
class Payload:
    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


@pytest.mark.parametrize("where", ["random_state", "optimizer", "model_pos"])
@pytest.mark.parametrize("zip_format", [True, False])
def test_code_executing_checkpoint_is_refused(tmp_path, where, zip_format):
    marker = tmp_path / "PWNED"
    payload = Payload(os.system, f"touch '{marker}'")
    ckpt = torch_load(CKPT, extra_globals=RANDOM_STATE_GLOBALS)
    if where == "random_state":
        ckpt["random_state"] = payload
    elif where == "optimizer":
        ckpt["optimizer"]["param_groups"][0]["betas"] = (0.9, payload)
    else:
        ckpt["model_pos"]["shrink.bias"] = payload
    path = tmp_path / "evil.bin"
    torch.save(ckpt, path, _use_new_zipfile_serialization=zip_format)
    if where == "random_state" and zip_format:  # control: torch's full unpickler runs it
        torch.load(path, weights_only=False)
        assert marker.exists()
        marker.unlink()
    with pytest.raises(UnsafePickleError) as e:
        load_videopose3d(path)
    assert str(path) in str(e.value) and "'posix.system'" in str(e.value)
    assert not marker.exists()


def test_forged_numpy_state_in_random_state_is_refused(tmp_path):
    class ObjectArrayOverBytes:  # numpy.ndarray((624,), object, raw bytes): pointers from the file
        def __reduce__(self):
            return np.ndarray, ((624,), np.dtype("O"), b"\x41" * 8 * 624)

    class RS:
        def __reduce__(self):
            state = ("MT19937", ObjectArrayOverBytes(), 624, 0, 0.0)
            return RANDOM_STATE_CTOR, (), state

    path = tmp_path / "forged.bin"
    save_vp3d_checkpoint(path, random_model(17, 17, [3, 3]).state_dict(), random_state=RS())
    with pytest.raises(UnsafePickleError, match=r"forged\.bin.*ndarray"):
        load_videopose3d(path)


# ------------------------------------------------------------------ old files, bad files
def test_legacy_torch_format_and_old_numpy_names(tmp_path, io_npz):
    """VideoPose3D's published files: torch 1.0's non-zip format, numpy < 1.17 pickle names."""

    class OldRandomState:  # numpy < 1.17: __RandomState_ctor() + the legacy state tuple
        def __init__(self, rs):
            self.state = rs.get_state(legacy=True)

        def __reduce__(self):
            return RANDOM_STATE_CTOR, (), self.state

    ckpt = torch_load(CKPT, extra_globals=RANDOM_STATE_GLOBALS)
    rs = np.random.RandomState(7)
    rs.standard_normal(3)
    ckpt["random_state"] = OldRandomState(rs)
    path = tmp_path / "legacy.bin"
    torch.save(ckpt, path, _use_new_zipfile_serialization=False)
    raw = path.read_bytes()
    new, old = b"cnumpy._core.multiarray\n_reconstruct\n", b"cnumpy.core.multiarray\n_reconstruct\n"
    assert raw.count(new) == 1
    path.write_bytes(raw.replace(new, old))
    assert b"cnumpy.random\n__RandomState_ctor\n" in raw
    got = torch_load(path, extra_globals=RANDOM_STATE_GLOBALS)
    assert np.array_equal(got["random_state"].standard_normal(4), rs.standard_normal(4))
    m = load_videopose3d(path)
    with torch.no_grad():
        out = m.predict(torch.from_numpy(io_npz["keypoints"]))
    torch.testing.assert_close(out, torch.from_numpy(io_npz["dense"]), rtol=0, atol=1e-5)


def test_files_that_are_not_videopose3d_checkpoints(tmp_path):
    sd = random_model(17, 17, [3, 3]).state_dict()

    def expect(name, match, **ckpt):
        path = tmp_path / name
        torch.save(ckpt, path)
        with pytest.raises(ValueError, match=match) as e:
            load_videopose3d(path)
        assert str(path) in str(e.value)
        assert not isinstance(e.value, UnsafePickleError)

    expect(
        "no_model.bin", r"no 'model_pos' state dict \(entries: epoch, model\)", epoch=1, model=sd
    )
    expect("none_model.bin", "no 'model_pos'", model_pos=None)
    expect("list_model.bin", "a list as 'model_pos'", model_pos=[1, 2])
    expect(
        "no_expand.bin",
        "'expand_conv.weight' is missing",
        model_pos={"shrink.weight": sd["shrink.weight"]},
    )
    bad = dict(sd)
    del bad["layers_bn.1.running_var"]
    expect("missing_bn.bin", r"missing: layers_bn\.1\.running_var", model_pos=bad)
    bad = dict(sd, **{"shrink.bias": torch.zeros(50)})
    expect(
        "wrong_bias.bin", r"wrong shape: shrink\.bias \(50,\) \(expected \(51,\)\)", model_pos=bad
    )
    bad = dict(sd, **{"shrink.weight": torch.zeros(50, 8, 1)})
    expect("wrong_shrink.bin", "50 output channels, not 3 per joint", model_pos=bad)
    bad = dict(sd, **{"layers_conv.5.weight": torch.zeros(8, 8, 1)})
    expect("gap.bin", r"layers_conv indices \[0, 1, 5\]", model_pos=bad)
    bad = dict(sd, **{"head.weight": torch.zeros(3)})
    expect("extra.bin", r"unexpected: head\.weight", model_pos=bad)
    bad = dict(sd, **{"layers_conv.0.weight": torch.zeros(8, 8, 4)})
    expect("even.bin", r"filter widths \[3, 4\] must be odd", model_pos=bad)
    with pytest.raises(ValueError, match=r"\[model_traj\]|'model_traj'"):
        path = tmp_path / "traj.bin"
        save_vp3d_checkpoint(path, sd)
        load_videopose3d(path, key="model_traj")
    # Not a dict at all, not a torch file, no file.
    torch.save(torch.zeros(3), tmp_path / "tensor.bin")
    with pytest.raises(
        ValueError, match=r"tensor\.bin: not a VideoPose3D checkpoint: expected a dict"
    ):
        load_videopose3d(tmp_path / "tensor.bin")
    (tmp_path / "text.bin").write_text("model_pos = 1\n")
    with pytest.raises(ValueError, match=r"text\.bin"):
        load_videopose3d(tmp_path / "text.bin")
    with pytest.raises(FileNotFoundError):
        load_videopose3d(tmp_path / "missing.bin")


def test_infer_architecture_reads_kernel_sizes():
    m = random_model(13, 17, [3, 5, 3])
    assert infer_architecture(m.state_dict()) == {
        "joints_in": 13, "joints_out": 17, "filter_widths": [3, 5, 3], "channels": 8,
        "in_features": 2, "dense": False,
    }  # fmt: skip
    d = random_model(17, 17, [3, 3, 3], dense=True).state_dict()
    assert [d[f"layers_conv.{i}.weight"].shape[2] for i in (0, 2)] == [7, 19]
    assert infer_architecture(d, dense=True)["filter_widths"] == [3, 3, 3]
    assert infer_architecture(d)["filter_widths"] == [3, 7, 19]  # dense is not in the weights


# ------------------------------------------------------------------ conventions
def test_normalisation_is_videopose3ds():
    w, h = 1920, 1080
    px = np.random.default_rng(0).uniform(0, 1920, (5, 17, 2)).astype(np.float32)
    ref = px / w * 2 - np.array([1, h / w], dtype=np.float32)  # normalize_screen_coordinates
    got = videopose3d_normalize(torch.from_numpy(px), w, h)
    torch.testing.assert_close(got, torch.from_numpy(ref))


def test_h36m17_is_videopose3ds_joint_order():
    """VideoPose3D's 17 joints: its 32-joint Human3.6M skeleton with 15 static joints removed
    (each joint re-parented to its nearest kept ancestor) and the shoulders wired to the
    thorax; tensorpose's h36m17 has the same order, parents and left/right pairs."""
    parents32 = [-1, 0, 1, 2, 3, 4, 0, 6, 7, 8, 9, 0, 11, 12, 13, 14, 12,
                 16, 17, 18, 19, 20, 19, 22, 12, 24, 25, 26, 27, 28, 27, 30]  # fmt: skip
    left32 = [6, 7, 8, 9, 10, 16, 17, 18, 19, 20, 21, 22, 23]
    right32 = [1, 2, 3, 4, 5, 24, 25, 26, 27, 28, 29, 30, 31]
    removed = {4, 5, 9, 10, 11, 16, 20, 21, 22, 23, 24, 28, 29, 30, 31}
    keep = [j for j in range(32) if j not in removed]
    parents = []
    for j in keep:
        p = parents32[j]
        while p in removed:
            p = parents32[p]
        parents.append(-1 if p < 0 else keep.index(p))
    parents[11] = parents[14] = 8
    left = [keep.index(j) for j in left32 if j in keep]
    right = [keep.index(j) for j in right32 if j in keep]
    sk = get_skeleton("h36m17")
    assert list(sk.parents) == parents
    assert (left, right) == ([4, 5, 6, 11, 12, 13], [1, 2, 3, 14, 15, 16])
    assert [sk.flip_index[j] for j in left] == right


def test_test_time_flip_averaging_matches_videopose3d(io_npz):
    m = load_videopose3d(CKPT)
    x = torch.from_numpy(io_npz["keypoints"][:, :40])
    # VideoPose3D's evaluate(): a second, mirrored copy with left/right swapped by index lists.
    kps_left, kps_right = [1, 3, 5, 7, 9, 11, 13, 15], [2, 4, 6, 8, 10, 12, 14, 16]  # COCO
    joints_left, joints_right = [4, 5, 6, 11, 12, 13], [1, 2, 3, 14, 15, 16]  # Human3.6M
    mirrored = x.clone()
    mirrored[..., 0] *= -1
    mirrored[:, :, kps_left + kps_right] = mirrored[:, :, kps_right + kps_left]
    with torch.no_grad():
        a, b = m.predict(x), m.predict(mirrored)
        b[..., 0] *= -1
        b[:, :, joints_left + joints_right] = b[:, :, joints_right + joints_left]
        got = m.predict(
            x,
            flip_index_in=get_skeleton("coco17").flip_index,
            flip_index_out=get_skeleton("h36m17").flip_index,
        )
    torch.testing.assert_close(got, (a + b) / 2)
    with pytest.raises(ValueError, match="together"):
        m.predict(x, flip_index_in=list(range(17)))
    with pytest.raises(ValueError, match="flip_index_out must be a permutation of 17"):
        m.predict(x, flip_index_in=list(range(17)), flip_index_out=[0] * 17)
    with pytest.raises(ValueError, match=r"keypoints must have shape \(B, T, 17, 2\)"):
        m.predict(x[..., :1])
