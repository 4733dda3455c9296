"""3D pose metrics as batched tensor functions (definitions of VideoPose3D's ``common/loss.py``).

Every metric takes ``pred`` and ``target`` of the same shape ``(..., J, 3)`` (``(..., T, J, 3)``
where a time axis is needed) and ``reduction``:

- ``"mean"``: one 0-dim tensor, the mean over everything (VideoPose3D's number);
- ``"none"``: the per-pose (per-frame) value, shape ``(...)``; for ``mpjve`` ``(..., T - 1)``,
  for ``bone_length_std`` per bone ``(..., S)``.

Units are those of the inputs (metres in, metres out). Nothing here synchronises with the host.
"""

from __future__ import annotations

import torch

from ..ops.kinematics import bone_lengths
from ..ops.procrustes import procrustes_align
from ..ops.trajectory import lowpass_trajectory, path_length
from ..skeleton import Skeleton

__all__ = [
    "LIMB_JOINTS",
    "bone_length_std",
    "compare_with_reference",
    "mpjpe",
    "mpjve",
    "n_mpjpe",
    "p_mpjpe",
    "trajectory_errors",
]

_REDUCTIONS = ("mean", "none")


def _check_pair(pred: torch.Tensor, target: torch.Tensor, min_dim: int = 2) -> None:
    for name, x in (("pred", pred), ("target", target)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() < min_dim or x.shape[-1] != 3:
            want = "(..., T, J, 3)" if min_dim == 3 else "(..., J, 3)"
            raise ValueError(f"{name} must have shape {want}, got {tuple(x.shape)}")
    if pred.shape != target.shape:
        raise ValueError(
            f"pred and target must have the same shape, got {tuple(pred.shape)} and "
            f"{tuple(target.shape)}"
        )


def _reduce(x: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return x.mean()
    if reduction == "none":
        return x
    raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def mpjpe(pred: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Mean per-joint position error: mean Euclidean distance over joints (protocol 1).

    Example:
        >>> round(mpjpe(torch.zeros(2, 17, 3), torch.ones(2, 17, 3)).item(), 4)  # sqrt(3)
        1.7321
    """
    _check_pair(pred, target)
    return _reduce(torch.linalg.vector_norm(pred - target, dim=-1).mean(-1), reduction)


def p_mpjpe(pred: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """MPJPE after per-pose rigid alignment with scale (Procrustes, protocol 2)."""
    _check_pair(pred, target)
    aligned = procrustes_align(pred, target)
    return _reduce(torch.linalg.vector_norm(aligned - target, dim=-1).mean(-1), reduction)


def n_mpjpe(pred: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """MPJPE after the least-squares per-pose scale of ``pred`` (no rotation or translation)."""
    _check_pair(pred, target)
    norm_pred = pred.square().sum(-1).mean(-1, keepdim=True)
    norm_tgt = (target * pred).sum(-1).mean(-1, keepdim=True)
    scale = norm_tgt / norm_pred.clamp_min(1e-12)
    return mpjpe(scale.unsqueeze(-1) * pred, target, reduction)


def mpjve(pred: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Mean per-joint velocity error: MPJPE of the first differences along time (dim -3), in
    input units per frame. ``"none"`` gives ``(..., T - 1)``."""
    _check_pair(pred, target, min_dim=3)
    if pred.shape[-3] < 2:
        raise ValueError(
            f"mpjve needs at least 2 frames along dim -3, got shape {tuple(pred.shape)}"
        )
    vp = pred.diff(dim=-3)
    vt = target.diff(dim=-3)
    return _reduce(torch.linalg.vector_norm(vp - vt, dim=-1).mean(-1), reduction)


def bone_length_std(
    pred: torch.Tensor, skeleton: Skeleton, reduction: str = "mean"
) -> torch.Tensor:
    """Standard deviation over time (dim -3, population std) of each bone's length in
    ``pred (..., T, J, 3)``; ``"none"`` gives ``(..., S)``. Zero for a rigid skeleton."""
    if not isinstance(pred, torch.Tensor):
        raise TypeError(f"pred must be a torch.Tensor, got {type(pred).__name__}")
    if pred.dim() < 3 or pred.shape[-1] != 3:
        raise ValueError(f"pred must have shape (..., T, J, 3), got {tuple(pred.shape)}")
    lengths = bone_lengths(pred, skeleton)  # (..., T, S)
    return _reduce(lengths.std(dim=-2, correction=0), reduction)


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
        "mpjpe_mm": 1000 * float(mpjpe(p[ok], r[ok])),
        "p_mpjpe_mm": 1000 * float(p_mpjpe(p[ok], r[ok])),
        "frames": n,
    }


def trajectory_errors(
    pred: torch.Tensor, reference: torch.Tensor, fps: float, cutoff: float = 6.0
) -> dict[str, float]:
    """A root trajectory against a reference (both ``(T, 3)``, the same frame, metres) on the
    frames where both are finite.

    - ``scale``: the one global factor ``s`` minimising ``sum |s p - r|^2`` (the monocular
      depth is known up to the size of the predicted skeleton);
    - ``position_mm``: mean ``|s p - r|``; ``static_mm``: the same for a root that stands still
      at the reference's mean position (how far the root moves, for comparison);
    - ``distance_ref_m``, ``distance_m``, ``distance_error_pct``: distance travelled by ``r``
      and ``s p`` after the same zero-phase low-pass at ``cutoff`` Hz
      (:func:`lowpass_trajectory`; without it the frame-to-frame noise of either would count as
      travel; frames left out are skipped), and the relative error.

    Host reads (floats): for reports, not training steps.
    """
    if pred.shape != reference.shape or pred.dim() != 2 or pred.shape[-1] != 3:
        raise ValueError(
            f"pred and reference must both have shape (T, 3), got {tuple(pred.shape)} and "
            f"{tuple(reference.shape)}"
        )
    ok = torch.isfinite(pred).all(-1) & torch.isfinite(reference).all(-1)
    p, r = pred[ok].double(), reference[ok].double()
    if len(p) < 2:
        raise ValueError(f"fewer than two frames where both trajectories are finite ({len(p)})")
    s = (p * r).sum() / (p * p).sum().clamp_min(1e-12)
    d_ref = path_length(lowpass_trajectory(r, fps, cutoff))
    d = path_length(lowpass_trajectory(s * p, fps, cutoff))
    return {
        "scale": float(s),
        "position_mm": 1000 * float(torch.linalg.vector_norm(s * p - r, dim=-1).mean()),
        "static_mm": 1000 * float(torch.linalg.vector_norm(r - r.mean(0), dim=-1).mean()),
        "distance_ref_m": float(d_ref),
        "distance_m": float(d),
        "distance_error_pct": 100 * float((d - d_ref) / d_ref.clamp_min(1e-12)),
        "frames": len(p),
    }
