"""Hostile OpenPose folders: seeded corruptions of three real frames of the bundled tracks
(text-level: truncation, byte flips, deleted/duplicated lines; JSON-level: deleted keys, values
of the wrong type, huge/negative/NaN numbers, deep nesting, empty or all-zero people, joints at
(0, 0)), and folders with subfolders where frame files are expected. Every case must load (into
tracks that respect the reader's rules) or raise OpenPoseError naming the folder or file; never
another exception, a hang or a write."""

import copy
import json

import numpy as np
import torch

from tensorpose.io.openpose import LAYOUTS, OpenPoseError, bundled_tracks
from tensorpose.io.tracks import read_tracks

SEED = 20240613
DEEP = "[" * 5000 + "]" * 5000
VALUES = [None, [], {}, "x", True, 1.5, -1, 0, 1e308, float("nan"), [1, 2], {"a": 1}, 10**30,
          "DEEP", [[1, 2, 3]], ["1", "2", "3"]]  # fmt: skip


def base_frames() -> list[dict]:
    """Three frames of camera 2 (two people in some of them)."""
    files = sorted(bundled_tracks()[1].glob("*.json"))[:3]
    return [json.loads(f.read_text()) for f in files]


def dump(doc: dict) -> bytes:
    return json.dumps(doc, indent=1).replace('"DEEP"', DEEP).encode()


def json_mutation(rng: np.random.Generator, doc: dict) -> tuple[str, bytes]:
    """One JSON-level corruption of a frame: ``(label, file bytes)``."""
    d = copy.deepcopy(doc)
    people = d["people"]
    kind = int(rng.integers(6))
    if kind == 0 or not people:
        value = VALUES[int(rng.integers(len(VALUES)))]
        d["people"] = value
        return f"people = {str(value)[:20]}", dump(d)
    i = int(rng.integers(len(people)))
    kp = people[i]["pose_keypoints_2d"]
    if kind == 1:
        value = VALUES[int(rng.integers(len(VALUES)))]
        people[i]["pose_keypoints_2d"] = value
        return f"people[{i}].pose_keypoints_2d = {str(value)[:20]}", dump(d)
    if kind == 2:
        k = int(rng.integers(len(kp)))
        value = [float("nan"), -1e308, 1e308, -5.0, 0, 2.5, None, "1", True, 10**400][
            int(rng.integers(10))
        ]
        kp[k] = value
        return f"people[{i}] value {k} = {str(value)[:20]}", dump(d)
    if kind == 3:  # cut or extend the keypoint list
        n = int(rng.integers(0, len(kp) + 7))
        people[i]["pose_keypoints_2d"] = (kp + kp)[:n]
        return f"people[{i}] with {n} numbers", dump(d)
    if kind == 4:  # all confidences 0 (OpenPose's empty detections), or joints at (0, 0)
        arr = np.asarray(kp, float).reshape(-1, 3)
        if rng.integers(2):
            arr[:, 2] = 0.0
            label = f"people[{i}] all confidences 0"
        else:
            sel = rng.random(len(arr)) < 0.5
            arr[sel, :2] = 0.0
            label = f"people[{i}] {int(sel.sum())} joints at (0, 0) with confidence"
        people[i]["pose_keypoints_2d"] = arr.ravel().tolist()
        return label, dump(d)
    people.insert(0, copy.deepcopy(people[i]))  # the same person twice
    return f"people[{i}] twice", dump(d)


def empty_people_frames(T: int = 40, ghosts: int = 5) -> list[bytes]:
    """One real person plus ``ghosts`` all-zero people in each of ``T`` frames: read as one
    track (ignoring the ghosts), not ``1 + T * ghosts`` tracks."""
    doc = base_frames()[0]
    real = doc["people"][0]["pose_keypoints_2d"]
    ghost = [0.0] * len(real)
    people = [{"pose_keypoints_2d": real}] + [{"pose_keypoints_2d": ghost}] * ghosts
    return [json.dumps({"version": 1.3, "people": people}).encode()] * T


def structural_cases(frames: list[dict]) -> list[tuple[str, dict, str]]:
    """``(label, {file name: bytes, or None for a folder}, expected outcome)``; ``"."`` as the
    only name makes the case folder a file."""
    ok = {f"f{t:04d}.json": dump(doc) for t, doc in enumerate(frames)}

    def edit(t, fn):
        d = copy.deepcopy(frames[t])
        fn(d)
        return {**ok, f"f{t:04d}.json": dump(d)}

    kp0 = frames[0]["people"][0]["pose_keypoints_2d"]
    huge = b"9" * 5000 + b", 1, 1]}]}"

    def set_kp(t, value):
        return edit(t, lambda d: d["people"][0].__setitem__("pose_keypoints_2d", value))

    error = [
        ("folder is a file", {".": b"{}"}),
        ("empty folder", {}),
        ("only a subfolder named like a frame", {"f0000.json": None}),
        ("empty frame file", {**ok, "f0001.json": b""}),
        ("people null", edit(1, lambda d: d.__setitem__("people", None))),
        ("people an object", edit(1, lambda d: d.__setitem__("people", {"0": {}}))),
        ("not UTF-8", {**ok, "f0001.json": ok["f0001.json"].replace(b"people", b"pe\xffple")}),
        ("deep nesting", {**ok, "f0002.json": DEEP.encode()}),
        ("huge integer", {**ok, "f0002.json": b'{"people": [{"pose_keypoints_2d": [' + huge}),
        ("nested keypoints", set_kp(0, [kp0[:3]] * 25)),
        ("keypoints as strings", set_kp(0, [str(v) for v in kp0])),
        (
            "20 keypoints",
            {
                f"f{t}.json": json.dumps({"people": [{"pose_keypoints_2d": kp0[:60]}]}).encode()
                for t in range(2)
            },
        ),
        ("25 then 18 keypoints", set_kp(2, kp0[:54])),
        ("coordinate 1e9", set_kp(0, [1e9, *kp0[1:]])),
    ]
    accepted = [
        ("three real frames", ok),
        ("plus a subfolder named like a frame", {**ok, "f0003.json": None}),
        ("a frame file replaced by a folder", {**ok, "f0001.json": None}),
        ("plus a file that is not .json", {**ok, "notes.txt": b"\xff\x00"}),
        ("frame without people", edit(1, lambda d: d.__setitem__("people", []))),
        (
            "40 frames of 5 ghosts and one person",
            {f"f{t:04d}.json": b for t, b in enumerate(empty_people_frames())},
        ),
        ("negative coordinates", set_kp(0, [-abs(v) for v in kp0])),
        (
            "17 keypoints",
            {
                f"f{t}.json": json.dumps({"people": [{"pose_keypoints_2d": kp0[:51]}]}).encode()
                for t in range(2)
            },
        ),
        ("face keypoints only", set_kp(1, [])),
    ]
    return [(*c, "error") for c in error] + [(*c, "accepted") for c in accepted]


def tracks_follow_the_rules(folder):
    def check(tr) -> None:
        files = sorted(p for p in folder.glob("*.json") if p.is_file())
        T, P, K, _ = tr.keypoints.shape
        assert T == len(tr.files) == len(files) and K == len(LAYOUTS[tr.layout])
        assert tr.layout_reason
        people = 0
        for f in files:  # independent count of the people listed
            people += len(json.loads(f.read_bytes()).get("people", []))
        assert P <= people
        for x in (tr.raw, tr.keypoints):
            ok = ~torch.isnan(x[..., 2])
            assert (x[..., 2][ok] > 0).all()
            assert not ((x[..., 0] == 0) & (x[..., 1] == 0) & ok).any()  # (0, 0) is missing
            assert torch.isfinite(x[..., :2][ok]).all()
        assert (tr.keypoints[..., 2][~torch.isnan(tr.keypoints[..., 2])] >= 0.3).all()
        # every track has a found joint somewhere: empty detections are no tracks
        assert (~torch.isnan(tr.raw[..., 2])).any(-1).any(0).all()

    return check


def test_hostile_openpose(tmp_path, hostile):
    run = hostile.runner("OpenPose", OpenPoseError)
    rng = np.random.default_rng(SEED)
    frames = base_frames()
    cases = structural_cases(frames)
    for i in range(300):  # seeded: half text-level, half JSON-level, on one frame of three
        t = int(rng.integers(3))
        if i % 2:
            label, data = hostile.mutate(rng, dump(frames[t]))
        else:
            label, data = json_mutation(rng, frames[t])
        files = {f"f{s:04d}.json": dump(doc) for s, doc in enumerate(frames)}
        files[f"f{t:04d}.json"] = data
        cases.append((f"frame {t}: {label}", files, None))
    for i, (label, files, expect) in enumerate(cases):
        root = tmp_path / f"c{i:03d}"
        folder = root / f"case{i:03d}"
        if "." in files:
            root.mkdir()
            folder.write_bytes(files["."])
        else:
            folder.mkdir(parents=True)
        for name, data in files.items():
            if data is None:
                (folder / name).mkdir()
            elif name != ".":
                (folder / name).write_bytes(data)
        layout = "BODY_25B" if i % 7 == 6 and expect is None else None

        def call(f=folder, layout=layout):
            return read_tracks(f, layout=layout)

        check = tracks_follow_the_rules(folder)
        run(f"case {i} ({label})", root, call, folder.name, check, expect)
    run.finish(min_errors=100, min_accepted=60)
    assert run.counts["error"] + run.counts["accepted"] == len(cases) >= 300
