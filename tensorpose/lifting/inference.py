"""Monocular 3D lifting with a loaded lifter: one person's 2D keypoints -> root-relative 3D and
the root's trajectory in the camera frame.

The path, one function each:

1. :func:`to_model_joints`: the model's input joints (``h36m17`` via
   :func:`tensorpose.layouts.to_h36m17`, or COCO-17 for a VideoPose3D COCO model); joints below
   ``min_confidence`` or not found are *missing*.
2. :func:`tensorpose.ops.gaps.bridge_missing`: missing joints filled by linear interpolation in
   time per joint (the nearest observed value held at the ends).
3. :func:`normalize_input` + :func:`predict_joints`: the normalisation the checkpoint was
   trained with (screen normalisation with the image size; ``intrinsics``: ``K^-1 [u, v, 1]``),
   the model's dense prediction, optionally averaged with the prediction of the mirrored input
   (``flip``), made root-relative; with ``reproject`` each detected joint is then slid onto
   its camera ray at its predicted depth (:func:`tensorpose.ops.camera.fit_to_rays`).
4. :func:`tensorpose.ops.trajectory.root_translation` + ``lowpass_trajectory``: the root in the
   camera frame (the joints placed on the rays of their keypoints, smoothed over time).

:func:`lift_keypoints` runs the three; :func:`load_lifter` loads a tensorpose lifting
checkpoint, a VideoPose3D ``.bin`` or the bundled lifter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError, MissingFileError
from ..io.tracks import Keypoints2D
from ..layouts import COCO17_INDEX, to_h36m17
from ..ops.gaps import bridge_missing
from ..ops.trajectory import lowpass_trajectory, root_translation
from ..skeleton import Skeleton, get_skeleton

__all__ = [
    "TRAJECTORY_CUTOFF_HZ",
    "TRAJECTORY_DEPTH_CUTOFF_HZ",
    "Lifter",
    "bundled_lifters",
    "lift_keypoints",
    "load_lifter",
    "normalize_input",
    "predict_joints",
    "to_model_joints",
]

MODELS_DIR = Path(__file__).resolve().parents[1] / "assets" / "models"
TRAJECTORY_CUTOFF_HZ = 6.0
"""Low-pass cutoff of the root's ray (Hz; chosen on the mocap hold-outs,
``docs/lifting_results.md``, Trajectory)."""
TRAJECTORY_DEPTH_CUTOFF_HZ = 0.5
"""Low-pass cutoff of the root's depth (Hz; chosen with :data:`TRAJECTORY_CUTOFF_HZ`)."""


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
            raise InputError(f"layout {layout} does not contain the 17 COCO keypoints")
        return keypoints[..., COCO17_INDEX[layout], :]
    raise ValueError(f"joints must be 'h36m17' or 'coco17', got {joints!r}")


@dataclass
class Lifter:
    """A loaded lifting model and how to feed it.

    Attributes:
        kind: ``tensorpose`` (a :class:`~tensorpose.lifting.model.TemporalLifter` checkpoint)
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

    @property
    def skeleton_in(self) -> Skeleton:
        """The input joints as a skeleton (names, bones)."""
        return get_skeleton(self.joints_in)


def bundled_lifters() -> list[Path]:
    """The lifter checkpoints shipped in ``tensorpose/assets/models/`` (may be none)."""
    return sorted(MODELS_DIR.glob("lifter*.pt")) if MODELS_DIR.is_dir() else []


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
            raise InputError(
                f"no bundled lifter in {MODELS_DIR}: pass --checkpoint (a checkpoint.pt of "
                "`tensorpose train`/`demo`, or a VideoPose3D .bin)"
            )
        checkpoint = found[0]
    path = Path(checkpoint)
    if not path.exists():
        raise MissingFileError(f"--checkpoint {path}: no such file")
    if not path.is_file():
        raise InputError(f"--checkpoint {path}: is a folder or not a regular file, expected a "
                         "lifting checkpoint.pt or a VideoPose3D .bin")  # fmt: skip
    h36m = get_skeleton("h36m17")
    if path.suffix == ".bin":
        from .videopose3d import load_videopose3d

        model = load_videopose3d(path, device)
        if model.joints_out != 17 or model.joints_in != 17 or model.in_features != 2:
            raise InputError(
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
    from ..inference import load_model

    task, model, cfg, _ = load_model(path, device)
    if "lift" not in task.capabilities:
        raise InputError(f"{path}: a {cfg.task!r} checkpoint, lift needs a lifting one")
    d = cfg.data
    norm = getattr(d, "normalization", "screen")
    if norm not in ("screen", "intrinsics"):
        raise InputError(f"{path}: unknown data.normalization {norm!r}")
    if model.skeleton.names != h36m.names:
        raise InputError(f"{path}: lifter of skeleton {model.skeleton}, lift feeds h36m17 joints")
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
    recording, :func:`tensorpose.ops.poseaug_cameras.default_intrinsics` (the rule the kinematic
    augmentation trains with).
    """
    from ..ops.camera import normalize_screen, undistort_points
    from ..ops.poseaug_cameras import default_intrinsics

    if normalization == "screen":
        if size is None:
            raise InputError(
                "this lifter was trained on screen-normalised keypoints and needs the image "
                "size: pass --size WxH, --calib FILE --camera NAME, or --video"
            )
        return normalize_screen(pixels, float(size[0]), float(size[1]))
    if normalization != "intrinsics":
        raise ValueError(f"normalization must be 'screen' or 'intrinsics', got {normalization!r}")
    if K is None:
        if size is None:
            raise InputError(
                "this lifter takes camera-normalised keypoints and needs the intrinsics or the "
                "image size: pass --calib FILE --camera NAME, --size WxH, or --video"
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
    if not bool(torch.isfinite(x).all()):
        raise InputError(
            "the 2D keypoints do not fit in float32 after normalisation (values far outside the "
            "image): check --size or --calib/--camera and the keypoint file"
        )
    out_skel = lifter.skeleton_out
    if lifter.kind == "videopose3d":
        fin = get_skeleton(lifter.joints_in).flip_index if flip else None
        fout = out_skel.flip_index if flip else None
        joints = lifter.model.predict(x[None], fin, fout)[0]
    else:
        joints = lifter.model.predict(x[None], flip=flip)[0]
    root = out_skel.root
    return joints - joints[:, root : root + 1]


def lift_keypoints(
    kp: Keypoints2D,
    lifter: Lifter,
    size: tuple[int, int] | None = None,
    K: torch.Tensor | None = None,
    flip: bool = False,
    min_confidence: float = 0.3,
    dist: torch.Tensor | None = None,
    reproject: bool = False,
    fps: float | None = None,
    trajectory_cutoff: tuple[float, float] = (TRAJECTORY_CUTOFF_HZ, TRAJECTORY_DEPTH_CUTOFF_HZ),
) -> dict[str, Any]:
    """Lift one person's keypoints: convert, mask, bridge, normalise, predict (``K``,
    ``dist``: the camera's intrinsics and distortion, see :func:`normalize_input`), and place
    the root in the camera frame.

    The root's trajectory: per frame the translation that best puts the predicted joints on
    the rays of their detected keypoints (:func:`tensorpose.ops.trajectory.root_translation`,
    rays ``K^-1 [u, v, 1]`` with ``K`` or the default camera of ``size``), then with ``fps``
    zero-phase low-passes of its ray and its depth at ``trajectory_cutoff`` ``(ray, depth)``
    Hz (:func:`tensorpose.ops.trajectory.lowpass_trajectory`). Its depth scales with the
    predicted skeleton's size.

    With ``reproject`` the prediction is placed in front of the camera and every detected
    joint slid onto its ray at its predicted depth (:func:`tensorpose.ops.camera.fit_to_rays`
    on ``K^-1 [u, v, 1]``, with ``K`` or the default camera of ``size``; joints that were
    missing keep the model's position), so the 3D re-projects onto the 2D keypoints; bone
    lengths then vary. Needs a lifter whose input joints are its output joints.

    Returns:
        ``joints (T, 17, 3)`` root-relative (camera frame, metres), ``root (T, 3)`` the
        root's position in the camera frame (metres; low-passed with ``fps``), ``root_raw``
        (the same before the low-pass), ``pixels (T, J_in, 2)``
        (bridged model input, pixels), ``missing (T, J_in)`` (masked before bridging),
        ``bridged_joints`` (missing joint-frames filled), ``bridged_frames`` (frames with at
        least one), ``absent_frames`` (frames with no joint at all).
    """
    if not 0 <= min_confidence <= 1:
        raise InputError(f"min_confidence must be in [0, 1], got {min_confidence}")
    j = to_model_joints(kp.keypoints, kp.layout, lifter.joints_in)
    missing = ~(torch.isfinite(j[..., :2]).all(-1) & (j[..., 2] >= min_confidence))
    skel = get_skeleton(lifter.joints_in)
    never = missing.all(0).nonzero()[:, 0].tolist()  # the input's, not bridge_missing's to say
    if never:
        raise InputError(
            f"joint(s) {', '.join(skel.names[i] for i in never)} missing or below the "
            "confidence threshold in every frame: nothing to bridge from (lower "
            "--min-confidence, or check the layout)"
        )
    px = bridge_missing(j[..., :2], missing, skel.names)
    x = normalize_input(px, lifter.normalization, size, K, dist)
    joints = predict_joints(lifter, x, flip)
    rays = normalize_input(px.double(), "intrinsics", size, K, dist).cpu()
    w = (~missing).to(torch.float64).cpu()
    out_i, in_i = _shared_joints(lifter)
    root_raw = root_translation(joints.double().cpu()[:, out_i], rays[:, in_i], w[:, in_i])
    root = root_raw if fps is None else lowpass_trajectory(root_raw, fps, *trajectory_cutoff)
    if reproject:
        joints = _reproject(joints, rays, w, lifter)
    return {
        "joints": joints.cpu(),
        "root": root,
        "root_raw": root_raw,
        "pixels": px,
        "missing": missing,
        "bridged_joints": int(missing.sum()),
        "bridged_frames": int(missing.any(1).sum()),
        "absent_frames": int(missing.all(1).sum()),
    }


def _shared_joints(lifter: Lifter) -> tuple[list[int], list[int]]:
    """Indices of the output and of the input joints that share a name (all 17 for an
    ``h36m17`` lifter, the 12 limb joints for a COCO-17 one)."""
    names_in = get_skeleton(lifter.joints_in).names
    names_out = lifter.skeleton_out.names
    shared = [n for n in names_out if n in names_in]
    return [names_out.index(n) for n in shared], [names_in.index(n) for n in shared]


def _reproject(joints, rays, w, lifter: Lifter) -> torch.Tensor:
    """:func:`lift_keypoints`' ``reproject`` step: root-relative joints on their rays."""
    from ..ops.camera import fit_to_rays

    if tuple(get_skeleton(lifter.joints_in).names) != tuple(lifter.skeleton_out.names):
        raise InputError(
            f"--reproject needs a lifter whose input joints are its output joints; this one "
            f"maps {lifter.joints_in} to other joints"
        )
    few = (w > 0).sum(-1, keepdim=True) < 2  # a frame with < 2 detected joints: fit all of them
    w = torch.where(few, torch.ones_like(w), w)
    placed, _ = fit_to_rays(joints.double().cpu(), rays, w)
    root = lifter.skeleton_out.root
    return (placed - placed[:, root : root + 1]).to(joints)
