"""Pose2Sim's OpenSim model and setup files, and the choice of one setup from a TRC's markers.

The files are Pose2Sim 0.10.49's (``Pose2Sim/OpenSim_Setup``, BSD-3-Clause, shipped in
``tensorpose/assets/opensim/`` with their licence): one full-body model
(``Model_Pose2Sim_muscles_flex.osim``, the model Pose2Sim scales unless ``use_simple_model``)
and, per 2D keypoint model, a marker set, a scaling setup and an inverse kinematics setup.

A setup fits a TRC when the TRC holds the eight markers scaling and the standing-frame rule
need (shoulders, hips, knees, ankles) and at least half of the setup's IK markers; ``auto``
picks, among the setups that fit, the one whose IK markers the TRC covers best (the largest
share, then the most markers): BODY_25B's TRC -> ``body25b``, BODY_25's (``CHip``) ->
``body25``, BlazePose's (fingers) -> ``blazepose``, HALPE_26's (``Hip``) -> ``halpe26``,
COCO-17's and ``lift``'s -> ``coco17``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..errors import InputError

__all__ = ["ASSETS", "CORE_MARKERS", "MODEL_FILE", "SETUPS", "Setup", "choose_setup"]

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "opensim"
"""Folder of the shipped model and setup files."""

MODEL_FILE = ASSETS / "Model_Pose2Sim_muscles_flex.osim"
"""The unscaled model every setup scales (Pose2Sim's default, not its simple model)."""

CORE_MARKERS = ("RShoulder", "LShoulder", "RHip", "LHip", "RKnee", "LKnee", "RAnkle", "LAnkle")
"""Markers every setup needs from the TRC: the standing-frame rule and the height use them."""


@dataclass(frozen=True)
class Setup:
    """One of Pose2Sim's keypoint models: its marker set, scaling and IK setup files."""

    name: str
    markers_file: Path
    scaling_file: Path
    ik_file: Path

    @property
    def ik_markers(self) -> list[str]:
        """The markers the IK setup tracks (``apply`` true), in the file's order."""
        return _ik_markers(self.ik_file)


def _setup(name: str, markers: str, stem: str) -> Setup:
    return Setup(name, ASSETS / f"Markers_{markers}.xml",
                 ASSETS / f"Scaling_Setup_Pose2Sim_{stem}.xml",
                 ASSETS / f"IK_Setup_Pose2Sim_{stem}.xml")  # fmt: skip


SETUPS: dict[str, Setup] = {
    "body25b": _setup("body25b", "Body25b", "Body25b"),
    "body25": _setup("body25", "Body25", "Body25"),
    "coco17": _setup("coco17", "Coco17", "Coco17"),
    "blazepose": _setup("blazepose", "BlazePose", "Blazepose"),
    "halpe26": _setup("halpe26", "Halpe26", "Halpe26"),
}
"""``--model`` name -> setup."""


@cache
def _ik_markers(path: Path) -> list[str]:
    root = ET.parse(path).getroot()
    return [t.get("name", "") for t in root.iter("IKMarkerTask")
            if (t.findtext("apply") or "true").strip().lower() == "true"]  # fmt: skip


def _coverage(setup: Setup, present: set[str]) -> tuple[float, int]:
    wanted = setup.ik_markers
    n = sum(m in present for m in wanted)
    return n / len(wanted), n


def choose_setup(markers: Sequence[str], model: str = "auto", source: str = "TRC") -> Setup:
    """The setup for a TRC whose markers (with data) are ``markers``.

    Args:
        markers: the TRC's marker names that hold at least one coordinate.
        model: ``auto`` or a key of :data:`SETUPS`.
        source: the TRC's path, for messages.

    Raises:
        InputError: an unknown ``model``; a TRC lacking one of :data:`CORE_MARKERS`, or half of
            the chosen setup's IK markers (the message names the TRC and the missing markers).
    """
    if model != "auto" and model not in SETUPS:
        raise InputError(f"--model must be auto or one of {sorted(SETUPS)}, got {model!r}")
    present = set(markers)
    missing = [m for m in CORE_MARKERS if m not in present]
    if missing:
        have = ", ".join(markers) or "none"
        raise InputError(f"{source}: too few markers for scaling and inverse kinematics: "
                         f"{', '.join(missing)} missing (it has {have})")  # fmt: skip
    if model == "auto":
        setup = max(SETUPS.values(), key=lambda s: _coverage(s, present))
    else:
        setup = SETUPS[model]
    share, n = _coverage(setup, present)
    if share < 0.5:
        lacking = [m for m in setup.ik_markers if m not in present]
        raise InputError(f"{source}: has {n} of the {len(setup.ik_markers)} markers of the "
                         f"{setup.name} setup (at least half needed); missing "
                         f"{', '.join(lacking)}")  # fmt: skip
    return setup
