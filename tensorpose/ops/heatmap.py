"""Keypoint target codecs as batched tensor functions: gaussian heatmaps (MSRA/SimpleBaseline
encoding), offset maps, heatmap decoding, and CenterNet ("Objects as Points") person targets
and decoding.

No loop over samples, objects or keypoints. The gaussian heatmap is separable: one 1D factor per
axis and keypoint, ``exp`` evaluated on ``B*K*(H + W)`` values only, then one outer product.
CenterNet's max-combined gaussians are drawn as fixed-size patches with one
``scatter_reduce(amax)`` for every object and joint at once.

Coordinates are map pixels with pixel centres at integers; callers divide crop coordinates by
the stride (``stride`` arguments do it for them).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from ._checks import check_finite, check_last_dims, check_tensor
from ._constants import constant

__all__ = [
    "centernet_decode",
    "centernet_targets",
    "decode_heatmaps",
    "gather_features",
    "gaussian_heatmaps",
    "gaussian_radius",
    "heatmap_peaks",
    "offset_maps",
]

_EXP_FLOOR = -60.0  # exp() of less is 0 for float32; keeps CPU exp out of deep underflow


def _check_keypoints(keypoints: torch.Tensor, visibility: torch.Tensor) -> None:
    check_tensor("keypoints", keypoints, 2)
    check_last_dims("keypoints", keypoints, (None, 2), "x, y per keypoint")
    if not isinstance(visibility, torch.Tensor):
        raise TypeError(f"visibility must be a torch.Tensor, got {type(visibility).__name__}")
    if visibility.shape != keypoints.shape[:-1]:
        raise ValueError(
            f"visibility must have shape {tuple(keypoints.shape[:-1])} (keypoints without the "
            f"last dim), got {tuple(visibility.shape)}"
        )
    check_finite("keypoints", keypoints)


def _size(size) -> tuple[int, int]:
    try:
        H, W = (int(v) for v in size)
    except (TypeError, ValueError):
        raise ValueError(f"size must be (H, W), got {size!r}") from None
    if H < 1 or W < 1:
        raise ValueError(f"size must be positive (H, W), got {size!r}")
    return H, W


def _stride(stride) -> tuple[float, float]:
    sx, sy = (float(stride), float(stride)) if isinstance(stride, (int, float)) else stride
    if not (sx > 0 and sy > 0):
        raise ValueError(f"stride must be positive, got {stride!r}")
    return float(sx), float(sy)


# ----------------------------------------------------------------------------- gaussian heatmaps
def gaussian_heatmaps(
    keypoints: torch.Tensor,
    visibility: torch.Tensor,
    size: tuple[int, int],
    sigma: float = 2.0,
    stride: float | tuple[float, float] = 1.0,
    unbiased: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian heatmap targets, one map per keypoint.

    The classic MSRA/SimpleBaseline encoding (``unbiased=False``), value for value: the centre is
    the integer ``mu = trunc(x / stride + 0.5)``, the gaussian is cut to the ``3 sigma`` patch
    ``[trunc(mu - 3 sigma), trunc(mu + 3 sigma + 1))`` (its quirks near the border included), and
    a keypoint that is invisible or whose patch lies off the map gets an all-zero map and weight 0.
    ``unbiased=True`` centres the gaussian on the exact sub-pixel position (same ``3 sigma``
    cut-off around it; weight 0 outside the map area ``[-0.5, W - 0.5)``), so decoding with
    ``method="subpixel"`` recovers positions to a small fraction of a pixel.

    Args:
        keypoints: ``(..., K, 2)`` in crop pixels (divided by ``stride`` here).
        visibility: ``(..., K)``; a keypoint counts when ``visibility > 0``.
        size: ``(H, W)`` of the maps.
        sigma: gaussian standard deviation in map pixels.
        stride: crop pixels per map pixel (a number or ``(sx, sy)``).
        unbiased: sub-pixel centres instead of MSRA's integer ones.

    Returns:
        ``heatmaps (..., K, H, W)`` (peak 1) and ``weights (..., K)``, in the keypoints' dtype.

    Example:
        >>> hm, w = gaussian_heatmaps(torch.tensor([[[3.2, 2.0]]]), torch.ones(1, 1), (6, 8), 1.0)
        >>> hm.shape, w.tolist(), hm[0, 0].argmax().item() == 2 * 8 + 3
        (torch.Size([1, 1, 6, 8]), [[1.0]], True)
    """
    _check_keypoints(keypoints, visibility)
    H, W = _size(size)
    if not sigma > 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    sx, sy = _stride(stride)
    tmp = sigma * 3
    # Both axes at once: (..., K, 2) centres against one arange of max(H, W) positions; about
    # 20 small ops on (..., K, 2, L) values and one outer product that writes the maps (the
    # slices [:W] / [:H] drop the positions beyond each axis).
    consts = _axis_constants.__wrapped__ if torch.compiler.is_compiling() else _axis_constants
    p, n, stride_xy, table, hi = consts(
        H, W, sx, sy, float(sigma), keypoints.device, keypoints.dtype
    )
    xy = keypoints / stride_xy
    if not unbiased and float(tmp).is_integer():
        # MSRA with an integer 3 sigma: the patch is exactly mu - tmp .. mu + tmp. The 1D factor
        # is a lookup in a table of exp(-d^2 / (2 sigma^2)) for |d| <= tmp, zero-padded one step
        # further each side; clamping d into the table keeps far positions at 0.
        mu = torch.trunc(xy + 0.5)
        R = int(tmp) + 1
        i = (p + R - mu.unsqueeze(-1)).clamp_(0, 2 * R).long()
        f = table.index_select(0, i.reshape(-1)).view(i.shape)
        inside = ((mu < hi) & (mu >= -tmp - 1)).all(-1)
    else:
        if unbiased:
            d = p - xy.unsqueeze(-1)
            keep = d.abs() <= tmp
            inside = ((xy >= -0.5) & (xy < n - 0.5)).all(-1)
        else:
            mu = torch.trunc(xy + 0.5)
            ul = torch.trunc(mu - tmp)
            br = torch.trunc(mu + tmp + 1)
            # pixel p reads g[p - ul], g[i] = exp(-(i - c)^2 / (2 sigma^2)), len(g) =
            # ceil(2 tmp + 1), c = (2 tmp + 1) // 2, for ul <= p < br; trunc() of a negative
            # ul moves the patch, as in the reference code
            i = p - ul.unsqueeze(-1)
            lim = torch.clamp(br - ul, max=math.ceil(2 * tmp + 1)).unsqueeze(-1)
            keep = (i >= 0) & (i < lim)
            d = i - float((2 * tmp + 1) // 2)
            inside = ((ul < n) & (br >= 0)).all(-1)
        e = torch.exp((d * d).mul_(-0.5 / sigma**2).clamp_(min=_EXP_FLOOR))
        f = torch.where(keep, e, 0.0)
    weights = ((visibility > 0) & inside).to(keypoints.dtype)
    fy = f[..., 1, :H] * weights.unsqueeze(-1)
    return fy.unsqueeze(-1) * f[..., 0, :W].unsqueeze(-2), weights


@functools.lru_cache(maxsize=64)
def _axis_constants(H: int, W: int, sx: float, sy: float, sigma: float, device, dtype):
    """Small constant tensors of :func:`gaussian_heatmaps`, built once per shape and device:
    positions, map size, stride, the 1D gaussian table and the upper centre bound."""
    L = max(H, W)
    p = torch.arange(L, device=device, dtype=dtype)
    n = torch.tensor([W, H], device=device, dtype=dtype)
    stride_xy = torch.tensor([sx, sy], device=device, dtype=dtype)
    tmp = sigma * 3
    R = int(tmp) + 1
    d = torch.arange(-R, R + 1, device=device, dtype=dtype)
    table = torch.where(d.abs() <= tmp, torch.exp(-(d * d) * (0.5 / sigma**2)), 0.0)
    return p, n, stride_xy, table, n + tmp


def offset_maps(
    keypoints: torch.Tensor,
    visibility: torch.Tensor,
    size: tuple[int, int],
    radius: float,
    stride: float | tuple[float, float] = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Short-range offset targets: at every map pixel within ``radius`` of a visible keypoint,
    the vector from the pixel to the keypoint (map pixels).

    Args:
        keypoints: ``(..., K, 2)`` crop pixels (divided by ``stride``).
        visibility: ``(..., K)``.
        size: ``(H, W)``.
        radius: disk radius in map pixels.
        stride: crop pixels per map pixel.

    Returns:
        ``offsets (..., K, 2, H, W)`` (``dx, dy``; zero outside the disks) and
        ``mask (..., K, H, W)`` (1 inside the disk of a visible keypoint).
    """
    _check_keypoints(keypoints, visibility)
    H, W = _size(size)
    if not radius > 0:
        raise ValueError(f"radius must be positive, got {radius}")
    sx, sy = _stride(stride)
    x = (keypoints[..., 0] / sx)[..., None, None]
    y = (keypoints[..., 1] / sy)[..., None, None]
    px = torch.arange(W, device=keypoints.device, dtype=keypoints.dtype)
    py = torch.arange(H, device=keypoints.device, dtype=keypoints.dtype)[:, None]
    dx, dy = x - px, y - py
    mask = ((dx * dx + dy * dy) <= radius * radius) & (visibility > 0)[..., None, None]
    m = mask.to(keypoints.dtype)
    return torch.stack([dx * m, dy * m], dim=-3), m


# ----------------------------------------------------------------------------- decoding
def _argmax(flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Max and arg-max over the last dim. On a CPU, outside autograd and ``torch.compile``,
    numpy's arg-max is about 10x faster than torch's (measured, 2 cores); the memory is shared,
    so nothing is copied or synchronised."""
    if (
        flat.device.type == "cpu"
        and flat.dtype in (torch.float32, torch.float64)
        and not flat.requires_grad
        and not torch.compiler.is_compiling()
    ):
        idx = torch.from_numpy(np.argmax(flat.numpy(), axis=-1))
        return flat.gather(-1, idx.unsqueeze(-1)).squeeze(-1), idx
    return flat.max(dim=-1)


def decode_heatmaps(
    heatmaps: torch.Tensor,
    method: str = "quarter",
    blur_sigma: float | None = None,
    stride: float | tuple[float, float] = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keypoint positions from heatmaps, batched over every map at once.

    Methods:
        ``"argmax"``: the integer arg-max.
        ``"quarter"``: MSRA's rule: arg-max moved a quarter pixel towards the larger neighbour
            along each axis (only where ``1 < x < W - 1`` and ``1 < y < H - 1``, as there).
        ``"subpixel"``: the maximum of a second-order Taylor expansion of the log-heatmap at
            the arg-max (DARK-style; exact for a gaussian); optionally blur the maps first
            (``blur_sigma``, for network outputs). Offsets are clamped to one pixel; peaks on
            the outermost pixel ring stay integer.

    Args:
        heatmaps: ``(..., K, H, W)``.
        method: see above.
        blur_sigma: gaussian blur before ``"subpixel"`` decoding, map pixels; ``None``: none.
        stride: multiply the result by the stride to get crop pixels.

    Returns:
        ``coords (..., K, 2)`` and ``scores (..., K)`` (the map maximum).
    """
    check_tensor("heatmaps", heatmaps, 3)
    if method not in ("argmax", "quarter", "subpixel"):
        raise ValueError(f"method must be 'argmax', 'quarter' or 'subpixel', got {method!r}")
    sx, sy = _stride(stride)
    lead, (H, W) = heatmaps.shape[:-2], heatmaps.shape[-2:]
    flat = heatmaps.reshape(*lead, H * W)
    scores, idx = _argmax(flat)
    ix, iy = idx % W, torch.div(idx, W, rounding_mode="floor")
    x, y = ix.to(heatmaps.dtype), iy.to(heatmaps.dtype)
    if method != "argmax":
        # One gather of the 3x3 neighbourhood (index clamped into the map where the border rule
        # discards the shift anyway): columns (-1,-1) (0,-1) (1,-1) (-1,0) (0,0) ... (1,1).
        d = constant((-W - 1, -W, -W + 1, -1, 0, 1, W - 1, W, W + 1), idx.device, idx.dtype)
        inner = (ix > 0) & (ix < W - 1) & (iy > 0) & (iy < H - 1)
        centre = torch.where(inner, idx, torch.full_like(idx, W + 1 if H > 2 and W > 2 else 0))
        n = flat.gather(-1, (centre.unsqueeze(-1) + d).clamp_(0, H * W - 1))
    if method == "quarter":
        ok = ((ix > 1) & (ix < W - 1) & (iy > 1) & (iy < H - 1)).to(x.dtype)
        x = x + 0.25 * torch.sign(n[..., 5] - n[..., 3]) * ok
        y = y + 0.25 * torch.sign(n[..., 7] - n[..., 1]) * ok
    elif method == "subpixel":
        if blur_sigma:
            maps = _blur(heatmaps.reshape(-1, 1, H, W), blur_sigma).reshape(heatmaps.shape)
            # keep the original peak height (DARK's modulation)
            peak = maps.reshape(*lead, H * W).amax(-1).clamp_min(1e-12)
            maps = maps * (scores / peak)[..., None, None]
            nidx = (centre.unsqueeze(-1) + d).clamp_(0, H * W - 1)
            n = maps.reshape(*lead, H * W).gather(-1, nidx)
        L = n.clamp_min(1e-10).log()
        c = L[..., 4]
        gx, gy = 0.5 * (L[..., 5] - L[..., 3]), 0.5 * (L[..., 7] - L[..., 1])
        hxx, hyy = L[..., 5] - 2 * c + L[..., 3], L[..., 7] - 2 * c + L[..., 1]
        hxy = 0.25 * (L[..., 8] - L[..., 2] - L[..., 6] + L[..., 0])
        det = hxx * hyy - hxy * hxy
        good = inner & (det > 1e-12) & (hxx < 0)
        det = torch.where(good, det, torch.ones_like(det))
        ox = -(hyy * gx - hxy * gy) / det
        oy = -(-hxy * gx + hxx * gy) / det
        x = x + torch.where(good, ox.clamp(-1, 1), torch.zeros_like(ox))
        y = y + torch.where(good, oy.clamp(-1, 1), torch.zeros_like(oy))
    coords = torch.stack([x * sx, y * sy], dim=-1)
    return coords, scores


def _blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    r = max(1, math.ceil(3 * sigma))
    t = torch.arange(-r, r + 1, device=x.device, dtype=x.dtype)
    k = torch.exp(-(t**2) / (2 * sigma**2))
    k = k / k.sum()
    x = F.conv2d(F.pad(x, (r, r, 0, 0), mode="replicate"), k.view(1, 1, 1, -1))
    return F.conv2d(F.pad(x, (0, 0, r, r), mode="replicate"), k.view(1, 1, -1, 1))


def heatmap_peaks(heatmaps: torch.Tensor, k: int, kernel: int = 3):
    """Top-``k`` local maxima of each map (``kernel x kernel`` max-pool suppression).

    Args:
        heatmaps: ``(B, C, H, W)``.

    Returns:
        ``scores (B, C, k)``, flat ``index (B, C, k)`` (``y * W + x``), ``xs``, ``ys`` (long).
    """
    check_tensor("heatmaps", heatmaps, 4)
    H, W = heatmaps.shape[-2:]
    pad = (kernel - 1) // 2
    hmax = F.max_pool2d(heatmaps, kernel, stride=1, padding=pad)
    peaks = heatmaps * (hmax == heatmaps)
    k = min(k, H * W)
    scores, index = peaks.flatten(2).topk(k, dim=-1)
    return scores, index, index % W, torch.div(index, W, rounding_mode="floor")


def gather_features(features: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Feature vectors at flat map positions.

    Args:
        features: ``(B, C, H, W)``.
        index: ``(B, N)`` flat positions ``y * W + x``.

    Returns:
        ``(B, N, C)``.
    """
    B, C = features.shape[:2]
    flat = features.reshape(B, C, -1)
    return flat.gather(2, index.unsqueeze(1).expand(B, C, index.shape[1])).transpose(1, 2)


# ----------------------------------------------------------------------------- CenterNet
def gaussian_radius(height: torch.Tensor, width: torch.Tensor, min_overlap: float = 0.7):
    """CenterNet's gaussian radius for a box size (the three-case formula of the reference code,
    quirks included: its third root divides by 2 where the quadratic formula has ``2 a``).

    Args:
        height, width: broadcastable tensors (CenterNet passes ``ceil`` of the box size).

    Returns:
        the radius before truncation, same shape and dtype.
    """
    h, w = height, width
    b1 = h + w
    c1 = w * h * (1 - min_overlap) / (1 + min_overlap)
    r1 = (b1 + torch.sqrt(b1**2 - 4 * c1)) / 2
    b2 = 2 * (h + w)
    c2 = (1 - min_overlap) * w * h
    r2 = (b2 + torch.sqrt(b2**2 - 16 * c2)) / 2
    a3 = 4 * min_overlap
    b3 = -2 * min_overlap * (h + w)
    c3 = (min_overlap - 1) * w * h
    r3 = (b3 + torch.sqrt(b3**2 - 4 * a3 * c3)) / 2
    return torch.minimum(torch.minimum(r1, r2), r3)


def _draw_max_gaussians(
    centers: torch.Tensor,
    radius: torch.Tensor,
    active: torch.Tensor,
    channel: torch.Tensor,
    num_channels: int,
    size: tuple[int, int],
    max_radius: int | None,
) -> torch.Tensor:
    """CenterNet's ``draw_umich_gaussian`` for every item at once, combined by maximum.

    ``centers (B, M, 2)`` long, ``radius (B, M)`` long, ``active (B, M)`` bool, ``channel (B, M)``
    long. Each item paints ``exp(-(dx^2 + dy^2) / (2 sigma^2))``, ``sigma = (2 r + 1) / 6``,
    for ``|dx|, |dy| <= r`` into ``(B, num_channels, H, W)``.
    """
    B, M = radius.shape
    H, W = size
    device = centers.device
    out = torch.zeros(B * num_channels * H * W, device=device, dtype=torch.float32)
    b_idx = torch.arange(B, device=device).unsqueeze(1).expand(B, M)
    if max_radius is None:
        # Data-dependent sizes (host reads): compact to the active items and size the patch by
        # the largest radius present. Meant for CPU/worker use, where a host read is free.
        sel = active.nonzero(as_tuple=True)
        centers, radius, channel, b_idx = centers[sel], radius[sel], channel[sel], b_idx[sel]
        R = int(radius.max()) if radius.numel() else 0
        act = None
    else:
        R = int(max_radius)
        radius = radius.clamp(max=R)
        centers, radius, channel, b_idx = (
            centers.reshape(-1, 2),
            radius.reshape(-1),
            channel.reshape(-1),
            b_idx.reshape(-1),
        )
        act = active.reshape(-1)
    d = torch.arange(-R, R + 1, device=device)
    sigma = (2 * radius + 1).to(torch.float32) / 6
    r = radius.unsqueeze(-1)
    within = d.abs() <= r  # (n, P)
    arg = (-(d * d).to(torch.float32) / (2 * sigma * sigma).unsqueeze(-1)).clamp(min=_EXP_FLOOR)
    g = torch.exp(arg) * within
    px = centers[:, :1] + d  # (n, P)
    py = centers[:, 1:] + d
    gx = g * ((px >= 0) & (px < W))
    gy = g * ((py >= 0) & (py < H))
    if act is not None:
        gy = gy * act.unsqueeze(-1)
    vals = gy.unsqueeze(-1) * gx.unsqueeze(-2)  # (n, P, P)
    base = (b_idx * num_channels + channel) * (H * W)
    idx = base[:, None, None] + py.clamp(0, H - 1)[:, :, None] * W + px.clamp(0, W - 1)[:, None]
    # Out-of-map or inactive entries carry value 0: max(0, map) leaves the map as it is.
    out.scatter_reduce_(0, idx.reshape(-1), vals.reshape(-1), reduce="amax", include_self=True)
    return out.reshape(B, num_channels, H, W)


def centernet_targets(
    boxes: torch.Tensor,
    keypoints: torch.Tensor,
    visibility: torch.Tensor,
    valid: torch.Tensor,
    size: tuple[int, int],
    min_overlap: float = 0.7,
    max_radius: int | None = None,
) -> dict[str, torch.Tensor]:
    """CenterNet multi-person pose targets for a batch, as the reference ``multi_pose`` dataset
    builds them per object and joint (boxes clipped to the map; radius
    ``max(0, int(gaussian_radius(ceil(h), ceil(w))))`` for the centre and the joints; integer
    centres by truncation).

    Args:
        boxes: ``(B, N, 4)`` ``x1, y1, x2, y2`` in map pixels (N object slots per image).
        keypoints: ``(B, N, K, 2)`` map pixels.
        visibility: ``(B, N, K)``; a joint counts when ``> 0`` and inside the map.
        valid: ``(B, N)`` bool, which slots hold an object.
        size: ``(H, W)`` of the output maps.
        min_overlap: CenterNet's IoU parameter for the radius.
        max_radius: a static bound on the radius (e.g. :func:`centernet_radius_bound`): fixed
            shapes, no host reads (GPU, ``torch.compile``). ``None`` sizes the work by the data
            (reads the largest radius back to the host once: the CPU choice).

    Returns:
        dict with ``heatmap (B, 1, H, W)`` (object centres), ``joint_heatmaps (B, K, H, W)``,
        ``size (B, N, 2)`` (w, h), ``offset (B, N, 2)`` (centre minus integer centre),
        ``index (B, N)`` (flat ``y * W + x`` of the integer centre), ``box_mask (B, N)`` (object
        drawn), ``mask (B, N)`` (drawn and with labelled joints: the reference's ``reg_mask``),
        ``joint_offset (B, N, K, 2)`` (joint minus integer centre), ``joint_mask (B, N, K)``,
        ``joint_sub_offset (B, N, K, 2)`` (joint minus its integer position),
        ``joint_index (B, N, K)``. Masks are float.
    """
    B, N = _check_objects(boxes, keypoints, visibility, valid)
    H, W = _size(size)
    K = keypoints.shape[2]
    f32 = torch.float32
    bb, w, h, drawn, radius = _clipped_boxes(boxes, valid, H, W, min_overlap)
    ct = torch.stack([(bb[..., 0] + bb[..., 2]) / 2, (bb[..., 1] + bb[..., 3]) / 2], -1)
    ct_int = torch.trunc(ct)
    ct_long = ct_int.long()
    index = (ct_long[..., 1] * W + ct_long[..., 0]) * drawn
    labelled = (visibility.to(f32).sum(-1) > 0) & drawn

    kp = keypoints.to(f32)
    j_in = _joints_in_map(kp, visibility, drawn, H, W)
    jm = j_in.to(f32)
    pt_int = torch.trunc(kp) * jm.unsqueeze(-1)
    pt_long = pt_int.long()

    heat = _draw_max_gaussians(
        ct_long, radius, drawn, torch.zeros_like(radius), 1, (H, W), max_radius
    )
    joint_heat = _draw_max_gaussians(
        pt_long.reshape(B, N * K, 2),
        radius.unsqueeze(-1).expand(B, N, K).reshape(B, N * K),
        j_in.reshape(B, N * K),
        torch.arange(K, device=boxes.device).repeat(N).expand(B, N * K),
        K,
        (H, W),
        max_radius,
    )
    dm = drawn.to(f32)
    return {
        "heatmap": heat,
        "joint_heatmaps": joint_heat,
        "size": torch.stack([w, h], -1) * dm.unsqueeze(-1),
        "offset": (ct - ct_int) * dm.unsqueeze(-1),
        "index": index,
        "box_mask": dm,
        "mask": labelled.to(f32),
        "joint_offset": (kp - ct_int.unsqueeze(-2)) * jm.unsqueeze(-1),
        "joint_mask": jm,
        "joint_sub_offset": (kp - pt_int) * jm.unsqueeze(-1),
        "joint_index": (pt_long[..., 1] * W + pt_long[..., 0]) * j_in,
    }


def _check_objects(
    boxes: torch.Tensor, keypoints: torch.Tensor, visibility: torch.Tensor, valid: torch.Tensor
) -> tuple[int, int]:
    """Argument checks of :func:`centernet_targets`; returns ``(B, N)``."""
    check_tensor("boxes", boxes, 3)
    check_last_dims("boxes", boxes, (4,), "x1, y1, x2, y2")
    _check_keypoints(keypoints, visibility)
    B, N = boxes.shape[:2]
    if keypoints.dim() != 4 or keypoints.shape[:2] != (B, N):
        raise ValueError(
            f"keypoints must have shape (B, N, K, 2) = ({B}, {N}, K, 2) like boxes, "
            f"got {tuple(keypoints.shape)}"
        )
    if not isinstance(valid, torch.Tensor) or valid.shape != (B, N):
        raise ValueError(f"valid must be a (B, N) = ({B}, {N}) tensor")
    return B, N


def _clipped_boxes(
    boxes: torch.Tensor, valid: torch.Tensor, H: int, W: int, min_overlap: float
) -> tuple[torch.Tensor, ...]:
    """Boxes clipped to the map (float32), their widths and heights, which are drawn, and the
    reference's gaussian radius of each (``(B, N)`` each)."""
    lo = boxes.new_zeros(4)
    hi = constant((W - 1, H - 1, W - 1, H - 1), boxes.device, boxes.dtype)
    bb = torch.minimum(torch.maximum(boxes, lo), hi).to(torch.float32)
    w, h = bb[..., 2] - bb[..., 0], bb[..., 3] - bb[..., 1]
    drawn = valid.bool() & (w > 0) & (h > 0)
    r = gaussian_radius(torch.ceil(h).double(), torch.ceil(w).double(), min_overlap)
    radius = torch.trunc(r).clamp(min=0).long()
    return bb, w, h, drawn, radius


def _joints_in_map(
    kp: torch.Tensor, visibility: torch.Tensor, drawn: torch.Tensor, H: int, W: int
) -> torch.Tensor:
    """``(B, N, K)`` bool: labelled joints of drawn objects inside the ``H x W`` map."""
    return (
        (visibility > 0)
        & drawn.unsqueeze(-1)
        & (kp[..., 0] >= 0)
        & (kp[..., 0] < W)
        & (kp[..., 1] >= 0)
        & (kp[..., 1] < H)
    )


def centernet_radius_bound(size: tuple[int, int], min_overlap: float = 0.7) -> int:
    """The largest radius :func:`centernet_targets` can draw on an ``(H, W)`` map (boxes are
    clipped to the map): a static ``max_radius`` that changes nothing."""
    H, W = _size(size)
    r = gaussian_radius(torch.tensor(float(H - 1)), torch.tensor(float(W - 1)), min_overlap)
    return max(0, int(r))


def centernet_decode(
    heatmap: torch.Tensor,
    size: torch.Tensor,
    offset: torch.Tensor,
    joint_offset: torch.Tensor,
    joint_heatmaps: torch.Tensor | None = None,
    joint_sub_offset: torch.Tensor | None = None,
    k: int = 20,
    joint_threshold: float = 0.1,
) -> dict[str, torch.Tensor]:
    """People from CenterNet outputs: 3x3 max-pool peaks of the centre map, ``topk``, and
    ``gather`` of the regressed box size, offset and joints; joints snap to the nearest
    joint-heatmap peak inside the box when one is confident enough (the reference decoder).

    Args:
        heatmap: ``(B, 1, H, W)`` centre probabilities (after sigmoid).
        size: ``(B, 2, H, W)``; offset: ``(B, 2, H, W)``.
        joint_offset: ``(B, 2K, H, W)`` joints relative to the integer centre (x, y interleaved).
        joint_heatmaps: ``(B, K, H, W)`` probabilities, or ``None`` to skip the snapping.
        joint_sub_offset: ``(B, 2, H, W)`` joint sub-pixel offsets, or ``None``.
        k: people per image.
        joint_threshold: minimum joint-peak score for snapping.

    Returns:
        dict with ``scores (B, k)``, ``boxes (B, k, 4)`` (x1, y1, x2, y2), ``centers (B, k, 2)``,
        ``keypoints (B, k, K, 2)``, ``keypoint_scores (B, k, K)`` (the snapped peak's score,
        else 0), all in map pixels.
    """
    check_tensor("heatmap", heatmap, 4)
    B = heatmap.shape[0]
    K = joint_offset.shape[1] // 2
    scores, index, xs, ys = heatmap_peaks(heatmap, k)
    scores, index, xs, ys = scores[:, 0], index[:, 0], xs[:, 0], ys[:, 0]
    kk = index.shape[1]
    reg = gather_features(offset, index)
    wh = gather_features(size, index)
    kps = gather_features(joint_offset, index).reshape(B, kk, K, 2)
    base = torch.stack([xs, ys], -1).to(kps.dtype)
    kps = kps + base.unsqueeze(-2)
    cx, cy = base[..., 0] + reg[..., 0], base[..., 1] + reg[..., 1]
    boxes = torch.stack(
        [cx - wh[..., 0] / 2, cy - wh[..., 1] / 2, cx + wh[..., 0] / 2, cy + wh[..., 1] / 2], -1
    )
    kp_scores = torch.zeros_like(kps[..., 0])
    if joint_heatmaps is not None:
        hs, hidx, hx, hy = heatmap_peaks(joint_heatmaps, kk)  # (B, K, kk)
        cand = torch.stack([hx, hy], -1).to(kps.dtype)
        if joint_sub_offset is not None:
            sub = gather_features(joint_sub_offset, hidx.reshape(B, -1)).reshape(B, K, -1, 2)
            cand = cand + sub
        conf = hs > joint_threshold
        # distances (B, K, people, candidates)
        d = (kps.transpose(1, 2).unsqueeze(-2) - cand.unsqueeze(-3)).norm(dim=-1)
        d = torch.where(conf.unsqueeze(-2), d, torch.full_like(d, float("inf")))
        dmin, j = d.min(dim=-1)  # (B, K, people)
        pick = cand.gather(2, j.unsqueeze(-1).expand(*j.shape, 2))  # (B, K, people, 2)
        pscore = hs.gather(2, j)
        bx = boxes.unsqueeze(1)  # (B, 1, people, 4)
        inside = (
            (pick[..., 0] >= bx[..., 0])
            & (pick[..., 0] <= bx[..., 2])
            & (pick[..., 1] >= bx[..., 1])
            & (pick[..., 1] <= bx[..., 3])
        )
        big = torch.maximum(bx[..., 2] - bx[..., 0], bx[..., 3] - bx[..., 1])
        use = inside & torch.isfinite(dmin) & (dmin <= 0.3 * big)
        kps = torch.where(use.transpose(1, 2).unsqueeze(-1), pick.transpose(1, 2), kps)
        kp_scores = (pscore * use).transpose(1, 2)
    return {
        "scores": scores,
        "boxes": boxes,
        "centers": torch.stack([cx, cy], -1),
        "keypoints": kps,
        "keypoint_scores": kp_scores,
    }
