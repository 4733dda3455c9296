"""CenterNet ("Objects as Points") multi-person pose on whole images.

- :mod:`.model`: the network (:func:`build_model`) and its decoder (:func:`decode_people`:
  peaks, top-k, joint snapping, inverse letterbox, OKS-NMS).
- :mod:`.pipeline`: :class:`CenterNet` (input geometry, targets, loss, decoding, COCO results)
  and :func:`evaluate` (COCO keypoint AP).
- :mod:`.data`: whole images for training: letterbox, people in padded slots, targets (OpenCV).

Training is the ``centernet`` task (:mod:`tensorpose.tasks.centernet`).
"""

from .model import build_model, decode_people
from .pipeline import CenterNet, evaluate

__all__ = ["CenterNet", "build_model", "decode_people", "evaluate"]
