"""MediaPipe's BlazePose networks (the "full" variant), shipped converted to PyTorch.

Two graphs run by :class:`tensorpose.blazepose.graph.TFLiteNet` from the files of
``scripts/convert_blazepose.py`` (weights: MediaPipe 0.10.14, Apache-2.0, see
``tensorpose/assets/ATTRIBUTION.md``):

- the person detector: ``(B, 3, 224, 224)`` RGB in ``[-1, 1]`` -> box and keypoint regressions
  ``(B, 2254, 12)`` and logits ``(B, 2254, 1)``, one row per SSD anchor;
- the landmark network: ``(B, 3, 256, 256)`` RGB in ``[0, 1]`` (the rotated person crop) ->
  landmarks ``(B, 195)`` (39 x ``x, y, z, visibility, presence`` logits, crop pixels),
  the pose flag ``(B, 1)``, the segmentation logits ``(B, 1, 256, 256)``, heatmaps
  ``(B, 39, 64, 64)`` and world landmarks ``(B, 117)`` (39 x 3, metres).

Example::

    detector, landmark = load_blazepose_networks("cpu")
    with torch.no_grad():
        boxes, logits = detector(torch.zeros(2, 3, 224, 224))
"""

from __future__ import annotations

from pathlib import Path

import torch

from .graph import TFLiteNet
from .tflite import load_converted

__all__ = ["DETECTOR_FILE", "LANDMARK_FILE", "load_blazepose_networks"]

_MODELS = Path(__file__).resolve().parents[1] / "assets" / "models"
DETECTOR_FILE = _MODELS / "blazepose_detector.pt"
LANDMARK_FILE = _MODELS / "blazepose_landmark_full.pt"


def load_blazepose_networks(
    device: str | torch.device = "cpu",
) -> tuple[TFLiteNet, TFLiteNet]:
    """The shipped detector and "full" landmark networks, in eval mode, float32, on ``device``."""
    return load_converted(DETECTOR_FILE, device), load_converted(LANDMARK_FILE, device)
