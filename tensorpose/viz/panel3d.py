"""The 3D panel of ``tensorpose lift``'s video, drawn with OpenCV alone (no matplotlib).

The lifted joints are in the recording camera's frame (x right, y down, z forward). The panel
shows them in a floor frame (:func:`floor_frame`): up is the person's mean body axis (ankles to
head over the whole recording), the floor lies just under the lowest ankles. A virtual camera
follows the root from the front-right and above; the panel has a grid on the floor (0.5 m
squares, fixed to the floor so that it slides by as the person travels), the floor frame's axes
at the first frame's root (x red, y up green, z blue, 0.5 m), the root's trace on the floor, the
skeleton's shadow, the skeleton (the person's left green, right orange, the middle blue; far
bones first) and the frame number and time.

:class:`Panel3D` prepares a recording once (floor frame, the follow camera of every frame) and
draws frame ``t`` with :meth:`Panel3D.draw`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

__all__ = ["Panel3D", "floor_frame"]

FONT = cv2.FONT_HERSHEY_SIMPLEX
ANKLE_ABOVE_FLOOR_M = 0.08
"""Height of the ankle joint centre above the floor for a standing adult (about 8 cm)."""


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


def floor_frame(
    joints: np.ndarray, names: Sequence[str], root: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Floor axes of camera-frame joints ``(T, J, 3)``: ``(R (3, 3), origin (3,))`` with
    ``floor = (camera - origin) @ R.T`` giving x right (the camera's x, levelled), y up, z
    towards the camera; ``origin``: the first frame's ``root`` joint on the floor.

    Up is the mean of ``head - mid-ankle`` over the frames (the camera's up, ``-y``, where the
    joints lack a head or ankles); the floor is ``ANKLE_ABOVE_FLOOR_M`` below the 2nd
    percentile of the lower ankle's height."""
    p = np.asarray(joints, np.float64)
    has = all(n in names for n in ("head", "l_ankle", "r_ankle"))
    up = np.array([0.0, -1.0, 0.0])
    if has:
        ia, ib, ih = (list(names).index(n) for n in ("l_ankle", "r_ankle", "head"))
        axis = p[:, ih] - (p[:, ia] + p[:, ib]) / 2
        axis = axis[np.isfinite(axis).all(-1)]
        if len(axis) and np.linalg.norm(axis.mean(0)) > 1e-6:
            up = _unit(axis.mean(0))
    x = _unit(np.array([1.0, 0.0, 0.0]) - up[0] * up)
    R = np.stack([x, up, np.cross(x, up)])
    h = p @ up
    feet = np.nanmin(h[:, [ia, ib]], 1) if has else np.nanmin(h, 1)
    floor = float(np.nanpercentile(feet, 2)) - (ANKLE_ABOVE_FLOOR_M if has else 0.0)
    seen = np.isfinite(p[:, root]).all(-1)
    root0 = p[seen][0, root] if seen.any() else np.zeros(3)
    origin = root0 - (root0 @ up - floor) * up
    return R, origin


def _look_at(eye: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World (floor frame, y up) -> view camera (x right, y down, z forward): ``R, t``."""
    z = _unit(target - eye)
    x = _unit(np.cross(z, np.array([0.0, 1.0, 0.0])))
    y = np.cross(z, x)
    R = np.stack([x, y, z])
    return R, -R @ eye


def _clip_segments(a: np.ndarray, b: np.ndarray, near: float) -> tuple[np.ndarray, ...]:
    """View-frame segments ``(N, 3)`` cut at the plane ``z = near``; ``keep (N,)``: any part
    in front."""
    za, zb = a[:, 2], b[:, 2]
    keep = (za > near) | (zb > near)
    s = np.clip((near - za) / np.where(zb == za, 1.0, zb - za), 0.0, 1.0)[:, None]
    a2 = np.where((za < near)[:, None], a + s * (b - a), a)
    b2 = np.where((zb < near)[:, None], a + s * (b - a), b)
    return a2, b2, keep


class Panel3D:
    """A recording's 3D panel: prepared once, drawn per frame.

    Args:
        joints: ``(T, J, 3)`` camera-frame joints, metres (placed with their root trajectory,
            or root-relative: the person then stays on the spot).
        names, bones, colours: joint names, ``(a, b)`` bones and one BGR colour per bone;
            ``root``: the root joint's index.
        size: panel height and width in pixels; ``fps``: for the time shown.
        yaw_deg, elevation_deg, distance_m: the follow camera, relative to the recording camera
            (yaw about the vertical), looking at the root at hip height.
    """

    def __init__(self, joints: np.ndarray, names: Sequence[str], bones: Sequence,
                 colours: Sequence[tuple[int, int, int]], size: int, fps: float,
                 yaw_deg: float = 35.0, elevation_deg: float = 20.0,
                 distance_m: float = 4.0, root: int = 0) -> None:  # fmt: skip
        R, origin = floor_frame(joints, names, root)
        self.world = (np.asarray(joints, np.float64) - origin) @ R.T  # (T, J, 3), y up
        self.bones, self.colours = np.asarray(bones, int).reshape(-1, 2), list(colours)
        self.size, self.fps, self.T = int(size), float(fps), self.world.shape[0]
        self.scale = self.size / 720.0
        root = self.world[:, root].copy()
        root = np.where(np.isfinite(root), root, np.nanmean(root, 0))
        self.trace = root * np.array([1.0, 0.0, 1.0])  # the root on the floor
        a, e = math.radians(yaw_deg), math.radians(elevation_deg)
        back = np.array([math.sin(a) * math.cos(e), math.sin(e), math.cos(a) * math.cos(e)])
        self.targets = self.trace + np.array([0.0, 0.9, 0.0])
        self.eyes = self.targets + distance_m * back  # the recording camera looks along -z
        self.focal = 1.3 * self.size
        self.background = self._background()

    def _background(self) -> np.ndarray:
        top, bottom = np.array([235, 228, 220.0]), np.array([250, 250, 250.0])  # BGR
        ramp = np.linspace(0, 1, self.size)[:, None] * (bottom - top) + top
        return np.repeat(ramp[:, None], self.size, 1).astype(np.uint8)

    def _project(self, R, t, pts: np.ndarray) -> np.ndarray:
        v = pts @ R.T + t
        z = np.maximum(v[..., 2:], 1e-3)
        return v[..., :2] / z * self.focal + self.size / 2

    def _segments(self, img, R, t, a, b, colour, thickness: int) -> None:
        va, vb, keep = _clip_segments(a @ R.T + t, b @ R.T + t, 0.1)
        s = self.size / 2
        pa = va[keep, :2] / va[keep, 2:] * self.focal + s
        pb = vb[keep, :2] / vb[keep, 2:] * self.focal + s
        for p, q in zip(np.round(pa).astype(int), np.round(pb).astype(int), strict=True):
            cv2.line(img, tuple(p), tuple(q), colour, thickness, cv2.LINE_AA)  # a few dozen

    def _grid(self, img, R, t, centre: np.ndarray, half: float = 4.0, step: float = 0.5):
        c0 = np.round(centre[[0, 2]] / step) * step
        ticks = np.arange(-half, half + 1e-9, step)
        xs, zs = c0[0] + ticks, c0[1] + ticks
        a = np.concatenate([np.stack([xs, 0 * xs, np.full_like(xs, zs[0])], -1),
                            np.stack([np.full_like(zs, xs[0]), 0 * zs, zs], -1)])  # fmt: skip
        b = np.concatenate([np.stack([xs, 0 * xs, np.full_like(xs, zs[-1])], -1),
                            np.stack([np.full_like(zs, xs[-1]), 0 * zs, zs], -1)])  # fmt: skip
        self._segments(img, R, t, a, b, (200, 196, 190), max(1, round(self.scale)))

    def _axes(self, img, R, t) -> None:
        o = np.zeros((3, 3))
        ends = 0.5 * np.eye(3)
        cols = [(40, 40, 220), (40, 170, 40), (220, 90, 30)]  # x red, y green, z blue (BGR)
        th = max(2, round(2 * self.scale))
        for i, (label, col) in enumerate(zip("xyz", cols, strict=True)):
            self._segments(img, R, t, o[i : i + 1], ends[i : i + 1], col, th)
            p = self._project(R, t, ends[i] * 1.15)
            if (ends[i] @ R.T + t)[2] > 0.1:
                cv2.putText(img, label, (int(p[0]) - 5, int(p[1]) + 5), FONT,
                            0.6 * self.scale, col, th, cv2.LINE_AA)  # fmt: skip

    def draw(self, t: int) -> np.ndarray:
        """The panel of frame ``t``: ``(size, size, 3)`` uint8 BGR."""
        img = self.background.copy()
        R, tv = _look_at(self.eyes[t], self.targets[t])
        self._grid(img, R, tv, self.trace[t])
        self._axes(img, R, tv)
        th = max(1, round(self.scale))
        trace = self._project(R, tv, self.trace[: t + 1])
        if t > 0:
            cv2.polylines(img, [np.round(trace).astype(np.int32)], False, (150, 60, 150),
                          max(2, round(2 * self.scale)), cv2.LINE_AA)  # fmt: skip
        p = self.world[t]
        ok = np.isfinite(p).all(-1)
        shadow = p * np.array([1.0, 0.0, 1.0])
        self._skeleton(img, R, tv, shadow, ok, [(175, 170, 165)] * len(self.bones), 3 * th)
        self._skeleton(img, R, tv, p, ok, self.colours, 4 * th, dots=True)
        self._text(img, t)
        return img

    def _skeleton(self, img, R, tv, pts, ok, colours, width: int, dots: bool = False) -> None:
        """Bones far to near (the view's depth of each bone's middle), joints as dots."""
        v = np.nan_to_num(pts) @ R.T + tv
        px = self._project(R, tv, np.nan_to_num(pts))
        depth = (v[self.bones[:, 0], 2] + v[self.bones[:, 1], 2]) / 2
        for k in np.argsort(-depth):  # a loop over the 16 bones (drawing)
            a, b = self.bones[k]
            if ok[a] and ok[b] and v[a, 2] > 0.1 and v[b, 2] > 0.1:
                pa, pb = np.round(px[[a, b]]).astype(int)
                cv2.line(img, tuple(pa), tuple(pb), colours[k], width, cv2.LINE_AA)
        if dots:
            for j in np.flatnonzero(ok & (v[:, 2] > 0.1)):
                cv2.circle(img, tuple(np.round(px[j]).astype(int)), max(2, width // 2 + 1),
                           (60, 60, 60), -1, cv2.LINE_AA)  # fmt: skip

    def _text(self, img, t: int) -> None:
        s = 0.7 * self.scale
        th = max(1, round(self.scale * 1.5))
        line = round(30 * self.scale)
        cv2.putText(img, f"frame {t + 1}/{self.T}  {t / self.fps:6.2f} s", (line // 2, line),
                    FONT, s, (30, 30, 30), th, cv2.LINE_AA)  # fmt: skip
        for i, (text, col) in enumerate((("left", (60, 180, 60)), ("right", (0, 140, 255)))):
            cv2.putText(img, text, (line // 2 + i * round(90 * self.scale), 2 * line), FONT, s,
                        col, th, cv2.LINE_AA)  # fmt: skip
        cv2.putText(img, "grid 0.5 m, trace: root on the floor, axes 0.5 m at the start",
                    (line // 2, self.size - line // 2), FONT, 0.55 * self.scale, (90, 90, 90),
                    th, cv2.LINE_AA)  # fmt: skip
