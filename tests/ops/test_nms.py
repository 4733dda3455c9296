"""NMS ops against naive greedy loops (written here) and hand-worked torchvision-style cases."""

import math

import numpy as np
import pytest
import torch

from tensorpose.ops import nms as nms_module
from tensorpose.ops.nms import (
    COCO_SIGMAS,
    batched_nms,
    box_iou,
    greedy_keep,
    nms,
    oks_matrix,
    oks_nms,
)


# ----------------------------------------------------------------------------- naive twins
def naive_iou(a, b):
    """torchvision's CPU kernel for one pair, on numpy scalars of the boxes' dtype."""
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    w = np.maximum(np.minimum(a[2], b[2]) - np.maximum(a[0], b[0]), 0)
    h = np.maximum(np.minimum(a[3], b[3]) - np.maximum(a[1], b[1]), 0)
    inter = w * h
    with np.errstate(invalid="ignore"):
        return inter / (area_a + area_b - inter)


def naive_greedy(n, scores, overlap, thr, same=None):
    """The obvious greedy loop: visit by decreasing score (Python's sort is stable), keep a
    candidate unless a kept one overlaps it by more than ``thr``."""
    order = sorted(range(n), key=lambda i: -float(scores[i]))
    keep = []
    for j in order:
        if all(
            not (float(overlap(i, j)) > thr) or (same is not None and not same(i, j)) for i in keep
        ):
            keep.append(j)
    return keep


def naive_nms(boxes, scores, thr):
    b = boxes.numpy()
    return naive_greedy(len(b), scores, lambda i, j: naive_iou(b[i], b[j]), thr)


def naive_batched_nms(boxes, scores, idxs, thr):
    # per category alone, then merged by decreasing score (stable)
    kept = []
    for c in sorted(set(idxs.tolist())):
        sel = [i for i in range(len(boxes)) if int(idxs[i]) == c]
        k = naive_nms(boxes[sel], scores[sel], thr)
        kept += [sel[i] for i in k]
    return sorted(kept, key=lambda i: (-float(scores[i]), i))


def naive_oks(kp, areas, sigmas, i, j, vis_thr=None):
    """MMPose's oks_iou for one pair, joint by joint, on numpy scalars of the dtype."""
    num, den = 0, 0
    s = (areas[i] + areas[j]) / 2 + np.finfo(np.float64).eps
    s = s.astype(kp.dtype)
    for k in range(kp.shape[1]):
        if vis_thr is not None and not (kp[i, k, 2] > vis_thr and kp[j, k, 2] > vis_thr):
            continue
        var = (kp.dtype.type(sigmas[k]) * 2) ** 2
        d2 = (kp[i, k, 0] - kp[j, k, 0]) ** 2 + (kp[i, k, 1] - kp[j, k, 1]) ** 2
        num = num + np.exp(-(d2 / var / s / 2))
        den += 1
    return num / den if den else 0.0


def naive_oks_nms(kp, scores, areas, thr, sigmas=COCO_SIGMAS, vis_thr=None):
    k, a = kp.numpy(), areas.numpy()
    return naive_greedy(len(k), scores, lambda i, j: naive_oks(k, a, sigmas, i, j, vis_thr), thr)


def tiled(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with the CPU's default tiles (one tile at these sizes) and with
    tiles of 3 candidates (suppression by the kept ones of earlier tiles, fixed point within
    each)."""
    out = [fn(*args, **kwargs)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nms_module, "_TILE", 1)
        mp.setattr(nms_module, "_MIN_ROWS", 3)
        out.append(fn(*args, **kwargs))
    return out


# ----------------------------------------------------------------------------- random inputs
def random_boxes(g, n, dtype):
    """Clustered boxes with score ties, exact duplicates and zero-area boxes."""
    centres = torch.rand(max(1, n // 6), 2, generator=g, dtype=torch.float64) * 100
    c = centres[torch.randint(len(centres), (n,), generator=g)]
    c = c + torch.randn(n, 2, generator=g, dtype=torch.float64) * 4
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * 30 + 2
    boxes = torch.cat([c - wh / 2, c + wh / 2], -1)
    if n >= 4:
        dup = torch.randint(n, (n // 4,), generator=g)
        boxes[torch.randint(n, (n // 4,), generator=g)] = boxes[dup]  # duplicates
        z = torch.randint(n, (max(1, n // 8),), generator=g)
        boxes[z, 2] = boxes[z, 0]  # zero width
        boxes[z[:1], 3] = boxes[z[:1], 1]  # and a point
    scores = torch.randint(0, 6, (n,), generator=g).to(dtype) / 5  # many ties
    return boxes.to(dtype), scores


CASES = [(n, dt) for n in (0, 1, 2, 7, 40) for dt in (torch.float32, torch.float64)]


@pytest.mark.parametrize("n,dtype", CASES)
def test_nms_equals_greedy_loop(n, dtype):
    g = torch.Generator().manual_seed(n)
    for trial in range(3):
        boxes, scores = random_boxes(g, n, dtype)
        for thr in (0.0, 0.3, 0.5, 0.7, 1.0):
            ref = naive_nms(boxes, scores, thr)
            for keep in tiled(nms, boxes, scores, thr):
                assert keep.dtype == torch.int64 and keep.shape == (len(keep),)
                assert keep.tolist() == ref, (trial, thr)


def test_nms_on_device(device):
    g = torch.Generator().manual_seed(5)
    boxes, scores = random_boxes(g, 60, torch.float32)
    keep = nms(boxes.to(device), scores.to(device), 0.5)
    assert keep.device.type == device.type
    assert keep.tolist() == naive_nms(boxes, scores, 0.5)


def test_nms_by_hand():
    # IoU(0, 1) = 81 / 119 > 0.5: box 1 goes; box 2 is disjoint
    boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]])
    assert nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist() == [0, 2]
    assert nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.7).tolist() == [0, 1, 2]
    # visiting order is by score
    assert nms(boxes, torch.tensor([0.1, 0.8, 0.7]), 0.5).tolist() == [1, 2]
    # IoU exactly 0.5 (inter 2, union 4): "> threshold" suppresses, "=" does not
    half = torch.tensor([[0.0, 0, 4, 1], [0, 0, 2, 1]])
    assert nms(half, torch.tensor([1.0, 0.5]), 0.5).tolist() == [0, 1]
    assert nms(half, torch.tensor([1.0, 0.5]), 0.49).tolist() == [0]
    # ties: equal scores keep the lower index first
    dup = torch.tensor([[0.0, 0, 10, 10]] * 3)
    assert nms(dup, torch.tensor([0.5, 0.5, 0.5]), 0.5).tolist() == [0]
    far = torch.tensor([[0.0, 0, 1, 1], [5, 5, 6, 6], [9, 9, 10, 10]])
    assert nms(far, torch.tensor([0.5, 0.9, 0.5]), 0.5).tolist() == [1, 0, 2]
    # duplicates have IoU exactly 1: threshold 1 keeps them all
    assert nms(dup, torch.tensor([0.5, 0.6, 0.4]), 1.0).tolist() == [1, 0, 2]
    # zero-area boxes: two equal points have IoU 0/0 = NaN, which suppresses nothing
    pts = torch.tensor([[5.0, 5, 5, 5], [5, 5, 5, 5], [0, 0, 10, 10]])
    assert nms(pts, torch.tensor([0.9, 0.8, 0.7]), 0.0).tolist() == [0, 1, 2]
    # threshold 0: any positive overlap suppresses, touching boxes do not
    touch = torch.tensor([[0.0, 0, 2, 2], [2, 0, 4, 2], [1.9, 0, 3, 2]])
    assert nms(touch, torch.tensor([0.9, 0.8, 0.7]), 0.0).tolist() == [0, 1]
    # a chain, IoU 0.5 / 2.5 = 0.2 between neighbours only: greedy keeps every other box
    chain = torch.tensor([[float(i), 0, i + 1.5, 1] for i in range(9)])
    for keep in tiled(nms, chain, torch.linspace(1, 0.1, 9), 0.1):
        assert keep.tolist() == [0, 2, 4, 6, 8]
    assert nms(chain, torch.linspace(1, 0.1, 9), 0.2).tolist() == list(range(9))
    # empty input
    assert nms(torch.zeros(0, 4), torch.zeros(0), 0.5).shape == (0,)


def test_box_iou_by_hand():
    a = torch.tensor([[0.0, 0, 2, 2], [0, 0, 4, 1]])
    b = torch.tensor([[1.0, 0, 3, 2], [0, 0, 2, 1], [10, 10, 11, 11]])
    expect = torch.tensor([[2 / 6, 2 / 4, 0.0], [2 / 6, 2 / 4, 0.0]])
    torch.testing.assert_close(box_iou(a, b), expect)


def test_greedy_keep_worst_case_chain():
    # each candidate suppresses only the next: the fixed point needs ~N iterations
    n = 50
    s = torch.zeros(n, n, dtype=torch.bool)
    s[torch.arange(n - 1), torch.arange(1, n)] = True
    assert greedy_keep(s).tolist() == [i % 2 == 0 for i in range(n)]
    # lower-triangle entries are ignored
    assert greedy_keep(s.T.contiguous()).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batched_nms_equals_per_category_loops(dtype):
    g = torch.Generator().manual_seed(1)
    for n in (0, 1, 5, 40):
        for _ in range(3):
            boxes, scores = random_boxes(g, n, dtype)
            idxs = torch.randint(0, 3, (n,), generator=g)
            for thr in (0.0, 0.5, 0.8):
                ref = naive_batched_nms(boxes, scores, idxs, thr)
                keeps = tiled(batched_nms, boxes, scores, idxs, thr)
                assert [k.tolist() for k in keeps] == [ref, ref]


def test_batched_nms_by_hand():
    # the same box in two categories: both stay; within a category one goes
    boxes = torch.tensor([[0.0, 0, 10, 10]] * 3)
    keep = batched_nms(boxes, torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 1, 0]), 0.5)
    assert keep.tolist() == [0, 1]
    # negative coordinates with the largest coordinate -1: shifting categories by
    # idx * (max + 1) would shift by 0 and let categories suppress each other
    neg = torch.tensor([[-10.0, -10, -1, -1], [-10, -10, -1, -1], [-9, -9, -1, -1]])
    keep = batched_nms(neg, torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 1, 1]), 0.5)
    assert keep.tolist() == [0, 1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_oks_nms_equals_greedy_loop(dtype):
    g = torch.Generator().manual_seed(2)
    for n in (0, 1, 3, 16):
        for trial in range(2):
            base = torch.rand(max(1, n // 4), 17, 2, generator=g, dtype=torch.float64) * 100
            kp = base[torch.randint(len(base), (n,), generator=g)]
            kp = kp + torch.randn(n, 17, 2, generator=g, dtype=torch.float64) * 3
            if n >= 3:
                kp[1] = kp[0]  # a duplicate
            conf = torch.rand(n, 17, 1, generator=g, dtype=torch.float64)
            kp = torch.cat([kp, conf], -1).to(dtype)
            areas = (torch.rand(n, generator=g, dtype=torch.float64) * 3000 + 500).to(dtype)
            scores = torch.randint(0, 4, (n,), generator=g).to(dtype) / 3
            for thr in (0.3, 0.6, 0.9):
                for vis in (None, 0.3):
                    ref = naive_oks_nms(kp, scores, areas, thr, vis_thr=vis)
                    keeps = tiled(oks_nms, kp, scores, areas, thr, vis_threshold=vis)
                    assert [k.tolist() for k in keeps] == [ref, ref], (n, trial, thr, vis)


def test_oks_by_hand():
    # one joint, sigma 0.05 -> (2 sigma)^2 = 0.01; areas 100; distance 1:
    # e = 1 / 0.01 / 100 / 2 = 0.5, OKS = exp(-0.5) = 0.6065
    kp = torch.tensor([[[0.0, 0.0, 1.0]], [[1.0, 0.0, 1.0]]], dtype=torch.float64)
    areas = torch.tensor([100.0, 100.0], dtype=torch.float64)
    oks = oks_matrix(kp, areas, sigmas=(0.05,))
    torch.testing.assert_close(
        oks, torch.tensor([[1, math.exp(-0.5)], [math.exp(-0.5), 1]]).double()
    )
    assert oks_nms(kp, torch.tensor([0.9, 0.8]).double(), areas, 0.6, (0.05,)).tolist() == [0]
    assert oks_nms(kp, torch.tensor([0.9, 0.8]).double(), areas, 0.61, (0.05,)).tolist() == [0, 1]
    # the mean of the two areas: 50 and 150 give the same OKS as 100 and 100
    oks2 = oks_matrix(kp, torch.tensor([50.0, 150.0]).double(), sigmas=(0.05,))
    torch.testing.assert_close(oks2, oks)
    # vis_threshold: no joint visible in both predictions -> OKS 0
    kp_hidden = kp.clone()
    kp_hidden[1, 0, 2] = 0.0
    assert oks_matrix(kp_hidden, areas, (0.05,), vis_threshold=0.5)[0, 1] == 0


def test_bad_input():
    b, s = torch.zeros(3, 4), torch.zeros(3)
    with pytest.raises(ValueError, match=r"boxes must have shape \(N, 4\)"):
        nms(torch.zeros(3, 5), s, 0.5)
    with pytest.raises(ValueError, match=r"scores must have shape \(N,\) = \(3,\)"):
        nms(b, torch.zeros(4), 0.5)
    with pytest.raises(ValueError, match=r"iou_threshold must be in \[0, 1\], got 1.5"):
        nms(b, s, 1.5)
    with pytest.raises(ValueError, match="iou_threshold must be in"):
        nms(b, s, -0.1)
    with pytest.raises(TypeError, match="iou_threshold must be a Python number"):
        nms(b, s, torch.tensor(0.5))
    with pytest.raises(TypeError, match="boxes must be a floating point tensor"):
        nms(torch.zeros(3, 4, dtype=torch.long), s, 0.5)
    with pytest.raises(ValueError, match="boxes has non-finite values"):
        nms(torch.tensor([[0.0, 0, float("nan"), 1]]), torch.zeros(1), 0.5)
    with pytest.raises(ValueError, match=r"idxs must be an integer tensor of shape \(N,\)"):
        batched_nms(b, s, torch.zeros(2, dtype=torch.long), 0.5)
    with pytest.raises(ValueError, match="idxs must be an integer tensor"):
        batched_nms(b, s, torch.zeros(3), 0.5)
    kp, a = torch.zeros(3, 17, 3), torch.ones(3)
    with pytest.raises(ValueError, match=r"keypoints must have shape \(N, K, 3\)"):
        oks_nms(torch.zeros(3, 17, 2), s, a, 0.5)
    with pytest.raises(ValueError, match=r"areas must have shape \(N,\) = \(3,\)"):
        oks_nms(kp, s, torch.ones(2), 0.5)
    with pytest.raises(ValueError, match=r"scores must have shape \(N,\) = \(3,\)"):
        oks_nms(kp, torch.zeros(2), a, 0.5)
    with pytest.raises(ValueError, match="threshold must be in"):
        oks_nms(kp, s, a, 2.0)
    with pytest.raises(ValueError, match="sigmas must have K=17 values"):
        oks_nms(kp, s, a, 0.5, sigmas=(0.1,) * 5)
    with pytest.raises(ValueError, match=r"suppress must have shape \(N, N\)"):
        greedy_keep(torch.zeros(2, 3, dtype=torch.bool))
