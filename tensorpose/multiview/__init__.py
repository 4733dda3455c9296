"""Several calibrated cameras -> 3D people.

- :mod:`.recording`: a recording's cameras matched to a calibration (:class:`Recording`, read
  a chunk of frames at a time), :func:`triangulate_cameras`, each camera's agreement.
- :mod:`.dlt`: batched weighted DLT (normal matrices, the closed-form smallest eigenvector of
  symmetric 4 x 4 matrices, row compaction on CPU), reprojection errors.
- :mod:`.triangulate`: robust points (:class:`Triangulation`, weighted DLT with iterative
  camera dropping).
- :mod:`.association`: one person across views, and every person per frame.
- :mod:`.people`: people linked over time (:class:`PeopleLinker`,
  :func:`triangulate_cameras_people`; :func:`triangulate_cameras_one`: the person most cameras
  see longest).
- :mod:`.swaps`: each person's left and right made consistent across cameras
  (:func:`find_swaps`).
- :mod:`.motion3d`: triangulate's 3D outputs (axes, frame rate, filters, gap filling).
- :mod:`.sync`: each camera's frame offset from keypoint speeds (and the calibration's
  epipolar agreement): ``tensorpose sync``.
"""

from .association import triangulate_everyone, triangulate_people
from .dlt import reprojection_errors, weighted_dlt
from .motion3d import Filter3D, filter_points
from .people import PeopleLinker, triangulate_cameras_one, triangulate_cameras_people
from .recording import Recording, camera_agreement, open_recording, triangulate_cameras
from .swaps import find_swaps
from .triangulate import Triangulation, triangulate_points

__all__ = [
    "Filter3D",
    "PeopleLinker",
    "Recording",
    "Triangulation",
    "camera_agreement",
    "filter_points",
    "find_swaps",
    "open_recording",
    "reprojection_errors",
    "triangulate_cameras",
    "triangulate_cameras_one",
    "triangulate_cameras_people",
    "triangulate_everyone",
    "triangulate_people",
    "triangulate_points",
    "weighted_dlt",
]
