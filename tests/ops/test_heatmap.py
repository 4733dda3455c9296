"""Heatmap / offset / CenterNet codecs against naive per-keypoint and per-object numpy loops."""

import math

import numpy as np
import pytest
import torch

from tensorpose.ops.heatmap import (
    centernet_decode,
    centernet_radius_bound,
    centernet_targets,
    decode_heatmaps,
    gather_features,
    gaussian_heatmaps,
    offset_maps,
)


# ----------------------------------------------------------------------------- naive references
def msra_heatmaps(joints, vis, size, sigma, stride=1.0):
    """The MSRA/SimpleBaseline generate_target loop, as in the reference code."""
    H, W = size
    K = len(joints)
    target = np.zeros((K, H, W), np.float32)
    weight = (vis > 0).astype(np.float32)
    tmp = sigma * 3
    for j in range(K):
        mu_x = int(joints[j][0] / stride + 0.5)
        mu_y = int(joints[j][1] / stride + 0.5)
        ul = [int(mu_x - tmp), int(mu_y - tmp)]
        br = [int(mu_x + tmp + 1), int(mu_y + tmp + 1)]
        if ul[0] >= W or ul[1] >= H or br[0] < 0 or br[1] < 0:
            weight[j] = 0
            continue
        size_g = 2 * tmp + 1
        x = np.arange(0, size_g, 1, np.float32)
        y = x[:, None]
        x0 = y0 = size_g // 2
        g = np.exp(-((x - x0) ** 2 + (y - y0) ** 2) / (2 * sigma**2))
        g_x = max(0, -ul[0]), min(br[0], W) - ul[0]
        g_y = max(0, -ul[1]), min(br[1], H) - ul[1]
        img_x = max(0, ul[0]), min(br[0], W)
        img_y = max(0, ul[1]), min(br[1], H)
        if weight[j] > 0.5:
            target[j][img_y[0] : img_y[1], img_x[0] : img_x[1]] = g[
                g_y[0] : g_y[1], g_x[0] : g_x[1]
            ]
    return target, weight


def cn_gaussian_radius(det_size, min_overlap=0.7):
    height, width = det_size
    a1 = 1
    b1 = height + width
    c1 = width * height * (1 - min_overlap) / (1 + min_overlap)
    r1 = (b1 + np.sqrt(b1**2 - 4 * a1 * c1)) / 2
    a2 = 4
    b2 = 2 * (height + width)
    c2 = (1 - min_overlap) * width * height
    r2 = (b2 + np.sqrt(b2**2 - 4 * a2 * c2)) / 2
    a3 = 4 * min_overlap
    b3 = -2 * min_overlap * (height + width)
    c3 = (min_overlap - 1) * width * height
    r3 = (b3 + np.sqrt(b3**2 - 4 * a3 * c3)) / 2
    return min(r1, r2, r3)


def cn_draw_gaussian(heatmap, center, radius):
    diameter = 2 * radius + 1
    sigma = diameter / 6
    m = (diameter - 1.0) / 2.0
    y, x = np.ogrid[-m : m + 1, -m : m + 1]
    gaussian = np.exp(-(x * x + y * y) / (2 * sigma * sigma))
    gaussian[gaussian < np.finfo(gaussian.dtype).eps * gaussian.max()] = 0
    x, y = int(center[0]), int(center[1])
    height, width = heatmap.shape[0:2]
    left, right = min(x, radius), min(width - x, radius + 1)
    top, bottom = min(y, radius), min(height - y, radius + 1)
    masked_heatmap = heatmap[y - top : y + bottom, x - left : x + right]
    masked_gaussian = gaussian[radius - top : radius + bottom, radius - left : radius + right]
    if min(masked_gaussian.shape) > 0 and min(masked_heatmap.shape) > 0:
        np.maximum(masked_heatmap, masked_gaussian, out=masked_heatmap)


def cn_targets(boxes, kps, vis, valid, H, W):
    """CenterNet multi_pose target loop for one image (boxes already in map pixels)."""
    N, K = kps.shape[:2]
    hm = np.zeros((1, H, W), np.float32)
    hm_hp = np.zeros((K, H, W), np.float32)
    wh = np.zeros((N, 2), np.float32)
    reg = np.zeros((N, 2), np.float32)
    ind = np.zeros(N, np.int64)
    reg_mask = np.zeros(N, np.float32)
    box_mask = np.zeros(N, np.float32)
    kps_t = np.zeros((N, K, 2), np.float32)
    kps_mask = np.zeros((N, K), np.float32)
    hp_offset = np.zeros((N, K, 2), np.float32)
    hp_ind = np.zeros((N, K), np.int64)
    for k in range(N):
        if not valid[k]:
            continue
        bbox = boxes[k].astype(np.float32).copy()
        bbox[[0, 2]] = np.clip(bbox[[0, 2]], 0, W - 1)
        bbox[[1, 3]] = np.clip(bbox[[1, 3]], 0, H - 1)
        h, w = bbox[3] - bbox[1], bbox[2] - bbox[0]
        if h > 0 and w > 0:
            radius = max(0, int(cn_gaussian_radius((math.ceil(h), math.ceil(w)))))
            ct = np.array([(bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2], dtype=np.float32)
            ct_int = ct.astype(np.int32)
            wh[k] = w, h
            ind[k] = ct_int[1] * W + ct_int[0]
            reg[k] = ct - ct_int
            reg_mask[k] = 1
            box_mask[k] = 1
            if vis[k].sum() == 0:
                hm[0, ct_int[1], ct_int[0]] = 0.9999
                reg_mask[k] = 0
            for j in range(K):
                if vis[k, j] > 0:
                    pt = kps[k, j].astype(np.float32)
                    if 0 <= pt[0] < W and 0 <= pt[1] < H:
                        kps_t[k, j] = pt - ct_int
                        kps_mask[k, j] = 1
                        pt_int = pt.astype(np.int32)
                        hp_offset[k, j] = pt - pt_int
                        hp_ind[k, j] = pt_int[1] * W + pt_int[0]
                        cn_draw_gaussian(hm_hp[j], pt_int, radius)
            cn_draw_gaussian(hm[0], ct_int, radius)
    return dict(
        heatmap=hm,
        joint_heatmaps=hm_hp,
        size=wh,
        offset=reg,
        index=ind,
        mask=reg_mask,
        box_mask=box_mask,
        joint_offset=kps_t,
        joint_mask=kps_mask,
        joint_sub_offset=hp_offset,
        joint_index=hp_ind,
    )


# ----------------------------------------------------------------------------- gaussian heatmaps
@pytest.mark.parametrize("sigma", [2.0, 1.5, 3.0])
def test_gaussian_heatmaps_equal_msra_loop(device, sigma):
    rng = np.random.default_rng(int(sigma * 10))
    B, K, H, W = 3, 17, 64, 48
    kp = rng.uniform(-15, 70, (B, K, 2)).astype(np.float32)
    kp[0, :4] = [[0.49, 0.5], [-0.7, 3.0], [47.6, 63.4], [-9.5, 20.0]]  # border and trunc cases
    vis = rng.integers(0, 3, (B, K))
    hm, w = gaussian_heatmaps(
        torch.from_numpy(kp).to(device), torch.from_numpy(vis).to(device), (H, W), sigma
    )
    assert hm.shape == (B, K, H, W) and w.shape == (B, K)
    for b in range(B):
        ref, rw = msra_heatmaps(kp[b], vis[b], (H, W), sigma)
        np.testing.assert_allclose(hm[b].cpu().numpy(), ref, atol=2e-7)
        np.testing.assert_array_equal(w[b].cpu().numpy(), rw)


def test_gaussian_heatmaps_stride_and_leading_dims():
    rng = np.random.default_rng(1)
    kp = rng.uniform(0, 256, (2, 5, 17, 2)).astype(np.float32)
    vis = np.ones((2, 5, 17), np.int64)
    hm, w = gaussian_heatmaps(torch.from_numpy(kp), torch.from_numpy(vis), (64, 48), 2.0, 4.0)
    ref, rw = msra_heatmaps(kp[1, 3], vis[1, 3], (64, 48), 2.0, stride=4.0)
    np.testing.assert_allclose(hm[1, 3].numpy(), ref, atol=2e-7)
    np.testing.assert_array_equal(w[1, 3].numpy(), rw)


def test_gaussian_heatmaps_bad_input():
    kp = torch.zeros(2, 17, 2)
    with pytest.raises(ValueError, match="visibility must have shape"):
        gaussian_heatmaps(kp, torch.ones(2, 16), (8, 8))
    with pytest.raises(ValueError, match="keypoints must have shape"):
        gaussian_heatmaps(torch.zeros(2, 17, 3), torch.ones(2, 17), (8, 8))
    with pytest.raises(ValueError, match="sigma"):
        gaussian_heatmaps(kp, torch.ones(2, 17), (8, 8), sigma=0)
    with pytest.raises(ValueError, match="non-finite"):
        gaussian_heatmaps(kp.clone().fill_(float("nan")), torch.ones(2, 17), (8, 8))
    with pytest.raises(TypeError, match="floating point"):
        gaussian_heatmaps(kp.long(), torch.ones(2, 17), (8, 8))


@pytest.mark.parametrize("method", ["quarter", "subpixel"])
def test_encode_decode_round_trip(device, method):
    g = torch.Generator().manual_seed(0)
    B, K, H, W, stride = 4, 17, 64, 48, 4.0
    kp = torch.rand(B, K, 2, generator=g) * torch.tensor([W * stride - 16, H * stride - 16]) + 4
    vis = torch.randint(0, 3, (B, K), generator=g)
    kp, vis = kp.to(device), vis.to(device)
    hm, w = gaussian_heatmaps(kp, vis, (H, W), 2.0, stride)
    coords, scores = decode_heatmaps(hm, method, stride=stride)
    err = (coords - kp).norm(dim=-1)[w > 0] / stride  # in map pixels
    assert float(err.max()) <= 0.5 * math.sqrt(2) + 1e-6
    assert float((coords - kp).abs().amax(-1)[w > 0].max()) / stride <= 0.5 + 1e-6
    assert torch.allclose(scores[w > 0], torch.ones_like(scores[w > 0]))
    # the unbiased encoding keeps the sub-pixel position; the Taylor decoder recovers it
    hm, w = gaussian_heatmaps(kp, vis, (H, W), 2.0, stride, unbiased=True)
    coords, _ = decode_heatmaps(hm, "subpixel", stride=stride)
    err = (coords - kp).norm(dim=-1)[w > 0] / stride
    if method == "subpixel":
        assert float(err.max()) < 1e-3
    coords, _ = decode_heatmaps(hm + 0.01 * torch.rand_like(hm), "subpixel", 1.0, stride)
    assert float(((coords - kp).norm(dim=-1)[w > 0] / stride).max()) < 0.5


def naive_quarter_decode(hm):
    K, H, W = hm.shape
    out = np.zeros((K, 2))
    for k in range(K):
        idx = int(np.argmax(hm[k]))
        px, py = idx % W, idx // W
        c = np.array([px, py], float)
        if 1 < px < W - 1 and 1 < py < H - 1:
            diff = np.array(
                [hm[k, py, px + 1] - hm[k, py, px - 1], hm[k, py + 1, px] - hm[k, py - 1, px]]
            )
            c += np.sign(diff) * 0.25
        out[k] = c
    return out


def test_quarter_decode_equals_per_keypoint_loop(device):
    g = torch.Generator().manual_seed(3)
    hm = torch.rand(2, 17, 16, 12, generator=g)
    hm[0, 0] = 0
    hm[0, 0, 0, 5] = 1  # border: no shift
    coords, scores = decode_heatmaps(hm.to(device), "quarter")
    for b in range(2):
        np.testing.assert_allclose(coords[b].cpu().numpy(), naive_quarter_decode(hm[b].numpy()))
    assert torch.allclose(scores.cpu(), hm.flatten(2).amax(-1))


def test_offset_maps_equal_loop(device):
    g = torch.Generator().manual_seed(2)
    kp = torch.rand(2, 5, 2, generator=g) * 40
    vis = torch.tensor([[1, 0, 2, 1, 1], [0, 1, 1, 2, 1]])
    off, mask = offset_maps(kp.to(device), vis.to(device), (20, 24), radius=3.0, stride=2.0)
    assert off.shape == (2, 5, 2, 20, 24) and mask.shape == (2, 5, 20, 24)
    ref = np.zeros((2, 5, 2, 20, 24), np.float32)
    for b in range(2):
        for k in range(5):
            if vis[b, k] == 0:
                continue
            x, y = kp[b, k].numpy() / 2.0
            for py in range(20):
                for px in range(24):
                    if (x - px) ** 2 + (y - py) ** 2 <= 9.0:
                        ref[b, k, :, py, px] = x - px, y - py
    np.testing.assert_allclose(off.cpu().numpy(), ref, atol=1e-5)
    assert (mask.cpu().numpy() == (np.abs(ref).sum(2) > 0)).mean() > 0.999


# ----------------------------------------------------------------------------- CenterNet
def random_people(seed, B=3, N=6, K=17, H=64, W=80):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-10, [W + 5, H + 5], (B, N, 2))
    wh = rng.uniform(0.5, 40, (B, N, 2))
    boxes = np.concatenate([xy, xy + wh], -1).astype(np.float32)
    kps = (xy[:, :, None] + rng.uniform(0, 1, (B, N, K, 2)) * wh[:, :, None]).astype(np.float32)
    vis = rng.integers(0, 3, (B, N, K))
    vis[0, 1] = 0  # a person without labelled joints
    valid = rng.uniform(size=(B, N)) < 0.8
    return boxes, kps, vis, valid


@pytest.mark.parametrize("static", [False, True])
def test_centernet_targets_equal_per_object_loop(device, static):
    H, W = 64, 80
    boxes, kps, vis, valid = random_people(0, H=H, W=W)
    t = centernet_targets(
        torch.from_numpy(boxes).to(device),
        torch.from_numpy(kps).to(device),
        torch.from_numpy(vis).to(device),
        torch.from_numpy(valid).to(device),
        (H, W),
        max_radius=centernet_radius_bound((H, W)) if static else None,
    )
    for b in range(boxes.shape[0]):
        ref = cn_targets(boxes[b], kps[b], vis[b], valid[b], H, W)
        for key, r in ref.items():
            got = t[key][b].cpu().numpy()
            assert got.shape == r.shape, key
            np.testing.assert_allclose(got, r, atol=1e-6, err_msg=key)


def test_centernet_targets_no_objects_and_bad_input():
    z = centernet_targets(
        torch.zeros(2, 3, 4),
        torch.zeros(2, 3, 17, 2),
        torch.zeros(2, 3, 17),
        torch.zeros(2, 3, dtype=torch.bool),
        (8, 8),
    )
    assert float(z["heatmap"].abs().sum()) == 0 and float(z["joint_mask"].sum()) == 0
    with pytest.raises(ValueError, match=r"keypoints must have shape \(B, N, K, 2\)"):
        centernet_targets(
            torch.zeros(2, 3, 4),
            torch.zeros(2, 4, 17, 2),
            torch.zeros(2, 4, 17),
            torch.ones(2, 3, dtype=torch.bool),
            (8, 8),
        )


def test_centernet_decode_recovers_targets(device):
    H, W = 64, 80
    boxes = torch.tensor([[[10.0, 8.0, 30.0, 50.0], [45.0, 20.0, 70.0, 60.0]]])
    kps = torch.rand(1, 2, 17, 2, generator=torch.Generator().manual_seed(0))
    kps = boxes[:, :, None, :2] + kps * (boxes[:, :, None, 2:] - boxes[:, :, None, :2])
    vis = torch.full((1, 2, 17), 2)
    valid = torch.ones(1, 2, dtype=torch.bool)
    t = centernet_targets(
        boxes.to(device), kps.to(device), vis.to(device), valid.to(device), (H, W)
    )
    # dense output maps that hold the targets at the object centres / joint positions
    size = torch.zeros(1, 2, H * W, device=device)
    off = torch.zeros(1, 2, H * W, device=device)
    joff = torch.zeros(1, 34, H * W, device=device)
    for n in range(2):
        i = int(t["index"][0, n])
        size[0, :, i] = t["size"][0, n]
        off[0, :, i] = t["offset"][0, n]
        joff[0, :, i] = t["joint_offset"][0, n].reshape(-1)
    maps = size.view(1, 2, H, W), off.view(1, 2, H, W), joff.view(1, 34, H, W)
    out = centernet_decode(t["heatmap"], *maps, k=2)
    order = out["centers"][0, :, 0].argsort()
    assert torch.allclose(out["scores"][0], torch.ones(2, device=device))
    assert torch.allclose(out["boxes"][0, order].cpu(), boxes[0], atol=1e-4)
    assert torch.allclose(out["keypoints"][0, order].cpu(), kps[0], atol=1e-4)
    # snapping to joint-heatmap peaks (integer positions without a sub-pixel map)
    out = centernet_decode(t["heatmap"], *maps, joint_heatmaps=t["joint_heatmaps"], k=2)
    assert torch.allclose(out["keypoints"][0, order].cpu(), kps[0].trunc(), atol=1e-4)
    assert torch.equal(out["keypoint_scores"].cpu(), torch.ones(1, 2, 17))


def test_gather_features():
    f = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).view(2, 3, 4, 5)
    idx = torch.tensor([[0, 7], [19, 3]])
    g = gather_features(f, idx)
    assert g.shape == (2, 2, 3)
    assert torch.equal(g[1, 0], f[1, :, 3, 4]) and torch.equal(g[0, 1], f[0, :, 1, 2])


def test_heatmaps_compile_smoke():
    fn = torch.compile(gaussian_heatmaps, dynamic=False)
    kp, vis = torch.rand(2, 17, 2) * 40, torch.ones(2, 17)
    hm, w = fn(kp, vis, (16, 12), 2.0, 4.0)
    ref, rw = gaussian_heatmaps(kp, vis, (16, 12), 2.0, 4.0)
    assert torch.allclose(hm, ref, atol=1e-6) and torch.equal(w, rw)
