"""panel3d: the floor frame of a person seen by a tilted camera (against the rotation that
tilted it), and the panel's drawing (size, the left and right colours, the frame number)."""

from __future__ import annotations

import math

import numpy as np

from tensorpose.skeleton import get_skeleton
from tensorpose.viz.draw import bone_colours_bgr
from tensorpose.viz.panel3d import ANKLE_ABOVE_FLOOR_M, Panel3D, floor_frame

H36M = get_skeleton("h36m17")


def _standing(T: int = 20) -> np.ndarray:
    """A person standing upright (y up, metres), walking along x, ankles 8 cm above y = 0."""
    h = {"pelvis": 0.95, "r_hip": 0.95, "l_hip": 0.95, "r_knee": 0.5, "l_knee": 0.5,
         "r_ankle": 0.08, "l_ankle": 0.08, "spine": 1.2, "thorax": 1.45, "neck": 1.55,
         "head": 1.75, "l_shoulder": 1.45, "l_elbow": 1.15, "l_wrist": 0.9,
         "r_shoulder": 1.45, "r_elbow": 1.15, "r_wrist": 0.9}  # fmt: skip
    side = {n: (0.15 if n.startswith("l_") else -0.15 if n.startswith("r_") else 0.0)
            for n in H36M.names}  # fmt: skip
    one = np.array([[side[n], h[n], 0.0] for n in H36M.names])
    walk = np.linspace(0, 1.0, T)[:, None, None] * np.array([1.0, 0.0, 0.0])
    return one[None] + walk


def test_floor_frame_undoes_a_tilted_camera():
    world = _standing()
    a = math.radians(25)  # camera pitched down 25 degrees, 3 m away, 1.5 m up
    R = np.array([[1, 0, 0], [0, -math.cos(a), math.sin(a)], [0, -math.sin(a), -math.cos(a)]])
    cam = world @ R.T + np.array([0.0, 1.0, 3.0])
    Rf, origin = floor_frame(cam, H36M.names)
    up_true = R @ np.array([0.0, 1.0, 0.0])
    np.testing.assert_allclose(Rf[1], up_true, atol=1e-9)
    floor = (cam - origin) @ Rf.T
    ankles = floor[:, [H36M.names.index("l_ankle"), H36M.names.index("r_ankle")], 1]
    np.testing.assert_allclose(ankles, ANKLE_ABOVE_FLOOR_M, atol=1e-9)  # the floor at y = 0
    np.testing.assert_allclose(floor[0, 0], [0.0, 0.95, 0.0], atol=1e-9)  # origin under root
    assert np.allclose(np.linalg.det(Rf), 1.0)


def test_panel_draws_left_and_right_and_the_frame_number():
    joints = _standing() + np.array([0.0, -1.0, 3.0])  # y up here: mirrored into y down
    joints[..., 1] *= -1
    colours = bone_colours_bgr(H36M)
    p = Panel3D(joints, H36M.names, H36M.bones, colours, size=240, fps=30.0)
    a, b = p.draw(0), p.draw(19)
    assert a.shape == (240, 240, 3) and a.dtype == np.uint8
    for col in {colours[k] for k in range(len(colours))}:  # every side's colour is drawn
        assert (np.abs(a.astype(int) - col).sum(-1) < 30).sum() > 10, col
    assert not np.array_equal(a[:40], b[:40])  # the frame number and time changed
