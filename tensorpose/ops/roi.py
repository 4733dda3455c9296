"""Region crops as batched tensor functions: ROI align on feature maps (torchvision's
semantics) and top-down person crops of images with the matrices that map keypoints back.

No loop over regions, bins or samples: ROI align gathers one window of the feature map per
region and contracts it with per-axis bilinear weights (two small matrix products).
"""

from __future__ import annotations

import torch

from ._checks import check_finite, check_tensor
from .affine import _check_index, box_to_center_scale, crop_matrix, warp_affine_indexed

__all__ = ["crop_boxes", "roi_align"]


def _output_size(output_size) -> tuple[int, int]:
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    try:
        oh, ow = (int(v) for v in output_size)
    except (TypeError, ValueError):
        raise ValueError(f"output_size must be an int or (H, W), got {output_size!r}") from None
    if oh < 1 or ow < 1:
        raise ValueError(f"output_size must be positive, got {output_size!r}")
    return oh, ow


def _check_rois(rois: object, name: str = "rois") -> torch.Tensor:
    check_tensor(name, rois)
    if rois.dim() != 2 or rois.shape[1] != 5:
        raise ValueError(
            f"{name} must have shape (K, 5) (batch_index, x1, y1, x2, y2), got {tuple(rois.shape)}"
        )
    check_finite(name, rois)
    return rois


def _axis_samples(
    start: torch.Tensor,
    bin_size: torch.Tensor,
    grid: torch.Tensor,
    bins: int,
    max_grid: int,
    size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample positions along one axis and torchvision's bilinear rule on it.

    ``start, bin_size, grid (K,)``. Returns the two neighbour indices ``(K, bins, G, 2)``
    (long, inside ``[0, size)``) and their weights ``(K, bins, G, 2)``: zero for samples
    outside ``[-1, size]`` and for grid slots ``>= grid`` of a region (the padding of the
    batch's largest grid).
    """
    dt = start.dtype
    p = torch.arange(bins, device=start.device, dtype=dt).view(1, bins, 1)
    i = torch.arange(max_grid, device=start.device, dtype=dt).view(1, 1, max_grid)
    s0, b = start.view(-1, 1, 1), bin_size.view(-1, 1, 1)
    g = grid.view(-1, 1, 1)
    # the reference's expression, term for term: start + p * bin + (i + .5) * bin / grid
    y = s0 + p * b + (i + 0.5) * b / g.clamp(min=1).to(dt)
    used = (i < g) & (y >= -1.0) & (y <= size)
    y = y.clamp(min=0)
    low = y.floor().clamp(max=size - 1)
    top = y >= size - 1
    y = torch.where(top, low, y)
    frac = y - low
    low = low.long()
    high = torch.where(top, low, low + 1)
    w = torch.stack([1 - frac, frac], -1) * used.unsqueeze(-1).to(dt)
    return torch.stack([low, high], -1), w


def roi_align(
    features: torch.Tensor,
    rois: torch.Tensor,
    output_size: int | tuple[int, int],
    spatial_scale: float = 1.0,
    sampling_ratio: int = -1,
    aligned: bool = True,
) -> torch.Tensor:
    """ROI align (Mask R-CNN), with torchvision's ``roi_align`` semantics.

    Each region ``x1, y1, x2, y2`` (input pixels, times ``spatial_scale`` for the map) is
    split into ``oh x ow`` bins; a bin is the mean of a ``gh x gw`` grid of bilinear samples.

    - ``aligned=True`` shifts the region by half a map pixel (pixel centres at integers:
      the exact crop); ``aligned=False`` keeps the legacy Mask R-CNN coordinates and clamps
      the region's size to at least 1.
    - Grid: ``sampling_ratio`` samples per bin side, or (``<= 0``) adaptive
      ``ceil(roi_h / oh) x ceil(roi_w / ow)`` per region. Regions of a batch share the
      largest grid, the unused slots are masked.
    - Bilinear border rule: a sample with ``y < -1`` or ``y > H`` (or the same for ``x``)
      contributes 0; otherwise its coordinates are clamped into ``[0, H - 1]``.
    - A region with an empty grid (e.g. ``x2 < x1`` when aligned) gives zeros.

    Computed separably: each region gathers the window of the map its samples touch and two
    small matrix products with the per-axis weights give the bins (equal to the per-sample
    sum up to float rounding). Shapes depend on the data (the largest grid and window): a few
    host reads per call, so use it on finished predictions rather than inside a compiled step.

    Differentiable with respect to ``features`` (autograd through the gather). The regions
    are constants, as in torchvision (they are detached).

    Args:
        features: ``(N, C, H, W)`` floating point.
        rois: ``(K, 5)`` ``batch_index, x1, y1, x2, y2`` (batch index as a float, as
            torchvision takes it).
        output_size: ``oh`` or ``(oh, ow)``.
        spatial_scale: map pixels per input pixel (``1 / stride``).
        sampling_ratio: samples per bin side; ``<= 0``: adaptive.
        aligned: see above.

    Returns:
        ``(K, C, oh, ow)`` in the features' dtype.

    Example:
        >>> f = torch.arange(16.0).view(1, 1, 4, 4)
        >>> roi_align(f, torch.tensor([[0.0, 0.5, 0.5, 2.5, 2.5]]), 1, sampling_ratio=1)
        tensor([[[[5.]]]])
    """
    oh, ow = _check_roi_align(features, rois, output_size, spatial_scale, sampling_ratio)
    N, C, H, W = features.shape
    K = rois.shape[0]
    dt = features.dtype
    r = rois.detach().to(dt)
    batch = r[:, 0].long()
    _check_index("rois[:, 0] (batch index)", batch, N)
    offset = 0.5 if aligned else 0.0
    x1 = r[:, 1] * spatial_scale - offset
    y1 = r[:, 2] * spatial_scale - offset
    x2 = r[:, 3] * spatial_scale - offset
    y2 = r[:, 4] * spatial_scale - offset
    rw, rh = x2 - x1, y2 - y1
    if not aligned:
        rw, rh = rw.clamp(min=1.0), rh.clamp(min=1.0)
    bin_w, bin_h = rw / ow, rh / oh
    gh, gw, Gh, Gw = _grids(rh, rw, (oh, ow), sampling_ratio, features.device)
    iy, wy = _axis_samples(y1, bin_h, gh, oh, Gh, H)  # (K, oh, Gh, 2)
    ix, wx = _axis_samples(x1, bin_w, gw, ow, Gw, W)  # (K, ow, Gw, 2)
    # Separable: the sample grid of a bin is a product (iy x ix) and the border rule is per
    # axis, so bin (p, q) = sum_y sum_x Wy[p, y] Wx[q, x] F[y, x] with Wy, Wx the per-axis
    # bilinear weights summed over the samples. Each region reads one window of the map (the
    # rows and columns its samples touch) and two small matrix products do the rest.
    Ay, ys = _axis_matrix(iy, wy, H)  # (K, oh, Ly), window rows (K, Ly)
    Ax, xs = _axis_matrix(ix, wx, W)  # (K, ow, Lx), window columns (K, Lx)
    count = (gh * gw).clamp(min=1).to(dt).view(K, 1, 1)
    rows = (batch.view(K, 1, 1) * H + ys.unsqueeze(-1)) * W + xs.unsqueeze(-2)  # (K, Ly, Lx)
    flat = features.permute(0, 2, 3, 1).reshape(N * H * W, C)
    win = flat.index_select(0, rows.reshape(-1)).view(K, rows.shape[1], rows.shape[2], C)
    return torch.einsum("kpy,kyxc,kqx->kcpq", Ay / count, win, Ax)


def _check_roi_align(
    features: torch.Tensor,
    rois: torch.Tensor,
    output_size: int | tuple[int, int],
    spatial_scale: float,
    sampling_ratio: int,
) -> tuple[int, int]:
    """Argument checks of :func:`roi_align`; returns ``(oh, ow)``."""
    check_tensor("features", features)
    if features.dim() != 4:
        raise ValueError(f"features must have shape (N, C, H, W), got {tuple(features.shape)}")
    _check_rois(rois)
    oh, ow = _output_size(output_size)
    if isinstance(spatial_scale, bool) or not isinstance(spatial_scale, (int, float)):
        raise TypeError(f"spatial_scale must be a number, got {type(spatial_scale).__name__}")
    if not spatial_scale > 0:
        raise ValueError(f"spatial_scale must be positive, got {spatial_scale}")
    if isinstance(sampling_ratio, bool) or not isinstance(sampling_ratio, int):
        raise TypeError(f"sampling_ratio must be an int, got {type(sampling_ratio).__name__}")
    return oh, ow


def _grids(
    rh: torch.Tensor,
    rw: torch.Tensor,
    output_size: tuple[int, int],
    sampling_ratio: int,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Samples per bin side of each region ``gh, gw (K,)`` and the batch's largest ``Gh, Gw``."""
    oh, ow = output_size
    K = rh.shape[0]
    if sampling_ratio > 0:
        gh = gw = torch.full((K,), sampling_ratio, dtype=torch.long, device=device)
        Gh = Gw = sampling_ratio
    else:
        gh, gw = torch.ceil(rh / oh).long(), torch.ceil(rw / ow).long()
        # the batch's largest grid: a data-dependent shape, one host read
        Gh = max(int(gh.max()), 0) if K else 0
        Gw = max(int(gw.max()), 0) if K else 0
    return gh, gw, Gh, Gw


def _axis_matrix(
    index: torch.Tensor, weight: torch.Tensor, size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-axis weights of :func:`roi_align` as a dense matrix over a window.

    ``index, weight (K, bins, G, 2)`` from :func:`_axis_samples`. Returns ``A (K, bins, L)``,
    the summed weights of the window positions, and ``positions (K, L)`` (map indices,
    clamped into the map; positions past the map's end carry zero weight). ``L`` is the
    largest span a region touches: one host read.
    """
    K, bins, G = index.shape[:3]
    idx, w = index.reshape(K, bins, G * 2), weight.reshape(K, bins, G * 2)
    used = w != 0
    if idx.numel():
        big = torch.full_like(idx, size)
        start = torch.where(used, idx, big).amin(dim=(1, 2)).clamp(max=size - 1)  # (K,)
    else:  # no regions, or every region with an empty grid
        start = torch.zeros(K, dtype=idx.dtype, device=idx.device)
    rel = torch.where(used, idx - start.view(K, 1, 1), torch.zeros_like(idx))
    L = int(rel.max()) + 1 if rel.numel() else 1
    A = torch.zeros(K, bins, L, dtype=w.dtype, device=w.device).scatter_add_(2, rel, w)
    positions = (start.view(K, 1) + torch.arange(L, device=idx.device)).clamp(max=size - 1)
    return A, positions


def crop_boxes(
    images: torch.Tensor,
    boxes: torch.Tensor,
    output_size: tuple[int, int],
    padding: float = 1.25,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-down person crops for inference: one crop per box, with its image -> crop matrix.

    The window is the training-time one (:func:`tensorpose.ops.affine.box_to_center_scale`,
    as :class:`tensorpose.data.images.TopDownDataset` builds it): the box widened or
    heightened to the crop's aspect ratio ``W / H`` around its centre and enlarged by
    ``padding``; :func:`tensorpose.ops.affine.crop_matrix` maps it onto the crop and
    :func:`tensorpose.ops.affine.warp_affine_indexed` warps every crop from its own image
    (bilinear, zero border). Keypoints predicted in a crop map back to the image with
    ``transform_points(kp, invert_affine(matrices))``.

    Args:
        images: ``(B, C, H, W)`` floating point, or ``(B, H, W, C)`` uint8 (decoded images as
            :func:`tensorpose.data.images.collate_topdown` batches them).
        boxes: ``(K, 5)`` ``batch_index, x1, y1, x2, y2`` in image pixels (the corners of the
            box area, as COCO's ``x, y, x + w, y + h``).
        output_size: ``(H, W)`` of the crops (the model's input).
        padding: window enlargement around the box.

    Returns:
        ``crops (K, C, H, W)`` (float32 in ``[0, 255]`` for uint8 images, else the images'
        dtype) and ``matrices (K, 2, 3)`` image -> crop (float32 for uint8 images).
    """
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if images.dim() != 4:
        raise ValueError(
            f"images must have shape (B, C, H, W) (float) or (B, H, W, C) (uint8), got "
            f"{tuple(images.shape)}"
        )
    if images.dtype == torch.uint8:
        images = images.permute(0, 3, 1, 2)
        dt = torch.float32
    elif images.is_floating_point():
        dt = images.dtype
    else:
        raise TypeError(f"images must be uint8 or floating point, got {images.dtype}")
    _check_rois(boxes, "boxes")
    H, W = _output_size(output_size)
    if not padding > 0:
        raise ValueError(f"padding must be positive, got {padding}")
    b = boxes.to(dt)
    xywh = torch.cat([b[:, 1:3], b[:, 3:5] - b[:, 1:3]], dim=-1)
    center, scale = box_to_center_scale(xywh, W / H, padding)
    M = crop_matrix(center, scale, (H, W))
    crops = warp_affine_indexed(images, M, (H, W), boxes[:, 0].long(), out_dtype=dt)
    return crops, M
