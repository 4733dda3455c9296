"""Whole-image multi-person data: people per image against the raw JSON, padding and slot
truncation, the letterbox against cv2.warpAffine, augmented people against a per-person loop,
and the CenterNet targets of a batch."""

import json
import math
import shutil
import warnings

import cv2
import numpy as np
import pytest
import torch

from tensorpose.augment.crops import AugmentConfig, sample_params
from tensorpose.centernet.data import (
    MultiPersonAugment,
    MultiPersonDataset,
    collate_multiperson,
    letterbox_matrices,
    multiperson_targets,
    warp_images,
)
from tensorpose.io.coco import bundled_coco, load_coco_keypoints
from tensorpose.skeleton import get_skeleton

SK = get_skeleton("coco17")


@pytest.fixture(scope="module")
def ds():
    return MultiPersonDataset(cache_images=True)


def _to(batch, device):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def test_people_per_image_match_the_json(ds):
    raw = json.loads(bundled_coco().read_text())
    expected = {}
    for a in raw["annotations"]:
        if not a.get("iscrowd"):
            expected.setdefault(a["image_id"], []).append(a["id"])
    assert ds.image_ids == sorted(expected)
    total = 0
    for i, iid in enumerate(ds.image_ids):
        item = ds[i]
        assert item["image_id"] == iid
        assert sorted(item["ann_id"].tolist()) == sorted(expected[iid])
        h, w = item["image"].shape[:2]
        im = next(x for x in raw["images"] if x["id"] == iid)
        assert (w, h) == (im["width"], im["height"])
        total += len(item["ann_id"])
    # people without keypoints are centres too: 85 non-crowd people, 43 with keypoints
    assert total == 85 == len(ds.records)
    assert sum(r.num_keypoints > 0 for r in ds.records) == 43


def test_collate_pads_and_keeps_the_largest(ds):
    items = [ds[i] for i in range(4)]
    counts = [len(s["boxes"]) for s in items]
    b = collate_multiperson(items)
    N = max(counts)
    assert b["boxes"].shape == (4, N, 4) and b["keypoints"].shape == (4, N, 17, 2)
    assert b["valid"].sum(1).tolist() == counts
    assert (b["ann_id"][~b["valid"]] == -1).all()
    for i, s in enumerate(items):
        h, w = s["image"].shape[:2]
        assert b["image_size"][i].tolist() == [w, h]
        assert np.array_equal(b["images"][i, :h, :w].numpy(), s["image"])
        assert int(b["images"][i, h:].sum()) == 0 and int(b["images"][i, :, w:].sum()) == 0
    with pytest.warns(UserWarning, match="max_people"):
        small = collate_multiperson(items, max_people=3)
    for i, s in enumerate(items):  # naive: the 3 largest areas, in annotation order
        keep = sorted(sorted(range(len(s["area"])), key=lambda j: -s["area"][j])[:3])
        assert small["ann_id"][i, : len(keep)].tolist() == s["ann_id"][keep].tolist()
    assert small["dropped"] == sum(max(0, c - 3) for c in counts)


def test_letterbox_equals_cv2_warp(ds):
    S = 128
    items = [ds[i] for i in (0, 5)]  # landscape 640x422 and portrait 480x640
    b = collate_multiperson(items)
    out = MultiPersonAugment(AugmentConfig.identity((S, S)), SK)(b, plain=True)
    for i, s in enumerate(items):
        h, w = s["image"].shape[:2]
        k = S / max(w, h)
        M = np.array([[k, 0, (S - 1) / 2 - k * (w - 1) / 2], [0, k, (S - 1) / 2 - k * (h - 1) / 2]])
        assert np.allclose(out["matrices"][i].numpy(), M, atol=1e-5)
        ref = cv2.warpAffine(s["image"], M, (S, S), flags=cv2.INTER_LINEAR)
        got = out["images"][i].permute(1, 2, 0).numpy()
        assert np.abs(got - ref).mean() < 0.5
    M = letterbox_matrices(b["image_size"], S)
    assert torch.allclose(M, out["matrices"])


def test_augmented_people_equal_a_per_person_loop(device, ds):
    S = 96
    cfg = AugmentConfig(output_size=(S, S), scale=0.3, rotation=40, rotation_prob=1.0, shift=0.1,
                        flip_prob=0.5)  # fmt: skip
    items = [ds[i] for i in range(6)]
    b = collate_multiperson(items)
    params = sample_params(cfg, len(items), torch.Generator().manual_seed(3))
    assert params.flip.any() and not params.flip.all()
    out = MultiPersonAugment(cfg, SK)(_to(b, device), params=params.to(device))
    M = out["matrices"].cpu().double().numpy()
    swap = [SK.names.index(n.replace("l_", "#").replace("r_", "l_").replace("#", "r_"))
            for n in SK.names]  # fmt: skip
    for i, s in enumerate(items):
        for p in range(len(s["boxes"])):  # the obvious loop: person by person, joint by joint
            for j in range(17):
                src = swap[j] if bool(params.flip[i]) else j
                x, y = s["keypoints"][p, src]
                q = M[i] @ np.array([x, y, 1.0])
                inside = -0.5 <= q[0] < S - 0.5 and -0.5 <= q[1] < S - 0.5
                v = int(s["visibility"][p, src]) if inside else 0
                assert int(out["visibility"][i, p, j]) == v
                if v:
                    assert np.allclose(out["keypoints"][i, p, j].cpu().numpy(), q, atol=1e-3)
            x, y, w, h = s["boxes"][p]
            c = np.array([[x, y, 1], [x + w, y, 1], [x, y + h, 1], [x + w, y + h, 1]]) @ M[i].T
            ref = [*c.min(0), *c.max(0)]
            assert np.allclose(out["boxes"][i, p].cpu().numpy(), ref, atol=1e-2)
    assert out["images"].shape == (6, 3, S, S)
    assert float(out["images"].min()) >= 0 and float(out["images"].max()) <= 255


def test_cpu_backend_equals_the_device_warp(ds):
    S = 128
    cfg = AugmentConfig(
        output_size=(S, S), scale=0.3, rotation=30, rotation_prob=1.0, shift=0.1, noise=0
    )
    b = collate_multiperson([ds[i] for i in range(5)])
    params = sample_params(cfg, 5, torch.Generator().manual_seed(0))
    dev = MultiPersonAugment(cfg, SK)(b, params=params)
    cpu = MultiPersonAugment(cfg, SK, backend="cpu")(b, params=params)
    diff = (dev["images"] - cpu["images"]).abs()
    assert float(diff.mean()) < 0.5 and float((diff > 2).float().mean()) < 1e-3
    for k in ("boxes", "keypoints", "visibility", "matrices"):
        assert torch.equal(dev[k], cpu[k])
    with pytest.raises(ValueError, match="backend"):
        MultiPersonAugment(cfg, SK, backend="gpu")


def test_warp_images_backends_agree_with_an_index(ds):
    from tensorpose.ops.affine import box_to_center_scale, crop_matrix

    b = collate_multiperson([ds[i] for i in (0, 1, 4)])  # 4, 13 and 13 people
    index = torch.tensor([0, 0, 1, 2, 2, 2])
    boxes = b["boxes"][index, torch.tensor([0, 1, 0, 0, 1, 2])]
    c, s = box_to_center_scale(boxes, 0.75)
    M = crop_matrix(c, s, (64, 48), rotation=torch.linspace(-0.5, 0.5, 6))
    dev = warp_images(b["images"], M, (64, 48), index=index, backend="device")
    cpu = warp_images(b["images"], M, (64, 48), index=index)  # auto: OpenCV on a CPU
    assert dev.shape == cpu.shape == (6, 3, 64, 48)
    assert float((dev - cpu).abs().mean()) < 0.5
    ref = cv2.warpAffine(ds[4]["image"], M[4].double().numpy(), (48, 64))
    assert np.array_equal(cpu[4].permute(1, 2, 0).numpy(), ref)
    with pytest.raises(ValueError, match="backend"):
        warp_images(b["images"], M, (64, 48), backend="gpu")


def test_targets_peak_at_each_drawn_centre(device, ds):
    S, stride = 128, 4
    b = collate_multiperson([ds[i] for i in range(4)])
    out = MultiPersonAugment(AugmentConfig.identity((S, S)), SK)(_to(b, device), plain=True)
    t = multiperson_targets(out, stride)
    hm = t["heatmap"].cpu()
    assert hm.shape == (4, 1, S // stride, S // stride)
    drawn = 0
    for i in range(4):
        for p in range(b["valid"].shape[1]):  # per person: the peak sits at the box centre
            x1, y1, x2, y2 = (out["boxes"][i, p].cpu() / stride).tolist()
            x1, x2 = max(0, x1), min(S / stride - 1, x2)
            y1, y2 = max(0, y1), min(S / stride - 1, y2)
            if not b["valid"][i, p] or x2 <= x1 or y2 <= y1:
                continue
            cx, cy = math.trunc((x1 + x2) / 2), math.trunc((y1 + y2) / 2)
            assert float(hm[i, 0, cy, cx]) == 1.0
            assert int(t["index"][i, p]) == cy * (S // stride) + cx
            assert bool(t["mask"][i, p]) == bool(b["visibility"][i, p].sum() > 0)
            drawn += 1
    assert drawn == int(t["box_mask"].sum()) > 10


def test_unreadable_image_is_skipped_or_raises(tmp_path):
    src = bundled_coco()
    (tmp_path / "images").mkdir()
    for f in (src.parent / "images").iterdir():
        shutil.copy(f, tmp_path / "images" / f.name)
    shutil.copy(src, tmp_path / "ann.json")
    coco = load_coco_keypoints(tmp_path / "ann.json", min_keypoints=0, warn=False)
    bad = coco.images[min(r.image_id for r in coco.records)]["file"]  # item 0
    bad.write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match=bad.name):
        MultiPersonDataset(coco)[0]
    ds = MultiPersonDataset(coco, on_error="skip")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        b = collate_multiperson([ds[i] for i in range(3)])
    assert b["images"].shape[0] == 2 and len(b["errors"]) == 1 and bad.name in b["errors"][0]


def test_bad_arguments():
    with pytest.raises(ValueError, match="on_error"):
        MultiPersonDataset(on_error="ignore")
    with pytest.raises(ValueError, match="square"):
        MultiPersonAugment(AugmentConfig.identity((128, 96)), SK)
    with pytest.raises(ValueError, match="keep_empty"):
        MultiPersonDataset(load_coco_keypoints(bundled_coco(), warn=False).records, keep_empty=True)
