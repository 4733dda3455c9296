"""BlazePose's geometry as batched tensor functions: SSD anchors, detector decoding, MediaPipe's
weighted NMS, the rotated square region of interest (ROI), its crop matrix and the landmarks
mapped back to image pixels.

The rules are those of MediaPipe 0.10.14's pose graphs (``pose_detection_cpu``,
``pose_detection_to_roi``, ``pose_landmark_by_roi_cpu``, ``pose_landmarks_to_roi``), written
anew as tensor code over any leading batch dims (frames, people):

- detector input: the whole frame letterboxed into ``224 x 224`` (zero border), values in
  ``[-1, 1]``; boxes and keypoints come out in ``[0, 1]`` of that square;
- an ROI is ``center (..., 2)`` (image pixels), ``side (...)`` (pixels, square) and
  ``rotation (...)`` (radians, MediaPipe's sign); the crop maps the ROI's corners onto the
  corners ``0`` and ``size`` of the crop (MediaPipe's ``ImageToTensorCalculator``), so a crop
  point ``q`` is the image point ``center + side / size * R(rotation) (q - size / 2)``;
- detection keypoint 0 is the hip centre, keypoint 1 a point giving scale and rotation; the ROI
  is square, twice their distance, times ``1.25``, turned so that the body points up (target
  angle 90 degrees); landmarks 33 and 34 (auxiliary) play the same role for tracking.

Pixel coordinates are OpenCV's (pixel ``i`` has its centre at ``i``), so a landmark at
``x * W`` matches MediaPipe's normalised ``x`` times the frame width.
"""

from __future__ import annotations

import math

import torch

from ..ops._checks import check_last_dims, check_tensor
from ..ops.affine import crop_matrix, invert_affine, transform_points

__all__ = [
    "DETECTOR_SIZE",
    "LANDMARK_SIZE",
    "alignment_roi",
    "decode_detections",
    "decode_landmarks",
    "detection_to_image",
    "head_down",
    "letterbox_roi",
    "one_euro_step",
    "refine_landmarks",
    "roi_matrix",
    "split_torso",
    "ssd_anchors",
    "tile_rois",
    "torso_distance",
    "weighted_nms",
]

DETECTOR_SIZE = 224
LANDMARK_SIZE = 256


def ssd_anchors(
    input_size: int = DETECTOR_SIZE,
    strides: tuple[int, ...] = (8, 16, 32, 32, 32),
    offset: float = 0.5,
) -> torch.Tensor:
    """Anchor centres ``(A, 2)`` (``x, y`` in ``[0, 1]``) of the BlazePose detector.

    MediaPipe's ``SsdAnchorsCalculator`` with a fixed anchor size (every width and height 1):
    consecutive layers of equal stride share one feature map; each of its cells holds two
    anchors per layer (aspect ratio 1 and the interpolated scale), rows then columns then
    anchors. The default gives the detector's 2254 rows.
    """
    out, i = [], 0
    while i < len(strides):
        j = i
        while j < len(strides) and strides[j] == strides[i]:
            j += 1
        n = math.ceil(input_size / strides[i])
        c = (torch.arange(n, dtype=torch.float32) + offset) / n
        y, x = torch.meshgrid(c, c, indexing="ij")
        xy = torch.stack([x, y], -1).reshape(-1, 1, 2).expand(-1, 2 * (j - i), 2)
        out.append(xy.reshape(-1, 2))
        i = j
    return torch.cat(out)


def decode_detections(
    raw: torch.Tensor,
    logits: torch.Tensor,
    anchors: torch.Tensor,
    input_size: int = DETECTOR_SIZE,
    clip: float = 100.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The detector's rows decoded against the anchors.

    Args:
        raw: ``(..., A, 4 + 2 K)``: box centre offset, size, then ``K`` keypoint offsets, all in
            input pixels (``x`` before ``y``).
        logits: ``(..., A, 1)`` or ``(..., A)`` scores before the sigmoid.
        anchors: ``(A, 2)`` centres from :func:`ssd_anchors`.
        input_size: the detector's input side (the pixel scale of ``raw``).
        clip: logits are clamped to ``[-clip, clip]`` first.

    Returns:
        ``boxes (..., A, 4)`` ``xmin, ymin, xmax, ymax``, ``keypoints (..., A, K, 2)`` (both in
        ``[0, 1]`` of the detector input) and ``scores (..., A)`` in ``[0, 1]``.
    """
    check_tensor("raw", raw, 2)
    check_tensor("anchors", anchors, 2)
    check_last_dims("anchors", anchors, (raw.shape[-2], 2), "one x, y per row of raw")
    if raw.shape[-1] < 4 or raw.shape[-1] % 2:
        raise ValueError(f"raw must have 4 + 2 K values per row, got {raw.shape[-1]}")
    if logits.dim() == raw.dim():
        logits = logits.squeeze(-1)
    a = anchors.to(raw)
    v = raw / input_size
    centre = v[..., :2] + a
    half = v[..., 2:4] / 2
    boxes = torch.cat([centre - half, centre + half], -1)
    keypoints = v[..., 4:].unflatten(-1, (-1, 2)) + a.unsqueeze(-2)
    scores = torch.sigmoid(logits.clamp(-clip, clip))
    return boxes, keypoints, scores


def _iou(box: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """IoU of ``box (..., 1, 4)`` with ``boxes (..., A, 4)`` (xyxy); 0 without overlap."""
    lo = torch.maximum(box[..., :2], boxes[..., :2])
    hi = torch.minimum(box[..., 2:], boxes[..., 2:])
    wh = hi - lo
    inter = wh[..., 0] * wh[..., 1]
    area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])  # noqa: E731
    union = area(box) + area(boxes) - inter
    ok = (wh > 0).all(-1) & (union > 0)
    return torch.where(ok, inter / union.clamp_min(1e-12), torch.zeros_like(inter))


def weighted_nms(
    boxes: torch.Tensor,
    keypoints: torch.Tensor,
    scores: torch.Tensor,
    max_detections: int,
    iou_threshold: float = 0.3,
    min_score: float = 0.5,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """MediaPipe's weighted non-maximum suppression, for every frame at once.

    Rows scoring at least ``min_score`` take part. The best remaining row leads; every
    remaining row whose IoU with it is greater than ``iou_threshold`` (itself included) joins
    its cluster and leaves the pool; the output is the cluster's score-weighted mean box and
    keypoints, with the leader's score. Repeated ``max_detections`` times (a fixed number of
    steps, no host read); the outputs come in decreasing score.

    Args:
        boxes: ``(B, A, 4)`` xyxy; keypoints: ``(B, A, K, 2)``; scores: ``(B, A)``.
        max_detections: outputs per frame.

    Returns:
        ``boxes (B, N, 4)``, ``keypoints (B, N, K, 2)``, ``scores (B, N)`` and ``valid (B, N)``
        (bool; invalid slots hold zeros), ``N = max_detections``.
    """
    check_tensor("boxes", boxes, 3)
    check_last_dims("boxes", boxes, (None, 4), "xmin, ymin, xmax, ymax")
    if max_detections < 1:
        raise ValueError(f"max_detections must be at least 1, got {max_detections}")
    B = scores.shape[0]
    pool = scores >= min_score
    flat = torch.cat([boxes, keypoints.flatten(-2)], -1)  # (B, A, 4 + 2K)
    rows = torch.arange(B, device=scores.device)
    out_v, out_s, out_ok = [], [], []
    for _ in range(max_detections):  # fixed steps, each over every frame
        masked = torch.where(pool, scores, torch.full_like(scores, -1.0))
        best = masked.argmax(-1)
        ok = pool[rows, best]
        lead = boxes[rows, best].unsqueeze(-2)
        member = pool & (_iou(lead, boxes) > iou_threshold)
        member[rows, best] |= ok
        w = torch.where(member, scores, torch.zeros_like(scores))
        mean = (w.unsqueeze(-1) * flat).sum(-2) / w.sum(-1, keepdim=True).clamp_min(1e-12)
        out_v.append(torch.where(ok[:, None], mean, torch.zeros_like(mean)))
        out_s.append(torch.where(ok, scores[rows, best], torch.zeros_like(ok, dtype=scores.dtype)))
        out_ok.append(ok)
        pool = pool & ~member
    v = torch.stack(out_v, 1)
    return (
        v[..., :4],
        v[..., 4:].unflatten(-1, (-1, 2)),
        torch.stack(out_s, 1),
        torch.stack(out_ok, 1),
    )


def letterbox_roi(sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The detector's ROI of whole frames of ``sizes (..., 2)`` ``(w, h)``: centred, square of
    the long side (the letterbox), no rotation."""
    s = sizes.to(torch.float32)
    return s / 2, s.amax(-1), torch.zeros_like(s[..., 0])


def roi_matrix(
    center: torch.Tensor, side: torch.Tensor, rotation: torch.Tensor, size: int
) -> torch.Tensor:
    """``(..., 2, 3)`` image -> crop matrices of square ROIs (crop ``size x size``): the ROI's
    corners go to the crop's corners ``0`` and ``size`` (MediaPipe's convention, half a pixel
    from :func:`~tensorpose.ops.affine.crop_matrix`'s)."""
    M = crop_matrix(center, torch.stack([side, side], -1), (size, size), rotation)
    return M + torch.tensor([0.0, 0.0, 0.5], dtype=M.dtype, device=M.device)


def detection_to_image(points: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """Points ``(..., N, 2)`` in ``[0, 1]`` of the letterboxed detector input -> pixels of
    frames of ``sizes (..., 2)`` ``(w, h)``."""
    center, side, _ = letterbox_roi(sizes)
    return (points - 0.5) * side[..., None, None] + center.unsqueeze(-2)


def _normalize_radians(angle: torch.Tensor) -> torch.Tensor:
    return angle - 2 * math.pi * torch.floor((angle + math.pi) / (2 * math.pi))


def alignment_roi(
    hip: torch.Tensor,
    scale_point: torch.Tensor,
    scale: float = 1.25,
    target_angle: float = math.pi / 2,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rotated square ROI from two alignment points ``(..., 2)`` in pixels.

    Centre at ``hip``; side ``2 |scale_point - hip| * scale``; rotation
    ``target_angle - atan2(-(dy), dx)`` normalised to ``[-pi, pi)`` (MediaPipe's
    ``AlignmentPointsRectsCalculator`` + ``RectTransformationCalculator`` with
    ``square_long``).
    """
    d = scale_point - hip
    side = 2 * torch.linalg.vector_norm(d, dim=-1) * scale
    rotation = _normalize_radians(target_angle - torch.atan2(-d[..., 1], d[..., 0]))
    return hip, side, rotation


def refine_landmarks(
    xy: torch.Tensor, heatmaps: torch.Tensor, kernel_size: int = 9, min_confidence: float = 0.5
) -> torch.Tensor:
    """Landmarks ``(..., L, 2)`` in ``[0, 1]`` of the crop, refined by heatmap logits
    ``(..., L, h, w)`` (MediaPipe's ``RefineLandmarksFromHeatmapCalculator``).

    The default window is 9 cells, the calculator's own default: MediaPipe 0.10.14's graph asks
    for 7, but ``mp.solutions.pose`` loses that option when it rebuilds the graph (its Python
    side does not know the option's type), so the pipeline users run refines with 9.

    Around the cell ``trunc(x w), trunc(y h)`` a ``kernel_size`` window (cut at the map's
    edges) of ``sigmoid(heatmap)`` weights its cell indices; where the window's largest weight
    is at least ``min_confidence`` the landmark moves to the weighted mean cell ``/ (w, h)``.
    A landmark whose cell is left of, right of or above the map stays (as MediaPipe, which
    checks no lower bound: its window is cut instead).
    """
    check_tensor("heatmaps", heatmaps, 3)
    h, w = heatmaps.shape[-2:]
    r = (kernel_size - 1) // 2
    off = torch.arange(-r, r + 1, device=xy.device)
    col = torch.trunc(xy[..., 0] * w).long()
    row = torch.trunc(xy[..., 1] * h).long()
    cols = col[..., None] + off  # (..., L, k)
    rows = row[..., None] + off
    inside = ((cols >= 0) & (cols < w))[..., None, :] & ((rows >= 0) & (rows < h))[..., :, None]
    idx = rows.clamp(0, h - 1)[..., :, None] * w + cols.clamp(0, w - 1)[..., None, :]
    vals = torch.gather(heatmaps.flatten(-2), -1, idx.flatten(-2))
    conf = torch.where(inside.flatten(-2), torch.sigmoid(vals), torch.zeros_like(vals))
    total = conf.sum(-1)
    cells = torch.stack([cols[..., None, :].expand_as(idx), rows[..., :, None].expand_as(idx)], -1)
    mean = (conf.unsqueeze(-1) * cells.flatten(-3, -2).to(conf)).sum(-2)
    mean = mean / total.clamp_min(1e-12).unsqueeze(-1) / torch.tensor([w, h]).to(conf)
    use = (col >= 0) & (col < w) & (row >= 0) & (conf.amax(-1) >= min_confidence) & (total > 0)
    return torch.where(use.unsqueeze(-1), mean.to(xy.dtype), xy)


def decode_landmarks(
    raw: torch.Tensor,
    center: torch.Tensor,
    side: torch.Tensor,
    rotation: torch.Tensor,
    heatmaps: torch.Tensor | None = None,
    size: int = LANDMARK_SIZE,
    matrix: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The landmark network's output ``(..., 5 L)`` (``x, y, z`` in crop pixels, visibility and
    presence logits) mapped to image pixels of the ROIs ``center, side, rotation``.

    ``heatmaps (..., L, h, w)``, when given, refine ``x, y`` first (:func:`refine_landmarks`).
    ``matrix``: the crops' :func:`roi_matrix` when the caller has it already.

    Returns:
        ``xy (..., L, 2)`` image pixels, ``z (..., L)`` (pixels, MediaPipe's ``z`` times the ROI
        side in pixels), ``visibility`` and ``presence`` ``(..., L)`` in ``[0, 1]``.
    """
    check_tensor("raw", raw)
    if raw.shape[-1] % 5:
        raise ValueError(f"raw must hold 5 values per landmark, got {raw.shape[-1]}")
    v = raw.unflatten(-1, (-1, 5))
    xy = v[..., :2] / size
    if heatmaps is not None:
        xy = refine_landmarks(xy, heatmaps)
    inv = invert_affine(roi_matrix(center, side, rotation, size) if matrix is None else matrix)
    return {
        "xy": transform_points(xy * size, inv),
        "z": v[..., 2] / size * side.unsqueeze(-1),
        "visibility": torch.sigmoid(v[..., 3]),
        "presence": torch.sigmoid(v[..., 4]),
    }


def one_euro_step(
    value: torch.Tensor,
    previous: dict[str, torch.Tensor] | None,
    started: torch.Tensor,
    scale: torch.Tensor,
    fps: float,
    min_cutoff: float,
    beta: float,
    d_cutoff: float = 1.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One step of MediaPipe's landmark ``OneEuroFilter`` (``LandmarksSmoothingCalculator``)
    for every signal at once: a streaming step, so video mode can smooth frame by frame.

    With ``Te = 1 / fps`` and ``alpha(fc) = 1 / (1 + 1 / (2 pi fc Te))``: the speed
    ``d = (x - x_raw') * scale * fps`` (``scale``: MediaPipe's value scale, one over the object
    size), ``d_hat = alpha(d_cutoff) d + (1 - alpha(d_cutoff)) d_hat'``, then
    ``x_hat = alpha(min_cutoff + beta |d_hat|) x + (1 - alpha) x_hat'``. Where ``started`` is
    False the filter restarts: ``x`` passes through with ``d_hat = 0``.

    Args:
        value: ``(..., L, D)`` new values (e.g. landmark pixels).
        previous: the state this function returned last (``raw``, ``out``, ``speed``, each
            shaped as ``value``), or ``None`` (every filter restarts).
        started: ``(...)`` bool, the filters that have a previous step.
        scale: ``(...)`` value scale.

    Returns:
        the filtered values ``(..., L, D)`` and the new state.
    """
    te = 1.0 / fps

    def alpha(cutoff):
        return 1.0 / (1.0 + 1.0 / (2 * math.pi * cutoff * te))

    if previous is None:
        started = torch.zeros_like(started)
        previous = {k: torch.zeros_like(value) for k in ("raw", "out", "speed")}
    on = started[..., None, None]
    speed = (value - previous["raw"]) * scale[..., None, None] * fps
    a_d = alpha(d_cutoff)
    speed = torch.where(on, a_d * speed + (1 - a_d) * previous["speed"], torch.zeros_like(speed))
    a = alpha(min_cutoff + beta * speed.abs())
    out = torch.where(on, a * value + (1 - a) * previous["out"], value)
    return out, {"raw": value, "out": out, "speed": speed}


def tile_rois(size: tuple[int, int], min_aspect: float = 1.2) -> torch.Tensor:
    """The detector's extra square regions of a tall or wide frame of ``size (w, h)``: squares
    of the short side along the long one, overlapping, ``ceil(long / short) + 1`` of them
    (three on a 1088 x 1920 frame), so that a person a fifth of the frame high fills twice as
    many detector pixels as in the letterboxed whole frame. ``(T, 3)``: centre ``x, y`` and
    side (pixels, no rotation); ``T = 0`` when ``long / short < min_aspect``."""
    w, h = size
    lo, hi = min(w, h), max(w, h)
    if hi < min_aspect * lo:
        return torch.zeros(0, 3)
    n = math.ceil(hi / lo) + 1
    along = torch.linspace(lo / 2, hi - lo / 2, n)
    across = torch.full_like(along, lo / 2)
    xy = torch.stack([across, along] if h > w else [along, across], -1)
    return torch.cat([xy, torch.full_like(along, float(lo))[:, None]], -1)


def torso_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How far two torsos are apart, in torso lengths: ``a (..., 2, 2)`` and ``b (..., 2, 2)``
    hold the hip centre and the shoulder centre (pixels); the mean of the two points' distances
    over the longer of the two torsos (at least one pixel). 0: the same torso; two people side
    by side are about 1 or more apart. Broadcasts over the leading dims."""
    d = torch.linalg.vector_norm(a - b, dim=-1).mean(-1)
    la = torch.linalg.vector_norm(a[..., 1, :] - a[..., 0, :], dim=-1)
    lb = torch.linalg.vector_norm(b[..., 1, :] - b[..., 0, :], dim=-1)
    return d / torch.maximum(la, lb).clamp_min(1.0)


def split_torso(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Whether torso ``a (..., 2, 2)`` (hip centre, shoulder centre) sits on two of the torsos
    ``b (..., D, 2, 2)``: its hip centre nearest one of them and its shoulder centre nearest
    another, each within half that torso's length, while no single one of them is within half
    a torso length of both points (a merged skeleton: one person's legs under another's
    trunk). ``(...)`` bool; ``valid (..., D)`` rows of ``b`` may be masked with NaN."""
    d = torch.linalg.vector_norm(a.unsqueeze(-3) - b, dim=-1)  # (..., D, 2)
    length = torch.linalg.vector_norm(b[..., 1, :] - b[..., 0, :], dim=-1).clamp_min(1.0)
    r = torch.nan_to_num(d / length.unsqueeze(-1), nan=float("inf"))
    near, which = r.min(-2)  # (..., 2): per point its nearest torso
    both = (r < 0.5).all(-1).any(-1)
    return (which[..., 0] != which[..., 1]) & (near < 0.5).all(-1) & ~both


def head_down(torso: torch.Tensor, margin: float = 0.25) -> torch.Tensor:
    """Whether torsos ``(..., 2, 2)`` (hip centre, shoulder centre, image pixels, ``y`` down)
    stand on their heads: the shoulder centre lower in the image than the hip centre by more
    than ``margin`` torso lengths. ``(...)`` bool. A person upright, bent or lying is not; a
    skeleton read upside down from someone's legs is."""
    drop = torso[..., 1, 1] - torso[..., 0, 1]
    length = torch.linalg.vector_norm(torso[..., 1, :] - torso[..., 0, :], dim=-1)
    return drop > margin * length
