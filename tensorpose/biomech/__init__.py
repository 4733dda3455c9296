"""Biomechanics: OpenSim scaling and inverse kinematics of a TRC, as Pose2Sim 0.10 does it.

- :mod:`.setups`: Pose2Sim's model and setup files (shipped), chosen from a TRC's markers.
- :mod:`.scaling`: Pose2Sim's standing-frame rule, segment scale factors and height estimate
  (numpy only).
- :mod:`.engine`: OpenSim's ScaleTool and InverseKinematicsTool on those setups (the only module
  that imports ``opensim``, an optional extra: ``pip install 'tensorpose[opensim]'``).
"""

from .engine import inverse_kinematics, model_marker_positions, opensim_module, scale_model
from .scaling import (
    LARGE_HIP_KNEE_ANGLES,
    estimate_height,
    hip_knee_angles,
    segment_scales,
    standing_frames,
    trimmed_mean,
)
from .setups import CORE_MARKERS, SETUPS, Setup, choose_setup

__all__ = [
    "CORE_MARKERS",
    "LARGE_HIP_KNEE_ANGLES",
    "SETUPS",
    "Setup",
    "choose_setup",
    "estimate_height",
    "hip_knee_angles",
    "inverse_kinematics",
    "model_marker_positions",
    "opensim_module",
    "scale_model",
    "segment_scales",
    "standing_frames",
    "trimmed_mean",
]
