"""OpenSim's scaling and inverse kinematics tools on Pose2Sim's setups (the only module that
imports ``opensim``).

The steps are Pose2Sim 0.10's ``perform_scaling`` and ``perform_IK``: the unscaled model gets the
setup's marker set and is written where the scaled model goes; the scaling setup is rewritten
with the subject's mass and height, ``manualScale`` factors per body (its marker measurements
switched off, no marker file); OpenSim's ``ScaleTool`` writes the scaled model over it. The IK
setup is rewritten with the scaled model, the TRC, its first and last time and the output
``.mot``; OpenSim's ``InverseKinematicsTool`` writes the joint angles and, beside them, the
marker errors ``<stem>_ik_marker_errors.sto``. The rewritten setups live in a temporary folder.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import InputError
from .setups import MODEL_FILE, Setup

__all__ = ["inverse_kinematics", "model_marker_positions", "opensim_module", "scale_model"]

INSTALL = "pip install 'tensorpose[opensim]'"


def opensim_module():
    """The ``opensim`` package, its log level at errors (at its default level OpenSim prints
    every IK frame and every missing mesh).

    Raises:
        InputError: ``opensim`` is not installed (naming the extra that installs it).
    """
    try:
        import opensim
    except ImportError:
        raise InputError(f"kinematics needs OpenSim: {INSTALL} (OpenSim 4.6 wheels: CPython "
                         "3.11-3.13 on x86-64 Linux and Windows)") from None  # fmt: skip
    opensim.Logger.removeFileSink()  # else an error writes opensim.log into the working folder
    opensim.Logger.setLevelString("Error")
    return opensim


@contextlib.contextmanager
def _console_to(log: Path):
    """OpenSim's console output (C++ ``stdout``: model summaries, the log) into ``log``; its last
    lines join an error raised inside."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(log, "ab") as f:
            os.dup2(f.fileno(), 1)
        try:
            yield
        except Exception as e:
            os.dup2(saved, 1)
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
            raise RuntimeError(f"OpenSim failed: {e}; its log ends: {tail}") from e
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _model_with_markers(osim, setup: Setup):
    model = osim.Model(str(MODEL_FILE))
    model.set_MarkerSet(osim.MarkerSet(str(setup.markers_file)))
    model.initSystem()
    return model


def model_marker_positions(setup: Setup) -> dict[str, np.ndarray]:
    """The unscaled model's markers (``setup``'s marker set) in the ground frame, default pose:
    name -> ``(3,)`` metres."""
    osim = opensim_module()
    model = _model_with_markers(osim, setup)
    state = model.getWorkingState()
    markers = model.getMarkerSet()
    return {markers.get(i).getName(): markers.get(i).getLocationInGround(state).to_numpy()
            for i in range(markers.getSize())}  # fmt: skip


def _write(tree: ET.ElementTree, path: Path) -> Path:
    ET.indent(tree, space="\t")
    tree.write(path, xml_declaration=True, encoding="utf-8")
    return path


def scale_model(setup: Setup, scales: Mapping[str, list[float]], out_osim: str | os.PathLike,
                *, mass: float, height: float) -> Path:  # fmt: skip
    """Scale the model by ``scales`` (body -> X, Y, Z factors) with OpenSim's ``ScaleTool``;
    write it to ``out_osim`` (Pose2Sim's ``perform_scaling``)."""
    osim = opensim_module()
    out_osim = Path(out_osim).resolve()
    _model_with_markers(osim, setup).printToXML(str(out_osim))
    tree = ET.parse(setup.scaling_file)
    tool = tree.getroot()[0]
    tool.find("mass").text = str(mass)
    tool.find("height").text = str(height)
    tool.find("GenericModelMaker").find("model_file").text = str(out_osim)
    tool.find(".//scaling_order").text = " manualScale measurements"
    for meas in tool.find(".//MeasurementSet/objects").findall("Measurement"):
        meas.find("apply").text = "false"
    scale_set = tool.find(".//ScaleSet/objects")
    for old in scale_set.findall("Scale"):
        scale_set.remove(old)
    for body, xyz in scales.items():
        scale = ET.SubElement(scale_set, "Scale")
        ET.SubElement(scale, "scales").text = " ".join(str(float(v)) for v in xyz)
        ET.SubElement(scale, "segment").text = body
        ET.SubElement(scale, "apply").text = "true"
    for marker_file in tool.iter("marker_file"):
        marker_file.text = "Unassigned"
    tool.find("ModelScaler").find("output_model_file").text = str(out_osim)
    with tempfile.TemporaryDirectory(prefix="tensorpose-scaling-") as tmp:
        path = _write(tree, Path(tmp) / f"{out_osim.stem}_scaling_setup.xml")
        with _console_to(Path(tmp) / "opensim.log"):
            osim.ScaleTool(str(path)).run()  # False without a marker placer; errors raise
    return out_osim


def inverse_kinematics(setup: Setup, model_osim: str | os.PathLike, trc: str | os.PathLike,
                       out_mot: str | os.PathLike, start: float, end: float) -> Path:  # fmt: skip
    """Run OpenSim's ``InverseKinematicsTool`` with ``setup``'s IK tasks on ``trc`` from
    ``start`` to ``end`` seconds; write ``out_mot`` (degrees) and
    ``<out_mot stem>_ik_marker_errors.sto`` beside it. Returns the marker errors' path."""
    osim = opensim_module()
    out_mot = Path(out_mot).resolve()
    tree = ET.parse(setup.ik_file)
    tool = tree.getroot().find("InverseKinematicsTool")
    tool.set("name", out_mot.stem)
    tool.find("results_directory").text = str(out_mot.parent)
    tool.find("model_file").text = str(Path(model_osim).resolve())
    tool.find("time_range").text = f"{start} {end}"
    tool.find("output_motion_file").text = str(out_mot)
    tool.find("marker_file").text = str(Path(trc).resolve())
    with tempfile.TemporaryDirectory(prefix="tensorpose-ik-") as tmp:
        path = _write(tree, Path(tmp) / f"{out_mot.stem}_ik_setup.xml")
        with _console_to(Path(tmp) / "opensim.log"):
            osim.InverseKinematicsTool(str(path)).run()
    if not out_mot.exists():
        raise RuntimeError(f"OpenSim's InverseKinematicsTool wrote no {out_mot.name}")
    return out_mot.parent / f"{out_mot.stem}_ik_marker_errors.sto"
