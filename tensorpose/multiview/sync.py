"""Synchronisation from motion: each camera's frame offset against a reference camera.

The cameras of a recording may not have started at the same instant. Each camera's keypoints
(the most confident person per frame, joints below ``min_confidence`` missing, short gaps
filled, low-pass filtered) give one speed signal per keypoint, pixels per frame; the signals
of a camera are compared with the reference camera's (the first folder) at every lag at once
(:func:`lagged_pearson`: the Pearson correlation of the overlapping frames, from FFT
cross-correlations of the masked moments), and averaged over the keypoints both cameras see.
The lag with the highest correlation is the camera's *delay*; with a calibration, the best
few lags (local maxima of the correlation) are told apart by the epipolar agreement of the
matched keypoints (:func:`epipolar_errors`). A parabola through the correlation around the
chosen lag gives the sub-frame part.

Sign convention: a camera's ``delay`` is how many frames later than the reference it started
(``+7``: its frame ``i`` shows the reference's frame ``i + 7``; ``-5``: it started 5 frames
earlier). The frames to drop at the start of each camera so that frame ``k`` of every camera
is the same instant are ``max(delays) - delay`` (:func:`frames_to_drop`).

Pose2Sim's synchronisation (``Pose2Sim/synchronization.py``) sums the absolute vertical
speeds of all keypoints into one signal per camera and loops over lags with pandas; here
each keypoint keeps its own signal (the sum mixes keypoints that each view sees differently),
every lag, keypoint and camera is one batched computation, and the calibration can check the
candidates.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from ..errors import InputError
from ..io.calibration import Calibration, load_calibration
from ..io.openpose import OpenPoseError, first_person, frame_paths, read_openpose_files
from ..ops.butterworth import butterworth, filtfilt
from ..ops.camera import undistort_points
from ..ops.gaps import fill_gaps
from .recording import CHUNK_FRAMES, find_camera_folders, match_cameras, pack_keypoints

__all__ = [
    "SyncResult",
    "best_person",
    "epipolar_errors",
    "estimate_delays",
    "frames_to_drop",
    "keypoint_speeds",
    "lagged_pearson",
    "motion_correlation",
    "read_tracks",
]

CUTOFF_HZ = 6.0
"""Low-pass cut-off of the keypoint tracks before their speeds (Pose2Sim's default is 6 Hz)."""

CANDIDATES = 3
"""Local maxima of the correlation (the highest) around which the calibration looks."""

WINDOW = 5
"""Lags on either side of each candidate whose epipolar agreement is measured."""


def best_person(k: torch.Tensor) -> torch.Tensor:
    """Per frame of ``k (T, P, K, 3)`` (:func:`~.recording.pack_keypoints`) the person with the
    highest mean confidence, ``(T, K, 3)``."""
    best = k[..., 2].mean(-1).argmax(1)
    return k[torch.arange(k.shape[0], device=k.device), best]


def read_tracks(
    tracks_dir: str | os.PathLike, calib_path: str | os.PathLike | None = None
) -> tuple[list[Path], list[torch.Tensor], Calibration | None]:
    """Each camera folder of ``tracks_dir`` (frame counts may differ), its most confident person
    per frame ``(T_c, K, 3)`` (read :data:`~.recording.CHUNK_FRAMES` frames at a time), and with
    ``calib_path`` the calibration of the folders' cameras (matched by name).

    Raises:
        InputError: fewer than two camera folders, no person, differing keypoint counts.
    """
    folders = find_camera_folders(tracks_dir)
    if len(folders) < 2:
        raise InputError(f"{tracks_dir}: synchronisation needs two camera folders or more, "
                         f"found {[f.name for f in folders]}")  # fmt: skip
    calib = None
    if calib_path is not None:
        calib = load_calibration(calib_path)
        calib = calib.select(match_cameras(folders, calib.names, Path(calib_path)))
    tracks, counts = [], {}
    for folder in folders:  # a handful of cameras
        files = frame_paths(folder)
        first = first_person(files)
        if first is None:
            raise OpenPoseError(f"{folder}: no person in any frame")
        counts[folder.name] = K = first[0]
        parts = []
        for start in range(0, len(files), CHUNK_FRAMES):  # bounded memory
            frames = read_openpose_files(files[start : start + CHUNK_FRAMES], K, str(first[1]))
            parts.append(_pack(frames.frames, K))
        tracks.append(torch.cat(parts))
    if len(set(counts.values())) != 1:
        raise InputError(f"the camera folders have different keypoint counts {counts}")
    return folders, tracks, calib


def _pack(frames: list[np.ndarray], K: int) -> torch.Tensor:
    """The most confident person per frame of one camera's ``frames`` (zeros: nobody)."""
    k = pack_keypoints(SimpleNamespace(keypoints=K), frames=[frames])[0]
    return best_person(k) if k.shape[1] else k.new_zeros(k.shape[0], K, 3)


def keypoint_speeds(
    track: torch.Tensor, fps: float, min_confidence: float = 0.3, cutoff: float | None = CUTOFF_HZ
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per keypoint the speed (pixels per frame) of ``track (T, K, 3)`` between frames ``t`` and
    ``t + 1``: joints below ``min_confidence`` missing, gaps between two seen frames filled
    linearly, ``cutoff`` Hz zero-phase Butterworth low-pass (order 4; ``None`` or too few
    frames: none). Returns ``speed (K, T - 1)`` and ``valid (K, T - 1)`` (both frames between
    the keypoint's first and last sighting)."""
    T = track.shape[0]
    xy, seen = track[..., :2].double(), track[..., 2] >= min_confidence
    xy, _ = fill_gaps(xy, ~seen, T)
    t = torch.arange(T, device=track.device)[:, None]
    first = torch.where(seen, t, T).amin(0)
    last = torch.where(seen, t, -1).amax(0)
    inside = (t >= first) & (t <= last)  # (T, K)
    held = torch.minimum(torch.maximum(t, first), last).clamp(0, T - 1)  # ends held
    xy = torch.gather(xy, 0, held[..., None].expand_as(xy))
    if cutoff is not None and T > 15 and cutoff < fps / 2:
        b, a = butterworth(4, cutoff, fps)
        xy = filtfilt(xy.reshape(T, -1), b, a).reshape(xy.shape)
    speed = (xy[1:] - xy[:-1]).norm(dim=-1)
    valid = inside[1:] & inside[:-1]
    return torch.where(valid, speed, 0.0).T, valid.T


def lagged_pearson(
    x: torch.Tensor, mx: torch.Tensor, y: torch.Tensor, my: torch.Tensor, max_lag: int,
    min_overlap: int = 3,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The Pearson correlation of ``x[t]`` and ``y[t - d]`` over the ``t`` where both are valid,
    for every lag ``d`` in ``-max_lag..max_lag``: ``x (..., Tx)``, ``y (..., Ty)`` with masks
    ``mx``, ``my`` (batch dimensions broadcast). The six masked moments of every lag come from
    FFT cross-correlations. Returns ``lags (L,)`` and ``r (..., L)`` (NaN: fewer than
    ``min_overlap`` pairs or no variance)."""
    x, y = x.double(), y.double()
    mx, my = mx.double(), my.double()

    def centred(v, m):  # zero mean, unit scale over the valid samples: exact moments in float64
        n = m.sum(-1, keepdim=True).clamp(min=1)
        v = torch.where(m > 0, v - (v * m).sum(-1, keepdim=True) / n, 0.0)
        return v / v.abs().amax(-1, keepdim=True).clamp(min=1e-12)

    x, y = centred(x, mx), centred(y, my)
    n = 1 << int(x.shape[-1] + y.shape[-1]).bit_length()
    lags = torch.arange(-max_lag, max_lag + 1, device=x.device)
    shape = torch.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    a = torch.stack([v.expand(*shape, -1) for v in (mx, x * mx, x * x * mx, mx, mx, x * mx)])
    b = torch.stack([v.expand(*shape, -1) for v in (my, my, my, y * my, y * y * my, y * my)])
    c = torch.fft.irfft(torch.fft.rfft(a, n) * torch.fft.rfft(b, n).conj(), n)[..., lags % n]
    cnt, sx, sxx, sy, syy, sxy = c.unbind(0)
    cnt = cnt.round()
    var = (cnt * sxx - sx * sx) * (cnt * syy - sy * sy)
    r = (cnt * sxy - sx * sy) / var.clamp(min=1e-300).sqrt()
    bad = (cnt < min_overlap) | (var <= 1e-18 * cnt.clamp(min=1) ** 4)
    return lags, torch.where(bad, float("nan"), r.clamp(-1, 1))


def motion_correlation(
    speeds: list[tuple[torch.Tensor, torch.Tensor]], max_lag: int, reference: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per camera the correlation of its keypoint speeds (:func:`keypoint_speeds` of each
    camera) with the reference camera's at every lag ``-max_lag..max_lag``
    (:func:`lagged_pearson`, every camera and keypoint at once), averaged over the keypoints
    with a value. Returns ``lags (L,)`` and ``r (C, L)`` (the reference's own row included)."""
    T = max(s.shape[-1] for s, _ in speeds)
    pad = [(torch.nn.functional.pad(s, (0, T - s.shape[-1])),
            torch.nn.functional.pad(v, (0, T - v.shape[-1]))) for s, v in speeds]  # fmt: skip
    y = torch.stack([s for s, _ in pad])  # (C, K, T)
    my = torch.stack([v for _, v in pad])
    x, mx = pad[reference]
    lags, r = lagged_pearson(x, mx, y, my, max_lag, min_overlap=max(3, min(
        s.shape[-1] for s, _ in speeds) // 4))  # fmt: skip
    return lags, r.nanmean(1)


def _peaks(r: torch.Tensor, count: int) -> torch.Tensor:
    """Indices ``(C, count)`` of the ``count`` highest local maxima of each row of ``r (C, L)``
    (``-1`` where fewer)."""
    v = r.nan_to_num(-float("inf"))
    left = torch.nn.functional.pad(v[:, :-1], (1, 0), value=-float("inf"))
    right = torch.nn.functional.pad(v[:, 1:], (0, 1), value=-float("inf"))
    peak = (v >= left) & (v >= right) & v.isfinite()
    top = torch.where(peak, v, -float("inf")).topk(min(count, v.shape[1]), 1)
    return torch.where(top.values.isfinite(), top.indices, -1)


def _parabola(r: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    """Sub-sample offset (``-0.5..0.5``) of the vertex of the parabola through ``r[i - 1]``,
    ``r[i]``, ``r[i + 1]`` per row of ``r (C, L)``; 0 at an end or without a curvature."""
    L = r.shape[1]
    lo, hi = (i - 1).clamp(0, L - 1), (i + 1).clamp(0, L - 1)
    rm, r0, rp = (r.gather(1, j[:, None])[:, 0] for j in (lo, i, hi))
    curve = rm - 2 * r0 + rp
    d = 0.5 * (rm - rp) / curve
    ok = (i > 0) & (i < L - 1) & (curve < 0) & d.isfinite()
    return torch.where(ok, d.clamp(-0.5, 0.5), 0.0)


def _fundamental(cal: Calibration, a: int, b: int) -> torch.Tensor:
    """``F`` with ``x_b^T F x_a = 0`` for undistorted pixels of cameras ``a`` and ``b``."""
    R = cal.R[b] @ cal.R[a].T
    t = cal.t[b] - R @ cal.t[a]
    zero = torch.zeros((), dtype=t.dtype)
    tx = torch.stack([zero, -t[2], t[1], t[2], zero, -t[0], -t[1], t[0], zero]).reshape(3, 3)
    return torch.linalg.inv(cal.K[b]).T @ (tx @ R) @ torch.linalg.inv(cal.K[a])


def epipolar_errors(
    ref: torch.Tensor, cam: torch.Tensor, F: torch.Tensor, lags: torch.Tensor,
    min_confidence: float = 0.3,
) -> torch.Tensor:  # fmt: skip
    """Per lag ``d`` of ``lags (L,)`` the median symmetric epipolar distance (pixels, the mean of
    the two point-to-line distances) between ``ref[t]`` and ``cam[t - d]`` over the frames and
    keypoints both see above ``min_confidence``: ``ref (T, K, 3)``, ``cam (T_c, K, 3)`` in
    undistorted pixels, ``F`` from ``ref`` to ``cam``. NaN: no pair."""
    T, Tc = ref.shape[0], cam.shape[0]
    t = torch.arange(T)[None]
    j = t - lags[:, None]  # (L, T)
    inside = (j >= 0) & (j < Tc)
    c = cam[j.clamp(0, Tc - 1)]  # (L, T, K, 3)
    ok = inside[..., None] & (ref[..., 2] >= min_confidence) & (c[..., 2] >= min_confidence)
    xa = torch.cat([ref[..., :2], torch.ones_like(ref[..., :1])], -1).double()  # (T, K, 3)
    xb = torch.cat([c[..., :2], torch.ones_like(c[..., :1])], -1).double()
    la = xa @ F.T  # lines in cam: F x_a
    lb = xb @ F  # lines in ref: F^T x_b
    alg = (xb * la).sum(-1).abs()
    d = 0.5 * alg * (1 / la[..., :2].norm(dim=-1) + 1 / lb[..., :2].norm(dim=-1))
    return torch.where(ok, d, float("nan")).flatten(1).nanquantile(0.5, 1)


@dataclass
class SyncResult:
    """What :func:`estimate_delays` found, per camera (the reference first-class: delay 0).

    Attributes:
        delays: whole frames each camera started after the reference (``-``: before).
        fractional: the same with the sub-frame part.
        correlation: the mean keypoint-speed correlation at the chosen lag.
        lags, curves: the lags tried and each camera's correlation at each ``(C, L)``.
        epipolar_px: with a calibration, the median epipolar distance at the chosen lag.
        candidates: with a calibration, per camera the lags tried and their epipolar distance.
    """

    delays: list[int]
    fractional: list[float]
    correlation: list[float | None]
    lags: np.ndarray
    curves: np.ndarray
    epipolar_px: list[float | None] | None = None
    candidates: list[dict[int, float | None]] | None = None


def estimate_delays(
    tracks: list[torch.Tensor],
    fps: float,
    *,
    calibration: Calibration | None = None,
    max_lag: int | None = None,
    min_confidence: float = 0.3,
    cutoff: float | None = CUTOFF_HZ,
    candidates: int = CANDIDATES,
    reference: int = 0,
    window: int = WINDOW,
) -> SyncResult:
    """Each camera's delay against camera ``reference`` from its most confident person per frame
    ``tracks[c] (T_c, K, 3)`` (:func:`read_tracks`), see the module's notes.

    Args:
        fps: frame rate (for ``cutoff``, Hz). max_lag: largest delay tried (frames; default:
            half the shortest camera). calibration: the cameras' (in ``tracks`` order): the
            epipolar agreement picks among the ``candidates`` best lags.
    """
    shortest = min(t.shape[0] for t in tracks)
    if max_lag is None:
        max_lag = shortest // 2
    if not (isinstance(max_lag, int) and 1 <= max_lag < shortest - 1):
        raise InputError(f"--max-lag must be whole frames in 1..{shortest - 2} (the shortest "
                         f"camera has {shortest} frames), got {max_lag!r}")  # fmt: skip
    speeds = [keypoint_speeds(t, fps, min_confidence, cutoff) for t in tracks]
    lags, r = motion_correlation(speeds, max_lag, reference)
    peaks = _peaks(r, candidates if calibration is not None else 1)  # (C, N)
    best = peaks[:, 0]
    epipolar, tried = None, None
    frac = delays_frac = None
    if calibration is not None:
        best, delays_frac, epipolar, tried = _by_epipolar(
            tracks, calibration, lags, peaks, window, min_confidence, reference
        )
    delays = torch.where(best >= 0, lags[best.clamp(min=0)], 0)
    delays[reference] = 0
    frac = delays.double() + _parabola(r, best.clamp(min=0)) if delays_frac is None else delays_frac
    frac[reference] = 0.0
    corr = r.gather(1, best.clamp(min=0)[:, None])[:, 0]
    return SyncResult(
        delays=delays.tolist(), fractional=[round(v, 3) for v in frac.tolist()],
        correlation=[None if (i < 0 or v != v) else round(v, 4)
                     for i, v in zip(best.tolist(), corr.tolist(), strict=True)],
        lags=lags.numpy(), curves=r.numpy(), epipolar_px=epipolar, candidates=tried,
    )  # fmt: skip


def _by_epipolar(tracks, calibration, lags, peaks, window, min_confidence, reference):
    """Per camera the lag whose matched keypoints agree best with the epipolar geometry of the
    other cameras, its sub-frame value (a parabola through the distances), the distance, and
    every lag tried with its distance. First against the reference alone, among ``window``
    frames around each candidate ``peaks (C, N)`` of the correlation; then twice against every
    other camera at its own lag (a camera whose epipolar geometry with the reference is weak,
    its epipolar lines along the motion, is placed by the others), ``window`` frames around."""
    cal = calibration.to(dtype=torch.float64)
    und = [torch.cat([undistort_points(t[..., :2].double(), cal.K[c], cal.dist[c], pixel=True),
                      t[..., 2:].double()], -1) for c, t in enumerate(tracks)]  # fmt: skip
    C, L = len(tracks), len(lags)
    F = {(a, b): _fundamental(cal, a, b) for a in range(C) for b in range(C) if a != b}
    best = torch.where(peaks[:, 0] >= 0, peaks[:, 0], int((lags == 0).nonzero()))
    best[reference] = int((lags == 0).nonzero())
    costs = torch.full((C, L), float("nan"), dtype=torch.float64)

    def cost(c: int, near: torch.Tensor, others: list[int]) -> torch.Tensor:
        """Mean over ``others`` of the median epipolar distance of camera ``c`` at the lags
        ``lags[near]`` and each other camera at its own lag."""
        e = torch.stack([epipolar_errors(und[d], und[c], F[(d, c)], lags[near] - lags[best[d]],
                                         min_confidence) for d in others])  # fmt: skip
        return e.mean(0)

    others = [c for c in range(C) if c != reference]
    for rounds in range(3):  # against the reference, then twice against every camera
        for c in others:  # a handful of cameras
            centres = peaks[c][peaks[c] >= 0] if rounds == 0 else best[c : c + 1]
            near = (centres[:, None] + torch.arange(-window, window + 1)).flatten()
            near = torch.unique(near[(near >= 0) & (near < L)])
            if not len(near):
                continue
            costs[c] = float("nan")
            costs[c, near] = cost(c, near, [reference] if rounds == 0 else
                                  [d for d in range(C) if d != c])  # fmt: skip
            if costs[c].isfinite().any():
                best[c] = costs[c].nan_to_num(float("inf")).argmin()
    frac = lags[best].double() + _parabola(-costs, best)
    epipolar = [None if c == reference or costs[c, best[c]].isnan()
                else round(float(costs[c, best[c]]), 3) for c in range(C)]  # fmt: skip
    tried = [{int(lags[i]): round(float(costs[c, i]), 3) for i in
              costs[c].isfinite().nonzero()[:, 0].tolist()} for c in range(C)]  # fmt: skip
    return best, frac, epipolar, tried


def frames_to_drop(delays: list[float]) -> list[float]:
    """The frames to drop at the start of each camera so that they start together:
    ``max(delays) - delay`` (the camera that started last drops none)."""
    last = max(delays)
    return [last - d for d in delays]
