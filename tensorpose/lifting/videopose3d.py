"""VideoPose3D checkpoints (facebookresearch/VideoPose3D ``run.py``) -> :class:`VideoPose3DLifter`.

VideoPose3D saves ``torch.save({"epoch", "lr", "random_state", "optimizer", "model_pos",
"model_traj", "random_state_semi"})``; ``model_pos`` is the state dict of its ``TemporalModel``
(its strided training model, ``TemporalModelOptimized1f``, has the same keys).
:func:`load_videopose3d` reads the file with :func:`tensorpose.io.torch_file.torch_load` (no code
from the file runs: ``random_state`` is a pickled ``numpy.random.RandomState``, which
``torch.load(weights_only=True)`` refuses), infers the architecture from the state dict
(:func:`infer_architecture`) and loads it into :class:`tensorpose.lifting.model.VideoPose3DLifter`,
tensorpose's temporal trunk with VideoPose3D's module names.

Lifting a video with a published model (what ``tensorpose lift --checkpoint x.bin`` runs)::

    model = load_videopose3d("pretrained_h36m_detectron_coco.bin", device)
    kp = videopose3d_normalize(pixels, width, height)  # (T, J_in, 2) pixels -> [-1, 1] in x
    with torch.no_grad():
        joints = model.predict(kp[None])[0]  # (T, 17, 3)
        # VideoPose3D's default test-time flip averaging, for COCO input:
        joints = model.predict(
            kp[None],
            flip_index_in=get_skeleton("coco17").flip_index,
            flip_index_out=get_skeleton("h36m17").flip_index,
        )[0]

- Input joints in the order the model was trained on: ``pretrained_h36m_detectron_coco.bin``
  takes COCO-17 keypoints as they are (the order of ``get_skeleton("coco17")``, COCO and the first
  17 of OpenPose BODY_25B); ``pretrained_h36m_cpn.bin`` takes Human3.6M-17 (``h36m17``).
  ``x, y`` only; no confidences.
- Normalisation: :func:`videopose3d_normalize` is :func:`tensorpose.ops.camera.normalize_screen`,
  VideoPose3D's ``normalize_screen_coordinates``: ``x / w * 2 - [1, h / w]``.
- Output: camera frame, metres, in Human3.6M-17 order, which is tensorpose's ``h36m17`` order
  (pelvis, r_hip, r_knee, r_ankle, l_hip, l_knee, l_ankle, spine, thorax, neck, head,
  l_shoulder, l_elbow, l_wrist, r_shoulder, r_elbow, r_wrist; VideoPose3D's joint 9 is Human3.6M's
  "neck/nose" site): no reordering. The model was trained root-relative; joint 0 comes out near
  zero but not exactly: subtract it for strictly root-relative joints.
- ``predict`` edge-pads the input by ``(receptive_field - 1) / 2`` frames on each side (all
  before for causal models), as VideoPose3D's evaluation; ``model(kp)`` is the unpadded (valid)
  forward, ``T - receptive_field + 1`` frames.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from ..io.safe_pickle import RANDOM_STATE_GLOBALS
from ..io.torch_file import torch_load
from ..ops.camera import normalize_screen
from .model import VideoPose3DLifter

__all__ = [
    "VideoPose3DLifter",
    "infer_architecture",
    "load_videopose3d",
    "read_checkpoint",
    "videopose3d_normalize",
]

videopose3d_normalize = normalize_screen
"""VideoPose3D's screen normalisation, ``x / w * 2 - [1, h / w]``: the same function as
:func:`tensorpose.ops.camera.normalize_screen` (``pixels (..., 2)``, ``width``, ``height``)."""

_LAYER = re.compile(r"layers_conv\.(\d+)\.weight")


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The dict a VideoPose3D ``run.py`` saved, loaded without running code from the file.

    Admits tensors, plain data, numpy arrays and a pickled ``numpy.random.RandomState``.

    Raises:
        FileNotFoundError: no such file.
        UnsafePickleError: the file refers to anything else (the message names the file and the
            refused global).
        ValueError: not a readable torch file, or not a dict.
    """
    ckpt = torch_load(path, map_location="cpu", extra_globals=RANDOM_STATE_GLOBALS)
    if not isinstance(ckpt, dict):
        raise InputError(
            f"{path}: not a VideoPose3D checkpoint: expected a dict, got {type(ckpt).__name__}"
        )
    return ckpt


def infer_architecture(
    state_dict: Mapping[str, torch.Tensor],
    source: str = "state_dict",
    in_features: int = 2,
    dense: bool = False,
) -> dict[str, Any]:
    """:class:`VideoPose3DLifter` arguments from a ``TemporalModel`` state dict.

    - ``channels`` and ``joints_in = in_channels / in_features`` from ``expand_conv.weight``
      ``(channels, joints_in * in_features, w_0)``;
    - filter widths: ``w_0`` and the kernel width of each ``layers_conv.{2i}.weight``
      (for ``dense=True`` a kernel ``k`` at dilation ``d`` is the width ``(k - 1) / d + 1``);
    - ``joints_out = out_channels / 3`` from ``shrink.weight (3 * joints_out, channels, 1)``.

    Whether a model is causal, and whether it is dense, leaves no trace in the weights
    (``dense`` must be known to read the widths); dropout does not matter in eval mode.

    Raises:
        ValueError: a key is missing or has a shape no ``TemporalModel`` has (naming ``source``).
    """

    def shape(key: str, dims: int) -> tuple[int, ...]:
        t = state_dict.get(key)
        if not isinstance(t, torch.Tensor):
            found = "missing" if t is None else f"a {type(t).__name__}"
            raise InputError(f"{source}: not a VideoPose3D model: {key!r} is {found}")
        if t.dim() != dims:
            raise InputError(
                f"{source}: not a VideoPose3D model: {key!r} should have {dims} dims, got shape "
                f"{tuple(t.shape)}"
            )
        return tuple(t.shape)

    channels, in_channels, w0 = shape("expand_conv.weight", 3)
    if in_channels % in_features:
        raise InputError(
            f"{source}: expand_conv.weight has {in_channels} input channels, not a multiple of "
            f"in_features={in_features}"
        )
    out_channels = shape("shrink.weight", 3)[0]
    if out_channels % 3:
        raise InputError(
            f"{source}: shrink.weight has {out_channels} output channels, not 3 per joint"
        )
    convs = sorted(int(m.group(1)) for k in state_dict if (m := _LAYER.fullmatch(k)))
    blocks = (max(convs) + 2) // 2 if convs else 0
    if convs != list(range(2 * blocks)):
        raise InputError(
            f"{source}: not a VideoPose3D model: layers_conv indices {convs} should be 0..2n-1"
        )
    widths = [w0]
    for i in range(blocks):
        k = shape(f"layers_conv.{2 * i}.weight", 3)[2]
        if dense:
            d = math.prod(widths)
            if (k - 1) % d:
                raise InputError(
                    f"{source}: layers_conv.{2 * i}.weight has width {k}, not a dense block at "
                    f"dilation {d}"
                )
            k = (k - 1) // d + 1
        widths.append(k)
    if any(w % 2 == 0 for w in widths):
        raise InputError(f"{source}: filter widths {widths} must be odd")
    return {
        "joints_in": in_channels // in_features,
        "joints_out": out_channels // 3,
        "filter_widths": widths,
        "channels": channels,
        "in_features": in_features,
        "dense": dense,
    }


def load_videopose3d(
    path: str | Path,
    device: str | torch.device = "cpu",
    *,
    key: str = "model_pos",
    in_features: int = 2,
    causal: bool = False,
    dense: bool = False,
) -> VideoPose3DLifter:
    """Load a VideoPose3D checkpoint as a :class:`VideoPose3DLifter` in eval mode.

    Args:
        path: a checkpoint saved by VideoPose3D's ``run.py`` (e.g. ``pretrained_h36m_cpn.bin``).
        device: where the model goes.
        key: the state dict to load: ``"model_pos"``, or ``"model_traj"`` (the trajectory
            model of semi-supervised training, one output joint).
        in_features: features per input joint (2).
        causal: the model was trained with ``--causal`` (not recorded in the file).
        dense: the model was trained with ``--dense`` (not recorded in the file).

    Returns:
        The model; ``model.predict(keypoints (B, T, J_in, 2)) -> (B, T, J_out, 3)``.

    Raises:
        FileNotFoundError: no such file.
        UnsafePickleError: the file refers to globals outside the allowlist (it might run code).
        ValueError: not a VideoPose3D checkpoint: the message names the file and what is
            missing or mis-shaped.
    """
    ckpt = read_checkpoint(path)
    sd = ckpt.get(key)
    if not isinstance(sd, Mapping):
        found = "no" if sd is None else f"a {type(sd).__name__} as"
        raise InputError(
            f"{path}: not a VideoPose3D checkpoint: {found} {key!r} state dict (entries: "
            f"{', '.join(map(str, ckpt)) or 'none'})"
        )
    if sd and all(str(k).startswith("module.") for k in sd):  # saved from nn.DataParallel
        sd = {k[len("module.") :]: v for k, v in sd.items()}
    source = f"{path} [{key}]"
    arch = infer_architecture(sd, source, in_features, dense)
    model = VideoPose3DLifter(**arch, causal=causal)
    expected = model.state_dict()
    missing = [k for k in expected if k not in sd and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in sd if k not in expected]
    wrong = [
        f"{k} {tuple(sd[k].shape) if isinstance(sd[k], torch.Tensor) else type(sd[k]).__name__}"
        f" (expected {tuple(v.shape)})"
        for k, v in expected.items()
        if k in sd and (not isinstance(sd[k], torch.Tensor) or sd[k].shape != v.shape)
    ]
    if missing or unexpected or wrong:
        parts = [
            f"{label}: {', '.join(items[:8])}{' ...' if len(items) > 8 else ''}"
            for label, items in (
                ("missing", missing),
                ("unexpected", unexpected),
                ("wrong shape", wrong),
            )
            if items
        ]
        raise InputError(
            f"{source}: does not match a VideoPose3D TemporalModel with {arch}: " + "; ".join(parts)
        )
    full = {**expected, **sd}  # old checkpoints lack BatchNorm's num_batches_tracked
    model.load_state_dict(full)
    return model.to(device).eval()
