"""The whole-folder OpenPose reader (io.openpose._read_whole: numbers gathered over all files,
checked and converted at once) against the file-by-file reader it replaces on well-formed
input (_read_one_by_one: each file parsed and checked on its own), on the bundled tracks, on
hand-made folders (identities, recorded layouts, empty and ghost people) and on seeded
corruptions of real frames: it returns the same frames, counts, identities and layout, or
nothing (then read_openpose_files raises the file-by-file reader's error, naming the file)."""

import json
import os

import numpy as np
import pytest

from tensorpose.io.files import list_files, read_regular
from tensorpose.io.openpose import (
    OpenPoseError,
    _read_one_by_one,
    _read_whole,
    bundled_tracks,
    frame_files,
    read_openpose_files,
)

from .conftest import mutate_bytes
from .test_hostile_openpose import base_frames, dump, json_mutation


def assert_same(a, b) -> None:
    """Two FrameFiles equal: every frame's array (shape, dtype, bits), counts, ids, layout."""
    assert len(a.frames) == len(b.frames)
    for x, y in zip(a.frames, b.frames, strict=True):  # every frame
        assert x.shape == y.shape and x.dtype == y.dtype
        assert x.tobytes() == y.tobytes()
    assert a.ignored == b.ignored and a.layout == b.layout
    assert (a.ids is None) == (b.ids is None)
    if a.ids is not None:
        assert [i.tolist() for i in a.ids] == [i.tolist() for i in b.ids]
        assert all(i.dtype == np.int64 for i in a.ids)


def test_bundled_tracks_read_the_same_whole_and_file_by_file():
    for folder in bundled_tracks():  # four cameras
        files = [str(p) for p in frame_files(folder)]
        whole = _read_whole(files, 25)
        assert whole is not None
        assert_same(whole, _read_one_by_one(files, 25, "x"))
        assert sum(len(f) for f in whole.frames) >= 100


def write(folder, docs):
    folder.mkdir()
    for t, doc in enumerate(docs):  # one file per frame
        (folder / f"f{t:03d}.json").write_text(json.dumps(doc))
    return [str(p) for p in frame_files(folder)]


def kp(rng, K=25, ints=False):
    a = np.column_stack([rng.uniform(1, 900, (K, 2)), rng.uniform(0.05, 1, K)])
    a[rng.random(K) < 0.2] = 0.0  # joints not found
    return (np.round(a).astype(int) if ints else a).ravel().tolist()


@pytest.mark.parametrize("case", ["openpose", "ids", "duplicate ids", "mixed layouts",
                                  "missing ids", "ghosts and empty"])  # fmt: skip
def test_hand_made_folders_read_the_same(tmp_path, case):
    rng = np.random.default_rng(len(case))
    docs = []
    for t in range(12):  # frames with 0..3 people
        people = [{"person_id": [p], "pose_keypoints_2d": kp(rng, ints=(t + p) % 3 == 0)}
                  for p in range(t % 4)]  # fmt: skip
        doc = {"version": 1.3, "people": people}
        if case != "openpose":
            doc["keypoint_layout"] = "BODY_25B"
        if case == "duplicate ids" and t == 6:
            people[1]["person_id"] = [0]
        if case == "mixed layouts" and t == 7:
            doc["keypoint_layout"] = "BODY_25"
        if case == "missing ids" and t == 3:
            del people[0]["person_id"]
        if case == "ghosts and empty":
            people += [{"pose_keypoints_2d": [0.0] * 75}, {"pose_keypoints_2d": []}]
        docs.append(doc)
    files = write(tmp_path / "f", docs)
    whole = _read_whole(files, 25)
    assert whole is not None
    assert_same(whole, _read_one_by_one(files, 25, "x"))
    assert (whole.ids is not None) == (case in ("ids", "mixed layouts", "ghosts and empty"))
    assert whole.layout == (None if case in ("openpose", "mixed layouts") else "BODY_25B")
    assert whole.ignored == (12 if case == "ghosts and empty" else 0)


def test_seeded_corruptions_read_the_same_or_are_left_to_the_file_by_file_reader(tmp_path):
    rng = np.random.default_rng(7)
    frames = base_frames()
    same = left = 0
    for i in range(240):  # seeded: half text-level, half JSON-level, on one frame of three
        t = int(rng.integers(3))
        data = (mutate_bytes(rng, dump(frames[t])) if i % 2 else json_mutation(rng, frames[t]))[1]
        folder = tmp_path / f"c{i:03d}"
        folder.mkdir()
        for s, doc in enumerate(frames):  # three frames, one corrupted
            (folder / f"f{s}.json").write_bytes(data if s == t else dump(doc))
        files = [str(p) for p in frame_files(folder)]
        whole = _read_whole(files, 25)
        if whole is None:  # the file-by-file reader decides (error or result)
            left += 1
            try:
                expected = _read_one_by_one(files, 25, "x")
            except (OpenPoseError, TypeError) as e:
                with pytest.raises(type(e)) as got:
                    read_openpose_files(files, 25, "x")
                assert str(got.value) == str(e)
            else:
                assert_same(read_openpose_files(files, 25, "x"), expected)
            continue
        same += 1
        assert_same(whole, _read_one_by_one(files, 25, "x"))
    assert same >= 40 and left >= 100, (same, left)


def test_list_files_is_sorted_glob(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for name in ["f10.json", "f9.json", "f010.json", ".h.json", "a.JSON", "x.txt", "f2.json"]:
        (d / name).write_text("{}")
    (d / "sub.json").mkdir()
    os.symlink("f9.json", d / "link.json")
    os.symlink("nowhere", d / "broken.json")
    os.symlink("loop.json", d / "loop.json")
    want = sorted((p for p in d.glob("*.json") if p.is_file()),
                  key=lambda p: [int(s) if s.isdigit() else s for s in
                                 __import__("re").split(r"(\d+)", p.name)])  # fmt: skip
    assert list_files(d, ".json") == [str(p) for p in want]
    assert [p.name for p in frame_files(d)][:4] == [".h.json", "f2.json", "f9.json", "f10.json"]
    assert list_files(tmp_path / "missing", ".json") == []
    assert list_files(d / "f2.json", ".json") == []  # a file, not a folder


def test_read_regular(tmp_path):
    f = tmp_path / "a.json"
    f.write_bytes(b"12345")
    assert read_regular(f, 5) == b"12345"
    assert read_regular(f, 4) is None  # over the limit
    assert read_regular(tmp_path, 100) is None  # a folder
    assert read_regular(tmp_path / "missing", 100) is None
    fifo = tmp_path / "p.json"
    os.mkfifo(fifo)
    assert read_regular(fifo, 100) is None  # refused, never opened (no hang)
