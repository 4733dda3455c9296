"""``tensorpose sync``: one keypoint folder per camera -> each camera's frame offset.

Check the inputs, read each camera's most confident person per frame
(:func:`tensorpose.multiview.sync.read_tracks`), estimate each camera's delay against the first
folder from the keypoint speeds, refined by the calibration's epipolar agreement when one is
given (:func:`tensorpose.multiview.sync.estimate_delays`), then commit ``sync.json``
(:mod:`tensorpose.io.sync`): the whole frames to drop at the start of each camera
(``tensorpose triangulate --sync``), their sub-frame values, and the delays (``+``: the camera
started that many frames after the reference).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from ..io.atomic import OutputFolder
from ..io.openpose import BUNDLED_FPS, bundled_tracks
from ..io.sync import write_sync
from ..multiview.motion3d import find_fps
from ..multiview.sync import CANDIDATES, CUTOFF_HZ, estimate_delays, frames_to_drop, read_tracks

__all__ = ["summary", "sync_folder"]


def sync_folder(
    tracks_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    calib_path: str | os.PathLike | None = None,
    fps: float | None = None,
    max_lag: int | None = None,
    min_confidence: float = 0.3,
    cutoff: float = CUTOFF_HZ,
    candidates: int = CANDIDATES,
    overwrite: bool = False,
) -> dict:
    """Estimate each camera's frame offset and write ``<out_dir>/sync.json`` (``sync``).

    Args:
        tracks_dir: one sub-folder of OpenPose ``*.json`` per camera (two or more; frame
            counts may differ). calib_path: ``.qca.txt`` or ``.toml`` (optional): the epipolar
            agreement picks the lag. fps: ``None``: what the input says (as ``triangulate``).
        max_lag: largest delay tried (frames; default half the shortest camera).
        min_confidence, cutoff, candidates: see :func:`tensorpose.multiview.sync.estimate_delays`.

    Returns a report: reference, per camera delay, fractional delay, offset, correlation,
    epipolar distance; outputs.
    """
    tracks_dir = Path(tracks_dir)
    if not 0 <= min_confidence <= 1:
        raise InputError(f"--min-confidence must be in [0, 1], got {min_confidence}")
    if not (isinstance(candidates, int) and candidates >= 1):
        raise InputError(f"--candidates must be a count >= 1, got {candidates!r}")
    inputs = [tracks_dir, calib_path] if calib_path is not None else [tracks_dir]
    outputs = OutputFolder(out_dir, ["sync.json"], inputs=inputs, overwrite=overwrite)
    folders, tracks, calib = read_tracks(tracks_dir, calib_path)
    bundled = [p.resolve() for p in bundled_tracks()] == [f.resolve() for f in folders]
    fps, source = find_fps(tracks_dir, folders, fps, BUNDLED_FPS if bundled else None)
    if not 0 < cutoff < fps / 2:
        raise InputError(f"--cutoff must be in (0, fps/2) = (0, {fps / 2:g}) Hz, got {cutoff}")
    res = estimate_delays(tracks, fps, calibration=calib, max_lag=max_lag,
                          min_confidence=min_confidence, cutoff=cutoff,
                          candidates=candidates)  # fmt: skip
    names = [f.name for f in folders]
    offsets = frames_to_drop(res.delays)
    fractional = [round(max(res.delays) - d, 3) for d in res.fractional]  # offsets + sub-frame
    record = {
        "reference": names[0],
        "offsets": dict(zip(names, offsets, strict=True)),
        "fractional": dict(zip(names, fractional, strict=True)),
        "delays": dict(zip(names, res.delays, strict=True)),
        "delays_fractional": dict(zip(names, res.fractional, strict=True)),
        "frames": {n: int(t.shape[0]) for n, t in zip(names, tracks, strict=True)},
        "common_frames": min(int(t.shape[0]) - o for t, o in zip(tracks, offsets, strict=True)),
        "correlation": dict(zip(names, res.correlation, strict=True)),
        "epipolar_px": None if res.epipolar_px is None
        else dict(zip(names, res.epipolar_px, strict=True)),
        "method": "keypoint speeds cross-correlated"
        + (" + epipolar agreement" if calib is not None else ""),
        "fps": fps,
        "calibration": None if calib_path is None else str(calib_path),
    }  # fmt: skip
    if record["common_frames"] <= 0:
        raise InputError(f"{tracks_dir}: the offsets found {record['offsets']} leave no frame "
                         "common to every camera; lower --max-lag")  # fmt: skip
    with outputs:
        write_sync(outputs.path("sync.json"), record)
        written = outputs.commit()
    return {"tracks_dir": str(tracks_dir), "fps_source": source,
            "outputs": [str(p) for p in written], **record}  # fmt: skip


def summary(r: dict) -> list[str]:
    """The lines ``tensorpose sync`` prints."""
    lines = [f"{r['tracks_dir']}: {len(r['offsets'])} cameras, reference {r['reference']}, "
             f"{r['method']}; {r['common_frames']} common frames at {r['fps']:g} fps"]  # fmt: skip
    for n, off in r["offsets"].items():  # a handful of cameras
        d, corr = r["delays_fractional"][n], r["correlation"][n]
        epi = (r["epipolar_px"] or {}).get(n)
        lines.append(f"  {n}: started {d:+.2f} frames after the reference; drop {off} frames "
                     f"({r['fractional'][n]:.2f}); speed correlation "
                     + ("-" if corr is None else f"{corr:.2f}")
                     + ("" if epi is None else f", epipolar distance {epi:.1f} px"))  # fmt: skip
    return lines + [f"  wrote {p}" for p in r["outputs"]]
