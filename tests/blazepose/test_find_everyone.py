"""BlazePose video mode with ``find_everyone`` (tensorpose/blazepose/pipeline.py): the detector
schedule and tiles, tracks matched to detections, merged skeletons dropped, two tracks on one
person merged, identities recalled; on a real bundled picture, against naive references."""

import json
from pathlib import Path

import pytest
import torch

from tensorpose.blazepose.geometry import head_down, split_torso, tile_rois, torso_distance
from tensorpose.blazepose.pipeline import BlazePose, BlazePoseTracker, detect_people
from tensorpose.io.video import read_image
from tensorpose.pose2d import pad_frames

PICTURE = Path(__file__).resolve().parents[2] / "tensorpose/assets/coco/images/000000000790.jpg"


@pytest.fixture(scope="module")
def bp():
    return BlazePose.load("cpu")


@pytest.fixture(scope="module")
def frames():
    """Four people at a table (640 x 422); ``hidden``: the left two greyed out, which leaves
    the man in black and the woman in blue, side by side and overlapping."""
    full = read_image(PICTURE)
    hidden = full.copy()
    hidden[:, :300] = 128
    return pad_frames([hidden, full], torch.device("cpu"))


def _naive_torso_distance(a, b):
    d = sum(float(torch.dist(a[i], b[i])) for i in range(2)) / 2
    return d / max(float(torch.dist(a[0], a[1])), float(torch.dist(b[0], b[1])), 1.0)


def test_torso_distance_and_split_torso_against_loops():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(5, 2, 2, generator=g) * 100
    b = torch.rand(4, 2, 2, generator=g) * 100
    got = torso_distance(a[:, None], b[None])
    want = torch.tensor([[_naive_torso_distance(x, y) for y in b] for x in a])
    torch.testing.assert_close(got, want)
    # split: hip on torso 0's hip, shoulder on torso 1's shoulder
    people = torch.tensor([[[0.0, 100.0], [0.0, 0.0]], [[60.0, 100.0], [60.0, 0.0]]])
    merged = torch.tensor([[2.0, 98.0], [58.0, 3.0]])
    whole = torch.tensor([[1.0, 97.0], [2.0, 4.0]])
    split = split_torso(torch.stack([merged, whole]), people)
    assert split.tolist() == [True, False]
    # a NaN row (no detection there) is never the other torso
    masked = people.clone()
    masked[1] = float("nan")
    assert split_torso(merged, masked).tolist() is False


def test_head_down_against_a_loop():
    """Shoulders below the hips by more than a quarter torso (image y down): head down."""
    g = torch.Generator().manual_seed(1)
    torso = torch.rand(50, 2, 2, generator=g) * 200
    want = []
    for (hx, hy), (sx, sy) in torso.tolist():
        length = ((sx - hx) ** 2 + (sy - hy) ** 2) ** 0.5
        want.append(sy - hy > 0.25 * length)
    assert head_down(torso).tolist() == want
    upright, lying = torch.tensor([[0.0, 100.0], [10.0, 0.0]]), torch.tensor([[0.0, 0.0], [90, 9]])
    assert not head_down(upright) and not head_down(lying) and head_down(upright.flip(0))


def test_tile_rois_cover_the_frame_with_overlapping_squares():
    t = tile_rois((1088, 1920))
    assert t.shape == (3, 3) and (t[:, 2] == 1088).all() and (t[:, 0] == 544).all()
    top, bottom = t[:, 1] - 544, t[:, 1] + 544
    assert top[0] == 0 and bottom[-1] == 1920 and (top[1:] < bottom[:-1]).all()
    wide = tile_rois((1920, 1088))
    torch.testing.assert_close(wide, t[:, [1, 0, 2]])
    assert len(tile_rois((640, 600))) == 0  # nearly square: the whole frame is enough


def _coco_shoulder_centres() -> torch.Tensor:
    """``(P, 2)``: the COCO annotators' mid-shoulders of the picture's people (both marked)."""
    ann = json.loads((PICTURE.parents[1] / "person_keypoints.json").read_text())["annotations"]
    kp = [torch.tensor(a["keypoints"], dtype=torch.float32).view(17, 3) for a in ann
          if a["image_id"] == 790]  # fmt: skip
    return torch.stack([k[5:7, :2].mean(0) for k in kp if (k[5:7, 2] > 0).all()])


def test_detect_people_finds_whom_the_whole_frame_misses(bp, frames):
    """The whole letterboxed frame gives one of the two people left in ``hidden``; its squares
    give both, each once, each where COCO's annotators put that person's shoulders."""
    images, sizes = frames
    det = detect_people(bp, images[:1], sizes[:1], 2)
    whole = detect_people(bp, images[:1], sizes[:1], 2, tiles=False)
    assert int(whole["valid"].sum()) == 1 and int(det["valid"].sum()) == 2
    shoulders = det["torso"][0, det["valid"][0], 1]
    d = torch.cdist(shoulders, _coco_shoulder_centres())
    assert (d.min(1).values < 15).all() and len(set(d.argmin(1).tolist())) == 2


def _track_both(bp, images, sizes, **kw):
    tr = BlazePoseTracker(bp, streams=1, max_people=2, smooth=False, **kw)
    first = tr.step(images[:1], sizes[:1])[0]
    assert sorted(first["track"].tolist()) == [0, 1]
    return tr, first


def test_find_everyone_is_the_default_for_several_people_only(bp):
    assert BlazePoseTracker(bp, 1, 2).everyone and not BlazePoseTracker(bp, 1, 1).everyone


def test_detector_schedule_fires_every_n_frames(bp, frames):
    """Two people tracked on a still picture: MediaPipe's rules detect once; find_everyone
    detects on frames 0, 3, 6 with ``detect_every=3`` (no alarm: the flags stay high)."""
    images, sizes = frames
    tr, _ = _track_both(bp, images, sizes, detect_every=3)
    mp = BlazePoseTracker(bp, 1, 2, smooth=False, find_everyone=False)
    mp.step(images[1:], sizes[1:])
    for _ in range(6):
        tr.step(images[:1], sizes[:1])
        mp.step(images[1:], sizes[1:])
    assert tr.detections == len([t for t in range(7) if t % 3 == 0]) and mp.detections == 1


def test_two_tracks_on_one_person_are_merged_and_the_identity_comes_back(bp, frames):
    """Slot 1's ROI moved onto slot 0's person: both land on one person; the track that slid
    there (slot 1, far from where its motion put it) is dropped, slot 0 keeps its landmarks;
    the next frame detects and gives slot 1 its person back (recalled by position)."""
    images, sizes = frames
    tr, first = _track_both(bp, images, sizes)
    ref, _ = _track_both(bp, images, sizes)  # the same frames, nothing moved
    with torch.inference_mode():
        for k in ("center", "side", "rotation"):
            getattr(tr, k)[0, 1] = getattr(tr, k)[0, 0]
    merged = tr.step(images[:1], sizes[:1])[0]
    want = ref.step(images[:1], sizes[:1])[0]
    assert merged["track"].tolist() == [0] and tr.dropped["same person"] == 1
    assert tr.redetect.all()
    same = want["keypoints"][want["track"] == 0][0]
    assert (merged["keypoints"][0, :, :2] - same[:, :2]).norm(dim=-1).median() < 0.5
    back = tr.step(images[:1], sizes[:1])[0]
    assert sorted(back["track"].tolist()) == [0, 1]
    again = back["keypoints"][back["track"] == 1][0]
    was = first["keypoints"][first["track"] == 1][0]
    assert (again[:, :2] - was[:, :2]).norm(dim=-1).median() < 0.5  # from the same detection


def test_a_merged_skeleton_is_dropped_and_the_person_taken_again(bp, frames):
    """Slot 0's torso set to one person's hips under the other's shoulders (a skeleton merged
    from two people): the next detection drops it and starts the unmatched person in the
    freed slot, where that person was tracked before."""
    images, sizes = frames
    tr, first = _track_both(bp, images, sizes)
    with torch.inference_mode():
        t0, t1 = tr.torso[0, 0].clone(), tr.torso[0, 1].clone()
        tr.torso[0, 0] = torch.stack([t0[0], t1[1]])
        tr.motion.zero_()
        tr.redetect[:] = True
    out = tr.step(images[:1], sizes[:1])[0]
    assert tr.dropped["merged skeleton"] == 1
    assert sorted(out["track"].tolist()) == [0, 1]
    now = out["keypoints"][out["track"] == 0][0]
    was = first["keypoints"][first["track"] == 0][0]
    assert (now[:, :2] - was[:, :2]).norm(dim=-1).median() < 5.0
