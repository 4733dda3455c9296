"""3D lifting: windows of 2D keypoints -> root-relative 3D joints (``task: lift``).

Data path: :func:`tensorpose.data.mocap.load_lifting_split` (BVH or npz -> a
:class:`~tensorpose.data.mocap.LiftingSet` on the device) -> :class:`FrameBatches` (shuffled
target frames) -> :meth:`LiftingTask.prepare` (window gather + flip, on the device) ->
:class:`~tensorpose.lifting.model.TemporalLifter` -> :mod:`tensorpose.losses` (MPJPE + bone
terms) -> :mod:`tensorpose.metrics.pose3d` in :meth:`LiftingTask.evaluate`.

With ``data.augment: kinematic`` the training batches come from
:class:`~tensorpose.data.synth.SyntheticLiftingBatches` instead (the world training sequences
with random joint rotations, bone lengths, cameras, detector offsets, noise and dropped joints,
settings in the ``data.synth`` section); validation stays the held-out sequences seen by the
``data`` virtual cameras.

2D inputs (``data.normalization``): ``screen`` (VideoPose3D: pixels / image width to [-1, 1])
or ``intrinsics`` (``K^-1 [u, v, 1]``, the camera's ray at unit depth: independent of image
size and focal length; at inference K comes from a calibration or a default focal).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import torch

from .. import losses, metrics
from ..config import Config, ConfigError, check_min, choices, valid
from ..data.mocap import (
    CameraSpec,
    LiftingSet,
    MocapSequence,
    load_bvh_sequences,
    load_lifting_split,
    load_npz,
)
from ..data.synth import SynthConfig, SyntheticLiftingBatches
from ..data.takes import joint_weights, parse_rules
from ..errors import InputError
from ..lifting.model import TemporalLifter, filter_widths_for
from ..ops.kinematics import bone_lengths, decompose
from ..ops.poseaug_bones import retarget_lengths
from ..skeleton import get_skeleton
from .base import Field, Task, check_batch, eval_mode, unwrap

__all__ = ["FrameBatches", "LiftDataConfig", "LiftModelConfig", "LiftSynthConfig", "LiftingTask"]

_SYNTH = SynthConfig()  # the defaults of the data.synth section


@dataclass
class LiftSynthConfig:
    """Kinematic augmentation (the ``data.synth`` section, used with ``data.augment:
    kinematic``): the fields of :class:`~tensorpose.data.synth.SynthConfig` (see there), ranges
    as ``[low, high]``; the 2D normalisation is ``data.normalization``."""

    joint_scale: float = _SYNTH.joint_scale
    bone_scale: list[float] = field(default_factory=lambda: list(_SYNTH.bone_scale))
    bone_group_scale: float = _SYNTH.bone_group_scale
    flip: float = _SYNTH.flip
    yaw_deg: float = _SYNTH.yaw_deg
    pitch_deg: float = _SYNTH.pitch_deg
    roll_deg: float = _SYNTH.roll_deg
    image_sizes: list[list[int]] = field(
        default_factory=lambda: [list(s) for s in _SYNTH.image_sizes]
    )
    fov_deg: list[float] = field(default_factory=lambda: list(_SYNTH.fov_deg))
    principal_offset: float = _SYNTH.principal_offset
    distance_m: list[float] = field(default_factory=lambda: list(_SYNTH.distance_m))
    elevation_deg: list[float] = field(default_factory=lambda: list(_SYNTH.elevation_deg))
    camera_roll_deg: float = _SYNTH.camera_roll_deg
    off_centre: float = _SYNTH.off_centre
    margin: float = _SYNTH.margin
    offsets: float = _SYNTH.offsets
    derive: bool = _SYNTH.derive
    noise: float = _SYNTH.noise
    outlier_prob: float = _SYNTH.outlier_prob
    drop_prob: float = _SYNTH.drop_prob
    drop_window_prob: float = _SYNTH.drop_window_prob
    fill: float = _SYNTH.fill
    speed: list[float] = field(default_factory=lambda: list(_SYNTH.speed))
    time_jitter: float = _SYNTH.time_jitter

    def synth_config(self, normalize: str) -> SynthConfig:
        """These settings as a :class:`SynthConfig` with 2D normalisation ``normalize``.

        Raises:
            ConfigError: a setting out of range (naming it).
        """
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        try:
            return SynthConfig.from_dict({**d, "normalize": normalize})
        except (ValueError, TypeError) as e:
            raise ConfigError(f"data.synth: {e}") from None


@dataclass
class LiftDataConfig:
    """Where sequences come from and how they are seen (the ``data`` section)."""

    source: str = field(default="bvh", metadata=choices("bvh", "npz"))
    """``bvh``: files or bundled names in ``train``/``val``; ``npz``: VideoPose3D-layout file
    ``npz`` with ``subject`` or ``subject/action`` entries in ``train``/``val``."""
    train: list[str] = field(default_factory=lambda: ["131_01", "131_02"])
    val: list[str] = field(default_factory=lambda: ["131_03"])
    npz: str = ""
    mapping: str = ""
    """BVH joint-name mapping (``cmu_3dsmax``, ``cmu_motionbuilder``, ``cmu_daz``,
    ``mixamo``); empty: detect."""
    units: str = field(default="", metadata=choices("", "m", "cm", "mm", "inch", "cmu"))
    """BVH length unit; empty: from the skeleton's standing height (1.4-2.1 m)."""
    kinds: list[str] = field(default_factory=list)
    """``"kind=glob"`` rules: each take's motion kind (:mod:`tensorpose.data.takes`)."""
    balance: str = field(default="frames", metadata=choices("frames", "kinds"))
    """Kinematic windows: uniform over all ``frames``, or equally many from each of the
    ``kinds`` (uniform over the frames within a kind)."""
    kind_shares: list[str] = field(default_factory=list)
    """``"kind=share"`` with ``balance: kinds``: a kind's relative share of the windows
    (default 1 each; ``walking=3``: three times the windows of any other kind)."""
    frame_rates: list[str] = field(default_factory=list)
    """``"glob=fps"`` rules: true frame rates of takes whose headers are wrong."""
    ignore_joints: list[str] = field(default_factory=list)
    """``"glob=joint joint ..."`` rules (``augment: kinematic``): joints whose 3D the training
    loss ignores for the matching takes (MPJPE, and the kinematic head's terms of the bones
    touching them), e.g. where a take's skeleton does not place them like the others'."""
    proportions: str = ""
    """``augment: kinematic``: a training kind whose mean bone lengths (over its frames) every
    training take gets, scaled to the take's own height
    (:func:`~tensorpose.ops.poseaug_bones.retarget_lengths`); empty: each take its own."""
    proportions_height: str = field(default="take", metadata=choices("take", "kind"))
    """With ``proportions``: at each ``take``'s own height, or at the ``kind``'s (every take
    gets that kind's mean bone lengths: its size too)."""
    character: str = ""
    """DeepMimic character file; empty: ``characters/humanoid3d.txt`` found above the motions."""
    up_axis: str = field(default="y", metadata=choices("y", "z"))
    """Up axis of world-coordinate npz data (BVH is Y up)."""
    fps: float = field(default=30.0, metadata=valid(0, 1000, "left-open"))
    """Frame rate after subsampling BVH files (120 fps CMU -> every 4th frame)."""
    train_cameras: int = field(default=32, metadata=valid(1, 10_000))
    val_cameras: int = field(default=4, metadata=valid(1, 10_000))
    seed: int = field(default=0, metadata=valid(0, 2**31 - 1))
    """Seed of the virtual cameras (fixed per sequence-camera pair)."""
    width: int = field(default=1000, metadata=valid(1, 100_000))
    height: int = field(default=1000, metadata=valid(1, 100_000))
    focal: float = field(default=1145.0, metadata=valid(0, 1e6, "left-open"))
    """Focal length of the virtual cameras in pixels."""
    elevation_deg: list[float] = field(
        default_factory=lambda: [-10.0, 30.0], metadata=valid(-89, 89)
    )
    distance_m: list[float] = field(default_factory=lambda: [3.0, 6.0], metadata=valid(0.5, 1000))
    flip: float = field(default=0.5, metadata=valid(0, 1))
    """Probability of a left/right flip per training sample (``augment: none``; the kinematic
    augmentation has its own ``synth.flip``)."""
    normalization: str = field(default="screen", metadata=choices("screen", "intrinsics"))
    """2D inputs: ``screen`` (pixels / image width) or ``intrinsics`` (``K^-1 [u, v, 1]``)."""
    augment: str = field(default="none", metadata=choices("none", "kinematic"))
    """``none``: the training sequences through ``train_cameras`` fixed virtual cameras;
    ``kinematic``: endless synthetic batches (``synth`` settings, ``steps_per_epoch``)."""
    steps_per_epoch: int = field(default=100, metadata=valid(1, 10**7))
    """Batches per epoch with ``augment: kinematic``."""
    synth: LiftSynthConfig = field(default_factory=LiftSynthConfig)

    def validate(self, cfg: Config) -> None:
        check_min(
            (
                ("data.steps_per_epoch", self.steps_per_epoch, 1),
                ("data.train_cameras", self.train_cameras, 1),
                ("data.val_cameras", self.val_cameras, 1),
                ("data.width", self.width, 1),
                ("data.height", self.height, 1),
            )
        )
        if not 0.0 <= self.flip <= 1.0:
            raise ConfigError(f"data.flip must be a probability in [0, 1], got {self.flip}")
        for key in ("elevation_deg", "distance_m"):
            v = getattr(self, key)
            if len(v) != 2 or v[0] > v[1]:
                raise ConfigError(f"data.{key} must be [low, high] with low <= high, got {v}")
        if self.fps <= 0:
            raise ConfigError(f"data.fps must be positive, got {self.fps}")
        if self.source == "npz" and not self.npz:
            raise ConfigError("data.source is npz but data.npz (the file) is empty")
        if self.augment == "kinematic":
            self.synth.synth_config(self.normalization)
        elif self.ignore_joints or self.proportions:
            raise ConfigError(
                "data.ignore_joints and data.proportions need data.augment: kinematic"
            )

    def camera_spec(self) -> CameraSpec:
        """The virtual cameras' intrinsics and placement ranges."""
        return CameraSpec(self.width, self.height, self.focal, tuple(self.elevation_deg),
                          tuple(self.distance_m))  # fmt: skip


@dataclass
class LiftModelConfig:
    """The lifter and its loss (stored in checkpoints; ``eval`` rebuilds the model from it)."""

    head: str = field(default="kinematic", metadata=choices("kinematic", "direct"))
    receptive_field: int = field(default=27, metadata=valid(1, 10_000))
    channels: int = field(default=256, metadata=valid(1, 65_536))
    dropout: float = field(default=0.25, metadata=valid(0, 1, "right-open"))
    skeleton: str = "h36m17"
    bone_weight: float = field(default=1.0, metadata=valid(0, 1e6))
    """Kinematic head: weight of the bone-length loss."""
    direction_weight: float = field(default=0.1, metadata=valid(0, 1e6))
    """Kinematic head: weight of the bone-direction loss."""

    def validate(self, cfg: Config) -> None:
        try:
            filter_widths_for(self.receptive_field)
        except ValueError as e:
            raise ConfigError(f"model.receptive_field: {e}") from None
        check_min((("model.channels", self.channels, 1),))
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model.dropout must be in [0, 1), got {self.dropout}")


def kind_weights(seqs: list[MocapSequence], shares: Sequence[str] = ()) -> list[float]:
    """Per-sequence sampling mass giving every motion kind the same share of windows, or the
    relative ``shares`` (``"kind=share"``, default 1) (a sequence's share within its kind by
    its frames).

    Raises:
        ValueError: a malformed share or one naming no kind of ``seqs`` (``data.kind_shares``).
    """
    frames: dict[str, int] = {}
    for s in seqs:  # a loop over the takes
        frames[s.kind] = frames.get(s.kind, 0) + len(s.positions)
    share = dict.fromkeys(frames, 1.0)
    for kind, value in parse_rules(shares, "data.kind_shares", "kind=share", last=False):
        try:  # a handful of rules
            v = float(value)
        except ValueError:
            v = -1.0
        if kind not in frames or not (v > 0 and math.isfinite(v)):
            raise InputError(f"data.kind_shares: {kind}={value} needs a share > 0 and a kind "
                             f"of the training takes ({', '.join(sorted(frames))})")  # fmt: skip
        share[kind] = v
    total = sum(share.values())
    return [len(s.positions) / frames[s.kind] * share[s.kind] / total for s in seqs]


class FrameBatches:
    """Shuffled target frames of a :class:`LiftingSet` in batches, drawn on the device.

    Each epoch one ``randperm`` (from ``generator``); with ``world > 1`` processes, the order is
    padded to a multiple of ``world`` and rank ``r`` takes every ``world``-th frame from ``r``
    (as ``DistributedSampler``), in batches of ``batch_size / world``: the ranks' batches of a
    step together are the single-process batch of that step. The generator's state carries
    over epochs (and is saved in checkpoints), so there is no ``set_epoch``.
    """

    def __init__(self, data: LiftingSet, batch_size: int, generator: torch.Generator,
                 rank: int = 0, world: int = 1) -> None:  # fmt: skip
        self.data, self.generator, self.rank, self.world = data, generator, rank, world
        self.local = batch_size // world
        per_rank = math.ceil(len(data) / world)
        self.steps = math.ceil(per_rank / self.local)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        n = len(self.data)
        perm = torch.randperm(n, generator=self.generator, device=self.generator.device)
        order = self.data.target_frames[perm]
        if self.world > 1:
            pad = (-n) % self.world
            order = torch.cat([order, order[:pad]])[self.rank :: self.world]
        for step in range(self.steps):
            yield {"frames": order[step * self.local : (step + 1) * self.local]}


class LiftingTask(Task):
    """2D keypoint windows -> root-relative 3D joints, with the loss of the model's head.

    Loss: MPJPE, plus for the kinematic head ``bone_weight * |length error|`` and
    ``direction_weight * |direction error|`` (all in metres / unit vectors).
    """

    data_config = LiftDataConfig
    model_config = LiftModelConfig
    capabilities: ClassVar[frozenset[str]] = frozenset({"lift"})
    contract: ClassVar[dict[str, Field]] = {
        "keypoints": Field(("B", "R", "J", 2), torch.float32),  # normalised windows
        "target": Field(("B", 1, "J", 3), torch.float32),  # root-relative, camera, metres
    }
    weight_field: ClassVar[Field] = Field(("B", 1, "J"), torch.float32)  # optional joint weights
    best_metric = ("val_mpjpe_mm", "min")
    metric_names = (
        "val_mpjpe_mm", "val_p_mpjpe_mm", "val_n_mpjpe_mm", "val_mpjve_mm", "val_bone_std_mm",
        "val_loss", "train_loss", "train_mpjpe_mm", "train_bone_loss", "train_direction_loss",
    )  # fmt: skip

    def __init__(self, model: TemporalLifter, cfg: Config) -> None:
        super().__init__(model, cfg)
        self.skeleton = model.skeleton
        self.bone_weight = cfg.model.bone_weight
        self.direction_weight = cfg.model.direction_weight
        self.mean_pose: torch.Tensor | None = None

    @classmethod
    def build_model(cls, cfg: Config) -> TemporalLifter:
        m = cfg.model
        return TemporalLifter(
            get_skeleton(m.skeleton), m.receptive_field, m.channels, m.dropout, m.head
        )

    @classmethod
    def run_name(cls, cfg: Config) -> str:
        return f"lift_{cfg.model.head}"

    # -- data
    def take_options(self, units: str | None = None) -> dict[str, Any]:
        """How this config reads mocap takes (:func:`~tensorpose.data.mocap.load_bvh_sequences`
        keywords); ``units``: default ``data.units``."""
        d = self.cfg.data
        return {"units": d.units if units is None else units, "frame_rates": d.frame_rates,
                "kinds": d.kinds, "character": d.character}  # fmt: skip

    def load_split(self, entries: list[str], cameras: int, mapping: str | None = None,
                   source: str | None = None, units: str | None = None) -> LiftingSet:  # fmt: skip
        """A split of this config's data (``mapping``/``source``/``units``: default the
        config's)."""
        d = self.cfg.data
        spec = d.camera_spec()
        data = load_lifting_split(
            entries, self.skeleton, cameras, spec, source=source or d.source,
            npz=d.npz, mapping=d.mapping if mapping is None else mapping, fps=d.fps,
            up_axis=d.up_axis, seed=d.seed, **self.take_options(units),
        )  # fmt: skip
        # the virtual cameras all share the spec's intrinsics
        return data.with_intrinsics(spec.K()) if d.normalization == "intrinsics" else data

    def load_world(self, entries: list[str], exclude: list[str] = ()) -> list[MocapSequence]:
        """World sequences of ``entries`` (BVH files/bundled names, or npz world entries),
        without the takes of ``exclude`` (BVH/DeepMimic entries)."""
        d = self.cfg.data
        if d.source == "npz":
            world, clips = load_npz(d.npz, self.skeleton, entries, d.up_axis)
            if clips:
                raise ConfigError(
                    "data.augment: kinematic needs world-coordinate sequences, but "
                    f"{d.npz} has per-camera 2D entries for {entries}"
                )
            return world
        seqs, sk = load_bvh_sequences(
            entries, d.mapping or None, d.fps, **self.take_options(), exclude=exclude
        )
        if sk != self.skeleton:
            raise ConfigError(
                f"the BVH mapping produces skeleton {sk.name!r} but the model's skeleton is "
                f"{self.skeleton.name!r}"
            )
        return seqs

    def setup(self, device: torch.device, rank: int = 0, world: int = 1) -> None:
        """Train and validation sets (split by sequence) on ``device``; batches of frames."""
        d, t = self.cfg.data, self.cfg.train
        self.val_set = self.load_split(d.val, d.val_cameras).to(device)
        if d.augment == "kinematic":  # each rank its own stream of batch_size / world windows
            self.train_set = None
            self.generator = torch.Generator(device=device).manual_seed(t.seed + rank)
            rf = unwrap(self.model).receptive_field()
            seqs = self.load_world(d.train, exclude=d.val)  # a held-out take is never trained on
            world_seqs = [s.positions for s in seqs]
            lengths = self.take_lengths(seqs)
            self.train_batches = SyntheticLiftingBatches(
                world_seqs, self.skeleton,
                t.batch_size // world, rf, self.generator,
                d.synth.synth_config(d.normalization), d.steps_per_epoch,
                weights=kind_weights(seqs, d.kind_shares) if d.balance == "kinds" else None,
                joint_weights=joint_weights([s.take for s in seqs], d.ignore_joints,
                                            self.skeleton.names) if d.ignore_joints else None,
                bone_lengths=lengths,
            )  # fmt: skip
            # the trivial baseline: mean target of a fixed-seed synthetic sample
            g = torch.Generator(device=device).manual_seed(t.seed)
            ref = SyntheticLiftingBatches(
                world_seqs, self.skeleton, 4096, 1, g, self.train_batches.config,
                bone_lengths=lengths,
            )  # fmt: skip
            self.mean_pose = ref.sample()["target"][:, 0].mean(0)
            return
        self.train_set = self.load_split(d.train, d.train_cameras).to(device)
        self.mean_pose = self.train_set.mean_pose()
        self.generator = torch.Generator(device=device).manual_seed(t.seed)
        self.train_batches = FrameBatches(self.train_set, t.batch_size, self.generator, rank, world)

    def take_lengths(self, seqs: list[MocapSequence]) -> torch.Tensor | None:
        """``(N, S)`` bone lengths of the training takes with ``data.proportions`` (that kind's
        mean proportions at each take's height, or its mean lengths with
        ``data.proportions_height: kind``); ``None`` without it (each take its own)."""
        kind = self.cfg.data.proportions
        if not kind:
            return None
        sk = self.skeleton
        own = torch.stack([bone_lengths(s.positions, sk).mean(0) for s in seqs])  # (N, S)
        frames = [s.positions for s in seqs if s.kind == kind]
        if not frames:
            kinds = ", ".join(sorted({s.kind for s in seqs}))
            raise ConfigError(f"data.proportions: no training take of kind {kind!r} ({kinds})")
        template = bone_lengths(torch.cat(frames), sk).mean(0)  # (S,)
        if self.cfg.data.proportions_height == "kind":
            return template.expand_as(own).clone()
        return retarget_lengths(own, template, sk)

    def eval_data(self, device: torch.device, bvh: list[str] | None = None,
                  mapping: str | None = None, units: str | None = None) -> LiftingSet:  # fmt: skip
        """``bvh`` files (mapping and units: detect unless given) or the config's held-out
        ``data.val``, seen by ``data.val_cameras`` cameras, on ``device``."""
        d = self.cfg.data
        if bvh:
            return self.load_split(bvh, d.val_cameras, mapping or "", "bvh", units or "").to(device)
        return self.load_split(d.val, d.val_cameras, mapping, units=units).to(device)

    def prepare(self, batch: dict) -> dict:
        """Window gather and random flip, on the device (same generator as the shuffle);
        synthetic batches (``keypoints``, ``target``, ...) pass through."""
        rf = unwrap(self.model).receptive_field()
        if "frames" in batch:
            out = self.train_set.batch(batch["frames"], rf, self.cfg.data.flip, self.generator)
        else:
            out = {"keypoints": batch["keypoints"], "target": batch["target"]}
            if "weight" in batch:  # per-joint loss weights (data.ignore_joints)
                out["weight"] = batch["weight"]
        contract = {**self.contract, "weight": self.weight_field} if "weight" in out else None
        return check_batch(out, contract or self.contract, R=rf, J=self.skeleton.num_joints)

    def extra(self) -> dict:
        return {"mean_pose": self.mean_pose.cpu()} if self.mean_pose is not None else {}

    def restore(self, extra: dict) -> None:
        self.mean_pose = extra.get("mean_pose")

    # -- step
    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch``: ``keypoints (B, R, J, 2)`` windows of exactly the receptive field and
        ``target (B, 1, J, 3)`` (optional ``weight (B, 1, J)``: per-joint loss weights). Runs
        the strided (one frame per window) model.

        Returns ``loss`` (0-dim), ``pred (B, 1, J, 3)``, ``mpjpe_mm`` (0-dim, detached) and the
        loss terms, all on the device (nothing is read back to the host).
        """
        out = self.model(batch["keypoints"], strided=True)
        return self.loss(out, batch["target"], batch.get("weight"))

    def loss(
        self,
        out: dict[str, torch.Tensor],
        target: torch.Tensor,
        weight: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """The training loss of model outputs ``joints`` (+ ``lengths``, ``directions`` of the
        kinematic head) against ``target``, with its terms (detached); ``weight (B, 1, J)``:
        per-joint weights of every term (see :mod:`tensorpose.losses`)."""
        pred = out["joints"]
        err = losses.mpjpe_loss(pred, target, weight)
        result = {"pred": pred, "mpjpe_mm": 1000 * err.detach()}
        loss = err
        if "lengths" in out:
            sk = self.skeleton
            bone = losses.bone_length_loss(out["lengths"], target, sk, weight)
            direction = losses.bone_direction_loss(out["directions"], target, sk, weight)
            loss = loss + self.bone_weight * bone + self.direction_weight * direction
            result["bone_loss"] = bone.detach()
            result["direction_loss"] = direction.detach()
        result["loss"] = loss
        return result

    # -- evaluation
    @torch.no_grad()
    def predict(
        self, data: LiftingSet | None = None, flip: bool = False
    ) -> list[dict[str, torch.Tensor]]:
        """Dense predictions for every clip of ``data`` (default: the validation set), in eval
        mode: one batched forward per group of clips of equal length (the cameras of one
        sequence). Each entry: ``pred``, ``target (T, J, 3)``, ``valid (T,)``,
        ``keypoints (T, J, 2)`` and the clip index. ``flip``: test-time flip averaging (the
        mean of the plain and the mirrored input's prediction, see
        :meth:`~tensorpose.lifting.model.TemporalLifter.predict`)."""
        data = self.val_set if data is None else data
        results = []
        with eval_mode(unwrap(self.model)) as model:
            for group in data.clip_groups():  # a loop over sequences, not samples
                arrays = [data.clip_arrays(i) for i in group]
                pred = model.predict(torch.stack([a["keypoints"] for a in arrays]), flip=flip)
                for k, (i, a) in enumerate(zip(group, arrays, strict=True)):
                    results.append({"clip": i, "pred": pred[k], **a})
        return results

    @torch.no_grad()
    def evaluate(self, data: LiftingSet | None = None, flip: bool = False) -> dict[str, float]:
        """Metrics over all valid frames of all clips of ``data`` (default: the validation set),
        in millimetres; ``flip``: of the test-time flip averaged predictions.

        Returns ``mpjpe_mm``, ``p_mpjpe_mm``, ``n_mpjpe_mm``, ``mpjve_mm`` (per frame at the
        data's frame rate), ``bone_std_mm`` (per-bone std of predicted lengths over each clip,
        averaged), ``frames`` (evaluated poses, frames x cameras), ``loss`` (the training loss
        on the dense predictions) and, when the training set's mean pose is known,
        ``mean_pose_mpjpe_mm`` (the error of always predicting it).
        """
        data = self.val_set if data is None else data
        sums = dict.fromkeys(("mpjpe", "p_mpjpe", "n_mpjpe", "loss", "mean_pose"), 0.0)
        vel_sum, vel_n, std_sum, frames = 0.0, 0, 0.0, 0
        for r in self.predict(data, flip):  # per clip: a handful of sequences x cameras
            pred, target, valid = r["pred"], r["target"], r["valid"]
            n = int(valid.sum())
            p, t = pred[valid], target[valid]
            sums["mpjpe"] += float(metrics.mpjpe(p, t, "none").sum())
            sums["p_mpjpe"] += float(metrics.p_mpjpe(p, t, "none").sum())
            sums["n_mpjpe"] += float(metrics.n_mpjpe(p, t, "none").sum())
            if self.mean_pose is not None:
                mp = self.mean_pose.to(t).expand_as(t)
                sums["mean_pose"] += float(metrics.mpjpe(mp, t, "none").sum())
            both = valid[1:] & valid[:-1]
            if pred.shape[0] > 1 and bool(both.any()):
                v = metrics.mpjve(pred, target, "none")[both]
                vel_sum += float(v.sum())
                vel_n += int(v.numel())
            std_sum += float(metrics.bone_length_std(p, self.skeleton, "mean"))
            sums["loss"] += float(self.dense_loss(p, t)) * n
            frames += n
        out = {f"{k}_mm": 1000 * sums[k] / frames for k in ("mpjpe", "p_mpjpe", "n_mpjpe")}
        out["mpjve_mm"] = 1000 * vel_sum / max(vel_n, 1)
        out["bone_std_mm"] = 1000 * std_sum / len(data.clips)
        out["frames"] = frames
        out["loss"] = sums["loss"] / frames
        if self.mean_pose is not None:
            out["mean_pose_mpjpe_mm"] = 1000 * sums["mean_pose"] / frames
        return out

    def dense_loss(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The training loss of dense predictions ``pred (T, J, 3)`` of one clip (the kinematic
        terms from the predicted poses' own bones)."""
        out = {"joints": pred[None]}
        if unwrap(self.model).head == "kinematic":
            lengths, dirs = decompose(pred[None], self.skeleton)
            out.update(lengths=lengths[:, :1], directions=dirs)
        return self.loss(out, target[None])["loss"]

    def eval_info(self, data: LiftingSet | None = None) -> dict[str, Any]:
        data = self.val_set if data is None else data
        return {"sequences": sorted({c.name for c in data.clips}),
                "cameras": self.cfg.data.val_cameras, "fps": data.fps}  # fmt: skip

    # -- reporting
    METRICS = (
        ("mpjpe_mm", "MPJPE", "mm"),
        ("p_mpjpe_mm", "P-MPJPE (Procrustes)", "mm"),
        ("n_mpjpe_mm", "N-MPJPE (scale)", "mm"),
        ("mpjve_mm", "MPJVE (velocity)", "mm/frame"),
        ("bone_std_mm", "bone length std", "mm"),
        ("mean_pose_mpjpe_mm", "mean-pose MPJPE (baseline)", "mm"),
    )

    @classmethod
    def metrics_json(cls, metrics: dict[str, Any]) -> dict[str, Any]:
        keys = [k for k, _, _ in cls.METRICS[:5]] + ["frames", "mean_pose_mpjpe_mm"]
        return {k: metrics[k] for k in keys if k in metrics}

    @classmethod
    def report(cls, metrics: dict[str, Any]) -> list[str]:
        lines = [f"  {', '.join(metrics['sequences'])}: {metrics['frames']} poses "
                 f"({metrics['cameras']} virtual cameras, {metrics['fps']:.0f} fps)"]  # fmt: skip
        for key, label, unit in cls.METRICS:
            if key in metrics:
                lines.append(f"  {label:<28s} {metrics[key]:10.4g} {unit}")
        return lines
