"""The BlazePose pipeline (tensorpose/blazepose/pipeline.py) on real bundled pictures."""

from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.blazepose.geometry import roi_matrix
from tensorpose.blazepose.pipeline import BlazePose, BlazePoseTracker, crop_rois, image_people
from tensorpose.io.video import read_image
from tensorpose.ops.affine import warp_affine_fixed_point
from tensorpose.pose2d import pad_frames

IMAGES = sorted(
    (Path(__file__).resolve().parents[2] / "tensorpose/assets/coco/images").glob("*.jpg")
)


@pytest.fixture(scope="module")
def bp():
    return BlazePose.load("cpu")


@pytest.fixture(scope="module")
def frames():
    return [read_image(p) for p in IMAGES[:2]]


def test_image_mode_finds_people_inside_the_frames(bp, frames):
    images, sizes = pad_frames(frames, torch.device("cpu"))
    people = image_people(bp, images, sizes, max_people=2)
    assert len(people) == 2
    found = 0
    for p, f in zip(people, frames, strict=True):
        n = len(p["scores"])
        assert p["keypoints"].shape == (n, 33, 3) and p["boxes"].shape == (n, 4)
        assert (p["scores"] >= 0.5).all()
        found += n
        for kp in p["keypoints"]:
            vis = kp[:, 2] > 0.8
            xy = kp[vis, :2]
            assert (xy[:, 0] > -0.1 * f.shape[1]).all() and (xy[:, 0] < 1.1 * f.shape[1]).all()
    assert found >= 1
    for p in people:  # ordinary tensors, though computed under inference mode
        assert not any(v.is_inference() for v in p.values())
        p["keypoints"] += 0


def test_image_mode_is_per_frame(bp, frames):
    """A frame's people do not depend on the other frames of the batch (up to the networks'
    float rounding, which differs with the batch size and can move a crop pixel by one grey
    level)."""
    images, sizes = pad_frames(frames[:1], torch.device("cpu"))
    alone = image_people(bp, images, sizes, max_people=2)[0]
    images, sizes = pad_frames(frames[:1] * 2, torch.device("cpu"))
    both = image_people(bp, images, sizes, max_people=2)
    for p in both:
        np.testing.assert_allclose(p["keypoints"].numpy(), alone["keypoints"].numpy(), atol=0.1)


def test_tracker_follows_and_batches_streams(bp, frames):
    f = frames[0]
    images, sizes = pad_frames([f, f], torch.device("cpu"))
    tr = BlazePoseTracker(bp, streams=2, max_people=1)
    first = tr.step(images, sizes)
    assert tr.detections == 2
    if len(first[0]["scores"]) == 0:
        pytest.skip("nobody found in the first bundled picture")
    again = tr.step(images, sizes)  # the same frame: tracked from the landmarks, no detector
    assert tr.detections == 2
    for a, b in zip(first, again, strict=True):
        assert a["track"].tolist() == b["track"].tolist() == [0]
        d = (a["keypoints"][0, :, :2] - b["keypoints"][0, :, :2]).norm(dim=-1)
        assert d.median() < 0.05 * f.shape[0]
    np.testing.assert_allclose(again[0]["keypoints"].numpy(), again[1]["keypoints"].numpy(),
                               atol=0.02)  # fmt: skip
    assert not any(v.is_inference() for p in again for v in p.values())
    blank = torch.zeros_like(images)
    assert all(len(p["scores"]) == 0 for p in tr.step(blank, sizes))
    assert tr.redetect.all()


def test_tracker_finds_a_person_who_comes_into_view(bp):
    """With ``max_people=2`` and MediaPipe's rules (``find_everyone=False``) a stream that
    tracks one person keeps running the detector (as
    MediaPipe's PoseLandmarker in video mode does while it tracks fewer than ``num_poses``):
    a second person who was hidden in the first frame is found in the next, with the landmarks
    image mode gives that person, and once both are tracked the detector rests."""
    full = read_image(IMAGES[0].parent / "000000000790.jpg")  # two people, left and right
    hidden = full.copy()
    hidden[:, :300] = 128  # the left person out of view
    images, sizes = pad_frames([hidden, full], torch.device("cpu"))
    want = image_people(bp, images[1:], sizes[1:], max_people=2)[0]
    assert len(want["scores"]) == 2
    tr = BlazePoseTracker(bp, streams=1, max_people=2, smooth=False, find_everyone=False)
    first = tr.step(images[:1], sizes[:1])[0]
    assert len(first["scores"]) == 1 and tr.detections == 1 and tr.redetect.all()
    second = tr.step(images[1:], sizes[1:])[0]
    assert tr.detections == 2 and sorted(second["track"].tolist()) == [0, 1]
    new = second["keypoints"][second["track"] == 1][0]
    left = want["keypoints"][int(want["boxes"][:, 0].argmin())]
    d = (new[:, :2] - left[:, :2]).norm(dim=-1)
    assert d.median() < 0.5, d  # pixels: the same detection and crop as image mode
    tr.step(images[1:], sizes[1:])
    assert tr.detections == 2 and not tr.redetect.any()


def test_image_mode_equals_mediapipe_on_bundled_pictures(bp, device):
    """image_people on three bundled pictures against mediapipe==0.10.14's own
    ``mp.solutions.pose`` (static_image_mode=True) on the same pixels, recorded by
    ``python scripts/compare_mediapipe.py --fixture``: the same people, the landmarks a median of
    a hundredth of a pixel apart (the networks' float rounding), the same visibilities. One
    landmark per person may be further: a landmark whose heatmap window sits on a cell edge
    or whose peak is near the 0.5 refinement threshold jumps with float rounding (MediaPipe's
    own output does too when one pixel in ten thousand changes by one grey level). The same on
    CUDA."""
    bp = bp if device.type == "cpu" else BlazePose.load(device)
    ref = np.load(Path(__file__).resolve().parents[1] / "data/blazepose_mediapipe_images.npz")
    frames = [read_image(Path(IMAGES[0]).parent / n) for n in ref["names"]]
    images, sizes = pad_frames(frames, device)
    people = [{k: v.cpu() for k, v in p.items()} for p in image_people(bp, images, sizes, 1)]
    assert sum(len(p["scores"]) for p in people) >= 2
    for i, p in enumerate(people):
        kp, want = p["keypoints"].numpy(), ref[f"keypoints_{i}"]
        assert kp.shape == want.shape
        d = np.linalg.norm(kp[..., :2] - want[..., :2], axis=-1)
        assert d.size == 0 or (np.median(d) < 0.02 and np.sort(d, -1)[:, -2].max() < 0.25), d
        np.testing.assert_allclose(kp[..., 2], want[..., 2], rtol=0, atol=1e-3)


def test_tracker_smoothing_starts_from_the_raw_landmarks(bp, frames):
    """MediaPipe's landmark smoothing: a person's first tracked frame passes through; later
    frames are filtered (a moving person lags behind its raw landmarks)."""
    f = frames[0]
    images, sizes = pad_frames([f], torch.device("cpu"))
    raw = BlazePoseTracker(bp, streams=1, smooth=False)
    smooth = BlazePoseTracker(bp, streams=1)
    a, b = raw.step(images, sizes)[0], smooth.step(images, sizes)[0]
    if len(a["scores"]) == 0:
        pytest.skip("nobody found in the first bundled picture")
    torch.testing.assert_close(a["keypoints"], b["keypoints"])
    shifted = torch.roll(images, 12, dims=2)  # the person moves 12 px to the right
    a, b = raw.step(shifted, sizes)[0], smooth.step(shifted, sizes)[0]
    assert smooth.started.all() and len(a["scores"]) == len(b["scores"]) == 1
    dx_raw = (a["keypoints"][0, :, 0] - b["keypoints"][0, :, 0]).median()
    assert 0 < dx_raw < 12  # the filtered landmarks trail the raw ones, by less than the step


@pytest.mark.parametrize("border", ["constant", "replicate"])
def test_cpu_crops_equal_the_tensor_warp(border):
    """crop_rois on a CPU (cv2.remap with OpenCV's fixed-point maps) equals
    warp_affine_fixed_point bit for bit, padded frames and crops past the edges included."""
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (2, 50, 70, 3), generator=g, dtype=torch.uint8)
    sizes = torch.tensor([[70, 50], [41, 33]])
    images[1, 33:], images[1, :, 41:] = 0, 0  # the second frame zero-padded
    K = 5
    c = torch.rand(K, 2, generator=g) * torch.tensor([70.0, 50.0])
    M = roi_matrix(c, 10 + torch.rand(K, generator=g) * 80, torch.rand(K, generator=g) * 6 - 3, 24)
    idx = torch.tensor([0, 1, 1, 0, 1])
    got = crop_rois(images, M, 24, idx, sizes, border)
    want = warp_affine_fixed_point(images.permute(0, 3, 1, 2), M, (24, 24), idx, sizes[idx], border)
    assert got.shape == (K, 3, 24, 24) and torch.equal(got, want)


def test_pad_frames_stacks_pads_and_does_not_copy_one_frame():
    """Frames of one size are stacked, others zero-padded to the largest (a per-frame loop is
    the reference); a single CPU frame comes back without a copy."""
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 256, (2, 5, 7, 3), dtype=np.uint8)
    c = rng.integers(0, 256, (4, 9, 3), dtype=np.uint8)
    one, size = pad_frames([a], torch.device("cpu"))
    assert one.shape == (1, 5, 7, 3) and torch.equal(one[0], torch.from_numpy(a))
    assert one.data_ptr() == a.__array_interface__["data"][0]
    assert size.tolist() == [[7, 5]]
    two, size = pad_frames([a, b], torch.device("cpu"))
    assert torch.equal(two, torch.from_numpy(np.stack([a, b]))) and size.tolist() == [[7, 5]] * 2
    mixed, size = pad_frames([a, c], torch.device("cpu"))
    want = np.zeros((2, 5, 9, 3), np.uint8)
    for i, f in enumerate([a, c]):
        want[i, : f.shape[0], : f.shape[1]] = f
    assert torch.equal(mixed, torch.from_numpy(want)) and size.tolist() == [[7, 5], [9, 4]]
