"""Motion capture -> 2D/3D training data for pose lifting, assembled on the device.

The path of one batch:

1. :func:`load_lifting_split` (BVH through :func:`load_bvh_sequences`, or :func:`load_npz`):
   files -> :class:`MocapSequence` world positions ``(T, J, 3)`` in metres, Y up, subsampled to
   the requested frame rate (or per-camera 2D/3D clips from an npz file).
2. :meth:`LiftingSet.from_world`: each sequence seen by ``cameras`` virtual cameras
   (:func:`tensorpose.ops.camera.virtual_cameras`, fixed per sequence-camera pair by a seed):
   3D joints -> camera coordinates (root-relative targets) and -> pixels. All clips are
   concatenated into flat frame tensors once.
3. :meth:`LiftingSet.batch`: for ``B`` target frames, the window indices of every frame are
   computed by tensor arithmetic from per-frame ``(clip start, clip length, position)`` tables
   (edge padding = clamping to the clip), gathered in one ``index_select``, flipped left/right
   for a random subset (2D and 3D together, joints swapped), and screen-normalised. No Python loop
   over samples or windows; everything stays on the tensors' device.

Splits are by sequence (whole files or npz subject/action entries), never by frame.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError, MissingFileError
from ..io.safe_pickle import load_npz as safe_npz
from ..ops.camera import (
    H36M_FOCAL,
    intrinsic_matrix,
    normalize_screen,
    project,
    virtual_cameras,
    world_to_camera,
)
from ..ops.poseaug_cameras import normalize_with_intrinsics
from ..skeleton import Skeleton

__all__ = [
    "CameraSpec",
    "Clip",
    "LiftingSet",
    "MocapSequence",
    "available_bvh",
    "load_bvh_sequences",
    "load_lifting_split",
    "load_npz",
    "read_npz",
    "resolve_bvh",
]

ASSET_MOCAP = Path(__file__).resolve().parent.parent / "assets" / "mocap"


@dataclass
class MocapSequence:
    """World-coordinate motion: ``positions (T, J, 3)`` metres, Y up, at ``fps``; ``kind``:
    its motion kind (:func:`tensorpose.data.takes.kind_of`); ``take``: the entry it was read
    from as the recipe lists it (a bundled stem, or the path a pattern expanded to)."""

    name: str
    positions: torch.Tensor
    fps: float
    kind: str = "other"
    take: str = ""


@dataclass(frozen=True)
class CameraSpec:
    """How virtual cameras are drawn (see :func:`tensorpose.ops.camera.virtual_cameras`).

    ``distance`` is measured from the subject's path: a camera sits ``d + r`` from the centre of
    the path, where ``r`` is the path's horizontal radius, so the subject never walks closer
    than about ``d``. The intrinsics are a Human3.6M-like pinhole (focal 1145 px) on a
    ``width x height`` image with the principal point at the centre (so a left/right flip of the
    normalised 2D is exactly the image of the mirrored 3D pose).
    """

    width: int = 1000
    height: int = 1000
    focal: float = H36M_FOCAL
    elevation_deg: tuple[float, float] = (-10.0, 30.0)
    distance_m: tuple[float, float] = (3.0, 6.0)

    def K(self, dtype=torch.float32) -> torch.Tensor:
        return intrinsic_matrix(self.focal, (self.width / 2, self.height / 2), dtype=dtype)


@dataclass(frozen=True)
class Clip:
    """One sequence seen by one camera: frames ``start .. start + length`` of a
    :class:`LiftingSet`."""

    name: str
    camera: int
    start: int
    length: int


# ---------------------------------------------------------------------- loading
def available_bvh() -> dict[str, Path]:
    """Bundled BVH files by stem, including the subfolders of ``assets/mocap``."""
    return {p.stem: p for p in sorted(ASSET_MOCAP.rglob("*.bvh"))}


def resolve_bvh(name: str | Path) -> Path:
    """A path to an existing file, or the stem of a bundled file (e.g. ``"131_03"``)."""
    p = Path(name)
    if p.is_file():
        return p
    bundled = available_bvh()
    if str(name) in bundled:
        return bundled[str(name)]
    raise MissingFileError(
        f"BVH file {str(name)!r} not found (neither a file nor a bundled name; bundled: "
        f"{', '.join(bundled)})"
    )


def load_bvh_sequences(
    names: Sequence[str | Path],
    mapping: str | None = None,
    fps: float = 30.0,
    *,
    units: str = "",
    frame_rates: Sequence[str] = (),
    kinds: Sequence[str] = (),
    character: str = "",
    exclude: Sequence[str | Path] = (),
) -> tuple[list[MocapSequence], Skeleton]:
    """Load mocap takes (BVH files, DeepMimic motions; paths, glob patterns or bundled stems)
    mapped to the target skeleton (``h36m17``), in metres, Y up, each resampled to ``fps`` on
    its own time axis (:mod:`tensorpose.data.takes`; 120 fps files at 30 fps keep every 4th
    frame).

    Args:
        names: paths, glob patterns or bundled stems.
        mapping: a shipped BVH mapping name or ``None`` to detect it per file. Unknown names
            raise ``ValueError`` listing the known ones.
        units: the BVH files' length unit (``--units`` / ``data.units``); empty: detect.
        frame_rates: ``"glob=fps"`` rules: true frame rates where a header is wrong.
        kinds: ``"kind=glob"`` rules giving each sequence's ``kind``.
        character: a DeepMimic character file (empty: found next to the motions).
        exclude: entries (as ``names``) whose takes are left out, e.g. the held-out ones.
    """
    from .takes import expand_entries, read_take

    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    seqs, skeleton = [], None
    held_out = {resolve_bvh(t.path).resolve() for t in expand_entries(exclude)}
    for take in expand_entries(names, kinds):  # one file at a time
        path = resolve_bvh(take.path)
        if path.resolve() in held_out:
            continue
        pos, _, sk = read_take(path, fps, mapping, units, frame_rates, character, take.path)
        if skeleton is not None and sk != skeleton:
            raise InputError(f"{path}: maps to skeleton {sk.name!r}, not {skeleton.name!r}")
        seqs.append(MocapSequence(_seq_name(path), pos.float(), fps, take.kind, take.path))
        skeleton = sk
    if skeleton is None:
        if held_out:
            raise ValueError(f"every take of {list(map(str, names))} is held out (excluded)")
        raise ValueError("no BVH files given")
    return seqs, skeleton


def _seq_name(path: Path) -> str:
    """A sequence's name: the file stem, with its folder where stems repeat across folders
    (``salsa/01``, ``martial/03``); bundled files keep their stem (``131_03``)."""
    if path.resolve().is_relative_to(ASSET_MOCAP):
        return path.stem
    return f"{path.parent.name}/{path.stem}"


def _rotate_z_up(x: np.ndarray) -> np.ndarray:
    """Z-up world coordinates to Y-up (x, y, z) -> (x, z, -y)."""
    return np.stack([x[..., 0], x[..., 2], -x[..., 1]], -1)


def read_npz(path: str | Path) -> tuple[dict, dict | None]:
    """The ``positions_3d`` and optional ``positions_2d`` dicts of a VideoPose3D-layout ``.npz``
    file (the only place that opens one), read by :func:`tensorpose.io.safe_pickle.load_npz`.

    Raises:
        ValueError: the file cannot be read as ``.npz`` or has no ``positions_3d`` (named).
    """
    path = Path(path)
    data = safe_npz(path)  # object arrays through the restricted unpickler: no code runs
    if "positions_3d" not in data:
        raise InputError(f"{path}: no 'positions_3d' array (keys: {sorted(data.keys())})")
    p3d = data["positions_3d"].item()
    p2d = data["positions_2d"].item() if "positions_2d" in data else None
    return p3d, p2d


def load_npz(
    path: str | Path,
    skeleton: Skeleton,
    entries: Sequence[str] | None = None,
    up_axis: str = "y",
) -> tuple[list[MocapSequence], list[tuple[str, torch.Tensor, torch.Tensor]]]:
    """Read 2D/3D arrays in VideoPose3D's ``.npz`` layout.

    - ``positions_3d[subject][action]``: ``(T, J, 3)`` world coordinates in metres (``up_axis``
      ``"y"`` or ``"z"``; Z-up data is rotated to Y-up), used with virtual cameras; or
      ``(C, T, J, 3)`` / a list of ``C`` arrays already in each camera's coordinates.
    - optional ``positions_2d[subject][action][camera]``: ``(T, J, 2)`` pixels. When present,
      2D inputs come from the file and ``positions_3d`` must be per camera (as after
      VideoPose3D's world-to-camera step); a single world array with 2D raises ``ValueError``.

    Args:
        entries: ``"subject"`` (all its actions) or ``"subject/action"``; ``None`` takes all.

    Returns:
        ``(world_sequences, camera_clips)``: world sequences (for virtual cameras) and clips
        ``(name, pixels (T, J, 2), joints_camera (T, J, 3))``. Frames with NaN are kept; see
        :meth:`LiftingSet.from_arrays`.
    """
    path = Path(path)
    if up_axis not in ("y", "z"):
        raise ValueError(f"up_axis must be 'y' or 'z', got {up_axis!r}")
    p3d, p2d = read_npz(path)
    world, clips = [], []
    for subject, action in _select_entries(p3d, entries, path):
        where = f"{path}: positions_3d[{subject!r}][{action!r}]"
        arr3 = _joints_3d(p3d[subject][action], skeleton, where)
        if p2d is None:
            world.append(_world_sequence(f"{subject}/{action}", arr3, up_axis, where))
        else:
            clips += _camera_clips(path, subject, action, arr3, p2d, skeleton.num_joints)
    return world, clips


def _joints_3d(arr3, skeleton: Skeleton, where: str) -> np.ndarray:
    """One ``positions_3d`` entry as float64 ``(T, J, 3)`` or ``(C, T, J, 3)``."""
    if isinstance(arr3, (list, tuple)):
        arr3 = np.stack([np.asarray(a) for a in arr3])
    arr3 = np.asarray(arr3, dtype=np.float64)
    J = skeleton.num_joints
    if arr3.ndim not in (3, 4) or arr3.shape[-2:] != (J, 3):
        raise InputError(
            f"{where} must have shape (T, {J}, 3) or (C, T, {J}, 3) for skeleton "
            f"{skeleton.name or J}, got {arr3.shape}"
        )
    return arr3


def _world_sequence(name: str, arr3: np.ndarray, up_axis: str, where: str) -> MocapSequence:
    """A world-coordinate entry (no 2D in the file) -> a sequence for virtual cameras."""
    if arr3.ndim == 4:
        raise InputError(
            f"{where} is per camera (C, T, J, 3) but there is no positions_2d to go with it"
        )
    if up_axis == "z":
        arr3 = _rotate_z_up(arr3)
    return MocapSequence(name, torch.from_numpy(arr3).float(), float("nan"))


def _camera_clips(
    path: Path, subject: str, action: str, arr3: np.ndarray, p2d: dict, J: int
) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """A per-camera entry with its 2D -> one ``(name, pixels, joints_camera)`` clip per camera,
    each trimmed to the shorter of its 2D and 3D (as VideoPose3D does)."""
    try:
        cams2d = p2d[subject][action]
    except (KeyError, TypeError):
        raise InputError(f"{path}: positions_2d has no entry [{subject!r}][{action!r}]") from None
    if arr3.ndim == 3:
        raise InputError(
            f"{path}: positions_3d[{subject!r}][{action!r}] is one world-coordinate array but "
            f"positions_2d has {len(cams2d)} cameras: give per-camera 3D (C, T, J, 3) in "
            "camera coordinates, or drop positions_2d to use virtual cameras"
        )
    if len(cams2d) != arr3.shape[0]:
        raise InputError(
            f"{path}: [{subject!r}][{action!r}] has {len(cams2d)} 2D cameras but "
            f"{arr3.shape[0]} 3D cameras"
        )
    clips = []
    for c, kp in enumerate(cams2d):  # a handful of cameras per entry
        kp = np.asarray(kp, dtype=np.float64)
        if kp.ndim != 3 or kp.shape[1:] != (J, 2):
            raise InputError(
                f"{path}: positions_2d[{subject!r}][{action!r}][{c}] must have shape "
                f"(T, {J}, 2), got {kp.shape}"
            )
        T = min(len(kp), arr3.shape[1])
        name = f"{subject}/{action}/cam{c}"
        clips.append(
            (name, torch.from_numpy(kp[:T]).float(), torch.from_numpy(arr3[c, :T]).float())
        )
    return clips


def _select_entries(p3d: dict, entries: Sequence[str] | None, path: Path) -> list[tuple[str, str]]:
    if not isinstance(p3d, dict):
        raise InputError(f"{path}: positions_3d must be a dict of subjects")
    if entries is None:
        return [(s, a) for s in p3d for a in p3d[s]]
    out = []
    for e in entries:
        subject, _, action = str(e).partition("/")
        if subject not in p3d:
            raise InputError(f"{path}: unknown subject {subject!r}; subjects: {sorted(p3d)}")
        if action:
            if action not in p3d[subject]:
                raise InputError(
                    f"{path}: subject {subject!r} has no action {action!r}; actions: "
                    f"{sorted(p3d[subject])}"
                )
            out.append((subject, action))
        else:
            out += [(subject, a) for a in p3d[subject]]
    return out


def load_lifting_split(
    entries: Sequence[str | Path],
    skeleton: Skeleton,
    cameras: int,
    spec: CameraSpec | None = None,
    *,
    source: str = "bvh",
    npz: str | Path = "",
    mapping: str | None = None,
    fps: float = 30.0,
    up_axis: str = "y",
    seed: int = 0,
    **takes,
) -> LiftingSet:
    """One split of lifting data (training, validation, evaluation): BVH files or bundled names
    (``source="bvh"``), or ``subject[/action]`` entries of the ``npz`` file, as a
    :class:`LiftingSet`. World-coordinate motion is seen by ``cameras`` virtual cameras drawn
    from ``spec`` and ``seed``; per-camera npz entries bring their own 2D.

    Args:
        mapping: BVH joint-name mapping (``None`` or ``""``: detect per file).
        fps: BVH frame rate after subsampling.
        up_axis: up axis of world-coordinate npz data.
        takes: ``units``, ``frame_rates``, ``kinds``, ``character`` of
            :func:`load_bvh_sequences`.

    Raises:
        ValueError: the BVH mapping's skeleton is not ``skeleton``; see also
            :func:`load_npz`.
    """
    if source == "npz":  # world sequences, or (with positions_2d) per-camera clips
        world, clips = load_npz(npz, skeleton, entries, up_axis)
        if clips:
            spec = spec or CameraSpec()
            return LiftingSet.from_arrays(clips, skeleton, spec.width, spec.height)
        return LiftingSet.from_world(world, skeleton, cameras, seed, spec)
    if source != "bvh":
        raise ValueError(f"source must be 'bvh' or 'npz', got {source!r}")
    seqs, bvh_skeleton = load_bvh_sequences(entries, mapping, fps, **takes)
    if bvh_skeleton != skeleton:
        raise ValueError(
            f"the BVH mapping produces skeleton {bvh_skeleton.name!r} but the model's skeleton "
            f"is {skeleton.name!r}"
        )
    return LiftingSet.from_world(seqs, skeleton, cameras, seed, spec)


# ---------------------------------------------------------------------- the tensor set
def _camera_seed(seed: int, name: str, camera: int) -> int:
    """A stable seed per (seed, sequence name, camera index) (crc32, not Python's hash)."""
    return zlib.crc32(f"{seed}:{name}:{camera}".encode())


def _fill_invalid(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Replace frames where ``valid`` is False by the nearest earlier valid frame (or the first
    valid one for leading gaps). ``x (T, ...)``, ``valid (T,)``."""
    T = valid.shape[0]
    idx = torch.arange(T)
    last = torch.where(valid, idx, torch.full_like(idx, -1)).cummax(0).values
    first = int(valid.nonzero()[0, 0])
    last = torch.where(last < 0, torch.full_like(last, first), last)
    return x.index_select(0, last)


class LiftingSet:
    """All frames of all clips as flat tensors, ready for window gathers.

    Attributes:
        pixels: ``(N, J, 2)`` 2D keypoints in pixels.
        targets: ``(N, J, 3)`` root-relative 3D joints in camera coordinates (metres).
        valid: ``(N,)`` frames usable as targets (finite 2D and 3D in the source).
        clip_start, clip_length, position: ``(N,)`` per-frame clip tables for window indexing.
        target_frames: ``(M,)`` indices of valid frames (what training samples from).
        clips: one :class:`Clip` per sequence-camera pair.
    """

    def __init__(
        self,
        pixels: torch.Tensor,
        targets: torch.Tensor,
        valid: torch.Tensor,
        clips: list[Clip],
        skeleton: Skeleton,
        width: int,
        height: int,
        fps: float = float("nan"),
        intrinsics: torch.Tensor | None = None,
    ) -> None:
        self.pixels, self.targets, self.valid = pixels, targets, valid
        if intrinsics is not None and tuple(intrinsics.shape) != (3, 3):
            raise ValueError(f"intrinsics must have shape (3, 3), got {tuple(intrinsics.shape)}")
        self.intrinsics = None if intrinsics is None else intrinsics.to(pixels)
        self.clips, self.skeleton = clips, skeleton
        self.width, self.height, self.fps = width, height, fps
        lengths = torch.tensor([c.length for c in clips], dtype=torch.long)
        starts = torch.tensor([c.start for c in clips], dtype=torch.long)
        self.clip_start = starts.repeat_interleave(lengths).to(pixels.device)
        self.clip_length = lengths.repeat_interleave(lengths).to(pixels.device)
        self.position = torch.arange(len(pixels), device=pixels.device) - self.clip_start
        self.target_frames = valid.nonzero()[:, 0]
        self.flip_index = skeleton.tensor("flip_index", pixels.device)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls,
        clips: Sequence[tuple[str, torch.Tensor, torch.Tensor]],
        skeleton: Skeleton,
        width: int,
        height: int,
        fps: float = float("nan"),
        cameras: Sequence[int] | None = None,
    ) -> LiftingSet:
        """Clips ``(name, pixels (T, J, 2), joints_camera (T, J, 3))`` -> one set.

        NaN/inf handling (documented behaviour): a frame with any non-finite 2D or 3D value is
        marked invalid; it is never a training target nor evaluated, and its values are replaced
        by the nearest earlier valid frame so that windows around it stay finite. A clip with no
        valid frame raises ``ValueError``.
        """
        J = skeleton.num_joints
        px, tg, va, out = [], [], [], []
        start = 0
        for i, (name, kp, j3) in enumerate(clips):
            if kp.dim() != 3 or kp.shape[1:] != (J, 2):
                raise ValueError(
                    f"clip {name}: 2D must have shape (T, {J}, 2), got {tuple(kp.shape)}"
                )
            if j3.dim() != 3 or j3.shape[1:] != (J, 3):
                raise ValueError(
                    f"clip {name}: 3D must have shape (T, {J}, 3), got {tuple(j3.shape)}"
                )
            if len(kp) != len(j3) or len(kp) == 0:
                raise ValueError(f"clip {name}: 2D has {len(kp)} frames, 3D has {len(j3)}")
            ok = torch.isfinite(kp).flatten(1).all(1) & torch.isfinite(j3).flatten(1).all(1)
            if not bool(ok.any()):
                raise ValueError(f"clip {name}: every frame has NaN or inf values")
            if not bool(ok.all()):
                kp, j3 = _fill_invalid(kp, ok), _fill_invalid(j3, ok)
            root = skeleton.root
            px.append(kp.float())
            tg.append((j3 - j3[:, root : root + 1]).float())
            va.append(ok)
            cam = cameras[i] if cameras is not None else 0
            out.append(Clip(name, cam, start, len(kp)))
            start += len(kp)
        if not out:
            raise ValueError("no clips given")
        return cls(torch.cat(px), torch.cat(tg), torch.cat(va), out, skeleton, width, height, fps)

    @classmethod
    def from_world(
        cls,
        sequences: Sequence[MocapSequence],
        skeleton: Skeleton,
        cameras: int,
        seed: int = 0,
        spec: CameraSpec | None = None,
    ) -> LiftingSet:
        """Each world sequence seen by ``cameras`` virtual cameras.

        Camera ``c`` of sequence ``name`` is drawn from a generator seeded by
        ``crc32(f"{seed}:{name}:{c}")``: the same pair always gets the same camera, whatever
        else is in the set. Azimuth all round, elevation and distance from ``spec``; every
        camera looks at the centre of the subject's path at mean pelvis height.
        """
        spec = spec or CameraSpec()
        if cameras < 1:
            raise ValueError(f"cameras must be >= 1, got {cameras}")
        J = skeleton.num_joints
        K = spec.K(torch.float64)
        clips, cams = [], []
        for seq in sequences:  # per sequence (a handful of files), not per sample
            pos = seq.positions.to(torch.float64)
            if pos.dim() != 3 or pos.shape[1:] != (J, 3):
                raise ValueError(
                    f"sequence {seq.name}: positions must have shape (T, {J}, 3), got "
                    f"{tuple(pos.shape)}"
                )
            ok = torch.isfinite(pos).flatten(1).all(1)
            if not bool(ok.any()):
                raise ValueError(f"sequence {seq.name}: every frame has NaN or inf values")
            root = pos[ok][:, skeleton.root]  # (T, 3)
            lo, hi = root.min(0).values, root.max(0).values
            centre = (lo + hi) / 2
            centre[1] = root[:, 1].mean()
            radius = float(torch.linalg.vector_norm((root - centre)[:, [0, 2]], dim=-1).max())
            d0, d1 = spec.distance_m
            Rs, ts = [], []
            for c in range(cameras):
                g = torch.Generator().manual_seed(_camera_seed(seed, seq.name, c))
                cam = virtual_cameras(
                    1,
                    g,
                    centre,
                    elevation=tuple(math.radians(e) for e in spec.elevation_deg),
                    distance=(d0 + radius, d1 + radius),
                )
                Rs.append(cam["R"][0])
                ts.append(cam["t"][0])
            R = torch.stack(Rs)[:, None]  # (C, 1, 3, 3)
            t = torch.stack(ts)[:, None]  # (C, 1, 3)
            pc = world_to_camera(pos.nan_to_num(0.0).unsqueeze(0), R, t)  # (C, T, J, 3)
            px = project(pc, K)
            pc = torch.where(ok[None, :, None, None], pc, torch.nan)
            for c in range(cameras):
                clips.append((seq.name, px[c], pc[c]))
                cams.append(c)
        fps = sequences[0].fps if sequences else float("nan")
        return cls.from_arrays(clips, skeleton, spec.width, spec.height, fps, cams)

    def to(self, device: torch.device | str) -> LiftingSet:
        """The same set with its tensors on ``device``."""
        out = LiftingSet(
            self.pixels.to(device),
            self.targets.to(device),
            self.valid.to(device),
            self.clips,
            self.skeleton,
            self.width,
            self.height,
            self.fps,
            self.intrinsics,
        )
        return out

    def with_intrinsics(self, K: torch.Tensor | None) -> LiftingSet:
        """The same set whose 2D inputs are normalised as ``K^-1 [u, v, 1]`` with ``K (3, 3)``
        (the cameras' intrinsics); ``None``: screen normalisation by the image width."""
        return LiftingSet(self.pixels, self.targets, self.valid, self.clips, self.skeleton,
                          self.width, self.height, self.fps, K)  # fmt: skip

    def normalize(self, pixels: torch.Tensor) -> torch.Tensor:
        """2D inputs of the model from ``pixels (..., J, 2)``: ``K^-1 [u, v, 1]`` when the set
        has ``intrinsics``, else VideoPose3D screen normalisation by the image width."""
        if self.intrinsics is not None:
            return normalize_with_intrinsics(pixels, self.intrinsics)
        return normalize_screen(pixels, self.width, self.height)

    def __len__(self) -> int:
        return int(self.target_frames.numel())

    def mean_pose(self) -> torch.Tensor:
        """Mean root-relative target over valid frames ``(J, 3)`` (the trivial baseline)."""
        return self.targets[self.target_frames].mean(0)

    # ------------------------------------------------------------------ batches
    def window_indices(self, frames: torch.Tensor, receptive_field: int) -> torch.Tensor:
        """``(B, receptive_field)`` flat frame indices of the windows centred on ``frames (B,)``,
        clamped to each frame's clip (edge padding), by broadcasting arithmetic."""
        half = receptive_field // 2
        offsets = torch.arange(-half, receptive_field - half, device=frames.device)
        pos = self.position[frames].unsqueeze(1) + offsets  # (B, R)
        last = (self.clip_length[frames] - 1).unsqueeze(1)
        pos = torch.minimum(pos.clamp_min(0), last)
        return self.clip_start[frames].unsqueeze(1) + pos

    def batch(
        self,
        frames: torch.Tensor,
        receptive_field: int,
        flip_prob: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> dict[str, torch.Tensor]:
        """Assemble a training batch for target ``frames (B,)`` (flat indices).

        Returns ``keypoints (B, R, J, 2)`` normalised windows (:meth:`normalize`) and
        ``target (B, 1, J, 3)``.
        With ``flip_prob > 0`` a random subset (drawn with ``generator`` on the set's device) is
        mirrored: normalised x and camera X negated, left/right joints swapped, 2D and 3D
        together.
        """
        B = frames.shape[0]
        idx = self.window_indices(frames, receptive_field)  # (B, R)
        kp = self.pixels.index_select(0, idx.reshape(-1)).reshape(B, receptive_field, -1, 2)
        kp = self.normalize(kp)
        target = self.targets.index_select(0, frames).unsqueeze(1)  # (B, 1, J, 3)
        if flip_prob > 0:
            flip = torch.rand(B, device=frames.device, generator=generator) < flip_prob
            kp_f = kp.index_select(2, self.flip_index) * kp.new_tensor([-1.0, 1.0])
            tg_f = target.index_select(2, self.flip_index) * target.new_tensor([-1.0, 1.0, 1.0])
            kp = torch.where(flip[:, None, None, None], kp_f, kp)
            target = torch.where(flip[:, None, None, None], tg_f, target)
        return {"keypoints": kp, "target": target}

    def clip_arrays(self, i: int) -> dict[str, torch.Tensor]:
        """Clip ``i``: ``keypoints (T, J, 2)`` normalised, ``target (T, J, 3)``, ``valid (T,)``."""
        c = self.clips[i]
        sl = slice(c.start, c.start + c.length)
        kp = self.normalize(self.pixels[sl])
        return {"keypoints": kp, "target": self.targets[sl], "valid": self.valid[sl]}

    def clip_groups(self) -> list[list[int]]:
        """Clip indices grouped by (name, length): the cameras of one sequence, which can be
        predicted as one batch."""
        groups: dict[tuple[str, int], list[int]] = {}
        for i, c in enumerate(self.clips):
            groups.setdefault((c.name, c.length), []).append(i)
        return list(groups.values())
