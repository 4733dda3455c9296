"""The naive 2D baselines the benchmarks measure against: the obvious per-keypoint / per-object
/ per-sample loops, written as the reference code bases write them (numpy + OpenCV).

- :func:`msra_heatmaps`: SimpleBaseline's ``generate_target`` (a loop over keypoints).
- :func:`centernet_targets_loop`: CenterNet's ``multi_pose`` target loop (objects x joints).
- :func:`quarter_decode_loop`: MSRA ``get_final_preds`` (arg-max, then a loop over samples and
  joints for the quarter-pixel shift).
- :func:`plain_opencv_augment`: a plain per-sample OpenCV top-down pipeline (full-image flip,
  3-point affine, warp, colour jitter through HSV, noise, shadow), as data loaders usually do.
- :func:`multiperson_augment_loop`: one whole image through ``cv2.warpAffine`` and its people
  person by person (the CenterNet data loader's way).
- :func:`centernet_decode_loop`, :func:`oks_nms_loop`: CenterNet decoding of one image, peak
  by peak and joint by joint, mapped back to the image, then the greedy OKS-NMS of the
  bottom-up code bases.
"""

from __future__ import annotations

import math

import cv2
import numpy as np


def msra_heatmaps(joints, vis, size, sigma, stride=1.0):
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


def _gaussian_radius(det_size, min_overlap=0.7):
    height, width = det_size
    b1 = height + width
    c1 = width * height * (1 - min_overlap) / (1 + min_overlap)
    r1 = (b1 + np.sqrt(b1**2 - 4 * c1)) / 2
    b2 = 2 * (height + width)
    c2 = (1 - min_overlap) * width * height
    r2 = (b2 + np.sqrt(b2**2 - 16 * c2)) / 2
    a3 = 4 * min_overlap
    b3 = -2 * min_overlap * (height + width)
    c3 = (min_overlap - 1) * width * height
    r3 = (b3 + np.sqrt(b3**2 - 4 * a3 * c3)) / 2
    return min(r1, r2, r3)


def _draw_gaussian(heatmap, center, radius):
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


def centernet_targets_loop(boxes, kps, vis, valid, H, W):
    """CenterNet ``multi_pose`` targets of one image (boxes/keypoints in map pixels)."""
    N, K = kps.shape[:2]
    hm = np.zeros((1, H, W), np.float32)
    hm_hp = np.zeros((K, H, W), np.float32)
    wh = np.zeros((N, 2), np.float32)
    reg = np.zeros((N, 2), np.float32)
    ind = np.zeros(N, np.int64)
    reg_mask = np.zeros(N, np.float32)
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
            radius = max(0, int(_gaussian_radius((math.ceil(h), math.ceil(w)))))
            ct = np.array([(bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2], dtype=np.float32)
            ct_int = ct.astype(np.int32)
            wh[k] = w, h
            ind[k] = ct_int[1] * W + ct_int[0]
            reg[k] = ct - ct_int
            reg_mask[k] = 1 if vis[k].sum() > 0 else 0
            for j in range(K):
                if vis[k, j] > 0:
                    pt = kps[k, j].astype(np.float32)
                    if 0 <= pt[0] < W and 0 <= pt[1] < H:
                        kps_t[k, j] = pt - ct_int
                        kps_mask[k, j] = 1
                        pt_int = pt.astype(np.int32)
                        hp_offset[k, j] = pt - pt_int
                        hp_ind[k, j] = pt_int[1] * W + pt_int[0]
                        _draw_gaussian(hm_hp[j], pt_int, radius)
            _draw_gaussian(hm[0], ct_int, radius)
    return hm, hm_hp, wh, reg, ind, reg_mask, kps_t, kps_mask, hp_offset, hp_ind


def quarter_decode_loop(heatmaps):
    """MSRA ``get_final_preds`` on ``(B, K, H, W)`` numpy heatmaps (heatmap coordinates)."""
    B, K, H, W = heatmaps.shape
    flat = heatmaps.reshape(B, K, -1)
    idx = np.argmax(flat, 2)
    maxvals = np.amax(flat, 2)
    coords = np.stack([idx % W, idx // W], -1).astype(np.float32)
    for n in range(B):
        for p in range(K):
            hm = heatmaps[n][p]
            px = math.floor(coords[n][p][0] + 0.5)
            py = math.floor(coords[n][p][1] + 0.5)
            if 1 < px < W - 1 and 1 < py < H - 1:
                diff = np.array([hm[py][px + 1] - hm[py][px - 1], hm[py + 1][px] - hm[py - 1][px]])
                coords[n][p] += np.sign(diff) * 0.25
    return coords, maxvals


def plain_opencv_augment(sample, rng, flip_index, size, cfg):
    """One sample through a plain per-sample OpenCV pipeline (the baseline data loader)."""
    H, W = size
    img = sample["image"]
    kp = sample["keypoints"].astype(np.float64).copy()
    vis = sample["visibility"].copy()
    c = sample["center"].astype(np.float64).copy()
    s = float(sample["scale"][0])
    s *= np.clip(rng.standard_normal() * cfg.scale + 1, 1 - cfg.scale, 1 + cfg.scale)
    r = 0.0
    if rng.random() < cfg.rotation_prob:
        r = np.clip(rng.standard_normal() * cfg.rotation, -2 * cfg.rotation, 2 * cfg.rotation)
    if rng.random() < cfg.flip_prob:  # flip the whole image and the joints (reference style)
        img = cv2.flip(img, 1)
        kp[:, 0] = img.shape[1] - 1 - kp[:, 0]
        kp, vis = kp[flip_index], vis[flip_index]
        c[0] = img.shape[1] - 1 - c[0]
    rad = math.radians(r)
    sn, cs = math.sin(rad), math.cos(rad)
    up = np.array([0.5 * s * sn, -0.5 * s * cs])
    left = np.array([-0.5 * s * cs, -0.5 * s * sn])
    src = np.float32([c, c + up, c + left])
    o = np.array([(W - 1) / 2, (H - 1) / 2])
    dst = np.float32([o, o + np.array([0, -W / 2]), o + np.array([-W / 2, 0])])
    M = cv2.getAffineTransform(src, dst)
    crop = cv2.warpAffine(img, M, (W, H), flags=cv2.INTER_LINEAR)
    kp = kp @ M[:, :2].T + M[:, 2]
    inside = (kp[:, 0] >= -0.5) & (kp[:, 0] < W - 0.5) & (kp[:, 1] >= -0.5) & (kp[:, 1] < H - 0.5)
    vis = vis * inside
    # colour: brightness and contrast, then saturation and hue in HSV
    b = 1 + rng.uniform(-cfg.brightness, cfg.brightness)
    ct = 1 + rng.uniform(-cfg.contrast, cfg.contrast)
    mean = cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY).mean()
    crop = cv2.convertScaleAbs(crop, alpha=b * ct, beta=(1 - ct) * b * mean)
    hsv = cv2.cvtColor(crop, cv2.COLOR_RGB2HSV).astype(np.float32)
    hsv[..., 0] = (hsv[..., 0] + rng.uniform(-cfg.hue, cfg.hue) * 180) % 180
    hsv[..., 1] *= 1 + rng.uniform(-cfg.saturation, cfg.saturation)
    crop = cv2.cvtColor(np.clip(hsv, 0, 255).astype(np.uint8), cv2.COLOR_HSV2RGB)
    if rng.random() < cfg.noise_prob:
        noise = rng.normal(0, rng.uniform(0, cfg.noise), crop.shape)
        crop = np.clip(crop + noise, 0, 255).astype(np.uint8)
    if rng.random() < cfg.shadow_prob:
        a = rng.uniform(0, 2 * np.pi)
        d = (rng.random() - 0.5) * 0.5 * math.hypot(W, H)
        ys, xs = np.mgrid[0:H, 0:W]
        mask = (xs - (W - 1) / 2) * math.cos(a) + (ys - (H - 1) / 2) * math.sin(a) > d
        f = 1 - rng.uniform(*cfg.shadow_strength)
        crop[mask] = (crop[mask] * f).astype(np.uint8)
    return crop, kp, vis


def multiperson_augment_loop(image, M, boxes, kps, vis, flip, flip_index, size):
    """One image: warp with ``M (2, 3)``, then each person's box corners and joints (a loop over
    people and joints); boxes ``(N, 4)`` x, y, w, h -> x1, y1, x2, y2."""
    S = size
    crop = cv2.warpAffine(image, M, (S, S), flags=cv2.INTER_LINEAR)
    N, K = kps.shape[:2]
    out_boxes = np.zeros((N, 4), np.float32)
    out_kps = np.zeros((N, K, 2), np.float32)
    out_vis = np.zeros((N, K), np.int64)
    for n in range(N):
        x, y, w, h = boxes[n]
        c = np.array([[x, y, 1], [x + w, y, 1], [x, y + h, 1], [x + w, y + h, 1]]) @ M.T
        out_boxes[n] = [*c.min(0), *c.max(0)]
        for j in range(K):
            src = flip_index[j] if flip else j
            q = M @ np.array([kps[n, src, 0], kps[n, src, 1], 1.0])
            out_kps[n, j] = q
            inside = -0.5 <= q[0] < S - 0.5 and -0.5 <= q[1] < S - 0.5
            out_vis[n, j] = vis[n, src] if inside else 0
    return crop, out_boxes, out_kps, out_vis


def _max3(h):
    p = np.pad(h, 1, constant_values=-np.inf)
    H, W = h.shape
    return np.max([p[i : i + H, j : j + W] for i in range(3) for j in range(3)], axis=0)


def _peaks(h, k):
    peaks = h * (_max3(h) == h)
    flat = peaks.ravel()
    idx = np.argsort(-flat, kind="stable")[:k]
    return flat[idx], idx


def centernet_decode_loop(out, M_inv, k=20, thr=0.1, stride=4):
    """CenterNet pose decoding of ONE image from numpy head outputs (heatmaps as probabilities),
    people mapped to image pixels with ``M_inv (2, 3)`` (input -> image).

    Returns ``scores (k,)``, ``boxes (k, 4)``, ``keypoints (k, K, 2)``, ``kp_scores (k, K)``.
    """
    heat, wh, reg = out["heatmap"][0], out["size"], out["offset"]
    hps, hm_hp, hp_off = out["joint_offset"], out["joint_heatmaps"], out["joint_sub_offset"]
    K, H, W = hm_hp.shape
    scores, idx = _peaks(heat, k)
    cand = []
    for j in range(K):  # joint heatmap peaks, joint by joint
        s, i = _peaks(hm_hp[j], k)
        xs, ys = i % W, i // W
        xy = np.stack([xs + hp_off[0, ys, xs], ys + hp_off[1, ys, xs]], -1)
        cand.append((s, xy))
    boxes = np.zeros((len(idx), 4))
    kps = np.zeros((len(idx), K, 2))
    kp_scores = np.zeros((len(idx), K))
    for p, i in enumerate(idx):  # peak by peak
        y, x = divmod(int(i), W)
        cx, cy = x + reg[0, y, x], y + reg[1, y, x]
        w, h = wh[0, y, x], wh[1, y, x]
        box = np.array([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])
        for j in range(K):  # joint by joint: regressed, then snapped to a near joint peak
            pt = np.array([x + hps[2 * j, y, x], y + hps[2 * j + 1, y, x]])
            s, xy = cand[j]
            d = np.where(s > thr, np.linalg.norm(xy - pt, axis=-1), np.inf)
            m = int(np.argmin(d))
            q = xy[m]
            inside = box[0] <= q[0] <= box[2] and box[1] <= q[1] <= box[3]
            if np.isfinite(d[m]) and inside and d[m] <= 0.3 * max(w, h):
                pt = q
            kps[p, j] = pt
            ix = int(np.clip(np.floor(pt[0]), 0, W - 1))
            iy = int(np.clip(np.floor(pt[1]), 0, H - 1))
            kp_scores[p, j] = hm_hp[j, iy, ix]
        kps[p] = (kps[p] * stride) @ M_inv[:, :2].T + M_inv[:, 2]
        c = np.array([[box[0], box[1]], [box[2], box[1]], [box[0], box[3]], [box[2], box[3]]])
        c = (c * stride) @ M_inv[:, :2].T + M_inv[:, 2]
        boxes[p] = [*c.min(0), *c.max(0)]
    return scores, boxes, kps, kp_scores


def oks_nms_loop(kpts, scores, areas, thr, sigmas):
    """Greedy OKS-NMS, one pose at a time (the bottom-up code bases' ``oks_nms``)."""
    order = list(np.argsort(-scores, kind="stable"))
    var = (2 * np.asarray(sigmas)) ** 2
    keep = []
    while order:
        i = order.pop(0)
        keep.append(i)
        rest = []
        for j in order:
            d2 = ((kpts[i, :, :2] - kpts[j, :, :2]) ** 2).sum(-1)
            e = d2 / var / ((areas[i] + areas[j]) / 2 + np.spacing(1)) / 2
            if np.exp(-e).mean() <= thr:
                rest.append(j)
        order = rest
    return keep
