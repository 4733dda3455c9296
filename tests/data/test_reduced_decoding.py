"""Reduced JPEG decoding for top-down crops (issue 23): the same targets and matrices as full
decoding, crops within JPEG noise; and the CPU backend is the default on a CPU device."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest
import torch

from tensorpose.augment.crops import AugmentConfig, CpuAugment, from_reduced, sample_params
from tensorpose.data.images import TopDownDataset, collate_topdown
from tensorpose.io.coco import bundled_coco, load_coco_keypoints
from tensorpose.io.video import read_image
from tensorpose.skeleton import get_skeleton

UP = 4  # the bundled 640x480 images, upscaled: large enough for 1/2 .. 1/8 decoding


@pytest.fixture(scope="module")
def big_records(tmp_path_factory):
    """The bundled people on their images upscaled 4x (JPEG, quality 95)."""
    folder = tmp_path_factory.mktemp("big")
    out = []
    for r in load_coco_keypoints(bundled_coco()).records[:12]:
        path = folder / f"{r.image_id}.jpg"
        if not path.exists():
            img = cv2.imread(str(r.file))
            big = cv2.resize(img, None, fx=UP, fy=UP, interpolation=cv2.INTER_CUBIC)
            cv2.imwrite(str(path), big, [cv2.IMWRITE_JPEG_QUALITY, 95])
        out.append(dataclasses.replace(
            r, file=path, width=r.width * UP, height=r.height * UP, bbox=r.bbox * UP,
            keypoints=(r.keypoints + 0.5) * UP - 0.5, area=r.area * UP * UP))  # fmt: skip
    return out


def test_read_image_reduced_size_and_geometry(big_records):
    r = big_records[0]
    full = read_image(r.file, (r.width, r.height)).astype(np.float32)
    for k in (2, 4, 8):
        small = read_image(r.file, (r.width, r.height), k).astype(np.float32)
        assert small.shape[:2] == (-(-r.height // k), -(-r.width // k))
        # pixel i of the reduction covers full pixels k i .. k i + k - 1: an area average
        h, w = r.height // k, r.width // k
        area = full[: h * k, : w * k].reshape(h, k, w, k, 3).mean((1, 3))
        assert np.abs(small[:h, :w] - area).mean() < 2.0


def test_from_reduced_composes_exactly():
    M = np.array([[0.3, -0.1, 5.0], [0.2, 0.4, -7.0]])
    q = np.array([13.0, 21.0])  # a reduced pixel; its full position is r q + (r - 1) / 2
    for r in (2, 4, 8):
        np.testing.assert_allclose(from_reduced(M, r) @ [*q, 1], M @ [*(r * q + (r - 1) / 2), 1])


def test_reduced_crops_match_full_decoding(big_records):
    cfg = AugmentConfig(output_size=(256, 192), scale=0.5, rotation=80.0, rotation_prob=0.6,
                        flip_prob=0.5)  # fmt: skip
    full = TopDownDataset(big_records)
    red = TopDownDataset(big_records, reduce_to=(256, 192), min_window=1 - cfg.scale)
    assert set(red.reduction.tolist()) > {1}  # some people decoded at a reduction
    aug = CpuAugment(cfg, get_skeleton("coco17"))
    A, B = [full[i] for i in range(len(full))], [red[i] for i in range(len(red))]
    p = sample_params(cfg, len(A), torch.Generator().manual_seed(0))
    a, b = aug.apply(A, p), aug.apply(B, p)
    for key in ("keypoints", "visibility", "matrices", "center", "scale"):
        assert torch.equal(a[key], b[key]), key  # the targets come from these: the same
    diff = (a["images"].float() - b["images"].float()).abs().mean((1, 2, 3))
    assert float(diff.max()) < 4.0, diff  # grey levels of 255: JPEG noise and resampling
    with pytest.raises(ValueError, match="cpu augmentation backend"):
        collate_topdown(B)


def test_cpu_backend_is_the_default_on_a_cpu_device():
    from tensorpose.config import load_config
    from tensorpose.tasks import build_task

    cfg = load_config(None, ["task=heatmap"])
    assert cfg.data.backend == "auto"
    task = build_task(cfg)
    assert task.backend(torch.device("cpu")) == "cpu"
    assert task.backend(torch.device("cuda")) == "device"


@pytest.mark.parametrize(
    "overrides, reduced",
    [([], True), (["data.reduced_decoding=false"], False), (["data.backend=device"], False)],
)
def test_trainer_decodes_reduced_by_default_on_cpu(overrides, reduced):
    """The heatmap task on a CPU device decodes its training JPEGs reduced (small crops of the
    bundled people allow 1/2 .. 1/8) unless switched off or on the device backend; evaluation
    crops are decoded whole."""
    from tensorpose.config import load_config
    from tensorpose.tasks import build_task

    cfg = load_config(None, ["task=heatmap", "data.input_size=[32,32]", "data.workers=0",
                             "data.scale=0.1", *overrides])  # fmt: skip
    task = build_task(cfg)
    task.setup(torch.device("cpu"))
    train_red = task.train_set.dataset.reduction
    expected = TopDownDataset(task.train_set.records, 1.0, reduce_to=(32, 32), min_window=0.9)
    if reduced:
        assert (train_red > 1).any()
        np.testing.assert_array_equal(train_red, expected.reduction)
    else:
        assert (train_red == 1).all()
    assert (task.val_set.dataset.reduction == 1).all()
