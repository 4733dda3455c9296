"""Built-in skeletons: ``get(name)`` returns a :class:`~tensorpose.skeleton.Skeleton`.

Each is a tree with left/right flip pairs. Joint orders follow the datasets' own conventions
(Human3.6M as used by VideoPose3D, COCO, MPII, LSP, the CMU BVH release) so arrays from those
sources index directly.
"""

from __future__ import annotations

from collections.abc import Callable

from .skeleton import Skeleton


def _pairs_by_prefix(names: list[str], left: str, right: str) -> list[tuple[str, str]]:
    """Flip pairs of names that differ only in a ``left``/``right`` prefix."""
    out = []
    for n in names:
        if n.startswith(left):
            twin = right + n[len(left) :]
            if twin in names:
                out.append((n, twin))
    return out


def h36m17() -> Skeleton:
    """Human3.6M 17 joints (VideoPose3D order), rooted at the pelvis."""
    names = [
        "pelvis", "r_hip", "r_knee", "r_ankle", "l_hip", "l_knee", "l_ankle", "spine",
        "thorax", "neck", "head", "l_shoulder", "l_elbow", "l_wrist", "r_shoulder",
        "r_elbow", "r_wrist",
    ]  # fmt: skip
    parents = [-1, 0, 1, 2, 0, 4, 5, 0, 7, 8, 9, 8, 11, 12, 8, 14, 15]
    return Skeleton(names, parents, _pairs_by_prefix(names, "l_", "r_"), name="h36m17")


def coco17() -> Skeleton:
    """COCO 17 keypoints, rooted at the left hip; face hangs off the nose, the nose off the
    left shoulder (COCO has no neck)."""
    names = [
        "nose", "l_eye", "r_eye", "l_ear", "r_ear", "l_shoulder", "r_shoulder", "l_elbow",
        "r_elbow", "l_wrist", "r_wrist", "l_hip", "r_hip", "l_knee", "r_knee", "l_ankle",
        "r_ankle",
    ]  # fmt: skip
    parents = [5, 0, 0, 1, 2, 11, 12, 5, 6, 7, 8, -1, 11, 11, 12, 13, 14]
    return Skeleton(names, parents, _pairs_by_prefix(names, "l_", "r_"), name="coco17")


def mpii16() -> Skeleton:
    """MPII 16 joints in the dataset's order, rooted at the pelvis (index 6)."""
    names = [
        "r_ankle", "r_knee", "r_hip", "l_hip", "l_knee", "l_ankle", "pelvis", "thorax",
        "upper_neck", "head_top", "r_wrist", "r_elbow", "r_shoulder", "l_shoulder",
        "l_elbow", "l_wrist",
    ]  # fmt: skip
    parents = [1, 2, 6, 6, 3, 4, -1, 6, 7, 8, 11, 12, 7, 7, 13, 14]
    return Skeleton(names, parents, _pairs_by_prefix(names, "l_", "r_"), name="mpii16")


def lsp14() -> Skeleton:
    """Leeds Sports Pose 14 joints in the dataset's order, rooted at the neck; hips hang off
    the shoulders (LSP has no pelvis)."""
    names = [
        "r_ankle", "r_knee", "r_hip", "l_hip", "l_knee", "l_ankle", "r_wrist", "r_elbow",
        "r_shoulder", "l_shoulder", "l_elbow", "l_wrist", "neck", "head_top",
    ]  # fmt: skip
    parents = [1, 2, 8, 9, 3, 4, 7, 8, 12, 12, 9, 10, -1, 12]
    return Skeleton(names, parents, _pairs_by_prefix(names, "l_", "r_"), name="lsp14")


def seed15() -> Skeleton:
    """The 15-joint tree of the kinematics article: parents of joints 1..14 are
    0,1,2,3,1,5,6,0,8,9,0,11,12,1. Joint names are our reading of that tree (pelvis root,
    neck with two arms and the head, two legs); the article does not name sides."""
    names = [
        "pelvis", "neck", "r_shoulder", "r_elbow", "r_wrist", "l_shoulder", "l_elbow",
        "l_wrist", "r_hip", "r_knee", "r_ankle", "l_hip", "l_knee", "l_ankle", "head",
    ]  # fmt: skip
    parents = [-1, 0, 1, 2, 3, 1, 5, 6, 0, 8, 9, 0, 11, 12, 1]
    return Skeleton(names, parents, _pairs_by_prefix(names, "l_", "r_"), name="seed15")


CMU31_NAMES = [
    "Hips", "LHipJoint", "LeftHip", "LeftKnee", "LeftAnkle", "LeftToe", "RHipJoint",
    "RightHip", "RightKnee", "RightAnkle", "RightToe", "lowerback", "Chest", "Chest2",
    "lowerneck", "Neck", "Head", "LeftCollar", "LeftShoulder", "LeftElbow", "LeftWrist",
    "lhand", "LFingers", "LThumb", "RightCollar", "RightShoulder", "RightElbow",
    "RightWrist", "rhand", "RFingers", "RThumb",
]  # fmt: skip
CMU31_PARENTS = [
    -1, 0, 1, 2, 3, 4, 0, 6, 7, 8, 9, 0, 11, 12, 13, 14, 15, 13, 17, 18, 19, 20, 21, 20,
    13, 24, 25, 26, 27, 28, 27,
]  # fmt: skip


def cmu31() -> Skeleton:
    """The 31-joint hierarchy of the CMU BVH release (names as in the bundled files), in file
    order; end sites are not joints here."""
    names = CMU31_NAMES
    pairs = (
        _pairs_by_prefix(names, "Left", "Right")
        + _pairs_by_prefix(names, "L", "R")
        + _pairs_by_prefix(names, "l", "r")
    )
    return Skeleton(names, CMU31_PARENTS, pairs, name="cmu31")


_BUILTINS: dict[str, Callable[[], Skeleton]] = {
    "h36m17": h36m17,
    "coco17": coco17,
    "mpii16": mpii16,
    "lsp14": lsp14,
    "seed15": seed15,
    "cmu31": cmu31,
}
_INSTANCES: dict[str, Skeleton] = {}


def names() -> list[str]:
    """Names accepted by :func:`get`."""
    return sorted(_BUILTINS)


def get(name: str) -> Skeleton:
    """A built-in skeleton by name (one shared instance per name, so its tensor cache is reused).

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    if name not in _BUILTINS:
        raise ValueError(f"unknown skeleton {name!r}; known: {', '.join(names())}")
    if name not in _INSTANCES:
        _INSTANCES[name] = _BUILTINS[name]()
    return _INSTANCES[name]
