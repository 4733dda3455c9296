"""BlazePose: MediaPipe's person detector and landmark network, converted to PyTorch.

- :mod:`.pipeline`: :class:`BlazePose` (image mode) and :class:`BlazePoseTracker` (video mode:
  landmarks of one frame give the next frame's region of interest).
- :mod:`.geometry`: the pure tensor functions of the pipeline (anchors, detections, NMS,
  regions of interest, landmark decoding, one-euro smoothing).
- :mod:`.networks`: :func:`load_blazepose_networks`, the shipped converted networks (and the
  heavy landmark network: :func:`convert_heavy` converts it, ``tensorpose convert-blazepose``
  installs it into :func:`models_dir`).
- :mod:`.tflite`: ``.tflite`` flatbuffers -> a plain-data graph description + float32 weights
  (the converter), converted files saved and loaded without running code.
- :mod:`.graph`: :class:`TFLiteNet`, a module that runs such a description; :mod:`.onednn`
  its CPU program (oneDNN convolutions with prepacked weights).
- :mod:`.memory`: :func:`keep_freed_memory`, the allocator policy of batched CPU inference
  (an explicit call).
"""

from .graph import TFLiteNet
from .memory import keep_freed_memory
from .networks import convert_heavy, load_blazepose_networks, models_dir
from .pipeline import BlazePose, BlazePoseTracker, image_people
from .tflite import load_converted, load_tflite, read_tflite, save_converted

__all__ = [
    "BlazePose",
    "BlazePoseTracker",
    "TFLiteNet",
    "convert_heavy",
    "image_people",
    "keep_freed_memory",
    "load_blazepose_networks",
    "load_converted",
    "load_tflite",
    "models_dir",
    "read_tflite",
    "save_converted",
]
