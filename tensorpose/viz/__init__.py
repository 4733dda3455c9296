"""Pictures from arrays (never a command's result type).

- :mod:`.draw`: skeletons on images, a lift video frame, augmented crops, curves, 3D
  skeletons and people's tracks (matplotlib where a chart needs axes).
- :mod:`.panel3d`: lift's 3D video panel with OpenCV alone (:class:`Panel3D`).
- :mod:`.charts`: the commands' own pictures with OpenCV alone (reprojection errors, lifted
  3D skeletons): a command that draws starts as fast as one that does not.
"""

from .charts import reprojection_errors_picture, skeletons_3d_picture
from .draw import draw_lift_frame, draw_people, draw_skeleton, plot_curves, plot_joint_xy
from .panel3d import Panel3D

__all__ = [
    "Panel3D",
    "draw_lift_frame",
    "draw_people",
    "draw_skeleton",
    "plot_curves",
    "plot_joint_xy",
    "reprojection_errors_picture",
    "skeletons_3d_picture",
]
