"""``tensorpose kinematics``: TRC files -> a scaled OpenSim model and joint angles per person.

Pose2Sim 0.10's kinematics step (:mod:`tensorpose.biomech`): check every input first (the TRC
reads, its units are metres, its markers fit a setup: :func:`tensorpose.biomech.choose_setup`;
the person stands upright in some frames: :func:`tensorpose.biomech.standing_frames`), then per
TRC scale Pose2Sim's model on the standing frames (height from the TRC unless ``--height``) and
run OpenSim's inverse kinematics on every frame. Commits per TRC ``<stem>.osim`` (scaled model),
``<stem>.mot`` (joint angles, degrees), ``<stem>_ik_marker_errors.sto`` (per-frame marker
error) and ``<stem>_angles.png`` (:func:`tensorpose.viz.angles.plot_joint_angles`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..biomech import (
    choose_setup,
    estimate_height,
    inverse_kinematics,
    model_marker_positions,
    opensim_module,
    scale_model,
    segment_scales,
    standing_frames,
)
from ..errors import InputError
from ..io.atomic import OutputFolder
from ..io.motion import read_trc
from ..io.storage import read_storage
from ..viz.angles import plot_joint_angles

__all__ = ["DEFAULT_HEIGHT", "MAIN_ANGLES", "kinematics_files", "output_names", "summary"]

DEFAULT_HEIGHT = 1.7
"""Pose2Sim's height (m) when the TRC cannot give one (the ScaleTool only records it)."""

MAIN_ANGLES = ("hip_flexion_r", "hip_flexion_l", "knee_angle_r", "knee_angle_l",
               "ankle_angle_r", "ankle_angle_l", "arm_flex_r", "arm_flex_l", "elbow_flex_r",
               "elbow_flex_l")  # fmt: skip
"""The joint angles whose ranges the report gives (``.mot`` coordinates, degrees)."""


def output_names(stem: str) -> list[str]:
    """The files written for the TRC ``<stem>.trc``."""
    return [f"{stem}.osim", f"{stem}.mot", f"{stem}_ik_marker_errors.sto", f"{stem}_angles.png"]


def _plan(path: Path, model: str, height: float | None) -> dict:
    """Read and check one TRC: its setup, standing frames and height (no OpenSim)."""
    trc = read_trc(path)
    if trc.units.strip().lower() not in ("m", "meters", "metres"):
        raise InputError(f"{path}: units are {trc.units!r}; kinematics needs metres (Units m), "
                         "as triangulate and lift write")  # fmt: skip
    keep = [j for j in range(len(trc.names)) if not np.isnan(trc.points[:, j]).all()]
    names = [trc.names[j] for j in keep]
    points = trc.points[:, keep]
    setup = choose_setup(names, model, str(path))
    frames = standing_frames(points, names, str(path))
    source = "--height"
    if height is None:
        height, source = estimate_height(points[frames], names), "the TRC"
        if not math.isfinite(height):
            height, source = DEFAULT_HEIGHT, "default (the TRC could not give one)"
    return {"trc": path, "setup": setup, "points": points, "names": names, "frames": frames,
            "height": float(height), "height_source": source, "time": trc.time,
            "n_frames": len(trc.time)}  # fmt: skip


def _check_options(trcs: Sequence[Path], height: float | None, mass: float) -> None:
    if not trcs:
        raise InputError("kinematics needs at least one TRC file")
    if height is not None and not (math.isfinite(height) and 0.5 <= height <= 2.5):
        raise InputError(f"--height must be a person's height in metres (0.5-2.5), got {height}")
    if not (math.isfinite(mass) and 0 < mass <= 500):
        raise InputError(f"--mass must be in kilograms (0-500], got {mass}")
    stems = [p.stem for p in trcs]
    twice = sorted({s for s in stems if stems.count(s) > 1})
    if twice:
        raise InputError(f"TRC files with the same name {twice}: their outputs would collide")
    for p in trcs:
        if p.suffix.lower() != ".trc":
            raise InputError(f"{p}: not a .trc file")


def kinematics_files(trcs: Sequence[Path], out: Path, *, height: float | None = None,
                     mass: float = 70.0, model: str = "auto", overwrite: bool = False,
                     skip_unscalable: bool = False) -> dict:  # fmt: skip
    """Scale Pose2Sim's OpenSim model and run inverse kinematics for each TRC (one person each).

    Args:
        trcs: TRC files in metres (``triangulate``'s, ``lift``'s, Pose2Sim's).
        out: output folder (four files per TRC: :func:`output_names`).
        height: the person's height in metres (default: estimated from each TRC, as Pose2Sim).
        mass: kilograms (the scaled model's mass).
        model: ``auto`` (from the markers) or a key of :data:`tensorpose.biomech.SETUPS`.
        skip_unscalable: a TRC that cannot be scaled (too few markers, never upright) is left
            out with a note instead of being an error (``triangulate --kinematics``).

    Returns a report: ``people`` (per TRC: setup, height, frames, marker error, angle ranges,
    seconds), ``skipped`` (TRC -> why), ``outputs``.

    Raises:
        InputError: a bad option, TRC or ``opensim`` missing (one line naming the file or flag).
    """
    trcs = [Path(p) for p in trcs]
    _check_options(trcs, height, mass)
    opensim_module()
    plans, skipped = [], {}
    for p in trcs:
        try:
            plans.append(_plan(p, model, height))
        except InputError as e:
            if not skip_unscalable:
                raise
            skipped[str(p)] = str(e)
    names = [n for plan in plans for n in output_names(plan["trc"].stem)]
    outputs = OutputFolder(out, names, inputs=trcs, overwrite=overwrite)
    people = []
    with outputs:
        for plan in plans:
            people.append(_run_one(outputs, plan, mass))
        written = outputs.commit() if plans else []
    return {"people": people, "skipped": skipped, "mass": mass, "out": str(out),
            "outputs": [str(p) for p in written]}  # fmt: skip


def _run_one(outputs: OutputFolder, plan: dict, mass: float) -> dict:
    t0 = time.perf_counter()
    setup, stem, frames = plan["setup"], plan["trc"].stem, plan["frames"]
    osim, mot, errors, png = (outputs.path(n) for n in output_names(stem))
    scales = segment_scales(setup.scaling_file, plan["points"][frames], plan["names"],
                            model_marker_positions(setup))  # fmt: skip
    scale_model(setup, scales, osim, mass=mass, height=plan["height"])
    t = plan["time"]
    written_errors = inverse_kinematics(setup, osim, plan["trc"], mot, float(t[0]), float(t[-1]))
    if written_errors.resolve() != errors.resolve():  # pragma: no cover (OpenSim's naming)
        written_errors.replace(errors)
    angles, err = read_storage(mot), read_storage(errors)
    coords = {c: angles.column(c) for c in angles.columns[1:]}
    rms, worst = err.column("marker_error_RMS"), err.column("marker_error_max")
    plot_joint_angles(png, angles.column("time"), coords, rms, worst,
                      title=f"{plan['trc'].name}: {setup.name} setup, "
                      f"height {plan['height']:.2f} m, {mass:g} kg")  # fmt: skip
    ranges = {c: [float(coords[c].min()), float(coords[c].max())] for c in MAIN_ANGLES
              if c in coords}  # fmt: skip
    return {"trc": str(plan["trc"]), "setup": setup.name, "height": plan["height"],
            "height_source": plan["height_source"], "frames": plan["n_frames"],
            "standing_frames": len(frames), "scales": scales,
            "marker_error_rms_median": float(np.median(rms)),
            "marker_error_max": float(worst.max()), "angle_ranges": ranges,
            "seconds": time.perf_counter() - t0}  # fmt: skip


def summary(r: dict) -> list[str]:
    """The lines ``tensorpose kinematics`` prints."""
    lines = []
    for p in r["people"]:
        lines.append(f"{p['trc']}: {p['setup']} setup, height {p['height']:.2f} m "
                     f"({p['height_source']}), mass {r['mass']:g} kg; scaled on "
                     f"{p['standing_frames']} of {p['frames']} frames; IK marker error "
                     f"{100 * p['marker_error_rms_median']:.1f} cm RMS (median frame), "
                     f"{100 * p['marker_error_max']:.1f} cm largest; "
                     f"{p['seconds']:.0f} s")  # fmt: skip
        ranges = p["angle_ranges"]
        main = [("knee", "knee_angle"), ("hip flexion", "hip_flexion")]
        lines.append("  " + "; ".join(
            f"{label} R {ranges[c + '_r'][0]:.0f}..{ranges[c + '_r'][1]:.0f}, "
            f"L {ranges[c + '_l'][0]:.0f}..{ranges[c + '_l'][1]:.0f} deg"
            for label, c in main if c + "_r" in ranges and c + "_l" in ranges))  # fmt: skip
    lines += [f"  skipped: {why}" for why in r["skipped"].values()]
    return lines + [f"  wrote {p}" for p in r["outputs"]]
