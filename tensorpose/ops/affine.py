"""2D affine geometry as batched tensor functions: matrices from point triples and from
box crops with rotation/scale/shift/flip, image warps and point transforms.

Conventions (the ones OpenCV uses, so results compare with ``cv2.warpAffine``):

- Pixel ``(i, j)`` (column, row) has its centre at the continuous point ``(i, j)`` and covers
  ``[i - 0.5, i + 0.5] x [j - 0.5, j + 0.5]``; keypoints live in the same coordinates.
- A matrix ``M (2, 3)`` maps a source point to its destination: ``q = M[:, :2] @ p + M[:, 2]``
  (``cv2.warpAffine`` without ``WARP_INVERSE_MAP``).
- A crop window of ``scale = (w, h)`` pixels around ``center`` covers the continuous box
  ``center +- scale / 2`` and maps onto the whole output area ``[-0.5, W - 0.5]``: the centre goes
  to ``((W - 1) / 2, (H - 1) / 2)`` and one source pixel to ``W / w`` output pixels (the unbiased
  convention; the classic HRNet code maps the centre to ``W / 2``, half a pixel off).
- Rotation ``theta`` (radians) turns the image content counter-clockwise on the screen, as
  ``cv2.getRotationMatrix2D`` does for positive angles.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._checks import check_finite, check_last_dims, check_tensor
from ._constants import constant

__all__ = [
    "box_to_center_scale",
    "crop_matrix",
    "fixed_point_maps",
    "fixed_point_samples",
    "get_affine_transform",
    "invert_affine",
    "transform_points",
    "warp_affine",
    "warp_affine_fixed_point",
    "warp_affine_indexed",
]


def get_affine_transform(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """The affine matrices that map three source points onto three destination points.

    Batched ``cv2.getAffineTransform``: solves ``M @ [src_i, 1] = dst_i`` for ``i = 0, 1, 2``.

    Args:
        src: ``(..., 3, 2)`` point triples (not collinear).
        dst: ``(..., 3, 2)`` their images.

    Returns:
        ``(..., 2, 3)`` matrices, in the dtype of the inputs (use float64 to match OpenCV to
        the last bits).

    Example:
        >>> src = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
        >>> get_affine_transform(src, 2 * src + 1)
        tensor([[[2., 0., 1.],
                 [0., 2., 1.]]], dtype=torch.float64)
    """
    check_tensor("src", src, 2)
    check_tensor("dst", dst, 2)
    check_last_dims("src", src, (3, 2), "three 2D points")
    check_last_dims("dst", dst, (3, 2), "three 2D points")
    check_finite("src", src)
    check_finite("dst", dst)
    src, dst = torch.broadcast_tensors(src, dst)
    A = torch.cat([src, torch.ones_like(src[..., :1])], dim=-1)  # (..., 3, 3)
    # A @ M^T = dst: one batched 3x3 solve (collinear points give a singular A).
    return torch.linalg.solve(A, dst).transpose(-1, -2)


def invert_affine(matrices: torch.Tensor) -> torch.Tensor:
    """Inverse of ``(..., 2, 3)`` affine matrices (closed-form 2x2 inverse, no solver)."""
    check_tensor("matrices", matrices, 2)
    check_last_dims("matrices", matrices, (2, 3), "affine matrices")
    a, b, tx = matrices[..., 0, 0], matrices[..., 0, 1], matrices[..., 0, 2]
    c, d, ty = matrices[..., 1, 0], matrices[..., 1, 1], matrices[..., 1, 2]
    inv_det = 1.0 / (a * d - b * c)
    ia, ib, ic, id_ = d * inv_det, -b * inv_det, -c * inv_det, a * inv_det
    row0 = torch.stack([ia, ib, -(ia * tx + ib * ty)], dim=-1)
    row1 = torch.stack([ic, id_, -(ic * tx + id_ * ty)], dim=-1)
    return torch.stack([row0, row1], dim=-2)


def transform_points(points: torch.Tensor, matrices: torch.Tensor) -> torch.Tensor:
    """Apply affine matrices to points.

    Args:
        points: ``(..., N, 2)``.
        matrices: ``(..., 2, 3)``, broadcast against the points' leading dims.

    Returns:
        ``(..., N, 2)``.
    """
    check_tensor("points", points, 2)
    check_tensor("matrices", matrices, 2)
    check_last_dims("points", points, (None, 2), "2D points")
    check_last_dims("matrices", matrices, (2, 3), "affine matrices")
    return points @ matrices[..., :2].transpose(-1, -2) + matrices[..., 2].unsqueeze(-2)


def box_to_center_scale(
    boxes: torch.Tensor, aspect_ratio: float, padding: float = 1.25
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-down crop windows from person boxes.

    The box is widened or heightened to the crop's ``aspect_ratio`` (width / height) around its
    centre, then enlarged by ``padding`` (the usual 1.25).

    Args:
        boxes: ``(..., 4)`` COCO boxes ``(x, y, w, h)`` in pixels (``x, y`` the top-left corner
            of the box area).
        aspect_ratio: output width / height, e.g. ``192 / 256``.
        padding: enlargement factor.

    Returns:
        ``center (..., 2) = (x + w / 2, y + h / 2)`` and ``scale (..., 2)`` (window width and
        height in pixels). Boxes and keypoints are taken in the same coordinates, as the
        classic top-down pipelines do.

    Example:
        >>> c, s = box_to_center_scale(torch.tensor([10.0, 20.0, 30.0, 80.0]), 0.75)
        >>> c.tolist(), s.tolist()
        ([25.0, 60.0], [75.0, 100.0])
    """
    check_tensor("boxes", boxes)
    check_last_dims("boxes", boxes, (4,), "x, y, w, h")
    if not aspect_ratio > 0:
        raise ValueError(f"aspect_ratio must be positive, got {aspect_ratio}")
    x, y, w, h = boxes.unbind(-1)
    center = torch.stack([x + 0.5 * w, y + 0.5 * h], dim=-1)
    wider = w > aspect_ratio * h
    w2 = torch.where(wider, w, h * aspect_ratio)
    h2 = torch.where(wider, w / aspect_ratio, h)
    return center, torch.stack([w2, h2], dim=-1) * padding


def crop_matrix(
    center: torch.Tensor,
    scale: torch.Tensor,
    output_size: tuple[int, int],
    rotation: torch.Tensor | None = None,
    flip: torch.Tensor | None = None,
    shift: torch.Tensor | None = None,
) -> torch.Tensor:
    """ONE matrix per sample: crop window -> output, with rotation, flip and shift folded in.

    ``q = k * R(theta) @ (p - center - shift) + o``, ``k = W / scale_w`` (uniform; windows from
    :func:`box_to_center_scale` already have the output's aspect ratio),
    ``o = ((W - 1) / 2, (H - 1) / 2)``; a flip then mirrors the output: ``q_x <- W - 1 - q_x``.

    Args:
        center: ``(..., 2)`` window centres (pixels).
        scale: ``(..., 2)`` window sizes (pixels); augmentation scales it before the call.
        output_size: ``(H, W)`` of the crop.
        rotation: ``(...)`` radians, counter-clockwise on screen; ``None`` for none.
        flip: ``(...)`` bool, mirror left-right; ``None`` for none.
        shift: ``(..., 2)`` window displacement in source pixels; ``None`` for none.

    Returns:
        ``(..., 2, 3)`` source -> crop matrices.
    """
    check_tensor("center", center)
    check_tensor("scale", scale)
    check_last_dims("center", center, (2,), "x, y")
    check_last_dims("scale", scale, (2,), "w, h")
    H, W = (int(v) for v in output_size)
    if H < 1 or W < 1:
        raise ValueError(f"output_size must be positive (H, W), got {output_size}")
    if shift is not None:
        center = center + shift
    k = W / scale[..., 0]
    if rotation is None:
        cos, sin = k, torch.zeros_like(k)
    else:
        cos, sin = k * torch.cos(rotation), k * torch.sin(rotation)
    # cv2.getRotationMatrix2D's linear part: [[cos, sin], [-sin, cos]].
    cx, cy = center.unbind(-1)
    ox, oy = (W - 1) / 2.0, (H - 1) / 2.0
    bx = ox - (cos * cx + sin * cy)
    by = oy - (-sin * cx + cos * cy)
    if flip is not None:
        sign = 1.0 - 2.0 * flip.to(cos.dtype)
        row0 = torch.stack([sign * cos, sign * sin, sign * bx + (1.0 - sign) * 0.5 * (W - 1)], -1)
    else:
        row0 = torch.stack([cos, sin, bx], -1)
    row1 = torch.stack([-sin, cos, by], -1)
    return torch.stack([row0, row1], dim=-2)


def warp_affine(
    images: torch.Tensor,
    matrices: torch.Tensor,
    size: tuple[int, int],
    fill: float = 0.0,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Batched affine warp, bilinear with a constant border.

    The geometry of ``cv2.warpAffine(img, M, (W, H), flags=INTER_LINEAR,
    borderMode=BORDER_CONSTANT, borderValue=fill)``: output pixel ``q`` reads the source at
    ``M^-1 q`` with pixel centres at integer coordinates; source pixels outside the image read
    as ``fill``. One ``grid_sample`` for the whole batch.

    Args:
        images: ``(B, C, H_in, W_in)`` uint8 or floating point. Channels-last memory (e.g.
            ``(B, H, W, C).permute(0, 3, 1, 2)``) is fine.
        matrices: ``(B, 2, 3)`` source -> output matrices.
        size: ``(H, W)`` of the output.
        fill: border value.
        out_dtype: output dtype; default the input's. Integer outputs are rounded and clamped
            to the dtype's range (OpenCV's uint8 path uses 1/32-pixel fixed point, so uint8
            results differ from it by a fraction of a grey level; see
            :func:`warp_affine_fixed_point` for OpenCV 4's arithmetic).

    Returns:
        ``(B, C, H, W)``.
    """
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if images.dim() != 4:
        raise ValueError(f"images must have shape (B, C, H, W), got {tuple(images.shape)}")
    check_tensor("matrices", matrices, 3)
    if matrices.shape != (images.shape[0], 2, 3):
        raise ValueError(
            f"matrices must have shape (B, 2, 3) with B={images.shape[0]} (images), "
            f"got {tuple(matrices.shape)}"
        )
    H, W = (int(v) for v in size)
    if H < 1 or W < 1:
        raise ValueError(f"size must be positive (H, W), got {size}")
    out_dtype = out_dtype or images.dtype
    work = matrices.dtype if images.dtype == torch.uint8 else images.dtype
    if not work.is_floating_point:
        work = torch.float32
    if images.device.type == "cpu" and work == torch.float16:
        work = torch.float32
    H_in, W_in = images.shape[-2:]
    x = images if _gather_path(images, work, fill) else images.to(work)
    if fill != 0.0:
        x = x - fill  # bilinear is linear: warp (x - fill) with zero border, add fill back
    inv = invert_affine(matrices.to(torch.float32 if work != torch.float64 else work))
    # Output pixel centres -> source pixel coordinates -> grid_sample's [-1, 1] (align_corners=
    # False: -1 is the left edge of pixel 0, so pixel centre i is (2 i + 1) / W_in - 1).
    ys = torch.arange(H, device=images.device, dtype=inv.dtype)
    xs = torch.arange(W, device=images.device, dtype=inv.dtype)
    a, b, c = inv[:, 0, 0, None, None], inv[:, 0, 1, None, None], inv[:, 0, 2, None, None]
    d, e, f = inv[:, 1, 0, None, None], inv[:, 1, 1, None, None], inv[:, 1, 2, None, None]
    X, Y = xs[None, None, :], ys[None, :, None]
    sx = a * X + b * Y + c
    sy = d * X + e * Y + f
    grid = torch.stack([(2 * sx + 1) / W_in - 1, (2 * sy + 1) / H_in - 1], dim=-1).to(work)
    if _gather_path(images, work, fill):
        out = _gather_bilinear(images.permute(0, 2, 3, 1), grid, H_in)
    else:
        out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    if fill != 0.0:
        out = out + fill
    if out_dtype.is_floating_point:
        return out.to(out_dtype)
    info = torch.iinfo(out_dtype)
    return out.round().clamp_(info.min, info.max).to(out_dtype)


def warp_affine_indexed(
    images: torch.Tensor,
    matrices: torch.Tensor,
    size: tuple[int, int],
    batch_index: torch.Tensor,
    fill: float = 0.0,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Affine warps of ``K`` crops out of ``B`` images, crop ``k`` read from image
    ``batch_index[k]`` (several crops per image, e.g. every person of a picture).

    The geometry of :func:`warp_affine` (``cv2.warpAffine``, bilinear, constant border
    ``fill``) without an image copy per crop: the ``B`` images are stacked into one tall image
    with a zero row between neighbours and sampled by one ``grid_sample``; a crop's sample
    points are shifted to its own image, and points whose two source rows would leave it
    (``y <= -1`` or ``y >= H``) are moved outside the tall image, so every sample reads exactly
    its own image or the border. ``warp_affine(images[batch_index], ...)`` gives the same
    values to float rounding (the tall image's coordinates are larger: about
    ``1e-4 * B`` pixels in float32, negligible in float64).

    Args:
        images: ``(B, C, H_in, W_in)`` uint8 or floating point; channels-last memory (e.g.
            ``(B, H, W, C).permute(0, 3, 1, 2)``) is fine.
        matrices: ``(K, 2, 3)`` source -> output matrices.
        size: ``(H, W)`` of the output.
        batch_index: ``(K,)`` integer image of each crop, in ``[0, B)``.
        fill: border value.
        out_dtype: output dtype; default the input's (integer outputs are rounded and clamped).

    Returns:
        ``(K, C, H, W)``.
    """
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if images.dim() != 4:
        raise ValueError(f"images must have shape (B, C, H, W), got {tuple(images.shape)}")
    check_tensor("matrices", matrices, 3)
    if not isinstance(batch_index, torch.Tensor) or batch_index.is_floating_point():
        raise TypeError("batch_index must be an integer torch.Tensor")
    K = batch_index.shape[0] if batch_index.dim() == 1 else -1
    if batch_index.dim() != 1 or matrices.shape != (K, 2, 3):
        raise ValueError(
            f"matrices must have shape (K, 2, 3) and batch_index (K,), got "
            f"{tuple(matrices.shape)} and {tuple(batch_index.shape)}"
        )
    B, C, H_in, W_in = images.shape
    _check_index("batch_index", batch_index, B)
    H, W = (int(v) for v in size)
    if H < 1 or W < 1:
        raise ValueError(f"size must be positive (H, W), got {size}")
    out_dtype = out_dtype or images.dtype
    work = images.dtype if images.is_floating_point() else matrices.dtype
    if not work.is_floating_point:
        work = torch.float32
    if images.device.type == "cpu" and work in (torch.float16, torch.bfloat16):
        work = torch.float32
    grid = _tall_grid(matrices, batch_index, B, (H_in, W_in), (H, W), work, images.device)
    if _gather_path(images, work, fill):
        out = _gather_bilinear(images.permute(0, 2, 3, 1), grid, B * (H_in + 1), H_in + 1)
        out = out.transpose(0, 1).contiguous().transpose(0, 1)  # the layout of the path below
    else:
        tall = _tall_image(images, work, fill)
        grid = grid.view(1, K * H, W, 2)
        out = F.grid_sample(tall, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        out = out.view(C, K, H, W).transpose(0, 1)
    if fill != 0.0:
        out = out + fill
    if out_dtype.is_floating_point:
        return out.to(out_dtype)
    info = torch.iinfo(out_dtype)
    return out.round().clamp_(info.min, info.max).to(out_dtype)


SAMPLE_LIMIT = float(1 << 30)
"""Sample points of :func:`fixed_point_samples` beyond this many 1/32 pixels (2^25 pixels) are
clamped to it: far outside any image, where a warp reads only the border."""


def fixed_point_samples(
    matrices: torch.Tensor, size: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """OpenCV 4's fixed-point sample points of affine warps (``cv2.warpPerspective`` with
    ``INTER_LINEAR``): each output pixel's source point ``(x, y)``, in float64, rounded to
    1/32 pixel (half to even, as ``cvRound``).

    Args:
        matrices: ``(K, 2, 3)`` source -> output matrices.
        size: ``(H, W)`` of the output.

    Returns:
        ``x, y (K, H, W)`` int32, the source point times 32 (clamped to
        :data:`SAMPLE_LIMIT`): ``>> 5`` is the top-left source pixel, ``& 31`` the position
        inside the 2 x 2 pixels.
    """
    check_tensor("matrices", matrices, 3)
    check_last_dims("matrices", matrices, (2, 3), "affine matrices")
    H, W = (int(v) for v in size)
    if H < 1 or W < 1:
        raise ValueError(f"size must be positive (H, W), got {size}")
    dev = matrices.device
    inv = invert_affine(matrices.to(torch.float64))
    X = torch.arange(W, device=dev, dtype=torch.float64)
    Y = torch.arange(H, device=dev, dtype=torch.float64)
    q = []  # per axis: round(32 (t0 x + (t1 y + t2))), every pixel at once
    for i in range(2):  # x, then y
        # times 32 before the sum: scaling by a power of two rounds nothing, the sum is the same
        a = inv[:, i, 0:1] * X * 32  # (K, W)
        b = (inv[:, i, 1:2] * Y + inv[:, i, 2:3]) * 32  # (K, H)
        v = a[:, None, :] + b[:, :, None]
        q.append(v.clamp_(-SAMPLE_LIMIT, SAMPLE_LIMIT).round_().to(torch.int32))
    return q[0], q[1]


def fixed_point_maps(
    matrices: torch.Tensor, size: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fixed_point_samples` as ``cv2.remap`` takes them.

    Args:
        matrices: ``(K, 2, 3)`` source -> output matrices.
        size: ``(H, W)`` of the output.

    Returns:
        ``first (K, H, W, 2)`` the top-left source pixel ``(x, y)`` of each 2 x 2 and ``frac
        (K, H, W, 2)`` its position inside, in 1/32 pixel (``0 .. 31``), both int64. These are
        the maps ``cv2.remap`` takes as ``CV_16SC2`` and ``frac_y * 32 + frac_x``.
    """
    q = torch.stack(fixed_point_samples(matrices, size), -1).to(torch.int64)
    return q >> 5, q & 31


def warp_affine_fixed_point(
    images: torch.Tensor,
    matrices: torch.Tensor,
    size: tuple[int, int],
    batch_index: torch.Tensor | None = None,
    sizes: torch.Tensor | None = None,
    border: str = "constant",
) -> torch.Tensor:
    """Affine warps of uint8 images with OpenCV 4's fixed-point bilinear: the arithmetic of
    ``cv2.warpPerspective(img, M, (W, H), flags=INTER_LINEAR)`` on 8-bit images (which
    MediaPipe's ``ImageToTensorCalculator`` runs), bit for bit.

    Each output pixel's source point (float64) is rounded to 1/32 pixel (half to even); its
    2 x 2 source pixels are weighted by integers ``(32 - a)(32 - b) 32 ...`` summing to
    ``2^15``, and the sum is rounded half up to uint8. (OpenCV 5 samples exactly instead, as
    :func:`warp_affine` does: the two differ by one grey level in about 1% of the pixels.)

    Args:
        images: ``(B, C, H_in, W_in)`` uint8; channels-last memory (``(B, H, W, C).permute(0,
            3, 1, 2)``) reads without a copy.
        matrices: ``(K, 2, 3)`` source -> output matrices.
        size: ``(H, W)`` of the output.
        batch_index: ``(K,)`` image of each crop (default: crop ``k`` reads image ``k``).
        sizes: ``(K, 2)`` ``(w, h)`` of the valid top-left part of each crop's image (frames
            zero-padded to a common size); default the whole image. Pixels beyond it are
            the border.
        border: ``"constant"`` (zero) or ``"replicate"`` (``cv2.BORDER_REPLICATE``).

    Returns:
        ``(K, C, H, W)`` uint8, channels-last memory.
    """
    if not isinstance(images, torch.Tensor) or images.dtype != torch.uint8 or images.dim() != 4:
        raise ValueError("images must be a uint8 tensor of shape (B, C, H, W)")
    check_tensor("matrices", matrices, 3)
    check_last_dims("matrices", matrices, (2, 3), "affine matrices")
    B, C, H_in, W_in = images.shape
    K, dev = matrices.shape[0], images.device
    if batch_index is None:
        if K != B:
            raise ValueError(f"matrices must have one row per image ({B}), got {K}")
        batch_index = torch.arange(B, device=dev)
    _check_index("batch_index", batch_index, B)
    if border not in ("constant", "replicate"):
        raise ValueError(f"border must be 'constant' or 'replicate', got {border!r}")
    H, W = (int(v) for v in size)
    if sizes is None:
        sizes = torch.tensor([W_in, H_in], device=dev).expand(K, 2)
    lim = sizes.to(dev, torch.int64).view(K, 1, 1, 2)
    first, frac = fixed_point_maps(matrices, (H, W))
    first, frac = first.unbind(-1), frac.unbind(-1)
    flat = images.permute(0, 2, 3, 1).reshape(-1, C)
    base = batch_index.to(dev, torch.int64).view(K, 1, 1) * (H_in * W_in)
    acc = torch.zeros(K, H, W, C, dtype=torch.int32, device=dev)
    for dy in (0, 1):  # the 2 x 2 source pixels of every output pixel (all at once)
        for dx in (0, 1):
            x, y = first[0] + dx, first[1] + dy
            w = (frac[0] if dx else 32 - frac[0]) * (frac[1] if dy else 32 - frac[1]) * 32
            if border == "replicate":
                x = torch.minimum(x.clamp_min(0), lim[..., 0] - 1)
                y = torch.minimum(y.clamp_min(0), lim[..., 1] - 1)
            else:
                ok = (x >= 0) & (x < lim[..., 0]) & (y >= 0) & (y < lim[..., 1])
                w, x, y = w * ok, x * ok, y * ok
            v = flat.index_select(0, (base + y * W_in + x).flatten()).view(K, H, W, C)
            acc.addcmul_(v.to(torch.int32), w.to(torch.int32).unsqueeze(-1))
    out = torch.bitwise_right_shift(acc + (1 << 14), 15).clamp_(0, 255).to(torch.uint8)
    return out.permute(0, 3, 1, 2)


def _gather_path(images: torch.Tensor, work: torch.dtype, fill: float) -> bool:
    """Whether a warp samples uint8 pixels by :func:`_gather_bilinear` (CPU, float32 work,
    zero border): it reads the 4 source pixels of each output pixel instead of converting the
    whole image to float first (a 1920 x 1080 frame warped to 256 x 256: 8x fewer reads)."""
    return (
        images.dtype == torch.uint8
        and images.device.type == "cpu"
        and (work == torch.float32 and fill == 0.0)
    )


def _gather_bilinear(
    images: torch.Tensor, grid: torch.Tensor, H_grid: int, block: int | None = None
) -> torch.Tensor:
    """``F.grid_sample(images, grid, "bilinear", "zeros", align_corners=False)`` of channels-last
    ``images (B, H_in, W_in, C)`` with the arithmetic of PyTorch's CPU kernel (unnormalise,
    floor, weights ``nw ne sw se``, their sum in that order), reading only the pixels it needs.

    ``grid (K, H, W, 2)`` is normalised over ``W_in`` and ``H_grid`` rows. ``block=None``: crop
    ``k`` reads image ``k`` (``H_grid = H_in``). Otherwise the rows are those of the tall image
    of :func:`warp_affine_indexed` (blocks of ``block`` rows per image, the last ones zero).
    Returns ``(K, C, H, W)`` float32.
    """
    B, H_in, W_in, C = images.shape
    flat = images.reshape(-1, C)
    # the kernel's fused multiply-adds (torch.add with alpha and addcmul are FMAs too)
    half = torch.tensor(-0.5, dtype=grid.dtype, device=grid.device)
    x = torch.add(half, grid[..., 0] + 1, alpha=W_in / 2)
    y = torch.add(half, grid[..., 1] + 1, alpha=H_grid / 2)
    x0, y0 = x.floor(), y.floor()
    w = x - x0
    e = 1 - w
    n = y - y0
    s = 1 - n
    xi, yi = x0.to(torch.int64), y0.to(torch.int64)
    rows, cols = [], []  # per source row / column of the 2 x 2: (flat offset, inside)
    for r in (yi, yi + 1):  # the 2 source rows of the 2 x 2 (all pixels at once)
        if block is None:
            first = torch.arange(grid.shape[0], device=grid.device).view(-1, 1, 1) * H_in
            rows.append(((first + r) * W_in, (r >= 0) & (r < H_in)))
        else:  # tall rows: image r // block, row r % block (zero from H_in on)
            img = torch.div(r, block, rounding_mode="floor")
            row = r - img * block
            rows.append(((img * H_in + row) * W_in, (r >= 0) & (img < B) & (row < H_in)))
    for c in (xi, xi + 1):  # the 2 source columns
        cols.append((c, (c >= 0) & (c < W_in)))
    pairs = [(rows[0], cols[0]), (rows[0], cols[1]), (rows[1], cols[0]), (rows[1], cols[1])]
    ok = torch.stack([ro & co for (_, ro), (_, co) in pairs], -1)
    idx = torch.stack([r + c for (r, _), (c, _) in pairs], -1)
    # the four pixels of each output pixel side by side: one gather, neighbouring reads
    v = flat.index_select(0, torch.where(ok, idx, 0).flatten()).view(*idx.shape, C)
    weights = torch.where(ok, torch.stack([s * e, s * w, n * e, n * w], -1), 0.0)
    out = v[..., 0, :] * weights[..., 0, None]  # pixels outside read as 0 (weight 0)
    for i in range(1, 4):  # nw + ne + sw + se, each an FMA, in the kernel's order
        out = torch.addcmul(out, v[..., i, :].to(torch.float32), weights[..., i, None])
    return out.permute(0, 3, 1, 2).contiguous()  # NCHW, as grid_sample returns


def _tall_image(images: torch.Tensor, work: torch.dtype, fill: float) -> torch.Tensor:
    """The tall image of :func:`warp_affine_indexed`: ``(1, C, B * (H_in + 1), W_in)``, a zero
    row below each image."""
    B, C, H_in, W_in = images.shape
    Ht = H_in + 1
    tall = torch.empty(1, C, B * Ht, W_in, dtype=work, device=images.device)
    rows = tall.view(C, B, Ht, W_in)
    rows[:, :, H_in:].zero_()
    view = rows[:, :, :H_in]
    view.copy_(images.permute(1, 0, 2, 3))
    if fill != 0.0:
        view.sub_(fill)  # bilinear is linear: warp (x - fill) with zero border, add fill back
    return tall


def _tall_grid(
    matrices: torch.Tensor,
    batch_index: torch.Tensor,
    B: int,
    size_in: tuple[int, int],
    size: tuple[int, int],
    work: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """The sampling grid ``(K, H, W, 2)`` of :func:`warp_affine_indexed` in the tall image's
    ``[-1, 1]`` coordinates; points whose two source rows leave their own image are moved
    outside the tall image."""
    (H_in, W_in), (H, W) = size_in, size
    K, Ht = matrices.shape[0], H_in + 1
    # One affine map per crop, output pixel -> tall-image [-1, 1] coordinates (the inverse
    # warp, the shift to the crop's own image, the tall image's normalisation), composed in
    # float64; each grid coordinate is then one broadcast add of a row and a column term.
    f64 = torch.float64
    Hs = B * Ht
    theta = invert_affine(matrices.to(f64))
    top = batch_index.to(f64) * Ht  # first row of each crop's image in the tall image
    scale = constant((2 / W_in, 2 / Hs), device, f64).view(1, 2, 1)
    theta = theta * scale
    theta[:, 0, 2] += 1 / W_in - 1
    theta[:, 1, 2] += (2 * top + 1) / Hs - 1
    theta = theta.to(work)
    X = torch.arange(W, device=device, dtype=work).view(1, 1, W)
    Y = torch.arange(H, device=device, dtype=work).view(1, H, 1)
    grid = torch.empty(K, H, W, 2, device=device, dtype=work)
    for i in range(2):  # x, then y
        t = theta[:, i, :, None, None]
        torch.add(t[:, 0] * X, t[:, 1] * Y + t[:, 2], out=grid[..., i])
    # a point whose two source rows leave its image (y <= -1 or y >= H_in) moves outside
    lo = ((2 * (top - 1) + 1) / Hs - 1).to(work).view(K, 1, 1)
    hi = ((2 * (top + H_in) + 1) / Hs - 1).to(work).view(K, 1, 1)
    gy = grid[..., 1]
    grid[..., 0].masked_fill_((gy <= lo) | (gy >= hi), -3.0)
    return grid


def _check_index(name: str, index: torch.Tensor, n: int) -> None:
    """Index values in ``[0, n)``: checked on a CPU; a device-side assert on CUDA (no sync)."""
    if torch.compiler.is_compiling() or index.numel() == 0:
        return
    ok = (index >= 0) & (index < n)
    if index.device.type == "cpu":
        if not bool(ok.all()):
            bad = int(index[~ok][0])
            raise ValueError(f"{name} must be in [0, {n}), got {bad}")
    elif index.device.type == "cuda":
        torch._assert_async(ok.all(), f"{name} must be in [0, {n})")
