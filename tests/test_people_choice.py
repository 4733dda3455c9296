"""Who is taken when several people are seen (issue 31, item 5): ``triangulate`` without
``--people`` takes the person most cameras see longest (never the one merely largest in a
view) and says so; ``lift`` takes the track seen in the most frames and says so; ``lift
--video`` takes the image size from the video."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.apps.lift import lift
from tensorpose.apps.lift import summary as lift_summary
from tensorpose.apps.triangulate import people_line, summary, triangulate_folder
from tensorpose.io.openpose import bundled_tracks
from tensorpose.io.tracks import _pick_person, read_tracks
from tensorpose.layouts import to_h36m17
from tensorpose.multiview.people import choose_person, seen_by, triangulate_cameras_one
from tensorpose.multiview.recording import read_cameras

TWO = Path(__file__).resolve().parent / "data" / "synthetic_two_people"
CAM01 = bundled_tracks()[0]


@pytest.fixture(scope="module")
def two():
    return read_cameras(TWO, TWO / "Calib.qca.txt")


def _composited(d: np.ndarray) -> np.ndarray:
    """``(P,)`` whether each detection ``(P, K, 3)`` is the composited person (confidences 0
    or exactly 1)."""
    c = d[..., 2]
    return ((c == 1) | (c == 0)).all(-1) & (c == 1).any(-1)


def _keep(cams, composited: dict, balancing: dict):
    """``cams`` with, per camera, the composited / balancing person kept only in the frames
    ``composited[c]`` / ``balancing[c]`` (a range; a camera not named keeps none)."""
    out = copy.copy(cams)
    out.detections = []
    for c, frames in enumerate(cams.detections):
        kept = []
        for t, d in enumerate(frames):
            comp = _composited(d)
            keep = np.where(comp, t in composited.get(c, ()), t in balancing.get(c, ()))
            kept.append(d[keep])
        out.detections.append(kept)
    return out


def _taken_is_composited(cams, tri) -> bool:
    q = tri.person
    hits = [bool(_composited(cams.detections[c][t][q[t, c] : q[t, c] + 1]).all())
            for t in range(len(q)) for c in range(q.shape[1]) if q[t, c] >= 0]  # fmt: skip
    assert hits and len(set(hits)) == 1  # one person throughout, never a mix
    return hits[0]


def test_takes_the_person_most_cameras_see_longest(two):
    T, all4 = two.frames, range(4)
    every = range(T)
    # the composited person in all four cameras for a quarter of the frames; the balancing
    # person in three cameras for all of them: the balancing one
    cams = _keep(two, {c: range(T // 4) for c in all4}, {c: every for c in range(3)})
    tri, people, k = triangulate_cameras_one(cams)
    assert len(people) >= 2 and not _taken_is_composited(cams, tri)
    # the composited person (larger than the other in cameras 0 and 1: checked below) seen by
    # two cameras all the time, the balancing one by all four in three quarters of the
    # frames: the balancing one (more camera-frames), never the merely largest
    cams = _keep(two, {0: every, 1: every}, {c: range(T // 4, T) for c in all4})
    sizes = [np.ptp(d[_composited(d)][0, :, 1]) / np.ptp(d[~_composited(d)][0, :, 1])
             for d in (cams.detections[0][T // 2], cams.detections[1][T // 2])]  # fmt: skip
    assert min(sizes) > 1
    tri, people, k = triangulate_cameras_one(cams)
    assert not _taken_is_composited(cams, tri)
    assert people[k]["camera_frames"] > max(p["camera_frames"] for p in people if p is not
                                            people[k])  # fmt: skip
    # the other way round: the composited person all the time in all four cameras
    cams = _keep(two, {c: every for c in all4}, {c: range(T // 4) for c in all4})
    tri, people, k = triangulate_cameras_one(cams)
    assert _taken_is_composited(cams, tri)
    assert tri.valid.any(-1)[T // 4 :].all()  # and in every frame it is seen


def test_steady_cameras_outrank_sporadic_joins():
    """A camera that joins a person in under half of its frames does not count."""
    T, C, J = 10, 3, 4
    person = np.zeros((T, C), int)
    valid = np.ones((T, J), bool)
    used = np.ones((T, J, C), bool)
    a = seen_by(person, used, valid)
    sporadic = person.copy()
    sporadic[4:, 2] = -1  # camera 2 in 4 of 10 frames
    b = seen_by(sporadic, used, valid)
    assert a == {"frames": 10, "per_camera": [10, 10, 10], "camera_frames": 30,
                 "steady_camera_frames": 30}  # fmt: skip
    assert b["camera_frames"] == 24 and b["steady_camera_frames"] == 20
    assert choose_person([b, a]) == 1 and choose_person([a, a]) == 0


def test_the_summary_names_the_person_taken_only_with_two(two, tmp_path):
    r = {"cameras": two.names}
    full = triangulate_folder(TWO, TWO / "Calib.qca.txt", tmp_path / "o", fps=60, plot=False)
    people, k = full["people_found"], full["person_taken"]
    line = [x for x in summary(full) if "people found" in x]
    assert len(people) >= 2 and len(line) == 1
    assert f" px in {people[k]['image']['camera']}" in line[0]
    assert f"  {len(people)} people found: triangulated p" in line[0] and "--people" in line[0]
    assert f"triangulated p{k + 1} (seen in {people[k]['frames']} frames" in line[0]
    one = _keep(two, {c: range(two.frames) for c in range(4)}, {})  # the composited alone
    _, people, k = triangulate_cameras_one(one)
    assert len(people) == 1 and people_line(r | {"people_found": people,
                                                 "person_taken": k}) == []  # fmt: skip


def test_lift_picks_the_track_seen_in_most_frames_not_the_largest():
    kp = read_tracks(CAM01).keypoints[:40, :1]  # one person, 40 frames
    big = kp.clone()
    big[..., :2] = big[..., :2] * 3  # three times larger
    big[10:] = float("nan")  # seen in 10 frames
    tracks = torch.cat([big, kp], 1)
    assert _pick_person(tracks, "BODY_25B", None, CAM01)[0] == 1
    # naive reference: frames seen per track, by a loop
    frames = [sum(bool(torch.isfinite(tracks[t, p, :, :2]).all(-1).any()) for t in range(40))
              for p in range(2)]  # fmt: skip
    assert frames == [10, 40]


def test_lift_says_which_person_it_took(tmp_path):
    r = lift(CAM01, None, tmp_path / "a", size=(1088, 1920), progress=False)
    lines = [x for x in lift_summary(r) if "people found" in x]
    assert len(lines) == 1 and f"lifted person {r['person']} (seen in" in lines[0]
    assert "--person" in lines[0] and " px)" in lines[0]
    one = read_tracks(CAM01).raw[:, r["person"]].numpy()
    np.savez(tmp_path / "one.npz", keypoints=one)
    r = lift(tmp_path / "one.npz", None, tmp_path / "b", layout="BODY_25B", size=(1088, 1920),
             progress=False)  # fmt: skip
    assert not [x for x in lift_summary(r) if "people found" in x]


def test_lift_video_gives_the_image_size(tmp_path):
    cv2 = pytest.importorskip("cv2")
    W, H, T = 96, 64, 8
    vid = tmp_path / "rec.mp4"
    w = cv2.VideoWriter(str(vid), cv2.VideoWriter_fourcc(*"mp4v"), 10, (W, H))
    for _ in range(T):
        w.write(np.zeros((H, W, 3), np.uint8))
    w.release()
    kp = to_h36m17(read_tracks(CAM01).keypoints[:T, :1], "BODY_25B")[:, 0].numpy()
    kp[..., 0] *= W / 1088
    kp[..., 1] *= H / 1920
    np.savez(tmp_path / "rec.npz", keypoints=kp)
    r = lift(tmp_path / "rec.npz", None, tmp_path / "v", layout="H36M_17", video=vid, fps=10,
             progress=False)  # fmt: skip
    assert r["size"] == (W, H) and r["size_source"] == "--video"
    assert any(f"size {W}x{H} (the video's)" in x for x in lift_summary(r))
