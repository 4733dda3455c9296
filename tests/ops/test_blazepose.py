"""BlazePose geometry (ops/blazepose) against naive loops written from MediaPipe's rules."""

import math

import numpy as np
import pytest
import torch

from tensorpose.blazepose.geometry import (
    alignment_roi,
    decode_detections,
    decode_landmarks,
    detection_to_image,
    letterbox_roi,
    one_euro_step,
    refine_landmarks,
    roi_matrix,
    ssd_anchors,
    weighted_nms,
)
from tensorpose.ops.affine import warp_affine_fixed_point


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_ssd_anchors_equal_the_layer_loop():
    ref = []
    strides, layer = [8, 16, 32, 32, 32], 0
    while layer < len(strides):  # MediaPipe's loop: layers of one stride share a feature map
        last = layer
        n_per_cell = 0
        while last < len(strides) and strides[last] == strides[layer]:
            n_per_cell += 2  # aspect ratio 1 + the interpolated scale
            last += 1
        fm = math.ceil(224 / strides[layer])
        for y in range(fm):
            for x in range(fm):
                for _ in range(n_per_cell):
                    ref.append(((x + 0.5) / fm, (y + 0.5) / fm))
        layer = last
    a = ssd_anchors()
    assert a.shape == (2254, 2)
    np.testing.assert_allclose(a.numpy(), np.array(ref), atol=1e-7)


def test_decode_detections_equal_the_row_loop():
    g = torch.Generator().manual_seed(0)
    raw = torch.randn(2, 2254, 12, generator=g) * 30
    logits = torch.randn(2, 2254, 1, generator=g) * 300  # some past the clip
    anchors = ssd_anchors()
    boxes, kps, scores = decode_detections(raw, logits, anchors)
    for b in range(2):
        for i in range(0, 2254, 97):
            r, (ax, ay) = raw[b, i].tolist(), anchors[i].tolist()
            cx, cy = r[0] / 224 + ax, r[1] / 224 + ay
            w, h = r[2] / 224, r[3] / 224
            assert boxes[b, i].tolist() == pytest.approx(
                [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], abs=1e-6
            )
            for k in range(4):
                ref = [r[4 + 2 * k] / 224 + ax, r[5 + 2 * k] / 224 + ay]
                assert kps[b, i, k].tolist() == pytest.approx(ref, abs=1e-6)
            s = _sigmoid(max(-100.0, min(100.0, logits[b, i, 0].item())))
            assert scores[b, i].item() == pytest.approx(s, abs=1e-7)


def _iou_loop(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    if ix <= 0 or iy <= 0:
        return 0.0
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _weighted_nms_loop(boxes, kps, scores, thr, min_score):
    """MediaPipe's WeightedNonMaxSuppression, written as its loop."""
    order = sorted((i for i in range(len(scores)) if scores[i] >= min_score),
                   key=lambda i: -scores[i])  # fmt: skip
    out = []
    while order:
        lead = order[0]
        cand = [i for i in order if _iou_loop(boxes[lead], boxes[i]) > thr or i == lead]
        order = [i for i in order if i not in cand]
        tot = sum(scores[i] for i in cand)
        box = [sum(boxes[i][j] * scores[i] for i in cand) / tot for j in range(4)]
        kp = [[sum(kps[i][k][j] * scores[i] for i in cand) / tot for j in range(2)]
              for k in range(len(kps[lead]))]  # fmt: skip
        out.append((box, kp, scores[lead]))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_nms_equals_the_greedy_loop(seed):
    g = torch.Generator().manual_seed(seed)
    B, A, N = 3, 60, 5
    xy = torch.rand(B, A, 2, generator=g) * 0.8
    wh = torch.rand(B, A, 2, generator=g) * 0.3 + 0.05
    boxes = torch.cat([xy, xy + wh], -1).double()
    kps = torch.rand(B, A, 4, 2, generator=g).double()
    scores = torch.rand(B, A, generator=g).double()
    ob, ok_, os_, valid = weighted_nms(boxes, kps, scores, N, 0.3, 0.5)
    for b in range(B):
        ref = _weighted_nms_loop(boxes[b].tolist(), kps[b].tolist(), scores[b].tolist(), 0.3, 0.5)
        n = min(N, len(ref))
        assert valid[b].tolist() == [True] * n + [False] * (N - n)
        for j in range(n):
            np.testing.assert_allclose(ob[b, j].numpy(), ref[j][0], atol=1e-12)
            np.testing.assert_allclose(ok_[b, j].numpy(), ref[j][1], atol=1e-12)
            assert os_[b, j].item() == ref[j][2]
        assert (ob[b, n:] == 0).all() and (os_[b, n:] == 0).all()


def test_weighted_nms_none_above_min_score():
    boxes = torch.tensor([[[0.1, 0.1, 0.3, 0.3]]])
    _, _, s, valid = weighted_nms(boxes, torch.zeros(1, 1, 4, 2), torch.tensor([[0.4]]), 2)
    assert not valid.any() and (s == 0).all()


def _rect_corners_loop(cx, cy, side, rot, size):
    """MediaPipe's crop: cv::RotatedRect corners -> (0, size), (0, 0), (size, 0)."""
    a, b = math.sin(rot) * 0.5, math.cos(rot) * 0.5
    p0 = (cx - a * side - b * side, cy + b * side - a * side)
    p1 = (cx + a * side - b * side, cy - b * side - a * side)
    p2 = (2 * cx - p0[0], 2 * cy - p0[1])
    return [p0, p1, p2], [(0.0, size), (0.0, 0.0), (size, 0.0)]


def test_roi_matrix_maps_the_rotated_rect_corners():
    g = torch.Generator().manual_seed(3)
    c = torch.rand(7, 2, generator=g).double() * 500
    side = torch.rand(7, generator=g).double() * 300 + 20
    rot = (torch.rand(7, generator=g).double() - 0.5) * 6
    M = roi_matrix(c, side, rot, 256)
    for i in range(7):
        src, dst = _rect_corners_loop(*c[i].tolist(), side[i].item(), rot[i].item(), 256)
        for p, q in zip(src, dst, strict=True):
            got = M[i, :, :2] @ torch.tensor(p, dtype=torch.float64) + M[i, :, 2]
            np.testing.assert_allclose(got.numpy(), q, atol=1e-9)


def test_letterbox_and_detection_to_image_loop():
    sizes = torch.tensor([[1088, 1920], [640, 480]])
    pts = torch.rand(2, 3, 2, dtype=torch.float64)
    got = detection_to_image(pts, sizes)
    for i, (w, h) in enumerate(sizes.tolist()):
        # DetectionLetterboxRemoval then times the frame size
        pad_x = (1 - w / max(w, h)) / 2
        pad_y = (1 - h / max(w, h)) / 2
        for j in range(3):
            x, y = pts[i, j].tolist()
            ref = ((x - pad_x) / (1 - 2 * pad_x) * w, (y - pad_y) / (1 - 2 * pad_y) * h)
            np.testing.assert_allclose(got[i, j].numpy(), ref, rtol=1e-6)
    c, s, r = letterbox_roi(sizes)
    assert c.tolist() == [[544, 960], [320, 240]] and s.tolist() == [1920, 640]
    assert (r == 0).all()


def test_alignment_roi_loop():
    g = torch.Generator().manual_seed(4)
    hip = torch.rand(20, 2, generator=g).double() * 800
    top = torch.rand(20, 2, generator=g).double() * 800
    c, side, rot = alignment_roi(hip, top)
    for i in range(20):
        (x0, y0), (x1, y1) = hip[i].tolist(), top[i].tolist()
        box = math.sqrt((x1 - x0) ** 2 + (y1 - y0) ** 2) * 2
        angle = math.pi / 2 - math.atan2(-(y1 - y0), x1 - x0)
        angle = angle - 2 * math.pi * math.floor((angle + math.pi) / (2 * math.pi))
        assert c[i].tolist() == [x0, y0]
        assert side[i].item() == pytest.approx(box * 1.25, rel=1e-12)
        assert rot[i].item() == pytest.approx(angle, abs=1e-12)
    # a person standing upright: hip below the scale point -> no rotation
    _, _, r = alignment_roi(torch.tensor([[100.0, 300.0]]), torch.tensor([[100.0, 100.0]]))
    assert r.abs().item() < 1e-6


def _refine_loop(xy, hm, k=9, min_conf=0.5):
    """RefineLandmarksFromHeatMap, as its loop (float -> int truncates toward zero)."""
    L, h, w = hm.shape
    out = [list(p) for p in xy]
    for i in range(L):
        cc, cr = int(xy[i][0] * w), int(xy[i][1] * h)
        if cc < 0 or cc >= w or cr < 0:
            continue
        off = (k - 1) // 2
        tot = wc = wr = mx = 0.0
        for r in range(max(0, cr - off), min(h, cr + off + 1)):
            for c in range(max(0, cc - off), min(w, cc + off + 1)):
                conf = _sigmoid(hm[i, r, c])
                tot += conf
                mx = max(mx, conf)
                wc += c * conf
                wr += r * conf
        if mx >= min_conf and tot > 0:
            out[i] = [wc / w / tot, wr / h / tot]
    return out


def test_refine_landmarks_equal_the_window_loop():
    g = torch.Generator().manual_seed(5)
    L = 39
    xy = torch.rand(2, L, 2, generator=g).double() * 1.3 - 0.15  # some off the map
    xy[0, 0] = torch.tensor([-0.005, 0.5])  # truncates to column 0: refined
    xy[0, 1] = torch.tensor([0.5, 1.02])  # below the map: the window is cut
    hm = torch.randn(2, L, 16, 16, generator=g).double() * 3
    got = refine_landmarks(xy, hm)
    for b in range(2):
        ref = _refine_loop(xy[b].tolist(), hm[b].numpy())
        np.testing.assert_allclose(got[b].numpy(), ref, atol=1e-12)
    assert not torch.equal(got[0, 0], xy[0, 0])


def test_decode_landmarks_equal_the_projection_loop():
    g = torch.Generator().manual_seed(6)
    raw = torch.randn(3, 195, generator=g).double() * 100 + 128
    c = torch.rand(3, 2, generator=g).double() * 600
    side = torch.rand(3, generator=g).double() * 400 + 100
    rot = (torch.rand(3, generator=g).double() - 0.5) * 4
    out = decode_landmarks(raw, c, side, rot)
    for b in range(3):
        cos, sin = math.cos(rot[b].item()), math.sin(rot[b].item())
        for j in range(39):
            x, y, z, v, p = raw[b, 5 * j : 5 * j + 5].tolist()
            dx, dy = x / 256 - 0.5, y / 256 - 0.5  # LandmarkProjectionCalculator
            ref = (c[b, 0].item() + (cos * dx - sin * dy) * side[b].item(),
                   c[b, 1].item() + (sin * dx + cos * dy) * side[b].item())  # fmt: skip
            np.testing.assert_allclose(out["xy"][b, j].numpy(), ref, atol=1e-9)
            assert out["z"][b, j].item() == pytest.approx(z / 256 * side[b].item())
            assert out["visibility"][b, j].item() == pytest.approx(_sigmoid(v))
            assert out["presence"][b, j].item() == pytest.approx(_sigmoid(p))


def _opencv4_warp_loop(img, M, size, w_valid, h_valid, replicate):
    """cv2.warpPerspective(img, M, size, INTER_LINEAR) of OpenCV 4 on uint8, one pixel at a
    time: the inverse-mapped point rounded to 1/32 pixel (cvRound: half to even), integer
    bilinear weights out of 2^15, the sum rounded half up."""
    inv = np.linalg.inv(np.vstack([M, [0.0, 0.0, 1.0]]))
    h, w = size
    out = np.zeros((img.shape[0], h, w), np.int64)
    for yy in range(h):
        for xx in range(w):
            sx, sy, _ = inv @ [xx, yy, 1.0]
            X, Y = int(np.rint(sx * 32)), int(np.rint(sy * 32))
            x0, y0, ax, ay = X >> 5, Y >> 5, X & 31, Y & 31
            acc = 0
            for dy, wy in ((0, 32 - ay), (1, ay)):
                for dx, wx in ((0, 32 - ax), (1, ax)):
                    x, y = x0 + dx, y0 + dy
                    if replicate:
                        x, y = min(max(x, 0), w_valid - 1), min(max(y, 0), h_valid - 1)
                    elif not (0 <= x < w_valid and 0 <= y < h_valid):
                        continue
                    acc = acc + img[:, y, x].astype(np.int64) * (wy * wx * 32)
            out[:, yy, xx] = np.clip((acc + (1 << 14)) >> 15, 0, 255)
    return out


@pytest.mark.parametrize("border", ["constant", "replicate"])
def test_fixed_point_warp_equals_opencv4s_pixel_loop(border):
    g = torch.Generator().manual_seed(7)
    img = torch.randint(0, 256, (2, 20, 30, 3), generator=g, dtype=torch.uint8)
    sizes = torch.tensor([[30, 20], [25, 17]])  # the second image zero-padded to 30 x 20
    img[1, 17:], img[1, :, 25:] = 0, 0
    c = torch.tensor([[2.0, 18.0], [28.0, 1.0], [12.3, 9.7]])
    M = roi_matrix(c, torch.tensor([40.0, 25.0, 13.0]), torch.tensor([0.4, -1.0, 0.0]), 16)
    idx = torch.tensor([0, 1, 1])
    got = warp_affine_fixed_point(img.permute(0, 3, 1, 2), M, (16, 16), idx, sizes[idx], border)
    assert got.dtype == torch.uint8 and got.shape == (3, 3, 16, 16)
    for k in range(3):
        w, h = sizes[idx[k]].tolist()
        want = _opencv4_warp_loop(img[idx[k]].permute(2, 0, 1).numpy(), M[k].double().numpy(),
                                  (16, 16), w, h, border == "replicate")  # fmt: skip
        np.testing.assert_array_equal(got[k].numpy(), want)
    with pytest.raises(ValueError, match="border must be"):
        warp_affine_fixed_point(img.permute(0, 3, 1, 2), M[:2], (4, 4), border="wrap")


def _one_euro_naive(values, scales, fps, min_cutoff, beta, d_cutoff):
    """MediaPipe's OneEuroFilter (one_euro_filter.cc), one scalar signal, the obvious loop."""
    te = 1.0 / fps
    alpha = lambda fc: 1.0 / (1.0 + 1.0 / (2 * math.pi * fc * te))  # noqa: E731
    out, raw, x_hat, dx_hat = [], None, None, None
    for v, s in zip(values, scales, strict=True):
        d = 0.0 if raw is None else (v - raw) * s * fps
        dx_hat = d if dx_hat is None else alpha(d_cutoff) * d + (1 - alpha(d_cutoff)) * dx_hat
        a = alpha(min_cutoff + beta * abs(dx_hat))
        x_hat = v if x_hat is None else a * v + (1 - a) * x_hat
        raw = v
        out.append(x_hat)
    return out


def test_one_euro_step_equals_mediapipes_filter_loop():
    g = torch.Generator().manual_seed(0)
    T, S, L = 12, 3, 4
    values = torch.cumsum(torch.randn(T, S, L, 2, generator=g, dtype=torch.float64) * 5, 0)
    scales = 1 / (100 + 50 * torch.rand(T, S, generator=g, dtype=torch.float64))
    state, started, got = None, torch.zeros(S, dtype=torch.bool), []
    for t in range(T):
        y, state = one_euro_step(values[t], state, started, scales[t], 30.0, 0.05, 80.0)
        started = torch.ones(S, dtype=torch.bool)
        got.append(y)
    got = torch.stack(got)
    for s in range(S):
        for j in range(L):
            for d in range(2):
                want = _one_euro_naive(values[:, s, j, d].tolist(), scales[:, s].tolist(), 30.0,
                                       0.05, 80.0, 1.0)  # fmt: skip
                torch.testing.assert_close(got[:, s, j, d], torch.tensor(want, dtype=torch.float64))
    # a restarted filter passes its value through
    y, _ = one_euro_step(values[0] + 7, state, torch.tensor([True, False, True]), scales[0], 30.0,
                         0.05, 80.0)  # fmt: skip
    torch.testing.assert_close(y[1], values[0, 1] + 7)
    assert not torch.equal(y[0], values[0, 0] + 7)
