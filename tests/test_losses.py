"""Losses: masked MSE (autograd vs explicit backward), heatmap MSE, CenterNet focal and L1."""

import numpy as np
import pytest
import torch

from tensorpose.losses import (
    centernet_loss,
    focal_loss,
    heatmap_mse,
    masked_mse,
    masked_mse_explicit,
    reg_l1_loss,
)
from tensorpose.ops.heatmap import centernet_targets


def naive_masked_mse(pred, target, vis):
    """The DeepPose articles' form: diff * v, dot with itself, over N = v.sum() / D."""
    v = (vis > 0).to(pred.dtype).unsqueeze(-1).expand_as(pred)
    diff = ((pred - target) * v).reshape(-1)
    return diff.dot(diff) / (v.sum() / pred.shape[-1])


def test_masked_mse_forms_agree(device):
    g = torch.Generator().manual_seed(0)
    pred = torch.randn(8, 17, 2, generator=g, dtype=torch.float64).to(device)
    target = torch.randn(8, 17, 2, generator=g, dtype=torch.float64).to(device)
    vis = torch.randint(0, 3, (8, 17), generator=g).to(device)
    ref = naive_masked_mse(pred, target, vis)
    a = masked_mse(pred, target, vis)
    b = masked_mse_explicit(pred, target, vis)
    assert torch.allclose(a, ref) and torch.allclose(b, ref)
    p1, p2 = pred.clone().requires_grad_(), pred.clone().requires_grad_()
    t1, t2 = target.clone().requires_grad_(), target.clone().requires_grad_()
    masked_mse(p1, t1, vis).backward()
    masked_mse_explicit(p2, t2, vis).backward()
    assert torch.allclose(p1.grad, p2.grad) and torch.allclose(t1.grad, t2.grad)
    assert float(p1.grad[vis == 0].abs().sum()) == 0


def test_masked_mse_explicit_gradcheck():
    g = torch.Generator().manual_seed(1)
    pred = torch.randn(3, 5, 2, generator=g, dtype=torch.float64, requires_grad=True)
    target = torch.randn(3, 5, 2, generator=g, dtype=torch.float64, requires_grad=True)
    vis = torch.tensor([[2, 0, 1, 2, 0], [0, 0, 0, 0, 0], [1, 1, 2, 2, 2]])
    assert torch.autograd.gradcheck(lambda p, t: masked_mse_explicit(p, t, vis), (pred, target))
    assert torch.autograd.gradgradcheck(lambda p, t: masked_mse(p, t, vis), (pred, target))
    # nothing visible: loss 0 and zero gradients, no NaN
    z = masked_mse_explicit(pred, target, torch.zeros(3, 5))
    z.backward()
    assert float(z.detach()) == 0 and torch.isfinite(pred.grad).all()


def test_masked_mse_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        masked_mse(torch.zeros(2, 17, 2), torch.zeros(2, 16, 2), torch.ones(2, 17))
    with pytest.raises(ValueError, match=r"visibility must have shape \(2, 17\)"):
        masked_mse_explicit(torch.zeros(2, 17, 2), torch.zeros(2, 17, 2), torch.ones(2, 17, 2))


def test_heatmap_mse_equals_per_joint_loop():
    g = torch.Generator().manual_seed(2)
    pred, gt = torch.rand(4, 17, 16, 12, generator=g), torch.rand(4, 17, 16, 12, generator=g)
    w = (torch.rand(4, 17, generator=g) > 0.3).float()
    ref = 0
    for j in range(17):  # SimpleBaseline's JointsMSELoss
        p, t = pred[:, j].reshape(4, -1), gt[:, j].reshape(4, -1)
        ref = ref + 0.5 * torch.nn.functional.mse_loss(p * w[:, j : j + 1], t * w[:, j : j + 1])
    assert torch.allclose(heatmap_mse(pred, gt, w), ref / 17)


def test_focal_loss_equals_direct_formula(device):
    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(2, 3, 8, 9, generator=g, dtype=torch.float64) * 3).to(device)
    gt = torch.rand(2, 3, 8, 9, generator=g, dtype=torch.float64).to(device) ** 4
    gt[0, 0, 2, 3] = gt[1, 2, 5, 5] = gt[1, 0, 0, 0] = 1.0
    p = torch.sigmoid(logits)
    pos = gt == 1
    ref = (
        -(
            (torch.log(p) * (1 - p) ** 2)[pos].sum()
            + (torch.log(1 - p) * p**2 * (1 - gt) ** 4)[~pos].sum()
        )
        / pos.sum()
    )
    assert torch.allclose(focal_loss(logits, gt), ref)
    # no positives: the negative term alone
    neg = -(torch.log(1 - p) * p**2 * (1 - gt * 0.5) ** 4).sum()
    assert torch.allclose(focal_loss(logits, gt * 0.5), neg)
    # stable for confident logits
    assert torch.isfinite(focal_loss(torch.full((1, 1, 2, 2), 80.0), torch.ones(1, 1, 2, 2)))


def test_reg_l1_and_centernet_loss_run():
    H, W = 32, 40
    boxes = torch.tensor([[[4.0, 5.0, 20.0, 30.0], [22.0, 3.0, 38.0, 28.0]]])
    kps = boxes[:, :, None, :2] + torch.rand(1, 2, 17, 2) * 12
    t = centernet_targets(boxes, kps, torch.full((1, 2, 17), 2), torch.ones(1, 2).bool(), (H, W))
    out = torch.zeros(1, 2, H, W)
    flat = out.view(1, 2, -1)
    flat[0, :, t["index"][0]] = t["size"][0].T
    assert float(reg_l1_loss(out, t["mask"], t["index"], t["size"])) < 1e-6
    expect = t["size"].abs().sum() / (4 + 1e-4)
    assert torch.allclose(
        reg_l1_loss(torch.zeros(1, 2, H, W), t["mask"], t["index"], t["size"]), expect
    )
    outputs = {
        "heatmap": torch.randn(1, 1, H, W, requires_grad=True),
        "size": torch.randn(1, 2, H, W),
        "offset": torch.randn(1, 2, H, W),
        "joint_offset": torch.randn(1, 34, H, W),
        "joint_heatmaps": torch.randn(1, 17, H, W),
        "joint_sub_offset": torch.randn(1, 2, H, W),
    }
    losses = centernet_loss(outputs, t)
    assert set(losses) >= {"loss", "heatmap", "joint_heatmaps", "joint_offset"}
    losses["loss"].backward()
    assert torch.isfinite(outputs["heatmap"].grad).all()
    assert np.isclose(
        float(losses["loss"].detach()),
        float(
            sum(
                v.detach() * (0.1 if k == "size" else 1.0) for k, v in losses.items() if k != "loss"
            )
        ),
    )


def _naive_weighted_lifting_losses(pred, target, lengths, dirs, w, sk):
    """The three lifting loss terms with joint weights, one sample / joint / bone at a time."""
    B, T, J, _ = pred.shape
    num = {"mpjpe": 0.0, "bone": 0.0, "dir": 0.0}
    den = dict.fromkeys(num, 0.0)
    for b in range(B):
        for t in range(T):
            for j in range(J):
                num["mpjpe"] += float(w[b, 0, j] * (pred[b, t, j] - target[b, t, j]).norm())
                den["mpjpe"] += float(w[b, 0, j])
        for s, (p, c) in enumerate(sk.bones):
            wb = float(w[b, 0, p] * w[b, 0, c])
            true = [(target[b, t, c] - target[b, t, p]) for t in range(T)]
            mean_len = sum(float(v.norm()) for v in true) / T
            num["bone"] += wb * abs(float(lengths[b, 0, s, 0]) - mean_len)
            den["bone"] += wb
            for t in range(T):
                num["dir"] += wb * float((dirs[b, t, s] - true[t] / true[t].norm()).norm())
                den["dir"] += wb
    return {k: num[k] / den[k] for k in num}


def test_joint_weighted_lifting_losses_equal_a_naive_loop():
    from tensorpose.losses import bone_direction_loss, bone_length_loss, mpjpe_loss
    from tensorpose.skeleton import get_skeleton

    sk = get_skeleton("h36m17")
    g = torch.Generator().manual_seed(0)
    B, T, J, S = 3, 2, 17, 16
    pred = torch.randn(B, T, J, 3, generator=g, dtype=torch.float64)
    target = torch.randn(B, T, J, 3, generator=g, dtype=torch.float64)
    lengths = torch.rand(B, 1, S, 1, generator=g, dtype=torch.float64)
    dirs = torch.nn.functional.normalize(
        torch.randn(B, T, S, 3, generator=g, dtype=torch.float64), dim=-1
    )
    w = (torch.rand(B, 1, J, generator=g) > 0.3).double()
    w[0, 0, 8] = 0.0  # a thorax ignored: its four bones too
    want = _naive_weighted_lifting_losses(pred, target, lengths, dirs, w, sk)
    assert float(mpjpe_loss(pred, target, w)) == pytest.approx(want["mpjpe"], rel=1e-10)
    assert float(bone_length_loss(lengths, target, sk, w)) == pytest.approx(want["bone"], rel=1e-10)
    assert float(bone_direction_loss(dirs, target, sk, w)) == pytest.approx(want["dir"], rel=1e-10)
    ones = torch.ones(B, 1, J, dtype=torch.float64)  # all weights 1: the unweighted means
    assert float(mpjpe_loss(pred, target, ones)) == pytest.approx(float(mpjpe_loss(pred, target)))
    assert float(bone_length_loss(lengths, target, sk, ones)) == pytest.approx(
        float(bone_length_loss(lengths, target, sk))
    )
    assert float(bone_direction_loss(dirs, target, sk, ones)) == pytest.approx(
        float(bone_direction_loss(dirs, target, sk))
    )
    # ignored joints get no gradient from the MPJPE, the others do
    p = pred.clone().requires_grad_(True)
    mpjpe_loss(p, target, w).backward()
    moved = p.grad.abs().sum(-1).amax(1) > 0  # (B, J)
    assert torch.equal(moved, w[:, 0] > 0)
