"""Gaps in keypoint tracks: missing values filled by linear interpolation in time."""

from __future__ import annotations

import torch

__all__ = ["bridge_missing"]


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
