"""2D keypoint layouts (keypoint orders of detectors and datasets), conversion to the lifter's
``h36m17`` skeleton, and layout detection from keypoint geometry.

A layout is a list of keypoint names in file order (tensorpose's snake_case names):

============ ==== ======================================================================
layout       K    where it comes from
============ ==== ======================================================================
``BODY_25``  25   OpenPose's default model: nose, neck, right arm, left arm, mid-hip, ...
``BODY_25B`` 25   OpenPose's experimental model: the 17 COCO keypoints first, then upper
                  neck, head top and the feet
``COCO_18``  18   OpenPose's COCO model: COCO's 17 plus a neck, in OpenPose's order
``COCO_17``  17   COCO keypoints (MMPose, Detectron2, COCO results files)
``H36M_17``  17   Human3.6M's 17 joints in VideoPose3D's order (``skeleton.h36m17()``)
``BLAZEPOSE_33`` 33 MediaPipe's BlazePose landmarks (``tensorpose predict --model blazepose``):
                  face points, hands (pinky, index, thumb), heels and foot tips
============ ==== ======================================================================

BODY_25 and BODY_25B both have 25 keypoints, COCO_17 and H36M_17 both 17: :func:`detect_layout`
tells them apart from the geometry of the people in the data.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .errors import InputError
from .ops._constants import constant
from .skeleton import coco17, h36m17

__all__ = [
    "COCO17_INDEX",
    "COCO_LINKS",
    "H36M17_RULES",
    "LAYOUTS",
    "candidate_layouts",
    "check_layout",
    "detect_layout",
    "flip_index",
    "join_evidence",
    "joint_marker_names",
    "layout_evidence",
    "layout_from_evidence",
    "layouts_with",
    "marker_names",
    "split_evidence",
    "to_body25",
    "to_coco17",
    "to_coco18",
    "to_h36m17",
]

LAYOUTS: dict[str, list[str]] = {
    "BODY_25": [
        "nose", "neck", "r_shoulder", "r_elbow", "r_wrist", "l_shoulder", "l_elbow",
        "l_wrist", "mid_hip", "r_hip", "r_knee", "r_ankle", "l_hip", "l_knee", "l_ankle",
        "r_eye", "l_eye", "r_ear", "l_ear", "l_big_toe", "l_small_toe", "l_heel",
        "r_big_toe", "r_small_toe", "r_heel",
    ],
    "BODY_25B": [
        "nose", "l_eye", "r_eye", "l_ear", "r_ear", "l_shoulder", "r_shoulder", "l_elbow",
        "r_elbow", "l_wrist", "r_wrist", "l_hip", "r_hip", "l_knee", "r_knee", "l_ankle",
        "r_ankle", "neck", "head_top", "l_big_toe", "l_small_toe", "l_heel", "r_big_toe",
        "r_small_toe", "r_heel",
    ],
    "COCO_18": [
        "nose", "neck", "r_shoulder", "r_elbow", "r_wrist", "l_shoulder", "l_elbow",
        "l_wrist", "r_hip", "r_knee", "r_ankle", "l_hip", "l_knee", "l_ankle", "r_eye",
        "l_eye", "r_ear", "l_ear",
    ],
    "COCO_17": list(coco17().names),
    "H36M_17": list(h36m17().names),
    "BLAZEPOSE_33": [
        "nose", "l_eye_inner", "l_eye", "l_eye_outer", "r_eye_inner", "r_eye", "r_eye_outer",
        "l_ear", "r_ear", "l_mouth", "r_mouth", "l_shoulder", "r_shoulder", "l_elbow",
        "r_elbow", "l_wrist", "r_wrist", "l_pinky", "r_pinky", "l_index", "r_index",
        "l_thumb", "r_thumb", "l_hip", "r_hip", "l_knee", "r_knee", "l_ankle", "r_ankle",
        "l_heel", "r_heel", "l_foot_index", "r_foot_index",
    ],
}  # fmt: skip
"""Keypoint names per layout, in file order. BODY_25's and COCO_18's ``neck`` is OpenPose's
"Neck" (the base of the neck, between the shoulders); BODY_25B's ``neck`` is its "UpperNeck" and
``head_top`` its "HeadTop"."""

_MARKER_RENAMES: dict[str, dict[str, str]] = {
    "BODY_25": {"mid_hip": "CHip"},
    "BODY_25B": {"head_top": "Head"},
    "H36M_17": {"pelvis": "Hip", "thorax": "Neck", "neck": "Nose"},
    "BLAZEPOSE_33": {"l_foot_index": "LBigToe", "r_foot_index": "RBigToe"},
}
"""Where Pose2Sim's skeletons (``Pose2Sim/skeletons.py``) name a keypoint other than the
CamelCase of tensorpose's name: BODY_25's mid-hip is ``CHip``, BODY_25B's head top ``Head``
(its upper neck is ``Neck``), BlazePose's foot index ``LBigToe`` / ``RBigToe``. H36M_17 (what
``lift`` writes) takes the names of Pose2Sim's HALPE_26 markers (its default body model) for
the same body points: the pelvis is ``Hip`` (the mid-hip), the thorax ``Neck`` (the base of
the neck, between the shoulders), H36M's neck/nose ``Nose``, the head top ``Head``; the spine
(no Pose2Sim marker) stays ``Spine``."""


def _camel(name: str) -> str:
    """``l_big_toe`` -> ``LBigToe``, ``nose`` -> ``Nose``."""
    parts = name.split("_")
    side = parts.pop(0).upper() if parts[0] in ("l", "r") and len(parts) > 1 else ""
    return side + "".join(p.capitalize() for p in parts)


def marker_names(layout: str) -> list[str]:
    """TRC marker names of a layout's keypoints, in file order, as OpenSim's Pose2Sim models and
    Pose2Sim's TRC files name them: ``l_hip`` -> ``LHip``, ``r_big_toe`` -> ``RBigToe``,
    ``nose`` -> ``Nose``, plus :data:`_MARKER_RENAMES` (keypoints Pose2Sim does not write, such
    as BODY_25B's eyes and ears, get the same CamelCase: ``LEye``, ``REar``)."""
    check_layout(layout)
    renames = _MARKER_RENAMES.get(layout, {})
    return [renames.get(n, _camel(n)) for n in LAYOUTS[layout]]


def joint_marker_names(names: Sequence[str]) -> list[str]:
    """TRC marker names of joints named ``names`` (a skeleton's, e.g. the lifter's ``h36m17``):
    :func:`marker_names` of the layout whose keypoints are exactly ``names``, else each name's
    CamelCase."""
    names = list(names)
    for layout, keypoints in LAYOUTS.items():  # a handful of layouts
        if keypoints == names:
            return marker_names(layout)
    return [_camel(n) for n in names]


def flip_index(layout: str) -> list[int]:
    """Per keypoint of ``layout``, the index of its mirror image: ``l_x`` <-> ``r_x``, every
    other keypoint itself (``kp[..., flip_index(layout), :]`` exchanges left and right)."""
    check_layout(layout)
    names = LAYOUTS[layout]
    where = {n: i for i, n in enumerate(names)}
    mirror = {"l": "r", "r": "l"}
    out = []
    for n in names:  # a layout's few dozen names (a table, not data)
        side, _, rest = n.partition("_")
        out.append(where.get(f"{mirror[side]}_{rest}", where[n]) if side in mirror and rest
                   else where[n])  # fmt: skip
    return out


COCO17_INDEX: dict[str, list[int]] = {
    name: [names.index(j) for j in coco17().names]
    for name, names in LAYOUTS.items()
    if set(coco17().names) <= set(names)
}
"""Per layout that contains the 17 COCO keypoints (all but ``H36M_17``), the index of each
joint of tensorpose's ``coco17`` skeleton: ``kp[..., COCO17_INDEX[layout], :]``."""

COCO_LINKS = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7),
    (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip
"""The COCO person category's skeleton links between ``COCO_17`` keypoints, 0-based (for
drawing)."""


def to_coco18(keypoints: np.ndarray) -> np.ndarray:
    """COCO-17 ``(..., 17, 3)`` (x, y, confidence) -> OpenPose ``COCO_18`` ``(..., 18, 3)``:
    the same joints reordered plus ``neck`` = midpoint of the shoulders, with the smaller of the
    two shoulder confidences."""
    names = coco17().names
    kp = np.asarray(keypoints, np.float64)
    if kp.shape[-2:] != (17, 3):
        raise ValueError(f"keypoints must have shape (..., 17, 3), got {kp.shape}")
    ls, rs = kp[..., names.index("l_shoulder"), :], kp[..., names.index("r_shoulder"), :]
    neck = np.concatenate(
        [(ls[..., :2] + rs[..., :2]) / 2, np.minimum(ls[..., 2:], rs[..., 2:])], -1
    )
    cols = [neck if n == "neck" else kp[..., names.index(n), :] for n in LAYOUTS["COCO_18"]]
    return np.stack(cols, -2)


def to_coco17(keypoints: np.ndarray, layout: str) -> np.ndarray:
    """Keypoints ``(..., K, 3)`` of a layout holding the COCO joints -> ``COCO_17``."""
    if layout not in COCO17_INDEX:
        raise InputError(f"layout {layout} does not contain the 17 COCO keypoints")
    kp = np.asarray(keypoints)
    check_layout(layout, kp.shape[-2] if kp.ndim >= 2 else None)
    return kp[..., COCO17_INDEX[layout], :]


_BODY25_FROM_BLAZEPOSE = {
    "neck": ("l_shoulder", "r_shoulder"),
    "mid_hip": ("l_hip", "r_hip"),
    "l_big_toe": ("l_foot_index",),
    "r_big_toe": ("r_foot_index",),
}


def to_body25(keypoints: np.ndarray) -> np.ndarray:
    """``BLAZEPOSE_33`` ``(..., 33, 3)`` -> OpenPose ``BODY_25`` ``(..., 25, 3)``.

    Joints of the same name are copied; ``neck`` and ``mid_hip`` are the midpoints of the
    shoulders and of the hips (the smaller confidence), the big toes are BlazePose's foot tips;
    the small toes, which BlazePose lacks, are missing (``0, 0, 0``, as OpenPose writes them).
    """
    kp = np.asarray(keypoints, np.float64)
    check_layout("BLAZEPOSE_33", kp.shape[-2] if kp.ndim >= 2 else None)
    if kp.shape[-1] != 3:
        raise ValueError(f"keypoints must have shape (..., 33, 3), got {kp.shape}")
    names = LAYOUTS["BLAZEPOSE_33"]
    cols = []
    for n in LAYOUTS["BODY_25"]:  # 25 columns
        src = _BODY25_FROM_BLAZEPOSE.get(n, (n,) if n in names else ())
        if not src:
            cols.append(np.zeros((*kp.shape[:-2], 3)))
            continue
        pts = [kp[..., names.index(s), :] for s in src]
        xy = sum(q[..., :2] for q in pts) / len(pts)
        conf = np.minimum.reduce([q[..., 2] for q in pts])
        cols.append(np.concatenate([xy, conf[..., None]], -1))
    return np.stack(cols, -2)


# ------------------------------------------------------------------------- to h36m17
_MID_HIP = {"l_hip": 0.5, "r_hip": 0.5}
_MID_SHOULDER = {"l_shoulder": 0.5, "r_shoulder": 0.5}
_TORSO = {"l_hip": 0.25, "r_hip": 0.25, "l_shoulder": 0.25, "r_shoulder": 0.25}

H36M17_RULES: dict[str, dict[str, dict[str, float]]] = {
    "BODY_25": {
        "pelvis": {"mid_hip": 1.0},
        "spine": {"mid_hip": 0.5, "neck": 0.5},
        "thorax": {"neck": 1.0},
        "neck": {"nose": 1.0},
        "head": {"nose": 1.5, "neck": -0.5},
    },
    "BODY_25B": {
        "pelvis": _MID_HIP,
        "spine": _TORSO,
        "thorax": _MID_SHOULDER,
        "neck": {"neck": 1.0},
        "head": {"head_top": 1.0},
    },
    "COCO_18": {
        "pelvis": _MID_HIP,
        "spine": {"l_hip": 0.25, "r_hip": 0.25, "neck": 0.5},
        "thorax": {"neck": 1.0},
        "neck": {"nose": 1.0},
        "head": {"nose": 1.5, "neck": -0.5},
    },
    "COCO_17": {
        "pelvis": _MID_HIP,
        "spine": _TORSO,
        "thorax": _MID_SHOULDER,
        "neck": {"nose": 1.0},
        "head": {"nose": 1.5, "l_shoulder": -0.25, "r_shoulder": -0.25},
    },
    "H36M_17": {},
    "BLAZEPOSE_33": {
        "pelvis": _MID_HIP,
        "spine": _TORSO,
        "thorax": _MID_SHOULDER,
        "neck": {"nose": 1.0},
        "head": {"nose": 1.5, "l_shoulder": -0.25, "r_shoulder": -0.25},
    },
}
"""Per layout, how each ``h36m17`` joint that the layout does not have under the same name is
made: ``{target: {source: weight}}`` (weights sum to 1). Every other target joint (hips, knees,
ankles, shoulders, elbows, wrists; all of them for ``H36M_17``) is copied from the source
keypoint of the same name. See :func:`to_h36m17` for the table in words."""


def check_layout(layout: str, num_keypoints: int | None = None, what: str = "keypoints") -> None:
    """Raise ``ValueError`` for an unknown layout name, or one whose keypoint count differs from
    ``num_keypoints`` (the message names both counts)."""
    if layout not in LAYOUTS:
        raise InputError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    K = len(LAYOUTS[layout])
    if num_keypoints is not None and num_keypoints != K:
        raise InputError(f"layout {layout} has {K} keypoints but {what} has {num_keypoints}")


def layouts_with(num_keypoints: int) -> list[str]:
    """The layout names with ``num_keypoints`` keypoints (the first is the default guess)."""
    return [name for name, names in LAYOUTS.items() if len(names) == num_keypoints]


def candidate_layouts(num_keypoints: int) -> list[str]:
    """:func:`layouts_with`, at least one.

    Raises:
        ValueError: no layout has ``num_keypoints`` keypoints (the known counts named).
    """
    candidates = layouts_with(num_keypoints)
    if not candidates:
        counts = sorted({len(v) for v in LAYOUTS.values()})
        raise InputError(f"{num_keypoints} keypoints match no known layout (known counts: "
                         f"{counts})")  # fmt: skip
    return candidates


def _h36m17_table(layout: str) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[float, ...], ...]]:
    """``(index (17, S), weight (17, S))`` of the sources of each ``h36m17`` joint, padded to
    ``S`` sources by repeating a joint's first source with weight 0 (which changes neither the
    weighted mean nor the smallest confidence)."""
    names = LAYOUTS[layout]
    rules = H36M17_RULES[layout]
    rows = [rules.get(t, {t: 1.0}) for t in h36m17().names]
    S = max(len(r) for r in rows)
    index, weight = [], []
    for r in rows:  # build time: once per layout
        idx = [names.index(s) for s in r] + [names.index(next(iter(r)))] * (S - len(r))
        index.append(tuple(idx))
        weight.append(tuple(r.values()) + (0.0,) * (S - len(r)))
    return tuple(index), tuple(weight)


_H36M17_TABLES = {name: _h36m17_table(name) for name in LAYOUTS}


def to_h36m17(keypoints: torch.Tensor, layout: str) -> torch.Tensor:
    """Keypoints of any layout in the order of the lifter's ``h36m17`` skeleton.

    One gather of every joint's sources and one small weighted sum; no loop over joints.
    Joints the layout does not have are made from others:

    ========== =================== =================== =================== =================
    h36m17     BODY_25             BODY_25B            COCO_18             COCO_17
    ========== =================== =================== =================== =================
    pelvis     mid_hip             mean of the hips    mean of the hips    mean of the hips
    spine      mean(mid_hip, neck) mean of hips and    hips 1/4 each,      mean of hips and
                                   shoulders           neck 1/2            shoulders
    thorax     neck                mean of shoulders   neck                mean of shoulders
    neck       nose                neck (UpperNeck)    nose                nose
    head (top) 1.5 nose - 0.5 neck head_top            1.5 nose - 0.5 neck 1.5 nose - 0.25
                                                                           per shoulder
    ========== =================== =================== =================== =================

    Limbs (hips, knees, ankles, shoulders, elbows, wrists) are copied; ``H36M_17`` is copied as
    it is. The head top is extrapolated half a nose-to-neck length beyond the nose. A made joint
    gets the smallest confidence of its sources. Any output joint whose confidence is not
    positive (0 or NaN: missing, e.g. a missing source) has NaN ``x, y`` and keeps that
    confidence.

    Args:
        keypoints: ``(..., K, 3)`` floating ``x, y, confidence`` in ``layout``.
        layout: a key of :data:`LAYOUTS`.

    Returns:
        ``(..., 17, 3)`` in the dtype and on the device of ``keypoints``.

    Raises:
        TypeError: ``keypoints`` is not a floating tensor.
        ValueError: unknown layout, a shape that is not ``(..., K, 3)``, or ``K`` differing from
            the layout's count.

    Example:
        >>> kp = torch.rand(2, 17, 3) + 0.1  # COCO_17, all confident
        >>> h36 = to_h36m17(kp, "COCO_17")
        >>> h36.shape
        torch.Size([2, 17, 3])
        >>> torch.allclose(h36[:, 0, :2], kp[:, 11:13, :2].mean(1))  # pelvis = mid-hip
        True
    """
    if not isinstance(keypoints, torch.Tensor) or not keypoints.is_floating_point():
        what = keypoints.dtype if isinstance(keypoints, torch.Tensor) else type(keypoints)
        raise TypeError(f"keypoints must be a floating-point tensor, got {what}")
    if keypoints.dim() < 2 or keypoints.shape[-1] != 3:
        raise ValueError(f"keypoints must have shape (..., K, 3), got {tuple(keypoints.shape)}")
    check_layout(layout, keypoints.shape[-2])
    index, weight = _H36M17_TABLES[layout]
    idx = constant(index, keypoints.device, torch.long)  # (17, S)
    w = constant(weight, keypoints.device, keypoints.dtype)  # (17, S)
    src = keypoints[..., idx.reshape(-1), :].unflatten(-2, idx.shape)  # (..., 17, S, 3)
    xy = torch.einsum("...jsc,js->...jc", src[..., :2], w)
    conf = src[..., 2].amin(-1, keepdim=True)  # NaN propagates: a NaN source is missing
    xy = xy.masked_fill(~(conf > 0), float("nan"))
    return torch.cat([xy, conf], -1)


# ------------------------------------------------------------------------- detection
# Per layout, geometric facts that hold for people in that layout: (keypoint, [references]):
# the keypoint lies close to the mean of the references. Under the wrong keypoint order they
# compare unrelated body parts (an ankle with the nose), so their residuals grow.
_SIGNATURES: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "BODY_25": [
        ("l_eye", ("nose",)),
        ("r_eye", ("nose",)),
        ("l_ear", ("nose",)),
        ("r_ear", ("nose",)),
        ("neck", ("l_shoulder", "r_shoulder")),
        ("mid_hip", ("l_hip", "r_hip")),
    ],
    "BODY_25B": [
        ("l_eye", ("nose",)),
        ("r_eye", ("nose",)),
        ("l_ear", ("nose",)),
        ("r_ear", ("nose",)),
    ],
    "COCO_18": [
        ("l_eye", ("nose",)),
        ("r_eye", ("nose",)),
        ("neck", ("l_shoulder", "r_shoulder")),
    ],
    "COCO_17": [
        ("l_eye", ("nose",)),
        ("r_eye", ("nose",)),
        ("l_ear", ("nose",)),
        ("r_ear", ("nose",)),
    ],
    "H36M_17": [
        ("pelvis", ("l_hip", "r_hip")),
        ("thorax", ("l_shoulder", "r_shoulder")),
    ],
    "BLAZEPOSE_33": [
        ("l_eye", ("nose",)),
        ("r_eye", ("nose",)),
        ("l_heel", ("l_ankle",)),
        ("r_heel", ("r_ankle",)),
    ],
}


def _signature_residuals(kp: torch.Tensor, layouts: list[str]) -> dict[str, np.ndarray]:
    """Per layout, ``(N,)`` per person: the mean over the layout's signature facts of
    ``|keypoint - mean(references)| / body size`` (body size: the diagonal of the box around
    the person's found keypoints, measured once for all layouts); NaN where no fact has all
    its keypoints found."""
    found = (kp[..., 2] > 0) & torch.isfinite(kp[..., :2]).all(-1)  # (N, K)
    xy = kp[..., :2].masked_fill(~found[..., None], float("nan"))
    inf = float("inf")  # xy is NaN exactly where not found (found joints are finite)
    lo = xy.nan_to_num(nan=inf, posinf=inf, neginf=-inf).amin(-2)
    hi = xy.nan_to_num(nan=-inf, posinf=inf, neginf=-inf).amax(-2)
    size = torch.linalg.vector_norm(hi - lo, dim=-1)  # (N,); inf/NaN without found points
    enough = found.sum(-1, keepdim=True) >= 3
    out = {}
    for layout in layouts:  # two candidates at most
        names, facts = LAYOUTS[layout], _SIGNATURES[layout]
        point = torch.tensor([names.index(p) for p, _ in facts])
        refs = torch.tensor([[names.index(r) for r in (*rs, rs[0])[:2]] for _, rs in facts])
        ref = xy[:, refs].mean(-2)  # (N, F, 2)
        d = torch.linalg.vector_norm(xy[:, point] - ref, dim=-1) / size[:, None]  # (N, F)
        ok = torch.isfinite(d) & enough
        n = ok.sum(-1)
        r = d.masked_fill(~ok, 0.0).sum(-1) / n.clamp(min=1)
        out[layout] = r.masked_fill(n == 0, float("nan")).numpy()
    return out


def detect_layout(keypoints: torch.Tensor | np.ndarray) -> tuple[str, str]:
    """The layout of keypoints from their count and, where two layouts share a count, from the
    geometry of the people.

    25 keypoints are ``BODY_25`` or ``BODY_25B``, 17 are ``COCO_17`` or ``H36M_17`` (18 are
    ``COCO_18``). Each candidate has signature facts that hold in its keypoint order (the
    eyes and ears lie close to the nose; BODY_25's neck and mid-hip lie between the shoulders
    and between the hips; Human3.6M's pelvis and thorax likewise); the candidate whose facts
    fit best (smallest median residual relative to body size, over all people with the
    keypoints they need) wins. Without such people the first candidate (OpenPose's default
    ``BODY_25``, or ``COCO_17``) is assumed, and the reason says so.

    Args:
        keypoints: ``(..., K, 3)`` ``x, y, confidence`` (e.g. ``(T, P, K, 3)`` tracks);
            missing keypoints have confidence 0 or NaN.

    Returns:
        ``(layout name, reason)``: the reason is a sentence with the evidence.

    Raises:
        ValueError: a shape that is not ``(..., K, 3)``, or a ``K`` that no layout has.
    """
    return layout_from_evidence(layout_evidence(keypoints))


def layout_evidence(keypoints: torch.Tensor | np.ndarray) -> tuple[int, dict[str, np.ndarray]]:
    """What :func:`detect_layout` decides from, for keypoints read in pieces: the keypoint count
    ``K`` and, per candidate layout of that count, the signature residual of every person who
    has the keypoints it needs (``(N,)`` float64). The evidence of several pieces joined
    (:func:`join_evidence`) decides as :func:`detect_layout` on all of them at once.

    Raises:
        ValueError: a shape that is not ``(..., K, 3)``, or a ``K`` that no layout has.
    """
    return split_evidence(keypoints, None)[0]


def split_evidence(
    keypoints: torch.Tensor | np.ndarray, counts: Sequence[int] | None
) -> list[tuple[int, dict[str, np.ndarray]]]:
    """:func:`layout_evidence` of each piece of ``keypoints`` (people ``(..., K, 3)``
    flattened): the first ``counts[0]`` people, the next ``counts[1]``, ... (``None``: one
    piece), all measured at once (each person's residual is its own)."""
    kp = torch.as_tensor(keypoints).detach().to("cpu", torch.float64)
    if kp.dim() < 2 or kp.shape[-1] != 3:
        raise ValueError(f"keypoints must have shape (..., K, 3), got {tuple(kp.shape)}")
    K = kp.shape[-2]
    candidates = candidate_layouts(K)
    flat = kp.reshape(-1, K, 3)
    ends = np.cumsum([len(flat)] if counts is None else counts).tolist()
    if len(candidates) == 1:
        return [(K, {candidates[0]: np.zeros(0)}) for _ in ends]
    every = _signature_residuals(flat, candidates)
    bounds = zip([0, *ends[:-1]], ends, strict=True)
    pieces = [{name: r[a:b] for name, r in every.items()} for a, b in bounds]
    return [(K, {name: r[~np.isnan(r)] for name, r in p.items()}) for p in pieces]


def join_evidence(pieces: list[tuple[int, dict[str, np.ndarray]]]) -> tuple[int, dict]:
    """The :func:`layout_evidence` of pieces of one input (same ``K``), joined."""
    K = pieces[0][0]
    return K, {name: np.concatenate([p[1][name] for p in pieces]) for name in pieces[0][1]}


def layout_from_evidence(evidence: tuple[int, dict[str, np.ndarray]]) -> tuple[str, str]:
    """``(layout name, reason)`` from :func:`layout_evidence` (see :func:`detect_layout`)."""
    K, residuals = evidence
    candidates = list(residuals)
    if len(candidates) == 1:
        return candidates[0], f"{K} keypoints: {candidates[0]} is the only layout with {K}"
    scores = {name: (float(torch.from_numpy(r).median()) if len(r) else float("nan"), len(r))
              for name, r in residuals.items()}  # fmt: skip
    usable = {k: v for k, v in scores.items() if v[1] > 0}
    if not usable:
        return candidates[0], (
            f"{K} keypoints: {' or '.join(candidates)}, and no person has the keypoints that "
            f"tell them apart; assumed {candidates[0]} (pass the layout to choose)"
        )
    best = min(usable, key=lambda k: usable[k][0])
    evidence_text = "; ".join(
        f"{k} {v[0]:.3f} over {v[1]} people" if v[1] else f"{k} not measurable"
        for k, v in scores.items()
    )
    others = [v[0] for k, v in usable.items() if k != best]
    weak = bool(others) and min(others) < 2 * usable[best][0]
    return best, (
        f"{K} keypoints: the geometry fits {best} best (median residual of its signature, "
        f"relative to body size: {evidence_text})"
        + ("; weak evidence, pass the layout to be sure" if weak else "")
    )
