"""The joint-angle picture of ``tensorpose kinematics``: the main joint angles of an OpenSim
inverse kinematics result over time, with the marker error (matplotlib)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .draw import _pyplot

__all__ = ["ANGLE_PANELS", "plot_joint_angles"]

_LUMBAR = ("L5_S1", "L4_L5", "L3_L4", "L2_L3", "L1_L2", "L1_T12")

ANGLE_PANELS: list[tuple[str, list[tuple[str, Sequence[str]]]]] = [
    ("pelvis (ground)", [("tilt", ["pelvis_tilt"]), ("list", ["pelvis_list"]),
                         ("rotation", ["pelvis_rotation"])]),
    ("trunk (lumbar, sum of levels)", [("flexion", [f"{j}_Flex_Ext" for j in _LUMBAR]),
                                       ("bending", [f"{j}_Lat_Bending" for j in _LUMBAR]),
                                       ("rotation", [f"{j}_axial_rotation" for j in _LUMBAR])]),
    ("hips", [("flexion R", ["hip_flexion_r"]), ("flexion L", ["hip_flexion_l"]),
              ("adduction R", ["hip_adduction_r"]), ("adduction L", ["hip_adduction_l"])]),
    ("knees (flexion)", [("R", ["knee_angle_r"]), ("L", ["knee_angle_l"])]),
    ("ankles (dorsiflexion)", [("R", ["ankle_angle_r"]), ("L", ["ankle_angle_l"])]),
    ("shoulders", [("flexion R", ["arm_flex_r"]), ("flexion L", ["arm_flex_l"]),
                   ("adduction R", ["arm_add_r"]), ("adduction L", ["arm_add_l"])]),
    ("elbows (flexion)", [("R", ["elbow_flex_r"]), ("L", ["elbow_flex_l"])]),
]  # fmt: skip
"""Panel title -> curves (label, the ``.mot`` coordinates summed into it)."""

_RIGHT, _LEFT, _OTHER = "tab:red", "tab:blue", ("tab:green", "tab:purple", "tab:orange")


def _style(label: str, k: int) -> dict:
    colour = _RIGHT if label.endswith("R") else _LEFT if label.endswith("L") else _OTHER[k % 3]
    dashed = label.startswith(("adduction", "rotation", "bending"))
    return {"color": colour, "ls": "--" if dashed else "-", "lw": 1.4}


def plot_joint_angles(path: str | os.PathLike, time: np.ndarray,
                      angles: Mapping[str, np.ndarray], marker_rms: np.ndarray,
                      marker_max: np.ndarray, title: str = "") -> Path:  # fmt: skip
    """Save a PNG of :data:`ANGLE_PANELS` and the IK marker error over ``time (T,)`` seconds.

    Args:
        angles: ``.mot`` coordinate -> ``(T,)`` degrees (a panel's missing coordinates are left
            out).
        marker_rms, marker_max: ``(T,)`` the RMS and largest marker error per frame, metres.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(4, 2, figsize=(11, 10), sharex=True)
    for ax, (name, curves) in zip(axes.flat, ANGLE_PANELS, strict=False):
        for k, (label, coords) in enumerate(curves):
            if all(c in angles for c in coords):
                ax.plot(time, np.sum([angles[c] for c in coords], axis=0), label=label,
                        **_style(label, k))  # fmt: skip
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("deg", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    ax = axes.flat[-1]
    ax.plot(time, 100 * marker_rms, color="k", lw=1.4, label="RMS")
    ax.plot(time, 100 * marker_max, color="0.5", lw=1.0, ls="--", label="largest")
    ax.set_title("IK marker error", fontsize=9)
    ax.set_ylabel("cm", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
