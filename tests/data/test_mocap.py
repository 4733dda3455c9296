from __future__ import annotations

import numpy as np
import pytest
import torch

from tensorpose.data import mocap
from tensorpose.data.mocap import LiftingSet, MocapSequence
from tensorpose.io.bvh import load_bvh
from tensorpose.ops.camera import normalize_screen
from tensorpose.ops.kinematics import flip
from tensorpose.skeleton import get_skeleton

SK = get_skeleton("h36m17")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def toy_set(lengths=(5, 40, 13), seed=0) -> LiftingSet:
    g = torch.Generator().manual_seed(seed)
    clips = [
        (f"s{i}", torch.rand(n, 17, 2, generator=g) * 1000, torch.randn(n, 17, 3, generator=g))
        for i, n in enumerate(lengths)
    ]
    return LiftingSet.from_arrays(clips, SK, 1000, 1000)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rf", [1, 3, 9, 27])
def test_window_gather_equals_naive_edge_padded_slices(rf, device):
    data = toy_set().to(device)
    frames = torch.arange(len(data.pixels), device=device)
    batch = data.batch(frames, rf)
    kp = batch["keypoints"].cpu().numpy()
    data = data.to("cpu")
    half = rf // 2
    for c in data.clips:  # naive reference: pad each clip with its edge frames, slice windows
        px = normalize_screen(data.pixels[c.start : c.start + c.length], 1000, 1000).numpy()
        padded = np.pad(px, ((half, half), (0, 0), (0, 0)), mode="edge")
        for f in range(c.length):  # (CUDA may fuse the normalisation's multiply-adds: 1 ulp)
            np.testing.assert_allclose(kp[c.start + f], padded[f : f + rf], rtol=0,
                                       atol=0 if device == "cpu" else 2.5e-7)  # fmt: skip
    np.testing.assert_array_equal(batch["target"][:, 0].cpu().numpy(), data.targets.numpy())


def test_targets_are_root_relative():
    data = toy_set()
    assert float(data.targets[:, SK.root].abs().max()) == 0.0


@pytest.mark.parametrize("device", DEVICES)
def test_flip_batch_is_mirrored_2d_and_3d_together(device):
    data = toy_set().to(device)
    frames = torch.tensor([0, 7, 20, 50], device=device)
    plain = data.batch(frames, 9)
    gen = torch.Generator(device=device).manual_seed(0)
    flipped = data.batch(frames, 9, flip_prob=1.0, generator=gen)
    torch.testing.assert_close(flipped["keypoints"], flip(plain["keypoints"], SK, axis=0))
    torch.testing.assert_close(flipped["target"], flip(plain["target"], SK, 0))
    data = data.to("cpu")
    half = data.batch(
        torch.arange(len(data.pixels)), 3, flip_prob=0.5, generator=torch.Generator().manual_seed(1)
    )
    was_flipped = half["target"] != data.batch(torch.arange(len(data.pixels)), 3)["target"]
    frac = was_flipped.flatten(1).any(1).float().mean()
    assert 0.3 < float(frac) < 0.7
    # Same draw on the 2D side: a sample is flipped in 2D iff it is flipped in 3D.
    kp_changed = half["keypoints"] != data.batch(torch.arange(len(data.pixels)), 3)["keypoints"]
    np.testing.assert_array_equal(kp_changed.flatten(1).any(1), was_flipped.flatten(1).any(1))


def walking_sequences(frames=60):
    seqs, sk = mocap.load_bvh_sequences(["131_01", "131_03"], fps=30)
    return [MocapSequence(s.name, s.positions[:frames], s.fps) for s in seqs], sk


def test_from_world_cameras_fixed_per_sequence_camera_pair():
    seqs, sk = walking_sequences()
    both = LiftingSet.from_world(seqs, sk, cameras=3, seed=5)
    alone = LiftingSet.from_world(seqs[1:], sk, cameras=2, seed=5)
    c_both = both.clip_arrays(3)  # sequence 2, camera 0
    c_alone = alone.clip_arrays(0)
    assert both.clips[3].name == alone.clips[0].name == seqs[1].name
    torch.testing.assert_close(c_both["keypoints"], c_alone["keypoints"])
    other_seed = LiftingSet.from_world(seqs[1:], sk, cameras=1, seed=6)
    assert not torch.allclose(other_seed.clip_arrays(0)["keypoints"], c_alone["keypoints"])


def test_from_world_projections_are_plausible():
    seqs, sk = walking_sequences(frames=1000)
    data = LiftingSet.from_world(seqs, sk, cameras=8, seed=0)
    kp = normalize_screen(data.pixels, 1000, 1000)
    # The subject is in front of every camera and mostly inside the image.
    assert float((kp.abs() <= 1.0).float().mean()) > 0.95
    assert data.fps == pytest.approx(30.0, rel=1e-4)
    assert len(data.clips) == 16 and len(data) == len(data.pixels)
    height = data.targets[..., 1].amax(-1) - data.targets[..., 1].amin(-1)  # y is down
    assert 0.9 < float(height.median()) < 2.0


def test_nan_frames_are_masked_and_filled():
    g = torch.Generator().manual_seed(0)
    kp, j3 = torch.rand(10, 17, 2, generator=g), torch.randn(10, 17, 3, generator=g)
    kp[0, 3] = float("nan")
    j3[4:6, 0] = float("nan")
    data = LiftingSet.from_arrays([("clip", kp, j3)], SK, 1000, 1000)
    assert data.valid.tolist() == [False, True, True, True, False, False, True, True, True, True]
    assert data.target_frames.tolist() == [1, 2, 3, 6, 7, 8, 9]
    assert torch.isfinite(data.pixels).all() and torch.isfinite(data.targets).all()
    torch.testing.assert_close(data.pixels[4], data.pixels[3])  # held from the last valid frame
    torch.testing.assert_close(data.pixels[0], data.pixels[1])  # leading gap: first valid frame
    with pytest.raises(ValueError, match="every frame"):
        LiftingSet.from_arrays([("bad", kp * float("nan"), j3)], SK, 1000, 1000)


def test_wrong_joint_counts_are_errors(tmp_path):
    with pytest.raises(ValueError, match=r"2D must have shape \(T, 17, 2\)"):
        LiftingSet.from_arrays([("c", torch.zeros(4, 16, 2), torch.zeros(4, 17, 3))], SK, 10, 10)
    path = tmp_path / "bad.npz"
    np.savez(path, positions_3d={"S1": {"Walk": np.zeros((5, 16, 3))}})
    with pytest.raises(ValueError, match=r"positions_3d\['S1'\]\['Walk'\].*\(5, 16, 3\)"):
        mocap.load_npz(path, SK)


def test_npz_videopose3d_layout(tmp_path):
    seqs, sk = walking_sequences()
    world = {"S9": {"walk": seqs[0].positions.numpy(), "hop": seqs[1].positions.numpy()}}
    path = tmp_path / "data_3d.npz"
    np.savez_compressed(path, positions_3d=world)
    w, clips = mocap.load_npz(path, sk, ["S9/hop"])
    assert [s.name for s in w] == ["S9/hop"] and clips == []
    torch.testing.assert_close(w[0].positions, seqs[1].positions)
    # Z-up input is rotated to Y-up.
    zup = seqs[0].positions.numpy()[..., [0, 2, 1]] * np.array([1, -1, 1])
    np.savez(tmp_path / "z.npz", positions_3d={"S1": {"a": zup}})
    wz, _ = mocap.load_npz(tmp_path / "z.npz", sk, None, up_axis="z")
    torch.testing.assert_close(wz[0].positions, seqs[0].positions)
    # With 2D: per-camera 3D is required.
    kp = np.random.default_rng(0).random((60, 17, 2)) * 1000
    np.savez(tmp_path / "both.npz", positions_3d=world, positions_2d={"S9": {"walk": [kp]}})
    with pytest.raises(ValueError, match="per-camera 3D"):
        mocap.load_npz(tmp_path / "both.npz", sk, ["S9/walk"])
    cam3d = {"S9": {"walk": [seqs[0].positions.numpy() + np.array([0, 0, 4.0])]}}
    np.savez(tmp_path / "cam.npz", positions_3d=cam3d, positions_2d={"S9": {"walk": [kp]}})
    _, clips = mocap.load_npz(tmp_path / "cam.npz", sk)
    data = LiftingSet.from_arrays(clips, sk, 1000, 1000)
    assert data.clips[0].name == "S9/walk/cam0" and len(data) == 60
    with pytest.raises(ValueError, match="unknown subject"):
        mocap.load_npz(path, sk, ["S1"])


def test_unknown_mapping_and_file_are_errors():
    with pytest.raises(ValueError, match=r"unknown mapping 'cmu_nope'.*cmu_3dsmax"):
        mocap.load_bvh_sequences(["131_03"], mapping="cmu_nope")
    with pytest.raises(FileNotFoundError, match="not found"):
        mocap.resolve_bvh("no_such_file.bvh")


def test_motionbuilder_names_map_like_3dsmax_names(motionbuilder_copy):
    """A bundled file with its joints renamed to the MotionBuilder-friendly CMU convention gives
    the same h36m17 positions through ``cmu_motionbuilder`` (and is detected as such)."""
    src = mocap.resolve_bvh("131_03")
    renamed = motionbuilder_copy(src, frames=40)
    a, _ = mocap.load_bvh_sequences([renamed], fps=120)  # detected mapping
    b, _ = mocap.load_bvh_sequences([renamed], mapping="cmu_motionbuilder", fps=120)
    ref = load_bvh(src).to_skeleton("cmu_3dsmax")[0][:40].float()
    torch.testing.assert_close(a[0].positions, ref)
    torch.testing.assert_close(b[0].positions, ref)
    with pytest.raises(ValueError, match="needs joints"):
        mocap.load_bvh_sequences([renamed], mapping="cmu_3dsmax")


def test_bundled_motionbuilder_excerpt_is_another_subject():
    """The real CMU subject-01 excerpt (MotionBuilder-friendly names) loads through the detected
    ``cmu_motionbuilder`` mapping into a plausible, rigid h36m17 motion with a jump in it."""
    seqs, sk = mocap.load_bvh_sequences(["01_01_jump_30fps"], fps=30)
    pos = seqs[0].positions
    assert (
        sk.name == "h36m17"
        and pos.shape == (54, 17, 3)
        and seqs[0].fps == pytest.approx(30, rel=1e-4)
    )
    lengths = torch.linalg.vector_norm(pos[:, 1:] - pos[:, list(sk.parents[1:])], dim=-1)
    # Rigid limbs; bones through the mapped pelvis (mean of the hips) / neck move by a few mm.
    assert float(lengths.std(0).max()) < 5e-3
    pelvis_y = pos[:, sk.root, 1]
    assert 0.7 < float(pelvis_y.min()) and float(pelvis_y.max()) > 1.05  # crouch, then airborne
    ours = mocap.load_bvh_sequences(["131_03"], fps=30)[0][0].positions
    thigh = lengths[:, 1].mean()  # r_hip -> r_knee: another person, another leg length
    assert (
        abs(float(thigh) - float(torch.linalg.vector_norm(ours[:, 2] - ours[:, 1], dim=-1).mean()))
        > 0.005
    )


def test_load_lifting_split_bvh_and_npz(tmp_path):
    """One reader for every split: bundled BVH names, and the same motion from an npz file
    (world coordinates, virtual cameras) give the same set; per-camera npz entries bring their
    own 2D; mixing both kinds and a skeleton mismatch are errors."""
    spec = mocap.CameraSpec()
    bvh = mocap.load_lifting_split(["131_03"], SK, 2, spec, fps=10.0, seed=3)
    seqs, _ = mocap.load_bvh_sequences(["131_03"], None, 10.0)
    want = LiftingSet.from_world(seqs, SK, 2, 3, spec)
    assert torch.equal(bvh.pixels, want.pixels) and bvh.clips == want.clips
    path = tmp_path / "d.npz"
    np.savez(path, positions_3d={"131_03": {"hop": seqs[0].positions.numpy()}})
    npz = mocap.load_lifting_split(["131_03"], SK, 2, spec, source="npz", npz=path, seed=3)
    hop = [MocapSequence("131_03/hop", seqs[0].positions, float("nan"))]
    want = LiftingSet.from_world(hop, SK, 2, 3, spec)
    assert [c.name for c in npz.clips] == ["131_03/hop"] * 2 and len(npz) == len(bvh)
    assert torch.equal(npz.pixels, want.pixels) and torch.equal(npz.targets, want.targets)
    kp = np.random.default_rng(0).random((len(seqs[0].positions), 17, 2)) * 1000
    cam = {"S1": {"a": [seqs[0].positions.numpy() + np.array([0, 0, 4.0])]}}
    mixed = {**cam, "131_03": {"hop": seqs[0].positions.numpy()}}
    np.savez(tmp_path / "cam.npz", positions_3d=cam, positions_2d={"S1": {"a": [kp]}})
    data = mocap.load_lifting_split(["S1"], SK, 5, spec, source="npz", npz=tmp_path / "cam.npz")
    assert [c.name for c in data.clips] == ["S1/a/cam0"]  # its own camera, not 5 virtual ones
    torch.testing.assert_close(data.pixels, torch.tensor(kp, dtype=torch.float32))
    np.savez(tmp_path / "mixed.npz", positions_3d=mixed, positions_2d={"S1": {"a": [kp]}})
    with pytest.raises(ValueError, match="positions_2d has no entry"):
        mocap.load_lifting_split(None, SK, 1, spec, source="npz", npz=tmp_path / "mixed.npz")
    with pytest.raises(ValueError, match="skeleton 'h36m17' but the model's skeleton is 'coco17'"):
        mocap.load_lifting_split(["131_03"], get_skeleton("coco17"), 1, spec)
    with pytest.raises(ValueError, match="source must be 'bvh' or 'npz'"):
        mocap.load_lifting_split(["131_03"], SK, 1, spec, source="csv")
