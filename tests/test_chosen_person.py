"""Who was chosen (issue 31, item 5): with two people or more, ``triangulate`` (no ``--people``)
and ``lift`` name the person taken in one summary line pointing to ``--people`` / ``--person``
(none with one person); the default is the person most cameras see longest (triangulate) and
the track seen in most frames (lift), never the one merely largest in one view; ``lift --video``
takes the image size from the video."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np

from tensorpose.apps.lift import lift
from tensorpose.apps.lift import summary as lift_summary
from tensorpose.apps.triangulate import summary as triangulate_summary
from tensorpose.apps.triangulate import triangulate_folder
from tensorpose.io.openpose import bundled_tracks
from tensorpose.multiview.recording import read_cameras, triangulate_cameras

BUNDLED = bundled_tracks()[0].parent
TWO = Path(__file__).resolve().parent / "data" / "synthetic_two_people"
FRAMES = 40


def _took(lines: list[str], flag: str) -> list[str]:
    return [line for line in lines if "took" in line and flag in line]


def test_triangulate_takes_the_person_most_cameras_see_longest(tmp_path):
    # synthetic_two_people: the composited person in all four views in every frame (160
    # camera-frames), the balancing person missing from cam01 in frames 0 and 1, a bystander in
    # two views.
    r = triangulate_folder(TWO, TWO / "Calib.qca.txt", tmp_path / "out", fps=60, plot=False)
    people, k = r["chosen"]["people"], r["chosen"]["person"]
    assert len(people) == 3
    seen = [p["camera_frames"] for p in people]
    assert seen[k] == max(seen) == 4 * FRAMES and sorted(seen)[-2] < seen[k]
    # the output is that person's detections in every frame, not each frame's best candidate
    person = np.load(r["outputs"]["npz"])["person"]
    assert int((person >= 0).sum()) == 4 * FRAMES
    (line,) = _took(triangulate_summary(r), "--people")
    assert f"3 people seen by two cameras or more: took person {k + 1} (40 frames, 160" in line
    assert "mean centre (" in line and " m)" in line


def _one_person_recording(root: Path) -> Path:
    """The bundled trial with, per camera and frame, only the detection the triangulation
    took (the background bystander left out)."""
    cams = read_cameras(BUNDLED, BUNDLED / "Calib.qca.txt")
    tri = triangulate_cameras(cams)
    out = root / "one"
    out.mkdir()
    shutil.copy(BUNDLED / "Calib.qca.txt", out / "Calib.qca.txt")
    for c, folder in enumerate(cams.folders):  # four cameras
        (out / folder.name).mkdir()
        for t, f in enumerate(sorted(folder.glob("*.json"))):  # 100 small files
            d = json.loads(f.read_text())
            q = int(tri.person[t, c])
            d["people"] = [d["people"][q]] if q >= 0 else []
            (out / folder.name / f.name).write_text(json.dumps(d))
    return out


def test_triangulate_says_nothing_with_one_person(tmp_path):
    one = _one_person_recording(tmp_path)
    r = triangulate_folder(one, one / "Calib.qca.txt", tmp_path / "out", fps=60, plot=False)
    assert r["chosen"] is None
    assert not _took(triangulate_summary(r), "--people")
    # the bundled trial itself: a bystander seen by two cameras is named, the numbers kept
    r2 = triangulate_folder(BUNDLED, BUNDLED / "Calib.qca.txt", tmp_path / "b", fps=60,
                            plot=False)  # fmt: skip
    assert r2["chosen"]["person"] == 0 and len(r2["chosen"]["people"]) == 2
    a, b = np.load(r["outputs"]["npz"]), np.load(r2["outputs"]["npz"])
    np.testing.assert_array_equal(a["points"], b["points"])


def _body(scale: float, centre: tuple[float, float]) -> np.ndarray:
    """A BODY_25B person of the bundled trial's first frame, scaled, its mean keypoint at
    ``centre`` ``(25, 3)``."""
    f = sorted((BUNDLED / "cam01_json").glob("*.json"))[0]
    k = np.array(json.loads(f.read_text())["people"][0]["pose_keypoints_2d"]).reshape(-1, 3)
    xy = k[:, :2]
    c = xy[k[:, 2] > 0].mean(0)
    k[:, :2] = (xy - c) * scale + centre
    return k


def _write_tracks(folder: Path, brief_large: bool, scale: float = 1.0) -> None:
    """``FRAMES`` OpenPose files: a person in every frame; with ``brief_large`` a second one
    twice as large in the first ten frames only."""
    folder.mkdir()
    small = _body(0.5 * scale, (300 * scale, 900 * scale))
    large = _body(1.0, (750, 900))
    for t in range(FRAMES):  # small files
        people = [small + np.array([t * 0.5 * scale, 0, 0])]
        if brief_large and t < 10:
            people.insert(0, large)
        d = {"version": 1.3,
             "people": [{"pose_keypoints_2d": p.ravel().tolist()} for p in people]}  # fmt: skip
        (folder / f"cam.{t:04d}.json").write_text(json.dumps(d))


def test_lift_takes_the_track_seen_in_most_frames_and_says_so(tmp_path):
    _write_tracks(tmp_path / "two", brief_large=True)
    r = lift(tmp_path / "two", out=tmp_path / "o2", layout="BODY_25B", size=(1088, 1920),
             fps=60, progress=False)  # fmt: skip
    counts = r["tracks"]
    assert sorted(counts)[-2:] == [10, FRAMES]
    assert counts[r["person"]] == FRAMES  # the longest, not the large one
    (line,) = _took(lift_summary(r), "--person")
    assert f"2 people found: took track {r['person']} ({FRAMES} frames, mean box centre (" in line
    assert "px)" in line and "(10 frames" in line
    # one person: no such line; --person given: none either
    _write_tracks(tmp_path / "one", brief_large=False)
    r1 = lift(tmp_path / "one", out=tmp_path / "o1", layout="BODY_25B", size=(1088, 1920),
              fps=60, progress=False)  # fmt: skip
    assert not _took(lift_summary(r1), "--person")
    other = counts.index(10)
    r3 = lift(tmp_path / "two", out=tmp_path / "o3", layout="BODY_25B", size=(1088, 1920),
              fps=60, progress=False, person=other)  # fmt: skip
    assert r3["person"] == other and not _took(lift_summary(r3), "--person")


def test_lift_video_gives_the_image_size(tmp_path):
    _write_tracks(tmp_path / "small", brief_large=False, scale=0.25)
    w, h = 272, 480
    video = tmp_path / "small.mp4"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 60, (w, h))
    for t in range(FRAMES):  # a small video, as many frames as the keypoints
        writer.write(np.full((h, w, 3), 4 * t, np.uint8))
    writer.release()
    r = lift(tmp_path / "small", out=tmp_path / "o", layout="BODY_25B", fps=60, video=video,
             progress=False)  # fmt: skip
    assert r["size"] == (w, h)
    assert any(f.endswith(".mp4") for f in r["files"])


def test_lift_prefers_frames_seen_over_whole_skeletons(tmp_path):
    # a person seen in every frame, without its ankles in every other one (20 whole), a larger
    # whole one in 30 frames: the one seen longest is taken (the former rule, most frames with
    # every joint, took the other)
    folder = tmp_path / "partial"
    folder.mkdir()
    long, large = _body(0.5, (300, 900)), _body(1.0, (750, 900))
    partial = long.copy()
    partial[[15, 16]] = 0  # BODY_25B's ankles: not found
    for t in range(FRAMES):  # small files
        this = partial if t % 2 == 0 else long
        people = [large, this] if t < 30 else [this]
        d = {"people": [{"pose_keypoints_2d": p.ravel().tolist()} for p in people]}
        (folder / f"cam.{t:04d}.json").write_text(json.dumps(d))
    r = lift(folder, out=tmp_path / "o", layout="BODY_25B", size=(1088, 1920), fps=60,
             progress=False)  # fmt: skip
    assert sorted(r["tracks"]) == [30, FRAMES] and r["tracks"][r["person"]] == FRAMES
