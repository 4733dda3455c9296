"""Skeleton: a joint tree (names, parents in any order, left/right flip pairs) and the index
tensors the kinematics ops need, derived once and cached per device and dtype."""

from __future__ import annotations

from collections.abc import Sequence

import torch


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
