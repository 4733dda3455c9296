"""Gaps in keypoint tracks: missing values filled by linear interpolation in time."""

from __future__ import annotations

import torch

__all__ = ["bridge_missing", "fill_gaps"]


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
    _check(xy, missing, "xy")
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
    t, prev, nxt = _neighbours(seen)
    lo = torch.where(prev < 0, nxt, prev)  # before the first observation: hold it
    hi = torch.where(nxt >= T, lo, nxt)  # after the last one: hold it
    lo = torch.where(nxt >= T, prev, lo)
    return torch.where(missing[..., None], _lerp(xy, t, lo, hi), xy)


def fill_gaps(
    x: torch.Tensor, missing: torch.Tensor, max_gap: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fill the gaps of at most ``max_gap`` frames that have an observation on both sides by
    linear interpolation in time, per joint (longer gaps and the ends stay as they are).

    Args:
        x: ``(T, J, D)`` values. missing: ``(T, J)`` bool. max_gap: ``>= 0`` frames.

    Returns:
        ``(T, J, D)`` with the short gaps filled, and the ``(T, J)`` bool of the filled entries.
    """
    _check(x, missing, "x")
    T = x.shape[0]
    t, prev, nxt = _neighbours(~missing)
    filled = missing & (prev >= 0) & (nxt < T) & (nxt - prev - 1 <= max_gap)
    lo, hi = prev.clamp(0, T - 1), nxt.clamp(0, T - 1)
    return torch.where(filled[..., None], _lerp(x, t, lo, hi), x), filled


def _check(x: torch.Tensor, missing: torch.Tensor, name: str) -> None:
    if x.dim() != 3 or missing.shape != x.shape[:2]:
        raise ValueError(
            f"{name} must be (T, J, D) and missing (T, J), got {tuple(x.shape)} and "
            f"{tuple(missing.shape)}"
        )


def _neighbours(seen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``seen (T, J)`` -> the frame index ``t``, the previous observed frame (-1: none) and the
    next one (``T``: none) of every entry: a ``cummax`` and a reversed ``cummin`` over time."""
    T = seen.shape[0]
    t = torch.arange(T, device=seen.device)[:, None].expand_as(seen)
    prev = torch.where(seen, t, -1).cummax(0).values
    nxt = torch.where(seen, t, T).flip(0).cummin(0).values.flip(0)
    return t, prev, nxt


def _lerp(x: torch.Tensor, t: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """``x (T, J, D)`` at frames ``t`` interpolated linearly between frames ``lo`` and ``hi``."""
    w = ((t - lo).to(x.dtype) / (hi - lo).clamp_min(1).to(x.dtype))[..., None]
    D = x.shape[-1]
    a = x.gather(0, lo[..., None].expand(-1, -1, D))
    b = x.gather(0, hi[..., None].expand(-1, -1, D))
    return a + w * (b - a)
