"""A synthetic multi-camera recording of any length and crowd, generated a chunk at a time.

The bundled balancing trial's person (triangulated once, 100 frames, looped) is placed at
``people`` spots on a grid 1.5 m apart around where it stands, and projected into the bundled
calibration's four cameras (confidence 0.9 wherever the projection lands in front of the
camera). With ``restart_every``, the first person jumps 3 m back and forth every
``restart_every`` frames, so its track restarts (the linking's gate is 0.5 m).

:class:`SceneCameras` behaves as :class:`tensorpose.multiview.recording.Cameras` for
:func:`tensorpose.multiview.people.triangulate_cameras_one` and
:func:`~tensorpose.multiview.people.triangulate_cameras_people`, but never holds more than
the chunk asked for: a 100,000-frame crowd fits in a few MB of input.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tensorpose.io.calibration import load_calibration
from tensorpose.io.openpose import bundled_tracks
from tensorpose.ops.camera import project_points

ROOT = bundled_tracks()[0].parent


def base_pose() -> np.ndarray:
    """``(100, 25, 3)`` the bundled trial's person in metres (NaN where not triangulated)."""
    from tensorpose.multiview.recording import read_cameras, triangulate_cameras

    tri = triangulate_cameras(read_cameras(ROOT, ROOT / "Calib.qca.txt"))
    pts = np.where(tri.valid[..., None], tri.points, np.nan)
    # fill each joint's missing frames with its median, so every frame has the whole body
    med = np.nanmedian(pts, 0)
    return np.where(np.isfinite(pts), pts, med[None])


class SceneCameras:
    """``frames`` frames of ``people`` people seen by the bundled trial's four cameras."""

    layout = "BODY_25B"

    def __init__(self, frames: int, people: int = 1, restart_every: int = 0) -> None:
        self.T, self.people, self.restart_every = frames, people, restart_every
        self.calibration = load_calibration(ROOT / "Calib.qca.txt")
        self.names = list(self.calibration.names)
        self.folders = [Path(f"/scene/cam{c + 1:02d}_json") for c in range(len(self.names))]
        self.pose = torch.from_numpy(base_pose())  # (100, J, 3)
        side = int(np.ceil(np.sqrt(people)))
        grid = np.stack(np.meshgrid(np.arange(side), np.arange(side)), -1).reshape(-1, 2)
        grid = (grid[:people] - (side - 1) / 2) * 1.5
        self.offsets = torch.zeros(people, 3, dtype=torch.float64)
        self.offsets[:, :2] = torch.from_numpy(grid)

    @property
    def frames(self) -> int:
        return self.T

    @property
    def keypoints(self) -> int:
        return self.pose.shape[1]

    def layout_so_far(self) -> str:
        return self.layout

    def read(self, start: int, stop: int) -> list[list[np.ndarray]]:
        """Per camera the detections ``(P, 25, 3)`` of frames ``start:stop``."""
        t = torch.arange(start, stop)
        pose = self.pose[t % len(self.pose)]  # (n, J, 3)
        off = self.offsets.expand(len(t), -1, -1).clone()  # (n, P, 3)
        if self.restart_every:
            off[:, 0, 0] += 3.0 * ((t // self.restart_every) % 2)
        world = pose[:, None] + off[:, :, None]  # (n, P, J, 3)
        cal, out = self.calibration, []
        for c in range(len(self.names)):  # the four cameras
            uv = project_points(world.reshape(-1, 3), cal.K[c], cal.dist[c], cal.R[c], cal.t[c])
            z = (world.reshape(-1, 3) @ cal.R[c].T + cal.t[c])[:, 2]
            conf = torch.where(z > 0, 0.9, 0.0)
            det = torch.cat([uv, conf[:, None]], -1).reshape(len(t), self.people, -1, 3)
            out.append(list(det.numpy()))
        return out
