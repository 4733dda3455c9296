"""Top-down augmentation: one affine warp per sample (crop + rotation + scale + shift + flip as
ONE matrix), left/right joint swap on flips, and per-sample photometric changes.

Two backends, the same parameters, the same geometry (tested equal):

- :class:`DeviceAugment`: batched on the device (the GPU default): one ``grid_sample`` for the
  batch, colour as one batched 3x3 matrix product, noise and shadow as tensor ops.
- :class:`CpuAugment`: the collate function of a CPU ``DataLoader``: the batch's parameters and
  matrices are drawn and built batched in torch, then each sample is warped with
  ``cv2.warpAffine`` and coloured with one ``cv2.transform`` (OpenCV's uint8 paths are several
  times faster than ``grid_sample`` on a CPU).

Parameters are drawn from a seeded ``torch.Generator`` (:func:`sample_params`) on the device
where they are used. Photometric model, per sample, on RGB values in ``[0, 255]`` (one affine
colour map, so it costs one pass):

``out = clip(shade * (A x + (1 - c) b m) + noise)``, ``A = c b Hue(h) Sat(s)``

with brightness ``b``, contrast ``c`` (about the crop's mean grey ``m``), saturation ``s``
(mix with the pixel's grey, ITU-R 601 weights), hue ``h`` (rotation of the colour cube about the
grey axis), ``shade`` a half-plane shadow (factor ``< 1`` on one side of a random line) and
gaussian noise. Grey stays grey under ``Sat`` and ``Hue``. Clipping happens once, at the end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import cv2
import numpy as np
import torch

from ..data.images import split_errors, stack_fields
from ..ops._constants import constant
from ..ops.affine import crop_matrix, transform_points, warp_affine
from ..skeleton import Skeleton
from .config import AugmentConfig

__all__ = [
    "AugmentConfig",
    "AugmentParams",
    "CpuAugment",
    "DeviceAugment",
    "augment_matrices",
    "color_matrices",
    "flip_keypoints",
    "sample_params",
    "shadow_masks",
]

GREY = (0.299, 0.587, 0.114)


@dataclass
class AugmentParams:
    """Drawn parameters, one entry per sample (all tensors on one device).

    ``scale (B,)`` window factor, ``rotation (B,)`` radians, ``shift (B, 2)`` fraction of the
    window, ``flip (B,)`` bool, ``brightness``/``contrast``/``saturation (B,)`` factors,
    ``hue (B,)`` radians, ``noise_std (B,)`` grey levels, ``noise_seed (B,)`` int64 (CPU
    backend's noise), ``shadow_angle (B,)`` radians, ``shadow_offset (B,)`` (fraction of half the
    crop diagonal), ``shadow_factor (B,)`` (1: no shadow).
    """

    scale: torch.Tensor
    rotation: torch.Tensor
    shift: torch.Tensor
    flip: torch.Tensor
    brightness: torch.Tensor
    contrast: torch.Tensor
    saturation: torch.Tensor
    hue: torch.Tensor
    noise_std: torch.Tensor
    noise_seed: torch.Tensor
    shadow_angle: torch.Tensor
    shadow_offset: torch.Tensor
    shadow_factor: torch.Tensor

    def to(self, device) -> AugmentParams:
        return AugmentParams(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def __len__(self) -> int:
        return self.scale.shape[0]


def sample_params(
    cfg: AugmentConfig,
    n: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> AugmentParams:
    """Draw ``n`` samples' parameters on the generator's device (no host synchronisation).

    Args:
        cfg: the ranges.
        n: batch size.
        generator: a seeded ``torch.Generator``; ``None`` uses the global RNG on ``device``.
        device: where to draw when ``generator`` is ``None`` (default CPU).
    """
    if generator is not None:
        if device is not None and torch.device(device).type != generator.device.type:
            raise ValueError(
                f"generator is on {generator.device} but device={device}; draw where the "
                "generator lives"
            )
        device = generator.device
    device = torch.device(device or "cpu")
    kw = {"generator": generator, "device": device}

    def randn():
        return torch.randn(n, **kw)

    def rand():
        return torch.rand(n, **kw)

    def uniform(v):  # 1 + U(-v, v)
        return 1 + (2 * rand() - 1) * v

    s = cfg.scale
    scale = (1 + s * randn()).clamp(1 - s, 1 + s)
    r = math.radians(cfg.rotation)
    rotation = (r * randn()).clamp(-2 * r, 2 * r) * (rand() < cfg.rotation_prob)
    shift = (cfg.shift * torch.randn(n, 2, **kw)).clamp(-2 * cfg.shift, 2 * cfg.shift)
    flip = rand() < cfg.flip_prob
    brightness, contrast, saturation = (
        uniform(cfg.brightness),
        uniform(cfg.contrast),
        uniform(cfg.saturation),
    )
    hue = (2 * rand() - 1) * (cfg.hue * 2 * math.pi)
    noise_std = rand() * cfg.noise * (rand() < cfg.noise_prob)
    noise_seed = torch.randint(0, 2**62, (n,), **kw)
    lo, hi = cfg.shadow_strength
    shadow_angle = rand() * (2 * math.pi)
    shadow_offset = rand() - 0.5
    strength = lo + (hi - lo) * rand()
    shadow_factor = torch.where(rand() < cfg.shadow_prob, 1 - strength, torch.ones_like(strength))
    return AugmentParams(
        scale,
        rotation,
        shift,
        flip,
        brightness,
        contrast,
        saturation,
        hue,
        noise_std,
        noise_seed,
        shadow_angle,
        shadow_offset,
        shadow_factor,
    )


def augment_matrices(
    center: torch.Tensor,
    scale: torch.Tensor,
    params: AugmentParams,
    output_size: tuple[int, int],
) -> torch.Tensor:
    """ONE source -> crop matrix per sample: window ``scale * params.scale`` around
    ``center + params.shift * window``, rotated, flipped. ``(B, 2, 3)``, dtype of ``center``."""
    window = scale * params.scale.to(scale.dtype).unsqueeze(-1)
    return crop_matrix(
        center,
        window,
        output_size,
        rotation=params.rotation.to(center.dtype),
        flip=params.flip,
        shift=params.shift.to(center.dtype) * window,
    )


def flip_keypoints(
    keypoints: torch.Tensor, visibility: torch.Tensor, flip: torch.Tensor, skeleton: Skeleton
) -> tuple[torch.Tensor, torch.Tensor]:
    """Swap left/right joint identities where ``flip`` (B,) is set (the coordinates were
    already mirrored by the matrix): ``out[:, j] = in[:, flip_index[j]]``."""
    if keypoints.shape[-2] != skeleton.num_joints:
        raise ValueError(
            f"keypoints have K={keypoints.shape[-2]} joints but skeleton {skeleton.name!r} has "
            f"{skeleton.num_joints}"
        )
    idx = skeleton.tensor("flip_index", keypoints.device)
    f = flip.view(-1, *([1] * (keypoints.dim() - 1)))
    kp = torch.where(f, keypoints.index_select(-2, idx), keypoints)
    vis = torch.where(f.squeeze(-1), visibility.index_select(-1, idx), visibility)
    return kp, vis


def _inside(keypoints: torch.Tensor, output_size: tuple[int, int]) -> torch.Tensor:
    H, W = output_size
    x, y = keypoints[..., 0], keypoints[..., 1]
    return (x >= -0.5) & (x < W - 0.5) & (y >= -0.5) & (y < H - 0.5)


def color_matrices(params: AugmentParams, mean_grey: torch.Tensor) -> torch.Tensor:
    """``(B, 3, 4)`` affine colour maps ``[A | o]`` on RGB (see the module docstring).

    Args:
        params: drawn parameters.
        mean_grey: ``(B,)`` mean grey level of each crop before the colour change.
    """
    dev, dt = mean_grey.device, mean_grey.dtype
    b, c, s, h = (
        p.to(dt) for p in (params.brightness, params.contrast, params.saturation, params.hue)
    )
    eye = torch.eye(3, device=dev, dtype=dt)
    grey_rows = constant((GREY, GREY, GREY), dev, dt)  # 1 w^T: each row the grey weights
    sat = s[:, None, None] * eye + (1 - s)[:, None, None] * grey_rows
    r3 = 1 / math.sqrt(3.0)
    ux = constant(((0.0, -r3, r3), (r3, 0.0, -r3), (-r3, r3, 0.0)), dev, dt)  # [u]x, u = 1/sqrt3
    uu = torch.full((3, 3), 1 / 3, device=dev, dtype=dt)  # u u^T
    cos, sin = torch.cos(h)[:, None, None], torch.sin(h)[:, None, None]
    hue = cos * eye + sin * ux + (1 - cos) * uu
    A = (c * b)[:, None, None] * (hue @ sat)
    o = ((1 - c) * b * mean_grey)[:, None, None].expand(-1, 3, 1)
    return torch.cat([A, o], dim=-1)


def shadow_masks(params: AugmentParams, output_size: tuple[int, int]) -> torch.Tensor:
    """``(B, H, W)`` bool: pixels on the shadowed side of each sample's line (all ``False``
    where ``shadow_factor == 1`` is irrelevant: the factor is 1 there)."""
    H, W = output_size
    dev = params.shadow_angle.device
    x = torch.arange(W, device=dev, dtype=torch.float32) - (W - 1) / 2
    y = torch.arange(H, device=dev, dtype=torch.float32) - (H - 1) / 2
    a = params.shadow_angle.float()
    d = params.shadow_offset.float() * (0.5 * math.hypot(W, H))
    side = torch.cos(a)[:, None, None] * x + torch.sin(a)[:, None, None] * y[:, None]
    return side > d[:, None, None]


class DeviceAugment:
    """Batched augmentation on the batch's device (GPU default).

    Args:
        cfg: the ranges.
        skeleton: for the left/right swap on flips.

    Call with a batch from :func:`tensorpose.data.images.collate_topdown` moved to the device
    (``images (B, H, W, 3)`` uint8, ``center``, ``scale``, ``keypoints``, ``visibility``) and a
    generator on that device. Returns ``images (B, 3, H, W)`` float in ``[0, 255]``,
    ``keypoints (B, K, 2)`` crop pixels, ``visibility (B, K)`` (0 where a joint left the crop),
    ``matrices (B, 2, 3)`` (image -> crop), ``params``, and the batch's ids.
    """

    def __init__(self, cfg: AugmentConfig, skeleton: Skeleton) -> None:
        self.cfg = cfg
        self.skeleton = skeleton

    def __call__(
        self,
        batch: dict,
        generator: torch.Generator | None = None,
        params: AugmentParams | None = None,
    ) -> dict:
        images = batch["images"]
        if images.dtype != torch.uint8 and not images.is_floating_point():
            raise TypeError(f"images must be uint8 or floating point, got {images.dtype}")
        B = images.shape[0]
        size = self.cfg.output_size
        if params is None:
            params = sample_params(self.cfg, B, generator, images.device)
        center, scale = batch["center"].float(), batch["scale"].float()
        M = augment_matrices(center, scale, params, size)
        crops = warp_affine(images.permute(0, 3, 1, 2), M, size, out_dtype=torch.float32)
        crops = self.photometric(crops, params, generator)
        kp = transform_points(batch["keypoints"].float(), M)
        kp, vis = flip_keypoints(kp, batch["visibility"], params.flip, self.skeleton)
        vis = vis * _inside(kp, size)
        out = {k: v for k, v in batch.items() if k not in ("images", "keypoints", "visibility")}
        out.update(images=crops, keypoints=kp, visibility=vis, matrices=M, params=params)
        return out

    def photometric(
        self, crops: torch.Tensor, params: AugmentParams, generator: torch.Generator | None
    ) -> torch.Tensor:
        """Colour, shadow and noise on ``(B, 3, H, W)`` float crops in ``[0, 255]``."""
        cfg = self.cfg
        B, _, H, W = crops.shape
        w = constant(GREY, crops.device, crops.dtype)
        mean_grey = crops.mean(dim=(2, 3)) @ w
        T = color_matrices(params, mean_grey)
        out = torch.baddbmm(T[:, :, 3:], T[:, :, :3], crops.reshape(B, 3, H * W))
        out = out.view(B, 3, H, W)
        if cfg.shadow_prob > 0:
            shade = torch.where(
                shadow_masks(params, (H, W)),
                params.shadow_factor.to(crops.dtype)[:, None, None],
                torch.ones((), device=crops.device, dtype=crops.dtype),
            )
            out = out * shade.unsqueeze(1)
        if cfg.noise > 0 and cfg.noise_prob > 0:
            noise = torch.randn(out.shape, generator=generator, device=out.device, dtype=out.dtype)
            out = out + noise * params.noise_std.to(out.dtype)[:, None, None, None]
        return out.clamp_(0, 255)


class CpuAugment:
    """The CPU backend, used as a ``DataLoader``'s ``collate_fn`` (so it runs in the workers).

    Parameters and matrices for the whole batch come from :func:`sample_params` and
    :func:`augment_matrices` (batched torch, a few small ops); each sample is then warped with
    ``cv2.warpAffine`` and coloured with one ``cv2.transform`` (its 3x4 map is
    :func:`color_matrices`'s). Same geometry and colour model as :class:`DeviceAugment`.

    Args:
        cfg: the ranges.
        skeleton: for the left/right swap on flips.
        seed: base seed. Each call draws from ``Generator(seed, worker id, call count)``, so a
            run is reproducible for a given seed and number of workers.

    Returns (per call, on a list of :class:`~tensorpose.data.images.TopDownDataset` items):
    ``images (B, 3, H, W)`` uint8, ``keypoints``, ``visibility``, ``matrices``, ``params``, the
    ids, and ``errors`` (messages of unreadable samples, dropped from the batch and warned about).
    """

    def __init__(self, cfg: AugmentConfig, skeleton: Skeleton, seed: int = 0) -> None:
        self.cfg = cfg
        self.skeleton = skeleton
        self.seed = int(seed)
        self.epoch = 0
        self._calls = 0

    def set_epoch(self, epoch: int) -> None:
        """Draw the next calls from ``(seed, epoch, worker id, call count)``: call it before each
        epoch's iterator starts (workers copy this object then), so every epoch augments
        differently and a run resumed at an epoch boundary replays the same crops."""
        self.epoch = int(epoch)
        self._calls = 0

    def _generator(self) -> torch.Generator:
        info = torch.utils.data.get_worker_info()
        wid = info.id if info is not None else -1
        self._calls += 1
        mix = self.seed * 1_000_003 + (wid + 1) * 7_919 + self._calls * 104_729
        mix = (mix + self.epoch * 15_485_863) % (2**63 - 1)
        return torch.Generator().manual_seed(mix)

    def __call__(self, samples: Sequence[dict]) -> dict:
        good, errors = split_errors(samples)
        params = sample_params(self.cfg, len(good), self._generator())
        out = self.apply(good, params)
        out["errors"] = errors
        return out

    def apply(self, samples: Sequence[dict], params: AugmentParams) -> dict:
        """Augment readable samples with given parameters (deterministic)."""
        cfg = self.cfg
        H, W = cfg.output_size
        batch = stack_fields(samples)
        B = len(samples)
        M = augment_matrices(batch["center"].double(), batch["scale"].double(), params, (H, W))
        kp = transform_points(batch["keypoints"].double(), M).float()
        kp, vis = flip_keypoints(kp, batch["visibility"], params.flip, self.skeleton)
        vis = vis * _inside(kp, (H, W))
        # colour maps without the mean-grey term (which needs the warped crop): A and (1 - c) b
        A = color_matrices(params, torch.zeros(B, dtype=torch.float64)).numpy()
        k_mean = ((1 - params.contrast.double()) * params.brightness.double()).numpy()
        shade = params.shadow_factor.double().numpy()
        masks = shadow_masks(params, (H, W)).numpy() if (shade < 1).any() else None
        noise_std = params.noise_std.double().numpy()
        seeds = params.noise_seed.numpy()
        Mn = M.numpy()
        images = torch.empty(B, H, W, 3, dtype=torch.uint8)
        reduction = [int(s.get("reduction", 1)) for s in samples]
        out_np = images.numpy()
        for i, s in enumerate(samples):  # per-sample OpenCV: the fast path on a CPU
            crop = cv2.warpAffine(
                s["image"],
                Mn[i] if reduction[i] == 1 else from_reduced(Mn[i], reduction[i]),
                (W, H),
                flags=cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_CONSTANT,
                borderValue=0,
            )
            r, g, b_, _ = cv2.mean(crop)
            T = A[i].copy()
            T[:, 3] = k_mean[i] * (GREY[0] * r + GREY[1] * g + GREY[2] * b_)
            if shade[i] < 1:
                lit = cv2.transform(crop, T)
                dark = cv2.transform(crop, T * shade[i])
                np.copyto(lit, dark, where=masks[i][..., None])
            else:
                lit = cv2.transform(crop, T)
            if noise_std[i] > 0:
                rng = np.random.default_rng(int(seeds[i]))
                noise = rng.standard_normal((H, W, 3), dtype=np.float32) * np.float32(noise_std[i])
                lit = cv2.add(lit, noise, dtype=cv2.CV_8U)
            out_np[i] = lit
        out = {k: v for k, v in batch.items() if k not in ("keypoints", "visibility")}
        out.update(
            images=images.permute(0, 3, 1, 2),
            keypoints=kp,
            visibility=vis,
            matrices=M.float(),
            params=params,
        )
        return out


def from_reduced(matrix: np.ndarray, reduction: int) -> np.ndarray:
    """The warp of an image decoded at ``1 / reduction`` (pixel ``i`` covering full pixels
    ``r i .. r i + r - 1``) for the full-resolution ``matrix (2, 3)``: ``matrix`` composed with
    ``x_full = r x + (r - 1) / 2``."""
    r = float(reduction)
    out = matrix.astype(np.float64, copy=True)
    out[:, 2] += out[:, :2].sum(-1) * (r - 1) / 2
    out[:, :2] *= r
    return out


def with_output_size(cfg: AugmentConfig, output_size: tuple[int, int]) -> AugmentConfig:
    """A copy of ``cfg`` with another crop size."""
    return replace(cfg, output_size=tuple(output_size))


def augmented_crops(
    dataset,
    skeleton: Skeleton,
    cfg: AugmentConfig,
    people: Sequence[int] = (0, 1, 2, 3),
    augmentations: int = 5,
    seed: int = 0,
    backend: str = "device",
) -> dict:
    """Per person, the plain crop and ``augmentations`` random ones (for pictures).

    Args:
        dataset: a :class:`~tensorpose.data.images.TopDownDataset`.
        skeleton: the joints' skeleton.
        cfg: augmentation ranges.
        people: dataset indices.
        augmentations: random crops per person.
        seed: generator seed.
        backend: ``"device"`` (batched torch) or ``"cpu"`` (per-sample OpenCV).

    Returns:
        ``images (N, H, W, 3)`` uint8 RGB, ``keypoints (N, 1, K, 2)``, ``visibility (N, 1, K)``,
        ``captions`` (flip and rotation; ``plain`` first), ``columns`` = ``augmentations + 1``,
        ``skeleton``; ``N = len(people) * columns``.
    """
    from ..data.images import collate_topdown

    samples = [dataset[i] for i in people]
    n = augmentations + 1
    items = [s for s in samples for _ in range(n)]
    g = torch.Generator().manual_seed(seed)
    params = sample_params(cfg, len(items), g)
    plain = sample_params(AugmentConfig.identity(cfg.output_size), len(items), g)
    for f in params.__dataclass_fields__:  # column 0 of every row: the plain crop
        getattr(params, f)[::n] = getattr(plain, f)[::n]
    if backend == "cpu":
        out = CpuAugment(cfg, skeleton).apply(items, params)
    elif backend == "device":
        out = DeviceAugment(cfg, skeleton)(collate_topdown(items), params=params)
    else:
        raise ValueError(f"backend must be 'device' or 'cpu', got {backend!r}")
    crops = out["images"].round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
    degrees = torch.rad2deg(params.rotation).tolist()
    captions = [
        "plain" if i % n == 0 else f"{'FLIP ' if bool(params.flip[i]) else ''}rot {degrees[i]:+.0f}"
        for i in range(len(items))
    ]
    return {"images": crops, "keypoints": out["keypoints"][:, None],
            "visibility": out["visibility"][:, None], "captions": captions, "columns": n,
            "skeleton": skeleton}  # fmt: skip
