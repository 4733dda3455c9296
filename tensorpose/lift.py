"""3D from a user's own recordings: 2D keypoint sequences -> root-relative 3D joints and files.

:func:`lift` is what ``tensorpose lift`` runs. The path, one function each:

1. :func:`read_keypoints_2d`: an OpenPose JSON folder (people linked into tracks by
   :func:`tensorpose.io.openpose.load_openpose`), a COCO results JSON (a list of
   ``{image_id, keypoints, score}``; ``image_id`` order = frame order; detections linked by
   :func:`tensorpose.io.openpose.link_tracks`) or an ``.npz`` with ``keypoints (T, K, 2|3)``
   (+ optional ``fps``, ``width``, ``height``) -> one person's ``(T, K, 3)`` pixels; the layout is
   given or detected (:func:`tensorpose.layouts.detect_layout`); by default the longest track
   (the most found keypoints over all frames).
2. :func:`to_model_joints`: the model's input joints (``h36m17`` via
   :func:`tensorpose.layouts.to_h36m17`, or COCO-17 for a VideoPose3D COCO model); joints below
   ``min_confidence`` or not found are *missing*.
3. :func:`bridge_missing`: missing joints are filled by linear interpolation in time per joint
   (the nearest observed value held at the ends). A joint missing in every frame is an error
   (nothing to interpolate from; the message names it).
4. :func:`normalize_input` + :func:`predict_joints`: the normalisation the checkpoint was
   trained with (screen normalisation with the image size; ``intrinsics``: ``K^-1 [u, v, 1]``),
   the model's dense prediction, optionally averaged with the prediction of the mirrored input
   (``flip``), made root-relative; with ``reproject`` each detected joint is then slid onto
   its camera ray at its predicted depth (:func:`tensorpose.ops.camera.fit_to_rays`).
5. :func:`write_outputs`: ``<name>_3d.npz``, ``<name>.trc``, ``<name>.csv``,
   ``<name>_skeletons.png`` and with a video ``<name>.mp4``, written into a temporary folder
   and moved into place only when all of them are complete.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import skeletons
from .layouts import COCO17_INDEX, check_layout, detect_layout, to_h36m17
from .skeleton import Skeleton

__all__ = [
    "LIMB_JOINTS",
    "Keypoints2D",
    "Lifter",
    "bridge_missing",
    "bundled_lifters",
    "compare_with_reference",
    "eval_wild",
    "lift",
    "lift_keypoints",
    "load_lifter",
    "normalize_input",
    "predict_joints",
    "read_keypoints_2d",
    "to_model_joints",
    "write_outputs",
]

MODELS_DIR = Path(__file__).resolve().parent / "assets" / "models"
DEFAULT_FPS = 30.0


# ---------------------------------------------------------------------------- input
@dataclass
class Keypoints2D:
    """One person's 2D keypoints read from a file.

    Attributes:
        keypoints: ``(T, K, 3)`` float64 ``x, y, confidence`` in pixels; NaN where the person
            is absent or a keypoint was not found (confidence 1 where the file had none).
        layout: keypoint layout (a key of :data:`tensorpose.layouts.LAYOUTS`).
        layout_reason: why that layout (given, or the detection's evidence).
        kind: ``openpose``, ``coco`` or ``npz``.
        track_frames: frames in which each linked track is present (one entry for npz).
        person: the chosen track.
        fps, size: frame rate and ``(width, height)`` stored in the file, if any.
    """

    keypoints: torch.Tensor
    layout: str
    layout_reason: str
    kind: str
    track_frames: list[int] = field(default_factory=list)
    person: int = 0
    fps: float | None = None
    size: tuple[int, int] | None = None


def _pick_person(tracks: torch.Tensor, person: int | None, source: Path) -> tuple[int, list[int]]:
    """``tracks (T, P, K, 3)``: the chosen track (default: the longest, i.e. the one with
    the most found keypoints over all frames; ties: the first) and the frames each track is
    present in."""
    seen = torch.isfinite(tracks[..., :2]).all(-1)  # (T, P, K)
    counts = [int(n) for n in seen.any(-1).sum(0)]
    if not counts:
        raise ValueError(f"{source}: no person in any frame")
    if person is None:
        keypoints = seen.sum((0, 2)).tolist()
        return max(range(len(counts)), key=lambda p: (keypoints[p], -p)), counts
    if not 0 <= person < len(counts):
        raise ValueError(
            f"--person {person}: {source} has {len(counts)} track(s) (0..{len(counts) - 1}; "
            f"frames present: {', '.join(map(str, counts))})"
        )
    return person, counts


def _read_coco_results(path: Path) -> list[np.ndarray]:
    """Per frame (sorted ``image_id``) ``(P_t, K, 3)`` detections of a COCO results file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: not a JSON file: {e}") from None
    if isinstance(data, dict) and "annotations" in data:
        data = data["annotations"]
    if not isinstance(data, list) or not data:
        raise ValueError(f"{path}: expected a non-empty list of {{image_id, keypoints, score}}")
    per_image: dict[int, list[np.ndarray]] = {}
    K = None
    for i, r in enumerate(data):
        kp = r.get("keypoints") if isinstance(r, dict) else None
        iid = r.get("image_id") if isinstance(r, dict) else None
        if not isinstance(iid, int) or isinstance(iid, bool) or not isinstance(kp, list):
            raise ValueError(f"{path}: entry {i} needs an integer image_id and a keypoints list")
        if not kp or len(kp) % 3 or (K is not None and len(kp) != 3 * K):
            want = f"{3 * K}" if K is not None else "a multiple of 3"
            raise ValueError(f"{path}: entry {i} has {len(kp)} keypoint values, expected {want}")
        try:
            arr = np.asarray(kp, dtype=np.float64).reshape(-1, 3)
        except (TypeError, ValueError):
            raise ValueError(f"{path}: entry {i}: keypoints are not all numbers") from None
        if not np.isfinite(arr).all():
            raise ValueError(f"{path}: entry {i}: keypoints are not all finite")
        K = arr.shape[0]
        per_image.setdefault(iid, []).append(arr)
    return [np.stack(per_image[k]) for k in sorted(per_image)]


def _read_npz(path: Path) -> tuple[np.ndarray, float | None, tuple[int, int] | None]:
    try:
        with np.load(path, allow_pickle=False) as z:
            if "keypoints" not in z.files:
                raise ValueError(f"{path}: no 'keypoints' array (has {sorted(z.files)})")
            kp = np.asarray(z["keypoints"], dtype=np.float64)
            fps = float(z["fps"]) if "fps" in z.files else None
            size = (
                (int(z["width"]), int(z["height"])) if {"width", "height"} <= set(z.files) else None
            )
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: not a readable .npz file: {e}") from None
    except (TypeError, ValueError) as e:
        if str(e).startswith(str(path)):
            raise
        raise ValueError(f"{path}: cannot read its arrays: {e}") from None
    if kp.ndim != 3 or kp.shape[-1] not in (2, 3) or kp.shape[0] == 0:
        raise ValueError(f"{path}: keypoints must have shape (T, K, 2|3), got {kp.shape}")
    if kp.shape[-1] == 2:
        kp = np.concatenate([kp, np.isfinite(kp).all(-1, keepdims=True).astype(np.float64)], -1)
    return kp, fps, size


def _layout_of(kp: torch.Tensor, layout: str | None, source: Path) -> tuple[str, str]:
    K = kp.shape[-2]
    if layout is not None:
        check_layout(layout, K, f"{source}")
        return layout, f"{layout} as given"
    try:
        return detect_layout(kp.nan_to_num(0.0))
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None


def read_keypoints_2d(
    path: str | os.PathLike,
    layout: str | None = None,
    person: int | None = None,
    progress: bool = False,
) -> Keypoints2D:
    """Read one person's 2D keypoints from an OpenPose folder, a COCO results JSON or an npz.

    Args:
        path: an OpenPose JSON folder, a ``.json`` COCO results file or an ``.npz``.
        layout: keypoint layout (default: detected from the keypoint count and geometry).
        person: track index (default: the longest track: most found keypoints over all
            frames).
        progress: a progress bar while reading an OpenPose folder of 300 files or more.

    Returns:
        :class:`Keypoints2D`.

    Raises:
        FileNotFoundError: no such file or folder.
        ValueError: a malformed file (named), a layout whose keypoint count differs from the
            file's (both counts named), ``person`` out of range (the track count named).
    """
    from .io.openpose import found, link_tracks, load_openpose

    src = Path(path)
    if not src.exists():
        raise FileNotFoundError(f"input not found: {src}")
    fps = size = None
    if src.is_dir():
        if layout is not None:
            check_layout(layout)
        tracks = load_openpose(src, layout, min_confidence=0.0, progress=progress)
        raw = tracks.raw
        kind, lay, reason = "openpose", tracks.layout, tracks.layout_reason
    elif src.suffix.lower() == ".npz":
        arr, fps, size = _read_npz(src)
        raw = torch.from_numpy(arr)[:, None]
        kind = "npz"
        if person not in (None, 0):
            raise ValueError(f"--person {person}: {src} holds one person (track 0)")
    elif src.suffix.lower() == ".json":
        frames = _read_coco_results(src)
        raw = link_tracks(frames)
        raw = raw.masked_fill(~found(raw)[..., None], float("nan"))
        kind = "coco"
    else:
        raise ValueError(
            f"{src}: expected an OpenPose JSON folder, a COCO results .json or an .npz"
        )
    if kind != "openpose":
        lay, reason = _layout_of(raw, layout, src)
    p, counts = _pick_person(raw, person, src)
    return Keypoints2D(raw[:, p].clone(), lay, reason, kind, counts, p, fps, size)


def to_model_joints(keypoints: torch.Tensor, layout: str, joints: str) -> torch.Tensor:
    """``keypoints (T, K, 3)`` of ``layout`` -> ``(T, J, 3)`` model input joints.

    Args:
        joints: ``"h36m17"`` (:func:`tensorpose.layouts.to_h36m17`: a built joint has the
            lowest confidence of its sources) or ``"coco17"`` (the 17 COCO keypoints as they are).
    """
    if joints == "h36m17":
        return to_h36m17(keypoints, layout)
    if joints == "coco17":
        if layout not in COCO17_INDEX:
            raise ValueError(f"layout {layout} does not contain the 17 COCO keypoints")
        return keypoints[..., COCO17_INDEX[layout], :]
    raise ValueError(f"joints must be 'h36m17' or 'coco17', got {joints!r}")


def bridge_missing(
    xy: torch.Tensor, missing: torch.Tensor, names: list[str] | tuple[str, ...] | None = None
) -> torch.Tensor:
    """Fill missing joints by linear interpolation in time, per joint, holding the nearest
    observed value before the first / after the last observation.

    Vectorised: the previous and next observed frame of every ``(t, j)`` come from a
    ``cummax`` / reversed ``cummin`` over time, then one gather and a lerp.

    Args:
        xy: ``(T, J, D)`` values (anything where ``missing``).
        missing: ``(T, J)`` bool.
        names: joint names for the error message.

    Returns:
        ``(T, J, D)`` with every missing entry filled (observed entries unchanged).

    Raises:
        ValueError: a joint missing in every frame (named).
    """
    if xy.dim() != 3 or missing.shape != xy.shape[:2]:
        raise ValueError(
            f"xy must be (T, J, D) and missing (T, J), got {tuple(xy.shape)} and "
            f"{tuple(missing.shape)}"
        )
    T = xy.shape[0]
    seen = ~missing
    never = ~seen.any(0)
    if bool(never.any()):
        idx = never.nonzero()[:, 0].tolist()
        which = [names[i] if names is not None else str(i) for i in idx]
        raise ValueError(
            f"joint(s) {', '.join(which)} missing or below the confidence threshold in every "
            "frame: nothing to bridge from (lower --min-confidence, or check the layout)"
        )
    t = torch.arange(T, device=xy.device)[:, None].expand_as(seen)
    prev = torch.where(seen, t, -1).cummax(0).values
    nxt = torch.where(seen, t, T).flip(0).cummin(0).values.flip(0)
    lo = torch.where(prev < 0, nxt, prev)  # before the first observation: hold it
    hi = torch.where(nxt >= T, lo, nxt)  # after the last one: hold it
    lo = torch.where(nxt >= T, prev, lo)
    span = (hi - lo).clamp_min(1).to(xy.dtype)
    w = ((t - lo).to(xy.dtype) / span)[..., None]
    D = xy.shape[-1]
    a = xy.gather(0, lo[..., None].expand(-1, -1, D))
    b = xy.gather(0, hi[..., None].expand(-1, -1, D))
    return torch.where(missing[..., None], a + w * (b - a), xy)


# ---------------------------------------------------------------------------- model
@dataclass
class Lifter:
    """A loaded lifting model and how to feed it.

    Attributes:
        kind: ``tensorpose`` (a :class:`~tensorpose.models.lifter.TemporalLifter` checkpoint)
            or ``videopose3d`` (a VideoPose3D ``.bin``).
        model: the module, in eval mode.
        joints_in: ``"h36m17"`` or ``"coco17"``.
        normalization: ``"screen"`` or ``"intrinsics"``.
        skeleton_out: the output joints (``h36m17``).
        path: the checkpoint file.
    """

    kind: str
    model: torch.nn.Module
    joints_in: str
    normalization: str
    skeleton_out: Skeleton
    path: Path

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def bundled_lifters() -> list[Path]:
    """The lifter checkpoints shipped in ``tensorpose/assets/models/`` (may be none)."""
    return sorted(MODELS_DIR.glob("*.pt")) if MODELS_DIR.is_dir() else []


def load_lifter(
    checkpoint: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
    joints_in: str | None = None,
) -> Lifter:
    """Load a lifter: a tensorpose lifting checkpoint (``.pt``), a VideoPose3D ``.bin``, or
    with ``checkpoint=None`` the bundled one.

    Args:
        joints_in: VideoPose3D only: ``"coco17"`` or ``"h36m17"`` input joints (default:
            ``coco17`` when the file name mentions ``coco`` or ``detectron``, as
            ``pretrained_h36m_detectron_coco.bin``, else ``h36m17``, as the CPN models).

    Raises:
        ValueError: no bundled lifter and no checkpoint; a checkpoint of another task.
    """
    if checkpoint is None:
        found = bundled_lifters()
        if not found:
            raise ValueError(
                f"no bundled lifter in {MODELS_DIR}: pass --checkpoint (a checkpoint.pt of "
                "`tensorpose train`/`demo`, or a VideoPose3D .bin)"
            )
        checkpoint = found[0]
    path = Path(checkpoint)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    h36m = skeletons.get("h36m17")
    if path.suffix == ".bin":
        from .io.videopose3d import load_videopose3d

        model = load_videopose3d(path, device)
        if model.joints_out != 17 or model.joints_in != 17 or model.in_features != 2:
            raise ValueError(
                f"{path}: VideoPose3D model with {model.joints_in} joints in, "
                f"{model.joints_out} out, {model.in_features} features; lift takes 17 -> 17 "
                "joints of x, y"
            )
        if joints_in is None:
            low = path.name.lower()
            joints_in = "coco17" if "coco" in low or "detectron" in low else "h36m17"
        if joints_in not in ("coco17", "h36m17"):
            raise ValueError(f"joints_in must be 'coco17' or 'h36m17', got {joints_in!r}")
        return Lifter("videopose3d", model, joints_in, "screen", h36m, path)
    from .inference import load_model

    _, model, cfg, _ = load_model(path, device)
    if cfg.task != "lift":
        raise ValueError(f"{path}: a {cfg.task!r} checkpoint, lift needs a lifting one")
    d = cfg.data
    norm = getattr(d, "normalization", "screen")
    if norm not in ("screen", "intrinsics"):
        raise ValueError(f"{path}: unknown data.normalization {norm!r}")
    if model.skeleton.names != h36m.names:
        raise ValueError(f"{path}: lifter of skeleton {model.skeleton}, lift feeds h36m17 joints")
    return Lifter("tensorpose", model, "h36m17", norm, model.skeleton, path)


def normalize_input(
    pixels: torch.Tensor,
    normalization: str,
    size: tuple[int, int] | None,
    K: torch.Tensor | None = None,
    dist: torch.Tensor | None = None,
) -> torch.Tensor:
    """``pixels (T, J, 2)`` -> the model's input coordinates.

    ``screen``: :func:`tensorpose.ops.camera.normalize_screen` with ``size = (w, h)`` (the
    pixels as observed; the lens distortion is not removed).
    ``intrinsics``: ``K^-1 [u, v, 1]`` (its ``x, y``), ``K (3, 3)`` from a calibration (with
    ``dist (5,)`` the lens distortion removed first,
    :func:`tensorpose.ops.camera.undistort_points`), else the default camera of an unknown
    recording, :func:`tensorpose.ops.poseaug.default_intrinsics` (the rule the kinematic
    augmentation trains with).
    """
    from .ops.camera import normalize_screen, undistort_points
    from .ops.poseaug_cameras import default_intrinsics

    if normalization == "screen":
        if size is None:
            raise ValueError(
                "this lifter was trained on screen-normalised keypoints and needs the image "
                "size: pass --size WxH, or --calib FILE --camera NAME"
            )
        return normalize_screen(pixels, float(size[0]), float(size[1]))
    if normalization != "intrinsics":
        raise ValueError(f"normalization must be 'screen' or 'intrinsics', got {normalization!r}")
    if K is None:
        if size is None:
            raise ValueError(
                "this lifter takes camera-normalised keypoints and needs the intrinsics or the "
                "image size: pass --calib FILE --camera NAME, or --size WxH"
            )
        K = default_intrinsics(float(size[0]), float(size[1]), dtype=torch.float64)
    K = K.to(pixels)
    if dist is not None:
        return undistort_points(pixels, K, dist.to(pixels))
    return (pixels - K[:2, 2]) / torch.stack([K[0, 0], K[1, 1]])


@torch.no_grad()
def predict_joints(lifter: Lifter, x: torch.Tensor, flip: bool = False) -> torch.Tensor:
    """Dense root-relative 3D joints ``(T, 17, 3)`` (camera frame, metres) for normalised
    input ``x (T, J_in, 2)``; with ``flip`` the average with the mirrored input's prediction
    (x negated about the normalised 0, left/right joints swapped in and out)."""
    x = x.to(lifter.device, torch.float32)
    out_skel = lifter.skeleton_out
    if lifter.kind == "videopose3d":
        fin = skeletons.get(lifter.joints_in).flip_index if flip else None
        fout = out_skel.flip_index if flip else None
        joints = lifter.model.predict(x[None], fin, fout)[0]
    else:
        joints = lifter.model.predict(x[None], flip=flip)[0]
    root = out_skel.root
    return joints - joints[:, root : root + 1]


# ---------------------------------------------------------------------------- library
def _calibration_camera(calib: str | os.PathLike, camera: str | None):
    """``(K (3, 3), dist (5,), size (w, h))`` of one camera of a calibration file."""
    from .io.calibration import load_calibration  # the geometry module

    cal = load_calibration(calib)
    names = list(cal.names)
    if camera is None:
        raise ValueError(f"--calib needs --camera (one of {names})")
    if camera not in names:
        raise ValueError(f"--camera {camera!r} is not in {calib} (cameras: {names})")
    c = names.index(camera)
    w, h = (int(v) for v in cal.size[c].tolist())
    return cal.K[c].double(), cal.dist[c].double(), (w, h)


def _check_video(video: str | os.PathLike, frames: int) -> tuple[int, int]:
    """Open ``video`` and read its first frame; its frame count must equal ``frames``."""
    import cv2

    path = Path(video)
    if not path.is_file():
        raise FileNotFoundError(f"--video not found: {path}")
    cap = cv2.VideoCapture(str(path))
    try:
        ok, img = cap.read() if cap.isOpened() else (False, None)
        if not ok or img is None:
            raise ValueError(f"--video {path}: cannot be decoded (unknown codec or not a video)")
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    finally:
        cap.release()
    if n > 0 and n != frames:
        raise ValueError(f"--video {path} has {n} frames but the keypoints have {frames}")
    return img.shape[1], img.shape[0]


@dataclass
class _Result:
    name: str
    joints: torch.Tensor  # (T, J, 3) root-relative camera metres
    pixels: torch.Tensor  # (T, J, 2) bridged 2D input (pixels)
    missing: torch.Tensor  # (T, J)
    skeleton_in: Skeleton
    skeleton_out: Skeleton
    fps: float


def lift_keypoints(
    kp: Keypoints2D,
    lifter: Lifter,
    size: tuple[int, int] | None = None,
    K: torch.Tensor | None = None,
    flip: bool = False,
    min_confidence: float = 0.3,
    dist: torch.Tensor | None = None,
    reproject: bool = False,
) -> dict[str, Any]:
    """Lift one person's keypoints: convert, mask, bridge, normalise, predict (``K``,
    ``dist``: the camera's intrinsics and distortion, see :func:`normalize_input`).

    With ``reproject`` the prediction is placed in front of the camera and every detected
    joint slid onto its ray at its predicted depth (:func:`tensorpose.ops.camera.fit_to_rays`
    on ``K^-1 [u, v, 1]``, with ``K`` or the default camera of ``size``; joints that were
    missing keep the model's position), so the 3D re-projects onto the 2D keypoints; bone
    lengths then vary. Needs a lifter whose input joints are its output joints.

    Returns:
        ``joints (T, 17, 3)`` root-relative (camera frame, metres), ``pixels (T, J_in, 2)``
        (bridged model input, pixels), ``missing (T, J_in)`` (masked before bridging),
        ``bridged_joints`` (missing joint-frames filled), ``bridged_frames`` (frames with at
        least one), ``absent_frames`` (frames with no joint at all).
    """
    if not 0 <= min_confidence <= 1:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
    j = to_model_joints(kp.keypoints, kp.layout, lifter.joints_in)
    missing = ~(torch.isfinite(j[..., :2]).all(-1) & (j[..., 2] >= min_confidence))
    skel = skeletons.get(lifter.joints_in)
    px = bridge_missing(j[..., :2], missing, skel.names)
    x = normalize_input(px, lifter.normalization, size, K, dist)
    joints = predict_joints(lifter, x, flip)
    if reproject:
        joints = _reproject(joints, px, missing, lifter, size, K, dist)
    return {
        "joints": joints.cpu(),
        "pixels": px,
        "missing": missing,
        "bridged_joints": int(missing.sum()),
        "bridged_frames": int(missing.any(1).sum()),
        "absent_frames": int(missing.all(1).sum()),
    }


def _reproject(joints, px, missing, lifter: Lifter, size, K, dist) -> torch.Tensor:
    """:func:`lift_keypoints`' ``reproject`` step: root-relative joints on their rays."""
    from .ops.camera import fit_to_rays

    if tuple(skeletons.get(lifter.joints_in).names) != tuple(lifter.skeleton_out.names):
        raise ValueError(
            f"--reproject needs a lifter whose input joints are its output joints; this one "
            f"maps {lifter.joints_in} to other joints"
        )
    rays = normalize_input(px.double(), "intrinsics", size, K, dist)
    w = (~missing).to(torch.float64)
    few = (w > 0).sum(-1, keepdim=True) < 2  # a frame with < 2 detected joints: fit all of them
    w = torch.where(few, torch.ones_like(w), w)
    placed, _ = fit_to_rays(joints.double().cpu(), rays.cpu(), w.cpu())
    root = lifter.skeleton_out.root
    return (placed - placed[:, root : root + 1]).to(joints)


def lift(
    input: str | os.PathLike,
    checkpoint: str | os.PathLike | None = None,
    out: str | os.PathLike | None = None,
    *,
    layout: str | None = None,
    person: int | None = None,
    fps: float | None = None,
    calib: str | os.PathLike | None = None,
    camera: str | None = None,
    size: tuple[int, int] | None = None,
    video: str | os.PathLike | None = None,
    flip: bool = False,
    min_confidence: float = 0.3,
    reproject: bool = False,
    overwrite: bool = False,
    device: str | torch.device = "cpu",
    vp3d_joints: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Lift a recording's 2D keypoints to 3D and write the files (``tensorpose lift``).

    Every input is checked before anything is written; the files are written under temporary
    names and moved into ``out`` at the end; existing outputs are refused unless ``overwrite``.

    Args:
        input: OpenPose JSON folder, COCO results ``.json`` or ``.npz`` (see the module notes).
        checkpoint: ``.pt`` lifting checkpoint, VideoPose3D ``.bin``, or None (bundled).
        out: output folder (default ``./lift_<name>``, ``name`` the input's stem).
        calib, camera: a calibration file and camera name (image size, and ``K`` for
            intrinsics-normalised models); ``size``: ``(w, h)`` instead.
        video: the recording, for ``<name>.mp4`` (2D skeleton on the frames, 3D beside).
        flip: test-time flip averaging.
        min_confidence: joints below it are missing (bridged).
        reproject: slide the joints onto their 2D rays (see :func:`lift_keypoints`).
        vp3d_joints: VideoPose3D input joints (see :func:`load_lifter`).

    Returns:
        a report: input, kind, layout (+ reason), tracks, person, frames, joints, bridged
        counts, model, normalisation, size, fps, flip, reproject, files written, seconds.
    """
    t0 = time.perf_counter()
    src = Path(input)
    name = src.stem if src.suffix.lower() in (".json", ".npz") else src.name
    out_dir = Path(out) if out is not None else Path(f"lift_{name}")
    if size is not None and calib is not None:
        raise ValueError("pass either --size or --calib/--camera, not both")
    if camera is not None and calib is None:
        raise ValueError("--camera needs --calib")
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise ValueError(f"--size must be WxH with positive integers, got {size}")
    if fps is not None and not fps > 0:
        raise ValueError(f"--fps must be positive, got {fps}")
    kp = read_keypoints_2d(src, layout, person, progress)
    K = dist = None
    if calib is not None:
        K, dist, size = _calibration_camera(calib, camera)
    size = size if size is not None else kp.size
    fps_used = fps if fps is not None else kp.fps if kp.fps is not None else DEFAULT_FPS
    T = kp.keypoints.shape[0]
    if video is not None:
        vsize = _check_video(video, T)
        if size is not None and tuple(size) != vsize:
            raise ValueError(f"--video is {vsize[0]}x{vsize[1]} but the image size is "
                             f"{size[0]}x{size[1]}")  # fmt: skip
    lifter = load_lifter(checkpoint, device, vp3d_joints)
    files = _output_names(name, video is not None)
    existing = [out_dir / f for f in files if (out_dir / f).exists()]
    if existing and not overwrite:
        raise ValueError(f"{existing[0]} exists (pass --overwrite to replace the outputs)")
    r = lift_keypoints(kp, lifter, size, K, flip, min_confidence, dist, reproject)
    res = _Result(name, r["joints"], r["pixels"], r["missing"],
                  skeletons.get(lifter.joints_in), lifter.skeleton_out, fps_used)  # fmt: skip
    written = write_outputs(out_dir, res, video, progress)
    return {
        "input": str(src),
        "kind": kp.kind,
        "layout": kp.layout,
        "layout_reason": kp.layout_reason,
        "tracks": kp.track_frames,
        "person": kp.person,
        "frames": T,
        "joints": lifter.skeleton_out.num_joints,
        "bridged_joints": r["bridged_joints"],
        "bridged_frames": r["bridged_frames"],
        "absent_frames": r["absent_frames"],
        "min_confidence": min_confidence,
        "model": f"{lifter.kind} {lifter.path}",
        "normalization": lifter.normalization,
        "size": tuple(size) if size is not None else None,
        "fps": fps_used,
        "fps_given": fps is not None or kp.fps is not None,
        "flip": flip,
        "reproject": reproject,
        "out_dir": str(out_dir),
        "files": [str(out_dir / f) for f in written],
        "seconds": time.perf_counter() - t0,
    }


# ---------------------------------------------------------------------------- outputs
def _output_names(name: str, video: bool) -> list[str]:
    names = [f"{name}_3d.npz", f"{name}.trc", f"{name}.csv", f"{name}_skeletons.png"]
    return [*names, f"{name}.mp4"] if video else names


def camera_to_opensim(joints: torch.Tensor) -> torch.Tensor:
    """Camera frame (x right, y down, z forward) -> Y-up frame (x right, y up, z towards the
    camera): a rotation by 180 degrees about x, ``(x, -y, -z)``. ``joints: (..., 3)``."""
    return joints * joints.new_tensor([1.0, -1.0, -1.0])


def write_outputs(
    out_dir: str | os.PathLike,
    res: _Result,
    video: str | os.PathLike | None = None,
    progress: bool = True,
) -> list[str]:
    """Write the npz, TRC, CSV, skeleton picture (and MP4) into a temporary folder beside
    ``out_dir``, then move them into ``out_dir``; returns the file names."""
    from .io.export import write_csv, write_trc

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    names = _output_names(res.name, video is not None)
    try:
        joints = res.joints.double()
        np.savez(
            tmp / names[0],
            joints=joints.float().numpy(),
            names=np.array(res.skeleton_out.names),
            fps=np.float64(res.fps),
            missing=res.missing.numpy(),
            input_names=np.array(res.skeleton_in.names),
            keypoints_2d=res.pixels.float().numpy(),
        )  # fmt: skip
        up = camera_to_opensim(joints).numpy()
        axes = "X/Y/Z: camera frame turned Y up (x, -y, -z), root-relative, metres"
        write_trc(tmp / names[1], up, list(res.skeleton_out.names), res.fps, units="m", axes=axes)
        write_csv(tmp / names[2], up, list(res.skeleton_out.names), res.fps, units="m")
        _skeleton_picture(tmp / names[3], res)
        if video is not None:
            _write_video(tmp / names[4], video, res, progress)
        out_dir.mkdir(parents=True, exist_ok=True)
        for n in names:
            os.replace(tmp / n, out_dir / n)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return names


def _skeleton_picture(path: Path, res: _Result, frames: int = 4) -> None:
    from .viz import plot_skeletons_3d

    T = res.joints.shape[0]
    idx = torch.linspace(0, T - 1, min(frames, T)).round().long().unique()
    labels = [f"frame {int(i)}" for i in idx]
    plot_skeletons_3d(None, res.joints[idx], res.skeleton_out, path, labels=labels,
                      title=f"{res.name}: lifted 3D ({T} frames)")  # fmt: skip


def orthographic_panel(joints: torch.Tensor, size: int, yaw_deg: float = 30.0) -> torch.Tensor:
    """Panel pixel coordinates ``(T, J, 2)`` of root-relative ``joints (T, J, 3)`` (camera
    frame) seen orthographically after a turn by ``yaw_deg`` about the vertical axis, one scale
    for the whole sequence so that every pose fits a ``size x size`` panel."""
    a = math.radians(yaw_deg)
    c, s = math.cos(a), math.sin(a)
    R = joints.new_tensor([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    p = (joints @ R.T)[..., :2]
    extent = float(p.abs().amax().clamp_min(1e-6))
    return p * (0.45 * size / extent) + size / 2


def _write_video(path: Path, video: str | os.PathLike, res: _Result, progress: bool) -> None:
    """2D skeleton over each frame, the 3D skeleton beside (frames decoded once, in order)."""
    import cv2
    from tqdm import tqdm

    cap = cv2.VideoCapture(str(video))
    ok, frame = cap.read()
    if not ok:
        cap.release()
        raise ValueError(f"--video {video}: cannot be decoded")
    H, W = frame.shape[:2]
    panel = orthographic_panel(res.joints.double(), H).round().long().numpy()
    px = res.pixels.round().long().numpy()
    miss = res.missing.numpy()
    bones_in, bones_out = res.skeleton_in.bones, res.skeleton_out.bones
    side_in = [_side_colour(res.skeleton_in.names[b]) for _, b in bones_in]
    side_out = [_side_colour(res.skeleton_out.names[b]) for _, b in bones_out]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), res.fps, (W + H, H))
    if not writer.isOpened():
        cap.release()
        raise ValueError(f"cannot write {path} with the mp4v codec")
    T = len(px)
    try:
        # A loop over frames (decoding and drawing, not tensor math).
        for t in tqdm(range(T), desc="video", disable=not progress or T < 300, leave=False):
            if t > 0:
                ok, frame = cap.read()
                if not ok:
                    raise ValueError(f"--video {video} ended after {t} frames, expected {T}")
            for (a, b), col in zip(bones_in, side_in, strict=True):
                dim = miss[t, a] or miss[t, b]
                cv2.line(frame, tuple(px[t, a]), tuple(px[t, b]),
                         tuple(v // 2 for v in col) if dim else col, 2)  # fmt: skip
            side = np.full((H, H, 3), 255, np.uint8)
            for (a, b), col in zip(bones_out, side_out, strict=True):
                cv2.line(side, tuple(panel[t, a]), tuple(panel[t, b]), col, 2)
            writer.write(np.concatenate([frame, side], 1))
    finally:
        writer.release()
        cap.release()


def _side_colour(name: str) -> tuple[int, int, int]:
    """BGR: left green, right orange, centre blue."""
    if name.startswith("l_"):
        return (60, 180, 60)
    if name.startswith("r_"):
        return (0, 140, 255)
    return (200, 120, 40)


# ---------------------------------------------------------------------------- evaluation
LIMB_JOINTS = ("l_hip", "r_hip", "l_knee", "r_knee", "l_ankle", "r_ankle", "l_shoulder",
               "r_shoulder", "l_elbow", "r_elbow", "l_wrist", "r_wrist")  # fmt: skip
"""The 12 limb joints that every layout names alike (the in-the-wild comparison's joints)."""


def compare_with_reference(
    pred: torch.Tensor,
    pred_names: list[str] | tuple[str, ...],
    reference: torch.Tensor,
    reference_names: list[str] | tuple[str, ...],
    R: torch.Tensor | None = None,
    t: torch.Tensor | None = None,
) -> dict[str, float]:
    """Monocular 3D against a reference (e.g. triangulated) on the 12 :data:`LIMB_JOINTS`.

    The reference is moved into the camera frame with ``R``, ``t`` (world -> camera); both are
    made root-relative at the mid-hip (mean of ``l_hip`` and ``r_hip``). Frames where any of the
    12 joints is not finite in either are left out.

    Args:
        pred: ``(T, J, 3)`` camera-frame joints (metres), named by ``pred_names``.
        reference: ``(T, K, 3)`` joints (metres; world frame if ``R``/``t`` given), named by
            ``reference_names``.
        R, t: ``(3, 3)``, ``(3,)`` world -> camera.

    Returns:
        ``mpjpe_mm`` (root-aligned), ``p_mpjpe_mm`` (Procrustes), ``frames`` (compared).
    """
    from . import metrics

    if pred.shape[0] != reference.shape[0]:
        raise ValueError(f"pred has {pred.shape[0]} frames but reference has {reference.shape[0]}")
    idx = []
    for names, what in ((pred_names, "pred_names"), (reference_names, "reference_names")):
        lost = [n for n in LIMB_JOINTS if n not in names]
        if lost:
            raise ValueError(f"{what} lacks the limb joints {lost}")
        idx.append([list(names).index(n) for n in LIMB_JOINTS])
    p = pred[:, idx[0]].double()
    r = reference[:, idx[1]].double().to(p.device)
    if R is not None:
        r = r @ R.to(r).T + t.to(r)
    hips = [LIMB_JOINTS.index("l_hip"), LIMB_JOINTS.index("r_hip")]
    p = p - p[:, hips].mean(1, keepdim=True)
    r = r - r[:, hips].mean(1, keepdim=True)
    ok = torch.isfinite(p).flatten(1).all(1) & torch.isfinite(r).flatten(1).all(1)
    n = int(ok.sum())
    if n == 0:
        return {"mpjpe_mm": float("nan"), "p_mpjpe_mm": float("nan"), "frames": 0}
    return {
        "mpjpe_mm": 1000 * float(metrics.mpjpe(p[ok], r[ok])),
        "p_mpjpe_mm": 1000 * float(metrics.p_mpjpe(p[ok], r[ok])),
        "frames": n,
    }


def _associated_person(frames: list[np.ndarray], chosen: np.ndarray) -> torch.Tensor:
    """``(T, K, 3)``: per frame the detection ``chosen[t]`` of ``frames[t]`` (NaN where -1)."""
    K = next((f.shape[1] for f in frames if len(f)), 0)
    out = torch.full((len(frames), K, 3), float("nan"), dtype=torch.float64)
    for t, (f, p) in enumerate(zip(frames, chosen.tolist(), strict=True)):  # file data per frame
        if 0 <= p < len(f):
            out[t] = torch.from_numpy(np.asarray(f[p], dtype=np.float64))
    return out


def _projected_reference(
    points: torch.Tensor, K: torch.Tensor, dist: torch.Tensor, R: torch.Tensor, t: torch.Tensor
) -> torch.Tensor:
    """``(T, K, 3)`` keypoints: the world ``points (T, K, 3)`` projected to pixels (confidence 1;
    NaN where the point is not valid)."""
    from .ops.camera import project_points

    pts = points.double()
    px = project_points(pts, K.double(), dist.double(), R.double(), t.double())
    valid = torch.isfinite(px).all(-1, keepdim=True)
    kp = torch.cat([px, torch.ones_like(px[..., :1])], -1)
    return torch.where(valid, kp, torch.full_like(kp, float("nan")))


def eval_wild(
    tracks_dir: str | os.PathLike,
    calib: str | os.PathLike,
    checkpoint: str | os.PathLike | None = None,
    *,
    flip: bool = False,
    reproject: bool = False,
    reference_2d: bool = False,
    min_confidence: float = 0.3,
    max_reprojection_px: float = 15.0,
    layout: str | None = None,
    device: str | torch.device = "cpu",
) -> dict[str, Any]:
    """Monocular lifting of each camera of a calibrated multi-camera recording against the
    multi-view triangulation of the same recording (``tensorpose eval-wild``).

    The folder is triangulated by :func:`tensorpose.multiview.triangulate_folder` (into a
    temporary folder). For each camera, the person the triangulation associated in that
    camera's view (per frame) is lifted as ``tensorpose lift`` does (the image size and ``K``
    from the calibration; missing joints bridged) and compared with the triangulated joints
    moved into that camera's frame by its ``R``, ``t``: :func:`compare_with_reference` on the
    12 limb joints, mid-hip root, frames where both are valid. ``flip`` and ``reproject`` as
    in :func:`lift_keypoints`. With ``reference_2d`` each camera lifts the triangulated
    keypoints projected into it (with its lens distortion) instead of its detections: 2D that
    is noise-free and consistent with the reference, so the error left is the lifter's own
    (its 3D prior, depth), not the detector's.

    Returns:
        ``cameras``: per camera ``{camera, folder, mpjpe_mm, p_mpjpe_mm, frames, bridged_joints}``
        (or ``error`` when that camera's person cannot be lifted), ``mean``: the mean over the
        lifted cameras, the model, ``flip``, ``reproject``, ``reference_2d``, the
        triangulation's valid fraction and median reprojection error.
    """
    from .io.calibration import load_calibration
    from .io.openpose import read_openpose_frames
    from .multiview import triangulate_folder

    tracks_dir = Path(tracks_dir)
    lifter = load_lifter(checkpoint, device)
    with tempfile.TemporaryDirectory(prefix=".eval_wild.") as tmp:
        tri = triangulate_folder(
            tracks_dir, calib, tmp, min_confidence=min_confidence, layout=layout,
            max_reprojection_px=max_reprojection_px, fps=DEFAULT_FPS, plot=False,
            name="tri", device=device,
        )  # fmt: skip
        with np.load(tri["outputs"]["npz"]) as z:
            points = torch.from_numpy(z["points"])  # (T, J, 3) world, NaN where not valid
            person = z["person"]  # (T, C)
            names = [str(n) for n in z["names"]]
    cal = load_calibration(calib).select(tri["cameras"])
    rows = []
    for c, (cam, folder) in enumerate(zip(tri["cameras"], tri["folders"], strict=True)):
        # one camera at a time: each is a separate monocular lift (a handful of cameras)
        if reference_2d:
            kp = _projected_reference(points, cal.K[c], cal.dist[c], cal.R[c], cal.t[c])
            lay = tri["layout"]
        else:
            frames, _, lay = read_openpose_frames(tracks_dir / folder, tri["layout"])
            kp = _associated_person(frames, person[:, c])
        k2d = Keypoints2D(kp, lay, "as triangulated", "openpose")
        size = tuple(int(v) for v in cal.size[c].tolist())
        try:
            r = lift_keypoints(
                k2d, lifter, size, cal.K[c], flip, min_confidence, cal.dist[c], reproject
            )
        except ValueError as e:
            rows.append({"camera": cam, "folder": folder, "error": str(e)})
            continue
        m = compare_with_reference(
            r["joints"], lifter.skeleton_out.names, points, names, cal.R[c], cal.t[c]
        )
        rows.append({"camera": cam, "folder": folder, **m, "bridged_joints": r["bridged_joints"]})
    done = [r for r in rows if "error" not in r and r["frames"] > 0]
    mean = {
        k: float(np.mean([r[k] for r in done])) if done else float("nan")
        for k in ("mpjpe_mm", "p_mpjpe_mm")
    }
    return {
        "cameras": rows,
        "mean": mean,
        "model": f"{lifter.kind} {lifter.path}",
        "flip": flip,
        "reproject": reproject,
        "reference_2d": reference_2d,
        "triangulated_valid_fraction": tri["valid_fraction"],
        "median_reprojection_px": tri["median_reprojection_px"],
        "frames": tri["frames"],
    }
