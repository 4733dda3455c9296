"""Augmentation: both backends equal on real images with the same parameters; flips swap joint
identities; joints leaving the crop become invisible; seeded, reproducible parameters."""

import math

import cv2
import numpy as np
import pytest
import torch

from tensorpose.augment.crops import (
    AugmentConfig,
    CpuAugment,
    DeviceAugment,
    color_matrices,
    sample_params,
)
from tensorpose.data.images import TopDownDataset, collate_topdown
from tensorpose.skeleton import get_skeleton

SK = get_skeleton("coco17")


@pytest.fixture(scope="module")
def samples():
    ds = TopDownDataset(cache_images=True)
    return [ds[i] for i in (0, 3, 9, 14, 22, 30, 38, 42)]


def _to(batch, device):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def test_backends_agree_on_real_images(device, samples):
    cfg = AugmentConfig(output_size=(128, 96), noise=0.0, shift=0.1, shadow_prob=0.5, hue=0.05)
    params = sample_params(cfg, len(samples), torch.Generator().manual_seed(0))
    cpu = CpuAugment(cfg, SK).apply(samples, params)
    dev = DeviceAugment(cfg, SK)(_to(collate_topdown(samples), device), params=params.to(device))
    a, b = dev["images"].cpu(), cpu["images"].float()
    assert cpu["images"].dtype == torch.uint8 and a.shape == b.shape == (8, 3, 128, 96)
    diff = (a - b).abs()
    assert float(diff.mean()) < 0.5
    assert float(((a.round() - b).abs() > 1).float().mean()) < 1e-3
    assert float((dev["keypoints"].cpu() - cpu["keypoints"]).abs().max()) < 1e-3
    assert torch.equal(dev["visibility"].cpu(), cpu["visibility"])
    assert torch.allclose(dev["matrices"].cpu(), cpu["matrices"], atol=1e-4)


def test_plain_crop_equals_cv2_warp_of_the_box(samples):
    cfg = AugmentConfig.identity((128, 96))
    params = sample_params(cfg, 2, torch.Generator().manual_seed(0))
    out = DeviceAugment(cfg, SK)(collate_topdown(samples[:2]), params=params)
    s = samples[0]
    k = 96 / s["scale"][0]
    cx, cy = s["center"]
    M = np.array([[k, 0, 47.5 - k * cx], [0, k, 63.5 - k * cy]])
    ref = cv2.warpAffine(s["image"], M, (96, 128), flags=cv2.INTER_LINEAR)
    got = out["images"][0].permute(1, 2, 0).numpy()
    assert np.abs(got - ref).mean() < 0.5
    kp = s["keypoints"] @ M[:, :2].T + M[:, 2]
    vis = s["visibility"] > 0
    assert np.abs(out["keypoints"][0].numpy()[vis] - kp[vis]).max() < 1e-3


def test_flip_swaps_left_and_right(device, samples):
    base = AugmentConfig.identity((128, 96))
    g = torch.Generator().manual_seed(1)
    params = sample_params(base, len(samples), g).to(device)
    batch = _to(collate_topdown(samples), device)
    aug = DeviceAugment(base, SK)
    plain = aug(batch, params=params)
    params.flip[:] = True
    flipped = aug(batch, params=params)
    # the crop is mirrored pixel for pixel
    assert float((flipped["images"] - plain["images"].flip(-1)).abs().max()) < 0.05
    # joint j of the flipped crop is joint flip_index[j] of the plain one, mirrored in x
    fi = torch.tensor(SK.flip_index, device=device)
    kp, vis = plain["keypoints"][:, fi], plain["visibility"][:, fi]
    mirrored = torch.stack([95 - kp[..., 0], kp[..., 1]], -1)
    seen = vis > 0
    assert torch.equal(flipped["visibility"], vis)
    assert torch.allclose(flipped["keypoints"][seen], mirrored[seen], atol=1e-3)
    ls, rs = SK.index("l_shoulder"), SK.index("r_shoulder")
    assert SK.flip_index[ls] == rs
    # the new left shoulder is the old right one, mirrored
    both = seen[:, ls]
    assert torch.allclose(flipped["keypoints"][both, ls, 0], 95 - plain["keypoints"][both, rs, 0])


def test_keypoints_leaving_the_crop_become_invisible(samples):
    cfg = AugmentConfig.identity((64, 48))
    params = sample_params(cfg, len(samples), torch.Generator().manual_seed(0))
    params.scale[:] = 0.35  # zoom in: limbs leave the crop
    params.rotation[:] = 0.4
    out = CpuAugment(cfg, SK).apply(samples, params)
    kp, vis = out["keypoints"], out["visibility"]
    before = torch.stack([torch.from_numpy(s["visibility"]) for s in samples])
    inside = (kp[..., 0] >= -0.5) & (kp[..., 0] < 47.5) & (kp[..., 1] >= -0.5) & (kp[..., 1] < 63.5)
    assert torch.equal(vis > 0, (before > 0) & inside)
    assert int(((before > 0) & ~inside).sum()) > 10  # the case is exercised
    assert set(vis.unique().tolist()) <= {0, 1, 2}


def test_params_seeded_and_in_range(device):
    cfg = AugmentConfig(shift=0.1)
    g1 = torch.Generator(device).manual_seed(5)
    g2 = torch.Generator(device).manual_seed(5)
    p1, p2 = sample_params(cfg, 256, g1), sample_params(cfg, 256, g2)
    assert p1.scale.device.type == device.type
    for f in p1.__dataclass_fields__:
        assert torch.equal(getattr(p1, f), getattr(p2, f)), f
    assert float(p1.scale.min()) >= 0.7 - 1e-6 and float(p1.scale.max()) <= 1.3 + 1e-6
    r = math.radians(cfg.rotation)
    assert float(p1.rotation.abs().max()) <= 2 * r + 1e-6
    assert 0.3 < float((p1.rotation == 0).float().mean()) < 0.55  # rotation_prob 0.6
    assert 0.35 < float(p1.flip.float().mean()) < 0.65
    assert float(p1.brightness.min()) >= 0.8 - 1e-6 and float(p1.brightness.max()) <= 1.2 + 1e-6
    with pytest.raises(ValueError, match="generator is on cpu"):
        sample_params(cfg, 2, torch.Generator(), device="meta")


def test_colour_model_keeps_grey_and_hue_turns():
    cfg = AugmentConfig(brightness=0.3, contrast=0.3, saturation=0.5, hue=0.5)
    p = sample_params(cfg, 16, torch.Generator().manual_seed(0))
    m = torch.rand(16) * 255
    T = color_matrices(p, m)
    v = torch.rand(16) * 255
    grey = torch.stack([v, v, v], -1)
    out = (T[:, :, :3] @ grey.unsqueeze(-1)).squeeze(-1) + T[:, :, 3]
    expect = p.contrast * p.brightness * v + (1 - p.contrast) * p.brightness * m
    assert torch.allclose(out, expect.unsqueeze(-1).expand(-1, 3), atol=1e-3)
    p.hue[:] = 2 * math.pi
    p.brightness[:], p.contrast[:], p.saturation[:] = 1.0, 1.0, 1.0
    assert torch.allclose(color_matrices(p, m)[:, :, :3], torch.eye(3).expand(16, 3, 3), atol=1e-5)


def test_noise_statistics(samples):
    cfg = AugmentConfig.identity((128, 96))
    cfg.noise, cfg.noise_prob = 8.0, 1.0
    g = torch.Generator().manual_seed(0)
    params = sample_params(cfg, 4, g)
    params.noise_std[:] = 8.0
    batch = collate_topdown(samples[:4])
    noisy = DeviceAugment(cfg, SK)(batch, g, params=params)["images"]
    params.noise_std[:] = 0.0
    clean = DeviceAugment(cfg, SK)(batch, g, params=params)["images"]
    d = (noisy - clean)[(clean > 30) & (clean < 225)]
    assert abs(float(d.std()) - 8.0) < 0.3 and abs(float(d.mean())) < 0.3
    params.noise_std[:] = 8.0
    cpu_noisy = CpuAugment(cfg, SK).apply(samples[:4], params)["images"].float()
    d = (cpu_noisy - clean)[(clean > 30) & (clean < 225)]
    assert abs(float(d.std()) - 8.0) < 0.4


def test_cpu_backend_in_a_dataloader_is_reproducible():
    ds = TopDownDataset(cache_images=True)
    cfg = AugmentConfig(output_size=(64, 48))

    def run():
        dl = torch.utils.data.DataLoader(ds, batch_size=8, collate_fn=CpuAugment(cfg, SK, 3))
        return [b["images"] for b in dl]

    a, b = run(), run()
    assert len(a) == 6 and a[0].shape == (8, 3, 64, 48) and a[-1].shape[0] == 3
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], a[1][:8])


def test_mismatched_joint_count_is_an_error(samples):
    cfg = AugmentConfig.identity((64, 48))
    sk = get_skeleton("mpii16")
    with pytest.raises(ValueError, match="K=17 joints but skeleton 'mpii16' has 16"):
        CpuAugment(cfg, sk)(samples[:2])
