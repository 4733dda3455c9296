"""COCO person keypoints: the bundled subset, bad records reported with their ids, results JSON,
and unreadable images (data.images)."""

import copy
import json

import numpy as np
import pytest
import torch

from tensorpose.data.images import TopDownDataset, collate_topdown
from tensorpose.io.coco import (
    CocoError,
    bundled_coco,
    coco_results,
    image_folder,
    load_coco_keypoints,
    missing_images,
    write_coco_results,
)
from tensorpose.io.video import ImageReadError, read_image


def test_bundled_subset():
    d = load_coco_keypoints(bundled_coco())
    assert len(d.images) == 16 and len(d) == 43
    assert d.problems == [] and d.skipped == {"crowd": 3, "few_keypoints": 42, "other_category": 0}
    assert len(d.keypoint_names) == 17 and d.keypoint_names[5] == "left_shoulder"
    assert len(d.links) == 19 and (15, 13) in d.links  # 1-based [16, 14] in the file
    assert all(r.file.is_file() for r in d.records)
    a = d.arrays()
    assert a["keypoints"].shape == (43, 17, 2) and a["visibility"].shape == (43, 17)
    assert set(np.unique(a["visibility"])) <= {0, 1, 2}
    assert (a["keypoints"][a["visibility"] == 0] == 0).all()
    assert len(load_coco_keypoints(bundled_coco(), min_keypoints=0)) == 85
    assert len(load_coco_keypoints(bundled_coco(), min_keypoints=0, skip_crowd=False)) == 88


@pytest.fixture
def coco_json():
    return json.loads(bundled_coco().read_text())


def _write(folder, data, name="ann.json"):
    p = folder / name
    p.write_text(json.dumps(data))
    return p


def test_bad_records_are_reported_with_ids(tmp_path, coco_json):
    d = copy.deepcopy(coco_json)
    people = [a for a in d["annotations"] if a["num_keypoints"] > 0 and not a["iscrowd"]]
    people[0]["keypoints"][2] = 3  # visibility outside {0, 1, 2}
    people[1]["bbox"][2] = 0.0  # zero area
    people[2]["keypoints"] = people[2]["keypoints"][:-3]  # K = 16
    people[3]["image_id"] = 999  # no such image
    people[4]["keypoints"][15:18] = [5000.0, 10.0, 2]  # keypoint 5 outside the image: repaired
    people[5]["num_keypoints"] += 1  # disagrees with the labels: recounted
    ids = [p["id"] for p in people[:6]]
    used = {p["image_id"] for p in people[:6]}
    bad_image = next(im for im in d["images"] if im["id"] not in used)
    bad_image["width"] = 0
    path = _write(tmp_path, d, "bad.json")
    with pytest.warns(UserWarning, match="bad record"):
        c = load_coco_keypoints(path, image_root=bundled_coco().parent / "images")
    by_id = {p.id: p.reason for p in c.problems}
    assert "visibility 3" in by_id[ids[0]] and "expected 0, 1 or 2" in by_id[ids[0]]
    assert "zero area" in by_id[ids[1]]
    assert "3*K = 51 values, got 48" in by_id[ids[2]]
    assert "image_id 999" in by_id[ids[3]]
    assert "outside the 640x" in by_id[ids[4]] and "left_shoulder" in by_id[ids[4]]
    assert "num_keypoints" in by_id[ids[5]]
    img_problem = [p for p in c.problems if p.kind == "image"]
    assert len(img_problem) == 1 and img_problem[0].id == bad_image["id"]
    kept = {r.ann_id: r for r in c.records}
    assert ids[4] in kept and kept[ids[4]].visibility[5] == 0  # repaired, kept
    assert ids[5] in kept
    assert not {ids[0], ids[1], ids[2], ids[3]} & set(kept)
    with pytest.raises(CocoError, match=rf"bad.json: image id={bad_image['id']}: width/height"):
        load_coco_keypoints(path, strict=True)
    bad_image["width"] = 640
    with pytest.raises(CocoError, match=rf"annotation id={ids[0]}: keypoint 0 \(nose\)"):
        load_coco_keypoints(_write(tmp_path, d, "bad2.json"), strict=True)


def test_file_level_errors(tmp_path, coco_json):
    with pytest.raises(FileNotFoundError, match="no such COCO annotation file"):
        load_coco_keypoints(tmp_path / "missing.json")
    bad = tmp_path / "broken.json"
    bad.write_text('{"images": [\n  {"id": 1,}\n]}')
    with pytest.raises(CocoError, match=r"broken.json:2: not valid JSON"):
        load_coco_keypoints(bad)
    with pytest.raises(CocoError, match="field 'annotations' must be a list"):
        load_coco_keypoints(_write(tmp_path, {"images": []}))
    with pytest.raises(CocoError, match="has K=17 keypoints, expected 16"):
        load_coco_keypoints(_write(tmp_path, coco_json), num_keypoints=16)


def test_results_json_round_trip(tmp_path):
    kp = torch.rand(3, 17, 2) * 100
    res = coco_results([1, 2, 2], kp, torch.full((3, 17), 0.5), torch.tensor([0.9, 0.8, 0.7]))
    assert (
        len(res) == 3 and len(res[0]["keypoints"]) == 51 and res[0]["score"] == pytest.approx(0.9)
    )
    assert res[1]["keypoints"][2] == 0.5 and res[2]["image_id"] == 2
    p = write_coco_results(tmp_path / "r" / "res.json", [1, 2, 2], kp)
    back = json.loads(p.read_text())
    assert np.allclose(np.array(back[0]["keypoints"]).reshape(17, 3)[:, :2], kp[0], atol=1e-3)
    with pytest.raises(ValueError, match="image_ids has 2 entries"):
        coco_results([1, 2], kp)


# ----------------------------------------------------------------------------- images
def test_read_image_errors(tmp_path):
    img = read_image(sorted((bundled_coco().parent / "images").glob("*.jpg"))[0])
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    with pytest.raises(FileNotFoundError, match="nope.jpg: image file not found"):
        read_image(tmp_path / "nope.jpg")
    corrupt = tmp_path / "corrupt.jpg"
    corrupt.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(ImageReadError, match="corrupt.jpg: cannot decode image"):
        read_image(corrupt)
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    with pytest.raises(ImageReadError, match="0 bytes"):
        read_image(empty)
    with pytest.raises(ImageReadError, match="differs from the annotated 10x10"):
        read_image(sorted((bundled_coco().parent / "images").glob("*.jpg"))[0], (10, 10))


def test_dataset_bad_image_raises_or_is_reported(tmp_path):
    c = load_coco_keypoints(bundled_coco())
    records = c.records[:4]
    corrupt = tmp_path / "corrupt.jpg"
    corrupt.write_bytes(b"garbage")
    records[1] = copy.copy(records[1])
    records[1].file = corrupt
    records[2] = copy.copy(records[2])
    records[2].file = tmp_path / "missing.jpg"
    ds = TopDownDataset(records)
    with pytest.raises(ImageReadError, match="corrupt.jpg"):
        ds[1]
    ds = TopDownDataset(records, on_error="skip")
    with pytest.warns(UserWarning, match="2 sample"):
        batch = collate_topdown([ds[i] for i in range(4)])
    assert batch["images"].shape[0] == 2 and batch["images"].dtype == torch.uint8
    assert len(batch["errors"]) == 2
    assert f"annotation {records[1].ann_id}" in batch["errors"][0]
    assert "missing.jpg: image file not found" in batch["errors"][1]
    assert batch["index"].tolist() == [0, 3]


def test_collate_pads_and_keeps_uint8():
    ds = TopDownDataset(aspect_ratio=0.75)
    items = [ds[i] for i in (0, 5, 20)]
    b = collate_topdown(items)
    H = max(s["image"].shape[0] for s in items)
    W = max(s["image"].shape[1] for s in items)
    assert b["images"].shape == (3, H, W, 3) and b["images"].dtype == torch.uint8
    assert b["keypoints"].shape == (3, 17, 2) and b["visibility"].dtype == torch.long
    w, h = b["image_size"][1].tolist()
    assert torch.equal(b["images"][1, :h, :w], torch.from_numpy(items[1]["image"]))
    assert int(b["images"][1, h:].sum()) == 0 and int(b["images"][1, :, w:].sum()) == 0
    assert torch.allclose(b["scale"][:, 0] / b["scale"][:, 1], torch.tensor(0.75))


# ----------------------------------------------------------------------------- malformed ids
def _people(d):
    return [a for a in d["annotations"] if a["num_keypoints"] > 0 and not a["iscrowd"]]


def test_categories_and_skeleton_must_be_lists(tmp_path, coco_json):
    d = copy.deepcopy(coco_json)
    d["categories"] = None
    with pytest.raises(CocoError, match=r"c\.json: field 'categories' must be a list, got None"):
        load_coco_keypoints(_write(tmp_path, d, "c.json"))
    for skeleton, match in [
        (5, r"categories\[0\]\.skeleton must be a list"),
        ([[0, 1]], r"categories\[0\]\.skeleton\[0\] must be two keypoint numbers in 1\.\.17"),
        ([[1, 2], ["a", "b"]], r"skeleton\[1\]"),
        ([[1, 18]], r"skeleton\[0\]"),
    ]:
        d = copy.deepcopy(coco_json)
        d["categories"][0]["skeleton"] = skeleton
        with pytest.raises(CocoError, match=match):
            load_coco_keypoints(_write(tmp_path, d, "s.json"))
    d = copy.deepcopy(coco_json)
    d["categories"][0]["skeleton"] = None  # no links is fine
    assert load_coco_keypoints(_write(tmp_path, d, "n.json")).links == []
    d["categories"][0]["keypoints"] = "nose,left_eye"
    with pytest.raises(CocoError, match=r"categories\[0\]\.keypoints must be a list of names"):
        load_coco_keypoints(_write(tmp_path, d, "k.json"))


def test_ids_must_be_unique_integers(tmp_path, coco_json):
    d = copy.deepcopy(coco_json)
    people = _people(d)
    by_image = {}
    for a in people:
        by_image.setdefault(a["image_id"], []).append(a)
    (im_a, anns_a), (im_b, anns_b) = list(by_image.items())[:2]
    images = {im["id"]: im for im in d["images"]}
    images[im_b]["id"] = im_a  # two images share an id: their people could belong to either
    ann_dup = people[-1]
    ann_dup["id"] = people[-2]["id"]  # two annotations share an id
    listed = next(a for a in people if a["image_id"] not in (im_a, im_b) and a not in people[-2:])
    listed["image_id"] = [listed["image_id"]]  # a list-valued id
    taken = (im_a, im_b, listed["image_id"][0])
    half = next(a for a in people if a["image_id"] not in taken and a not in [*people[-2:], listed])
    half["id"] = half["id"] + 0.5  # not an integer
    path = _write(tmp_path, d, "ids.json")
    with pytest.warns(UserWarning, match="bad record"):
        c = load_coco_keypoints(path)
    reasons = [str(p) for p in c.problems]
    assert sum(f"id {im_a} is used by more than one image" in r for r in reasons) == 2
    kept = {r.ann_id for r in c.records}
    # nobody is pointed at the wrong file: the people of both images are left out
    assert not kept & {a["id"] for a in anns_a + anns_b}
    assert im_a not in c.images and im_b not in c.images
    assert any("is used by more than one image" in r and str(anns_a[0]["id"]) in r for r in reasons)
    assert people[-2]["id"] not in kept
    assert sum("is used by more than one annotation" in r for r in reasons) == 2
    assert listed["id"] not in kept and any("image_id [" in r for r in reasons)
    assert any(f"id={half['id']!r}: id must be an integer" in r for r in reasons)
    with pytest.raises(CocoError, match=r"ids\.json: image id=\d+: id \d+ is used by more"):
        load_coco_keypoints(path, strict=True)
    # integral floats are integers
    d = copy.deepcopy(coco_json)
    for im in d["images"]:
        im["id"] = float(im["id"])
    for a in d["annotations"]:
        a["id"], a["image_id"] = float(a["id"]), float(a["image_id"])
    c = load_coco_keypoints(_write(tmp_path, d, "floats.json"))
    assert len(c) == 43 and c.problems == [] and all(type(r.ann_id) is int for r in c.records)


def test_not_a_file_and_not_text(tmp_path):
    with pytest.raises(CocoError, match="is a folder, expected a COCO annotation JSON file"):
        load_coco_keypoints(tmp_path)
    bad = tmp_path / "bin.json"
    bad.write_bytes(b'{"images": [], "annotations": [], "x": "\xff"}')
    with pytest.raises(CocoError, match=r"bin\.json: not UTF-8 text"):
        load_coco_keypoints(bad)
    bad.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CocoError, match=r"bin\.json: not valid JSON \(nested too deeply\)"):
        load_coco_keypoints(bad)


# ----------------------------------------------------------------------------- image folders
def _standard_layout(root, coco_json, images_dir):
    """COCO's layout: annotations/person_keypoints_val2017.json and the images in
    ``images_dir`` (links to the bundled images)."""
    (root / "annotations").mkdir(parents=True)
    images_dir.mkdir(parents=True)
    for f in (bundled_coco().parent / "images").glob("*.jpg"):
        (images_dir / f.name).symlink_to(f)
    return _write(root / "annotations", coco_json, "person_keypoints_val2017.json")


@pytest.mark.parametrize("images", ["val2017", "images/val2017"])
def test_coco_standard_layout(tmp_path, coco_json, images):
    path = _standard_layout(tmp_path, coco_json, tmp_path / images)
    c = load_coco_keypoints(path)
    assert c.image_root == tmp_path / images and len(c) == 43
    assert all(r.file.is_file() and r.file.parent == tmp_path / images for r in c.records)
    assert missing_images(c) == []
    gone = sorted((tmp_path / images).glob("*.jpg"))[0]
    gone.unlink()
    missing = missing_images(c)
    assert missing == [gone]
    people_images = {r.file for r in c.records}
    assert missing_images(c, people_only=True) == ([gone] if gone in people_images else [])


def test_images_argument(tmp_path, coco_json):
    bundled_images = bundled_coco().parent / "images"
    path = _write(tmp_path, coco_json, "ann.json")
    default = load_coco_keypoints(path)
    assert default.image_root == tmp_path and len(missing_images(default)) == 16
    c = load_coco_keypoints(path, bundled_images)
    assert c.image_root == bundled_images and missing_images(c) == []
    assert load_coco_keypoints(path, image_root=bundled_images).image_root == bundled_images
    assert load_coco_keypoints(path, images=bundled_images).records[0].file.is_file()
    with pytest.raises(TypeError, match="not both"):
        load_coco_keypoints(path, images=tmp_path, image_root=bundled_images)
    with pytest.raises(FileNotFoundError, match="images folder not found"):
        load_coco_keypoints(path, images=tmp_path / "nope")
    assert image_folder(bundled_coco()) == bundled_images  # <json folder>/images first
