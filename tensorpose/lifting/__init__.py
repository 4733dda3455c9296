"""Monocular 3D lifting: 2D keypoint sequences -> root-relative 3D joints + a trajectory.

- :mod:`.model`: :class:`TemporalLifter` (temporal convolutions with a kinematic head) and
  :class:`VideoPose3DLifter`.
- :mod:`.inference`: :func:`load_lifter`, :func:`lift_keypoints` (layout conversion, gaps,
  normalisation, prediction, the root's trajectory in the camera frame).
- :mod:`.videopose3d`: VideoPose3D checkpoints read without running code.

Training is the ``lift`` task (:mod:`tensorpose.tasks.lifting`).
"""

from .inference import Lifter, bundled_lifters, lift_keypoints, load_lifter
from .model import TemporalLifter, VideoPose3DLifter
from .videopose3d import load_videopose3d

__all__ = [
    "Lifter",
    "TemporalLifter",
    "VideoPose3DLifter",
    "bundled_lifters",
    "lift_keypoints",
    "load_lifter",
    "load_videopose3d",
]
