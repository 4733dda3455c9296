"""Hostile COCO annotation files: seeded corruptions of a small excerpt of the bundled file
(text-level: truncation, byte flips, deleted/duplicated lines; JSON-level: deleted keys, values
of the wrong type, huge/negative/NaN numbers, deep nesting, duplicated records, non-integer
ids). Every case must load (with records that agree with the raw JSON) or raise CocoError
naming the file; never another exception, a hang or a write."""

import copy
import json

import numpy as np

from tensorpose.io.coco import CocoError, PersonRecord, bundled_coco, load_coco_keypoints

SEED = 20240612
IMAGES = (790, 434204, 349860)  # 3 images, 11 annotations, 7 people kept
DEEP = "[" * 5000 + "]" * 5000  # deeper than Python's recursion limit
VALUES = [None, [], {}, "x", "", True, False, 1.5, -1, 0, 1e308, float("nan"), float("inf"),
          [1], [1, 2], {"a": 1}, 10**30, 2**63, "1", [[1, 2, 3]], "DEEP"]  # fmt: skip


def excerpt() -> dict:
    d = json.loads(bundled_coco().read_text())
    d["images"] = [im for im in d["images"] if im["id"] in IMAGES]
    d["annotations"] = [
        {k: v for k, v in a.items() if k != "segmentation"}
        for a in d["annotations"]
        if a["image_id"] in IMAGES
    ]
    return d


def dump(d: dict) -> bytes:
    return json.dumps(d, indent=1).replace('"DEEP"', DEEP).encode()


def json_mutation(rng: np.random.Generator, base: dict) -> tuple[str, bytes]:
    """One JSON-level corruption: ``(label, file bytes)``."""
    d = copy.deepcopy(base)
    kind = int(rng.integers(5))
    section = ("images", "annotations", "annotations", "categories")[int(rng.integers(4))]
    records = d[section]
    i = int(rng.integers(len(records)))
    key = sorted(records[i])[int(rng.integers(len(records[i])))]
    if kind == 0:
        del records[i][key]
        return f"{section}[{i}]: delete {key!r}", dump(d)
    if kind == 1:
        value = VALUES[int(rng.integers(len(VALUES)))]
        records[i][key] = value
        return f"{section}[{i}].{key} = {str(value)[:20]}", dump(d)
    if kind == 2:  # duplicate a record: its id appears twice
        records.insert(int(rng.integers(len(records) + 1)), copy.deepcopy(records[i]))
        return f"{section}[{i}] twice", dump(d)
    if kind == 3:  # an id that is another record's, or a float near it
        j = int(rng.integers(len(records)))
        new = [records[j].get("id"), records[j].get("id", 0) + 0.5, float(records[i]["id"])]
        new = new[int(rng.integers(3))]
        records[i]["id"] = new
        return f"{section}[{i}].id = {new}", dump(d)
    # a number inside a list field (keypoints, bbox) made hostile
    ann = d["annotations"][i % len(d["annotations"])]
    field = ("keypoints", "bbox")[int(rng.integers(2))]
    k = int(rng.integers(len(ann[field])))
    value = [float("nan"), -1e308, 1e308, -5, 3, 7.5, None, "1", True][int(rng.integers(9))]
    ann[field][k] = value
    return f"annotations[{i}].{field}[{k}] = {value}", dump(d)


def structural_cases(base: dict) -> list[tuple[str, bytes | None, str]]:
    """``(label, file bytes or None for a folder, expected outcome)``."""

    def edit(fn) -> bytes:
        d = copy.deepcopy(base)
        fn(d)
        return dump(d)

    cat = lambda key, value: edit(lambda d: d["categories"][0].__setitem__(key, value))  # noqa: E731
    first_ann = lambda key, value: edit(lambda d: d["annotations"][0].__setitem__(key, value))  # noqa: E731
    error = [
        ("folder instead of a file", None),
        ("empty file", b""),
        ("a list, not an object", b"[]"),
        ("deep nesting", DEEP.encode()),
        ("not UTF-8", dump(base).replace(b'"person"', b'"pers\xffon"')),
        ("huge integer", dump(base).replace(b'"id": 790', b'"id": ' + b"9" * 5000)),
        ("categories null", edit(lambda d: d.__setitem__("categories", None))),
        ("categories an object", edit(lambda d: d.__setitem__("categories", {"id": 1}))),
        ("no categories", edit(lambda d: d.pop("categories"))),
        ("skeleton a number", cat("skeleton", 5)),
        ("skeleton a string", cat("skeleton", "1-2")),
        ("skeleton 0-based", cat("skeleton", [[0, 1]])),
        ("skeleton link of names", cat("skeleton", [["nose", "left_eye"]])),
        ("skeleton link of three", cat("skeleton", [[1, 2, 3]])),
        ("keypoint names a string", cat("keypoints", "nose,left_eye")),
        ("keypoint names numbers", cat("keypoints", list(range(17)))),
        ("category id a list", cat("id", [1])),
        ("images an object", edit(lambda d: d.__setitem__("images", {"id": 1}))),
        ("keypoints nested too deeply", first_ann("keypoints", "DEEP")),
    ]
    accepted = [
        ("excerpt as it is", dump(base)),
        ("skeleton null", cat("skeleton", None)),
        ("image id a list", edit(lambda d: d["images"][0].__setitem__("id", [790]))),
        ("annotation id a list", first_ann("id", [1])),
        ("image_id a list", first_ann("image_id", [790])),
        ("image ids repeated", edit(lambda d: d["images"][1].__setitem__("id", 790))),
        ("annotation ids repeated", first_ann("id", base["annotations"][1]["id"])),
        ("image id 790.0", edit(lambda d: d["images"][0].__setitem__("id", 790.0))),
        ("image id 790.5", edit(lambda d: d["images"][0].__setitem__("id", 790.5))),
        ("iscrowd 'no'", first_ann("iscrowd", "no")),
        ("category_id a dict", first_ann("category_id", {"id": 1})),
        ("width 0.5", edit(lambda d: d["images"][0].__setitem__("width", 0.5))),
        ("file_name empty", edit(lambda d: d["images"][0].__setitem__("file_name", ""))),
    ]
    return [(*c, "error") for c in error] + [(*c, "accepted") for c in accepted]


def agrees_with_raw(path):
    """Check of an accepted load against the raw JSON, read independently here."""

    def same_id(v, target):
        return type(v) in (int, float) and v == target

    def check(c) -> None:
        raw = json.loads(path.read_bytes().replace(DEEP.encode(), b"null"))
        K = len(c.keypoint_names)
        assert all(0 <= a < K and 0 <= b < K for a, b in c.links)
        ann_ids = [r.ann_id for r in c.records]
        assert len(set(ann_ids)) == len(ann_ids)
        for r in c.records:
            assert isinstance(r, PersonRecord) and type(r.ann_id) is int
            ims = [im for im in raw["images"] if same_id(im.get("id"), r.image_id)]
            assert len(ims) == 1, f"image id {r.image_id} is not unique, yet used"
            assert r.file == c.image_root / ims[0]["file_name"]
            anns = [a for a in raw["annotations"] if same_id(a.get("id"), r.ann_id)]
            assert len(anns) == 1, f"annotation id {r.ann_id} is not unique, yet used"
            assert same_id(anns[0]["image_id"], r.image_id)
            assert r.keypoints.shape == (K, 2) and np.isfinite(r.keypoints).all()
            assert set(np.unique(r.visibility)) <= {0, 1, 2} and r.num_keypoints >= 1
            assert np.isfinite(r.bbox).all() and (r.bbox[2:] > 0).all()
            assert np.isfinite(r.area) and r.area > 0
            lab = r.visibility > 0
            kp = np.asarray(anns[0]["keypoints"], float).reshape(K, 3)
            np.testing.assert_array_equal(r.keypoints[lab], kp[lab, :2])

    return check


def test_hostile_coco(tmp_path, hostile):
    run = hostile.runner("COCO", CocoError)
    rng = np.random.default_rng(SEED)
    base = excerpt()
    assert len(load_coco_keypoints(_write(tmp_path / "base.json", dump(base)))) == 7
    cases = structural_cases(base)
    for i in range(320):  # seeded: half text-level, half JSON-level corruptions
        if i % 2:
            label, data = hostile.mutate(rng, dump(base))
        else:
            label, data = json_mutation(rng, base)
        cases.append((label, data, None))
    for i, (label, data, expect) in enumerate(cases):
        root = tmp_path / f"c{i:03d}"
        root.mkdir()
        path = root / f"case{i:03d}.json"
        if data is None:
            path.mkdir()
        else:
            _write(path, data)
        strict = i % 5 == 4 and expect is None  # some in strict mode: the first problem raises

        def call(p=path, strict=strict):
            return load_coco_keypoints(p, warn=False, strict=strict)

        check = agrees_with_raw(path) if data is not None else lambda r: None
        run(f"case {i} ({label})", root, call, path.name, check, expect)
    run.finish(min_errors=100, min_accepted=100)
    assert run.counts["error"] + run.counts["accepted"] == len(cases) >= 300


def _write(path, data: bytes):
    path.write_bytes(data)
    return path
