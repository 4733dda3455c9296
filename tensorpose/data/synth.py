"""Synthetic lifting batches from mocap, assembled on the device with kinematic augmentation.

The path of one batch (all tensor ops on the generator's device, no Python loop over samples):

1. :class:`SyntheticLiftingBatches` draws ``B`` window centres uniformly over all frames of all
   sequences, a playback speed and a small clock jitter per window
   (:func:`~tensorpose.ops.poseaug_detector.window_positions`), and interpolates the ``R``
   frames of each window linearly between the two nearest mocap frames (clamped to its
   sequence).
2. :class:`KinematicAugmenter` turns the world windows into a batch, with ONE set of random
   parameters per window (constant over its frames; the pose still moves as recorded):

   - bone lengths: the sequence's mean bone lengths x a global scale x one scale per bone group
     (left = right), so bone lengths are constant in time;
   - local joint rotations within anatomical limits: computed on the centre frame
     (:func:`~tensorpose.ops.poseaug_joints.joint_rotations`, so the target pose is exactly
     within the limits) and applied to every frame of the window
     (:func:`~tensorpose.ops.poseaug_joints.apply_rotations`);
   - detector-like keypoints in 3D: systematic offsets in the centre frame's body frames
     (:data:`~tensorpose.ops.poseaug_detector.H36M17_DETECTOR_OFFSETS`), then the joints a
     detector does not give recomputed from those it gives
     (:data:`~tensorpose.ops.poseaug_detector.H36M17_DETECTOR_RULES`);
   - a global rotation about the vertical through the centre frame's root (any yaw, small
     pitch/roll), then a random camera
     (:func:`~tensorpose.ops.poseaug_cameras.sample_cameras`: image size incl. portrait, field
     of view, principal point, distance, elevation, roll, off-centre aim), pushed back along
     its axis where needed so every keypoint of the window stays in the image
     (:func:`~tensorpose.ops.poseaug_cameras.fit_in_frame`);
   - 2D: Gaussian pixel noise scaled with the person's height in the image (heavier at wrists
     and ankles), rare outliers, a left/right mirror of 2D and 3D together, dropped joints;
   - normalisation: ``K^-1 [u, v, 1]`` (``normalize="intrinsics"``, camera-independent:
     computed directly as ``(x/z, y/z) + noise / focal``, which equals
     :func:`~tensorpose.ops.poseaug_cameras.normalize_with_intrinsics` of the noisy pixels for these
     skew-free cameras) or VideoPose3D's screen normalisation by the image width
     (``"screen"``).

The batch contract is the lifting task's: ``keypoints (B, R, J, 2)``, ``target (B, 1, J, 3)``
(root-relative joints of the centre frame, camera coordinates, metres) plus ``mask (B, R, J)``
(bool, True where a keypoint was dropped and its two coordinates set to ``fill``). The target
is always the mocap joint centres: offsets, noise and dropping touch only the 2D input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..ops.kinematics import bone_lengths as _bone_lengths
from ..ops.poseaug_bones import (
    H36M17_BONE_GROUPS,
    bone_scales,
    sample_bone_scales,
    set_bone_lengths,
)
from ..ops.poseaug_cameras import (
    fit_in_frame,
    global_rotation,
    sample_cameras,
    sample_global_angles,
)
from ..ops.poseaug_detector import (
    H36M17_DETECTOR_OFFSETS,
    H36M17_DETECTOR_RULES,
    H36M17_NOISE_SCALE,
    DetectorOffset,
    derive_joints,
    detector_offsets,
    drop_joints,
    keypoint_noise,
    sample_detector_offsets,
    window_positions,
)
from ..ops.poseaug_frames import H36M17_FRAMES
from ..ops.poseaug_joints import (
    H36M17_LIMITS,
    JointLimit,
    apply_rotations,
    joint_rotations,
    sample_joint_angles,
)
from ..skeleton import Skeleton

__all__ = ["KinematicAugmenter", "SynthConfig", "SyntheticLiftingBatches"]


@dataclass(frozen=True)
class SynthConfig:
    """Settings of :class:`KinematicAugmenter` (the defaults are the recommended recipe).

    Ranges are ``(low, high)``; a scale of 0 switches a part off. Degrees and metres.
    """

    # pose
    joint_scale: float = 1.0
    """Multiplies the swing/twist ranges of the limits table (0: no joint rotations)."""
    bone_scale: tuple[float, float] = (0.85, 1.2)
    """Global bone-length scale (people of other sizes)."""
    bone_group_scale: float = 0.1
    """Per bone group (thigh, shin, forearm, ...) scale ``1 +- bone_group_scale``."""
    flip: float = 0.5
    """Probability of a left/right mirror."""
    yaw_deg: float = 180.0
    pitch_deg: float = 10.0
    roll_deg: float = 10.0
    # camera
    image_sizes: tuple[tuple[int, int], ...] = (
        (1000, 1000),
        (1920, 1080),
        (1080, 1920),
        (1280, 960),
        (960, 1280),
    )
    fov_deg: tuple[float, float] = (40.0, 75.0)
    principal_offset: float = 0.03
    distance_m: tuple[float, float] = (2.5, 9.0)
    elevation_deg: tuple[float, float] = (-10.0, 35.0)
    camera_roll_deg: float = 5.0
    off_centre: float = 0.5
    margin: float = 0.02
    # detector model
    offsets: float = 1.0
    """Multiplies :data:`~tensorpose.ops.poseaug_detector.H36M17_DETECTOR_OFFSETS` (0: none)."""
    derive: bool = True
    """Recompute pelvis/spine/thorax from hips and shoulders as a detector converter does."""
    noise: float = 0.01
    """2D noise sigma as a fraction of the person's height in the image (x per-joint factors)."""
    outlier_prob: float = 0.002
    drop_prob: float = 0.02
    drop_window_prob: float = 0.01
    fill: float = 0.0
    # time
    speed: tuple[float, float] = (0.8, 1.25)
    time_jitter: float = 0.1
    """Clock jitter of each sample time, in frames (uniform +-)."""
    normalize: str = "intrinsics"
    """``"intrinsics"`` (``K^-1 [u, v, 1]``) or ``"screen"`` (VideoPose3D, by image width)."""

    def __post_init__(self) -> None:
        if self.normalize not in ("intrinsics", "screen"):
            raise ValueError(f"normalize must be 'intrinsics' or 'screen', got {self.normalize!r}")
        for name in ("joint_scale", "bone_group_scale", "offsets", "noise", "time_jitter"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("flip", "outlier_prob", "drop_prob", "drop_window_prob"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        lo, hi = self.speed
        if not 0 < lo <= hi:
            raise ValueError(f"speed must be (low, high) with 0 < low <= high, got {self.speed}")

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> SynthConfig:
        """From a plain mapping (e.g. a YAML section); unknown keys raise ``ValueError``
        naming them; lists become tuples."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown synth settings {unknown}; known: {sorted(known)}")

        def tup(v):
            return tuple(tup(x) for x in v) if isinstance(v, (list, tuple)) else v

        return cls(**{k: tup(v) for k, v in d.items()})


@dataclass
class KinematicAugmenter:
    """World windows -> augmented lifting batch (see the module docstring).

    Args:
        skeleton: the joint tree (``h36m17`` for the default tables).
        config: the settings.
        limits, frames, groups, offsets, rules, noise_scale: the tables of
            ``tensorpose.ops.poseaug_*`` modules (defaults: the ``h36m17`` ones).
        height_joints: the person's height (which scales the 2D noise) is the sum of the bone
            lengths on the paths from the root to these two joints.
    """

    skeleton: Skeleton
    config: SynthConfig = field(default_factory=SynthConfig)
    limits: Mapping[str, JointLimit] = field(default_factory=lambda: H36M17_LIMITS)
    frames: Mapping[str, tuple[str, str, str, str]] = field(default_factory=lambda: H36M17_FRAMES)
    groups: Mapping[str, Sequence[tuple[str, str]]] = field(
        default_factory=lambda: H36M17_BONE_GROUPS
    )
    offsets: Mapping[str, DetectorOffset] = field(default_factory=lambda: H36M17_DETECTOR_OFFSETS)
    rules: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: H36M17_DETECTOR_RULES)
    noise_scale: Mapping[str, float] = field(default_factory=lambda: H36M17_NOISE_SCALE)
    height_joints: tuple[str, str] = ("head", "r_ankle")

    def __post_init__(self) -> None:
        sk = self.skeleton
        missing = [n for n in sk.names if n not in self.noise_scale]
        if missing:
            raise ValueError(f"noise_scale has no factor for joints {missing}")
        self._noise = torch.tensor([float(self.noise_scale[n]) for n in sk.names])
        top, bottom = (sk.index(n) for n in self.height_joints)
        anc = torch.tensor(sk.ancestor_matrix, dtype=torch.float32)  # (J, J)
        on_path = anc[top] + anc[bottom]  # joints on root->top and root->bottom
        self._height_path = on_path[[c for _, c in sk.bones]]  # (S,): bones ending there

    def _device_tables(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return self._noise.to(device), self._height_path.to(device)

    def __call__(
        self,
        windows: torch.Tensor,
        generator: torch.Generator,
        lengths: torch.Tensor | None = None,
        weights: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Augment world windows into a batch.

        Args:
            windows: ``(B, R, J, 3)`` world joints, metres, Y up, on the generator's device.
            generator: the only source of randomness.
            lengths: ``(B, 1, S)`` bone lengths to give each window (e.g. the sequence's
                mean); ``None`` takes the centre frame's.
            weights: ``(B, 1, J)`` loss weights of the target joints (e.g. 0 where a take's
                skeleton does not place a joint like the others), mirrored with the pose and
                returned as ``weight``; ``None``: no ``weight`` entry.

        Returns:
            ``keypoints (B, R, J, 2)``, ``target (B, 1, J, 3)``, ``mask (B, R, J)``, the
            cameras' ``K (B, 3, 3)`` and ``size (B, 2)`` (width, height), and ``root (B, 3)``
            the centre frame's root in camera coordinates (before a mirror: ``target`` and
            ``keypoints`` of mirrored windows are mirrored about the camera's x = 0); with
            ``weights``, ``weight (B, 1, J)``.
        """
        cfg, sk = self.config, self.skeleton
        if windows.dim() != 4 or windows.shape[2:] != (sk.num_joints, 3):
            raise ValueError(
                f"windows must have shape (B, R, {sk.num_joints}, 3), got {tuple(windows.shape)}"
            )
        B, R, J, _ = windows.shape
        dev = windows.device
        gen = generator.device  # a CUDA generator made with device="cuda" has no index
        if dev.type != gen.type or (gen.index is not None and dev.index != gen.index):
            raise ValueError(f"windows are on {dev} but the generator is on {generator.device}")
        root = sk.root
        noise_scale, height_path = self._device_tables(dev)
        pose, lengths = self._pose(windows, generator, lengths)
        kp3 = self._detector_points(pose, generator)
        K, size, kc, xc = self._camera(pose, kp3, generator)
        rx, ry = self._rays(kc, xc, K, size, lengths, height_path, noise_scale, generator)
        kp = torch.stack([rx, ry], -1).reshape(B, R, J, 2)
        target = (xc - xc[:, :, root : root + 1]).transpose(1, 2).unsqueeze(1)  # (B, 1, J, 3)
        if cfg.flip > 0:  # mirror the scene (camera x) and swap left/right joints
            m = (torch.rand(B, generator=generator, device=dev) < cfg.flip)[:, None, None, None]
            fi = sk.tensor("flip_index", dev)
            kp = torch.where(m, kp.index_select(2, fi) * kp.new_tensor([-1.0, 1.0]), kp)
            tf = target.index_select(2, fi) * target.new_tensor([-1.0, 1.0, 1.0])
            target = torch.where(m, tf, target)
            if weights is not None:
                weights = torch.where(m[..., 0], weights.index_select(2, fi), weights)
        kp, mask = drop_joints(kp, generator, cfg.drop_prob, cfg.drop_window_prob, cfg.fill)
        out = {"keypoints": kp, "target": target, "mask": mask, "K": K, "size": size,
               "root": xc[:, :, root]}  # fmt: skip
        if weights is not None:
            out["weight"] = weights
        return out

    def _pose(
        self, windows: torch.Tensor, generator: torch.Generator, lengths: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Bone lengths and joint rotations, one set per window (computed on the centre frame,
        applied to every frame: the window moves as recorded); the centre frame's root at the
        origin. Returns the pose ``(B, R, J, 3)`` and the bone lengths ``(B, 1, S)``."""
        cfg, sk = self.config, self.skeleton
        B, R = windows.shape[:2]
        dt = windows.dtype
        c, root = R // 2, sk.root
        centre = windows[:, c : c + 1]  # (B, 1, J, 3)
        if lengths is None:
            lengths = _bone_lengths(centre, sk)  # (B, 1, S)
        lengths = lengths * bone_scales(
            sample_bone_scales(
                (B, 1), generator, cfg.bone_scale, cfg.bone_group_scale, self.groups, dt
            ),
            sk,
            self.groups,
        )  # (B, 1, S)
        if cfg.joint_scale > 0:  # rotations from the resized centre frame, one pass for all
            angles = sample_joint_angles((B, 1), generator, self.limits, cfg.joint_scale, dt)
            mid = set_bone_lengths(centre, lengths, sk)
            rot = joint_rotations(mid, angles, sk, self.limits, self.frames)
            pose = apply_rotations(windows, rot, sk, self.limits, lengths)
        else:
            pose = set_bone_lengths(windows, lengths, sk)
        pose = pose - pose[:, c : c + 1, root : root + 1]  # centre frame's root at the origin
        return pose, lengths

    def _detector_points(self, pose: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Detector keypoints in 3D: systematic offsets in the centre frame's body frames (one
        world shift per window, like the rotations), then derived joints per frame."""
        cfg, sk = self.config, self.skeleton
        B, R = pose.shape[:2]
        c = R // 2
        kp3 = pose
        if cfg.offsets > 0:
            off = sample_detector_offsets((B, 1), generator, self.offsets, cfg.offsets, pose.dtype)
            mid = pose[:, c : c + 1]
            shift = detector_offsets(mid, off, sk, self.offsets, self.frames) - mid
            kp3 = pose + shift
        if cfg.derive:
            kp3 = derive_joints(kp3, sk, self.rules)
        return kp3

    def _camera(
        self, pose: torch.Tensor, kp3: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Global rotation about the vertical through the centre root, then a random camera
        pushed back until the window fits its image. Returns ``K (B, 3, 3)``, ``size (B, 2)``,
        the keypoints ``(B, 3, R*J)`` and the centre frame's joints ``(B, 3, J)`` in camera
        coordinates."""
        cfg = self.config
        B, R, J, _ = pose.shape
        dt = pose.dtype
        c = R // 2
        Rg = global_rotation(
            sample_global_angles(
                (B,), generator, cfg.yaw_deg, cfg.pitch_deg, cfg.roll_deg, dtype=dt
            )
        )
        cam = sample_cameras(
            B,
            generator,
            pose.new_zeros(B, 3),
            cfg.image_sizes,
            cfg.fov_deg,
            cfg.principal_offset,
            cfg.distance_m,
            cfg.elevation_deg,
            cfg.camera_roll_deg,
            cfg.off_centre,
        )
        K, size = cam["K"], cam["size"]
        A = cam["R"] @ Rg  # (B, 3, 3): world -> camera, applied to coordinate-major points
        t = cam["t"][:, :, None]
        kc = A @ kp3.transpose(-1, -2).transpose(1, 2).reshape(B, 3, R * J) + t  # (B, 3, R*J)
        xc = A @ pose[:, c].transpose(-1, -2) + t  # (B, 3, J): the centre frame's joints
        push = fit_in_frame(kc.transpose(1, 2), K, size, cfg.margin)[:, None]  # (B, 1)
        kx, ky, kz = kc.unbind(1)  # contiguous (B, R*J) rows
        kz = kz + push
        xc = xc + push[:, :, None] * xc.new_tensor([0.0, 0.0, 1.0])[:, None]
        return K, size, (kx, ky, kz), xc

    def _rays(
        self,
        kc: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        xc: torch.Tensor,
        K: torch.Tensor,
        size: torch.Tensor,
        lengths: torch.Tensor,
        height_path: torch.Tensor,
        noise_scale: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """2D: the ray x/z, y/z plus pixel noise / focal, ``(B, R*J)`` each. For these
        skew-free cameras this equals normalize_with_intrinsics(project(kc, K) + noise, K),
        without the round trip; or VideoPose3D's screen normalisation of the pixels."""
        cfg = self.config
        kx, ky, kz = kc
        B, RJ = kx.shape
        J = xc.shape[-1]
        root = self.skeleton.root
        f = K[:, 0, 0, None]  # (B, 1)
        iz = 1 / kz.clamp_min(1e-6)
        rx, ry = kx * iz, ky * iz
        if cfg.noise > 0:
            height_m = (lengths[:, 0] * height_path).sum(-1)  # (B,)
            size_px = f[:, 0] * height_m / xc[:, 2, root]
            sigma = (cfg.noise * size_px)[:, None, None] * noise_scale  # (B, 1, J)
            sigma = sigma.expand(B, RJ // J, J).reshape(B, RJ)
            nx, ny = keypoint_noise((B, RJ), sigma, generator, cfg.outlier_prob).unbind(-1)
            rx, ry = rx + nx / f, ry + ny / f
        if cfg.normalize == "screen":  # VideoPose3D screen normalisation of the pixels
            w = size[:, 0, None]
            rx = (rx * f + K[:, 0, 2, None]) / w * 2 - 1
            ry = (ry * f + K[:, 1, 2, None]) / w * 2 - size[:, 1, None] / w
        return rx, ry


class SyntheticLiftingBatches:
    """Endless synthetic lifting batches from world sequences, sampled on the device.

    Args:
        sequences: world joints, each ``(T, J, 3)`` metres, Y up (e.g. ``seq.positions`` of
            :func:`tensorpose.data.mocap.load_bvh_sequences`); frames with NaN are not allowed.
        skeleton: their joint tree.
        batch_size: windows per batch ``B``.
        receptive_field: frames per window ``R`` (the lifter's receptive field).
        generator: the only source of randomness; everything is put on its device.
        config: augmentation settings (or use ``augmenter`` for custom tables).
        steps: batches per epoch (``len(self)``; iteration yields that many).
        augmenter: a :class:`KinematicAugmenter` to use instead of one built from ``config``.
        weights: each sequence's share of the window centres (e.g. equal per motion kind:
            :func:`tensorpose.tasks.lifting.kind_weights`), uniform over its frames; ``None``:
            uniform over all frames.
        joint_weights: ``(N, J)`` loss weights of each sequence's joints (0: a joint its
            skeleton does not place like the others'), given to its windows as ``weight (B,
            1, J)``; ``None``: no ``weight``.
        bone_lengths: ``(N, S)`` the bone lengths each sequence's windows get (e.g.
            :func:`~tensorpose.ops.poseaug_bones.retarget_lengths`); ``None``: each
            sequence's mean over its frames.

    Each batch: ``keypoints (B, R, J, 2)``, ``target (B, 1, J, 3)``, ``mask (B, R, J)`` (and
    the cameras' ``K``, ``size``), see :class:`KinematicAugmenter`. Windows are centred on
    frames drawn uniformly over all frames (longer sequences are seen more often), or by
    ``weights``.

    Example:
        >>> from tensorpose.data.mocap import load_bvh_sequences
        >>> seqs, sk = load_bvh_sequences(["131_01"])
        >>> g = torch.Generator().manual_seed(0)
        >>> batches = SyntheticLiftingBatches([s.positions for s in seqs], sk, 8, 27, g)
        >>> b = batches.sample()
        >>> tuple(b["keypoints"].shape), tuple(b["target"].shape), tuple(b["mask"].shape)
        ((8, 27, 17, 2), (8, 1, 17, 3), (8, 27, 17))
    """

    def __init__(
        self,
        sequences: Sequence[torch.Tensor],
        skeleton: Skeleton,
        batch_size: int,
        receptive_field: int,
        generator: torch.Generator,
        config: SynthConfig | None = None,
        steps: int = 100,
        augmenter: KinematicAugmenter | None = None,
        weights: Sequence[float] | None = None,
        joint_weights: torch.Tensor | None = None,
        bone_lengths: torch.Tensor | None = None,
    ) -> None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        if batch_size < 1 or receptive_field < 1 or steps < 1:
            raise ValueError(
                f"batch_size, receptive_field and steps must be >= 1, got {batch_size}, "
                f"{receptive_field}, {steps}"
            )
        if not sequences:
            raise ValueError("no sequences given")
        J = skeleton.num_joints
        dev = generator.device
        seqs = []
        for i, s in enumerate(sequences):  # a loop over the few input sequences
            if not isinstance(s, torch.Tensor) or s.dim() != 3 or s.shape[1:] != (J, 3):
                shape = tuple(s.shape) if isinstance(s, torch.Tensor) else type(s).__name__
                raise ValueError(f"sequences[{i}] must have shape (T, {J}, 3), got {shape}")
            if len(s) == 0 or not bool(torch.isfinite(s).all()):
                raise ValueError(f"sequences[{i}] is empty or has non-finite values")
            seqs.append(s.to(dev, torch.float32))
        self.skeleton, self.generator = skeleton, generator
        self.batch_size, self.receptive_field, self.steps = batch_size, receptive_field, steps
        self.augmenter = augmenter or KinematicAugmenter(skeleton, config or SynthConfig())
        self.config = self.augmenter.config
        lens = torch.tensor([len(s) for s in seqs], device=dev)
        starts = torch.cumsum(lens, 0) - lens
        self.frames = torch.cat(seqs)  # (N, J, 3)
        self.seq_of = torch.repeat_interleave(torch.arange(len(seqs), device=dev), lens)
        self.start, self.length = starts, lens
        self.frame_weights = None
        if weights is not None:
            w = torch.as_tensor(weights, dtype=torch.float64, device=dev)
            if w.shape != (len(seqs),) or not bool((w >= 0).all()) or not bool(w.sum() > 0):
                raise ValueError(f"weights must be {len(seqs)} values >= 0 with a positive sum")
            self.frame_weights = (w / lens).repeat_interleave(lens).float()  # (N,)
        n, S = len(seqs), len(skeleton.bones)
        for name, t, shape in (("joint_weights", joint_weights, (n, J)),
                               ("bone_lengths", bone_lengths, (n, S))):  # fmt: skip
            if t is not None and (not isinstance(t, torch.Tensor) or t.shape != shape):
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"{name} must have shape {shape}, got {got}")
        self.joint_weights = None
        if joint_weights is not None:
            self.joint_weights = joint_weights.to(dev, torch.float32)
        # Each sequence keeps its own (mean) bone lengths: constant over time.
        if bone_lengths is None:
            bone_lengths = torch.stack([_bone_lengths(s, skeleton).mean(0) for s in seqs])
        self.bone_lengths = bone_lengths.to(dev, torch.float32)

    def __len__(self) -> int:
        return self.steps

    def set_epoch(self, epoch: int) -> None:  # the generator's state carries over epochs
        pass

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for _ in range(self.steps):
            yield self.sample()

    def sample(self, batch_size: int | None = None) -> dict[str, torch.Tensor]:
        """One batch of ``batch_size`` (default: the constructor's) windows."""
        windows, seq = self._windows(batch_size)
        weights = None if self.joint_weights is None else self.joint_weights[seq][:, None]
        return self.augmenter(windows, self.generator, self.bone_lengths[seq][:, None], weights)

    def sample_windows(self, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """World windows before augmentation: ``(B, R, J, 3)`` and their sequences' bone
        lengths ``(B, 1, S)``. Centre frames uniform over all frames; positions
        ``centre + speed * offset + jitter`` clamped to the sequence, linearly interpolated."""
        windows, seq = self._windows(batch_size)
        return windows, self.bone_lengths[seq][:, None]

    def _windows(self, batch_size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        """World windows ``(B, R, J, 3)`` and the index ``(B,)`` of each one's sequence."""
        B = batch_size or self.batch_size
        g, cfg, R = self.generator, self.config, self.receptive_field
        dev = g.device
        if self.frame_weights is None:
            f = torch.randint(len(self.frames), (B,), generator=g, device=dev)
        else:
            f = torch.multinomial(self.frame_weights, B, replacement=True, generator=g)
        seq = self.seq_of[f]
        start, length = self.start[seq], self.length[seq]
        centre = (f - start).to(torch.float32)
        speed = cfg.speed[0] + (cfg.speed[1] - cfg.speed[0]) * torch.rand(
            B, generator=g, device=dev
        )
        jitter = cfg.time_jitter * (2 * torch.rand(B, R, generator=g, device=dev) - 1)
        pos = window_positions(centre, R, speed, jitter)
        pos = torch.minimum(pos.clamp_min(0), (length - 1)[:, None].to(pos.dtype))
        lo = pos.floor()
        w = (pos - lo)[..., None, None]
        i0 = start[:, None] + lo.long()
        i1 = start[:, None] + torch.minimum(lo.long() + 1, (length - 1)[:, None])
        x0 = self.frames.index_select(0, i0.reshape(-1)).reshape(B, R, -1, 3)
        x1 = self.frames.index_select(0, i1.reshape(-1)).reshape(B, R, -1, 3)
        return x0 + w * (x1 - x0), seq
