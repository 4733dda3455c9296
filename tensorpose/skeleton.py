"""Skeleton: a joint tree (names, parents in any order, left/right flip pairs) and the index
tensors the kinematics ops need, derived once and cached per device and dtype; and the built-in
skeletons: :func:`get_skeleton` by name (:func:`skeleton_names` lists them).

Each built-in is a tree with left/right flip pairs. Joint orders follow the datasets' own
conventions (Human3.6M as used by VideoPose3D, COCO, MPII, LSP, the CMU BVH release) so arrays
from those sources index directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .errors import InputError


class Skeleton:
    """A rooted tree of joints.

    Args:
        names: joint names, ``J`` unique strings.
        parents: ``parents[j]`` is the index of joint ``j``'s parent, ``-1`` for the one root.
            Joints may come in any order (a parent may have a larger index than its child).
        flip_pairs: pairs ``(a, b)`` of joint indices (or names) that swap under a left/right
            mirror. Each joint appears in at most one pair.
        name: an optional label, e.g. ``"h36m17"``.

    Derived (plain Python, computed once): ``bones`` (``S = J - 1`` rows of ``(parent, child)``,
    children in ascending joint index), ``depth``, ``levels``, ``flip_index``,
    ``ancestor_matrix``. Tensors on a device come from :meth:`tensor` and are cached.

    Example:
        >>> sk = Skeleton(["hip", "knee", "ankle"], [-1, 0, 1])
        >>> sk.bones
        ((0, 1), (1, 2))
    """

    def __init__(
        self,
        names: Sequence[str],
        parents: Sequence[int],
        flip_pairs: Sequence[tuple[int | str, int | str]] = (),
        name: str = "",
    ) -> None:
        names = tuple(str(n) for n in names)
        parents = tuple(int(p) for p in parents)
        if len(names) != len(parents):
            raise ValueError(f"names has {len(names)} entries but parents has {len(parents)}")
        if len(names) < 1:
            raise ValueError("a skeleton needs at least one joint")
        seen: dict[str, int] = {}
        for j, n in enumerate(names):
            if n in seen:
                raise ValueError(f"joint name {n!r} is used twice (joints {seen[n]} and {j})")
            seen[n] = j
        J = len(names)
        for j, p in enumerate(parents):
            if p == j:
                raise ValueError(f"joint {j} ({names[j]!r}) is its own parent")
            if not -1 <= p < J:
                raise ValueError(
                    f"joint {j} ({names[j]!r}) has parent index {p}, expected -1 or 0..{J - 1}"
                )
        roots = [j for j, p in enumerate(parents) if p == -1]
        if len(roots) != 1:
            listed = ", ".join(f"{j} ({names[j]!r})" for j in roots) or "none"
            raise ValueError(f"a skeleton needs exactly one root (parent -1), found: {listed}")
        depth = [0] * J
        for j in range(J):
            k, visited = j, set()
            while parents[k] != -1:
                if k in visited:
                    raise ValueError(f"joint {k} ({names[k]!r}) is in a cycle of parents")
                visited.add(k)
                k = parents[k]
                depth[j] += 1

        pairs: list[tuple[int, int]] = []
        used: dict[int, int] = {}
        for pair in flip_pairs:
            if len(pair) != 2:
                raise ValueError(f"flip pair {pair!r} must have two joints")
            a, b = (self._index(x, names, seen, "flip_pairs") for x in pair)
            if a == b:
                raise ValueError(
                    f"flip pair ({names[a]!r}, {names[b]!r}) pairs a joint with itself"
                )
            for x in (a, b):
                if x in used:
                    raise ValueError(f"joint {x} ({names[x]!r}) appears in more than one flip pair")
                used[x] = len(pairs)
            pairs.append((a, b))

        self.names = names
        self.parents = parents
        self.flip_pairs = tuple(pairs)
        self.name = name
        self.depth = tuple(depth)
        self.root = roots[0]
        # Derived once here (plain attributes, so torch.compile traces through them freely).
        self.bones = self._bones()
        self.levels = self._levels()
        self.flip_index = self._flip_index()
        self.ancestor_matrix = self._ancestor_matrix()
        self._cache: dict[tuple, object] = {}

    @staticmethod
    def _index(x: int | str, names: tuple[str, ...], lookup: dict[str, int], arg: str) -> int:
        if isinstance(x, str):
            if x not in lookup:
                raise ValueError(f"{arg}: unknown joint name {x!r}")
            return lookup[x]
        if not 0 <= int(x) < len(names):
            raise ValueError(f"{arg}: joint index {x} out of range 0..{len(names) - 1}")
        return int(x)

    # ------------------------------------------------------------------ plain derived data
    @property
    def num_joints(self) -> int:
        return len(self.names)

    @property
    def num_bones(self) -> int:
        return len(self.names) - 1

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"Skeleton({label}J={self.num_joints}, flip_pairs={len(self.flip_pairs)})"

    def index(self, name: str) -> int:
        """Index of a joint by name; ``ValueError`` naming the joint if absent."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"skeleton {self.name or ''} has no joint named {name!r}") from None

    def _bones(self) -> tuple[tuple[int, int], ...]:
        """``S = J - 1`` rows of ``(parent, child)``, children in ascending joint index."""
        return tuple((p, j) for j, p in enumerate(self.parents) if p != -1)

    def _levels(self) -> tuple[tuple[int, ...], ...]:
        """Joint indices grouped by depth: ``levels[0] == (root,)``."""
        out: list[list[int]] = [[] for _ in range(max(self.depth) + 1)]
        for j, d in enumerate(self.depth):
            out[d].append(j)
        return tuple(tuple(level) for level in out)

    def _flip_index(self) -> tuple[int, ...]:
        """Joint permutation of a mirror: ``mirrored[..., j] = joints[..., flip_index[j]]``."""
        perm = list(range(self.num_joints))
        for a, b in self.flip_pairs:
            perm[a], perm[b] = b, a
        return tuple(perm)

    def _ancestor_matrix(self) -> tuple[tuple[int, ...], ...]:
        """``(J, J)`` 0/1 rows: ``A[j][k] = 1`` when ``k`` is ``j`` or one of its ancestors."""
        rows = []
        for j in range(self.num_joints):
            row = [0] * self.num_joints
            k = j
            while k != -1:
                row[k] = 1
                k = self.parents[k]
            rows.append(tuple(row))
        return tuple(rows)

    # ------------------------------------------------------------------ cached tensors
    def tensor(
        self, key: str, device: torch.device | str | None = None, dtype=None
    ) -> torch.Tensor:
        """A derived index or matrix tensor on ``device``, built once and cached.

        Keys: ``"parents"``/``"children"`` (S,) bone end joints; ``"flip_index"`` (J,);
        ``"ancestors"`` (J, J); ``"path"`` (J, S): ``path[j, s] = 1`` when bone ``s`` lies on
        the root-to-``j`` path. Integer keys ignore ``dtype``; matrices default to float32.
        """
        device = torch.device("cpu") if device is None else torch.device(device)
        ck = (key, device, dtype)
        t = self._cache.get(ck)
        if t is None:
            t = self._build(key, dtype).to(device)
            self._cache[ck] = t
        return t

    def _build(self, key: str, dtype) -> torch.Tensor:
        long = torch.long
        if key == "parents":
            return torch.tensor([p for p, _ in self.bones], dtype=long)
        if key == "children":
            return torch.tensor([c for _, c in self.bones], dtype=long)
        if key == "flip_index":
            return torch.tensor(self.flip_index, dtype=long)
        if key == "ancestors":
            return torch.tensor(self.ancestor_matrix, dtype=dtype or torch.float32)
        if key == "path":
            anc = torch.tensor(self.ancestor_matrix, dtype=dtype or torch.float32)
            return anc[:, [c for _, c in self.bones]]
        raise KeyError(f"unknown skeleton tensor {key!r}")

    def compose_matrix(self, dim: int, device, dtype) -> torch.Tensor:
        """``(S*D, J*D)`` matrix ``kron(path.T, I_D)``: flat bones -> flat joints (root at 0)."""
        ck = ("compose", dim, torch.device(device), dtype)
        t = self._cache.get(ck)
        if t is None:
            path = self.tensor("path", "cpu", torch.float64)
            t = torch.kron(path.T.contiguous(), torch.eye(dim, dtype=torch.float64)).to(
                device, dtype
            )
            self._cache[ck] = t
        return t

    def bone_matrix(self, dim: int, device, dtype) -> torch.Tensor:
        """``(J*D, S*D)`` incidence matrix: flat joints -> flat bone vectors (child - parent)."""
        ck = ("bones", dim, torch.device(device), dtype)
        t = self._cache.get(ck)
        if t is None:
            inc = torch.zeros(self.num_joints, self.num_bones, dtype=torch.float64)
            for s, (p, c) in enumerate(self.bones):
                inc[c, s] += 1.0
                inc[p, s] -= 1.0
            t = torch.kron(inc, torch.eye(dim, dtype=torch.float64)).to(device, dtype)
            self._cache[ck] = t
        return t

    def bone_sum_matrix(self, dim: int, device, dtype) -> torch.Tensor:
        """``(S*D, S)`` 0/1 matrix summing each bone's ``D`` flat coordinates."""
        ck = ("bone_sum", dim, torch.device(device), dtype)
        t = self._cache.get(ck)
        if t is None:
            t = torch.kron(torch.eye(self.num_bones), torch.ones(dim, 1)).to(device, dtype)
            self._cache[ck] = t
        return t

    # ------------------------------------------------------------------ helpers
    def subset(self, keep: Sequence[int | str]) -> Skeleton:
        """The skeleton restricted to ``keep`` (each kept joint re-parented to its nearest kept
        ancestor); flip pairs with both ends kept survive."""
        lookup = {n: i for i, n in enumerate(self.names)}
        idx = [self._index(k, self.names, lookup, "keep") for k in keep]
        pos = {j: i for i, j in enumerate(idx)}
        parents = []
        for j in idx:
            p = self.parents[j]
            while p != -1 and p not in pos:
                p = self.parents[p]
            parents.append(pos[p] if p != -1 else -1)
        pairs = [(pos[a], pos[b]) for a, b in self.flip_pairs if a in pos and b in pos]
        return Skeleton([self.names[j] for j in idx], parents, pairs, name=self.name)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Skeleton)
            and self.names == other.names
            and self.parents == other.parents
            and self.flip_pairs == other.flip_pairs
        )

    def __hash__(self) -> int:
        return hash((self.names, self.parents, self.flip_pairs))


# ---------------------------------------------------------------------- built-in skeletons
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


def skeleton_names() -> list[str]:
    """Names accepted by :func:`get_skeleton`."""
    return sorted(_BUILTINS)


def get_skeleton(name: str) -> Skeleton:
    """A built-in skeleton by name (one shared instance per name, so its tensor cache is reused).

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    if name not in _BUILTINS:
        raise InputError(f"unknown skeleton {name!r}; known: {', '.join(skeleton_names())}")
    if name not in _INSTANCES:
        _INSTANCES[name] = _BUILTINS[name]()
    return _INSTANCES[name]
