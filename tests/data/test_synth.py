"""The synthetic lifting sampler: batch contract, window gathering against a naive loop, the 2D
shortcut against project + normalize_with_intrinsics, in-frame guarantee, limits, determinism."""

import dataclasses
import math
from pathlib import Path

import pytest
import torch
import yaml

from tensorpose.data.mocap import load_bvh_sequences
from tensorpose.data.synth import KinematicAugmenter, SynthConfig, SyntheticLiftingBatches
from tensorpose.ops import bone_lengths
from tensorpose.ops.camera import normalize_screen, project
from tensorpose.ops.poseaug_cameras import normalize_with_intrinsics
from tensorpose.ops.poseaug_joints import H36M17_LIMITS, apply_rotations, joint_angles
from tensorpose.ops.procrustes import procrustes_align
from tensorpose.skeleton import get_skeleton

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "synth_lift.yaml"
R = 27
SK = get_skeleton("h36m17")
# No randomness in the 2D: the keypoints are the exact projection of the joints.
CLEAN = {"offsets": 0.0, "derive": False, "noise": 0.0, "outlier_prob": 0.0, "drop_prob": 0.0,
         "drop_window_prob": 0.0, "flip": 0.0}  # fmt: skip


@pytest.fixture(scope="module")
def walk():
    seqs, sk = load_bvh_sequences(["131_01", "131_02"])
    return [s.positions for s in seqs], sk


def bone_len(x):
    return bone_lengths(x, SK)


def batches(walk, B=32, seed=0, device="cpu", **cfg):
    seqs, sk = walk
    g = torch.Generator(device=device).manual_seed(seed)
    return SyntheticLiftingBatches(seqs, sk, B, R, g, SynthConfig(**cfg), steps=3)


def test_batch_contract(walk, device):
    sb = batches(walk, device=device)
    b = sb.sample()
    assert b["keypoints"].shape == (32, R, 17, 2) and b["keypoints"].dtype == torch.float32
    assert b["target"].shape == (32, 1, 17, 3) and b["mask"].shape == (32, R, 17)
    assert b["mask"].dtype == torch.bool
    assert all(v.device.type == torch.device(device).type for v in b.values())
    assert torch.equal(b["target"][:, 0, 0], torch.zeros(32, 3, device=device))  # root-relative
    assert bool((b["keypoints"][b["mask"]] == 0.0).all())  # dropped: the fill value
    assert bool(torch.isfinite(b["keypoints"]).all()) and bool(torch.isfinite(b["target"]).all())
    assert len(sb) == 3 and len(list(sb)) == 3


def test_windows_match_a_naive_gather(walk):
    """Speed 1, no jitter: every window is R consecutive frames of one sequence, clamped at its
    ends; speed 0.5: the average of neighbouring frames at odd offsets."""
    seqs, _ = walk
    for speed in (1.0, 0.5):
        sb = batches(walk, B=64, speed=(speed, speed), time_jitter=0.0)
        win, lengths = sb.sample_windows()
        for b in range(64):  # the naive way, one window at a time
            centre = win[b, R // 2]
            hits = [
                (i, t)
                for i, s in enumerate(seqs)
                for t in range(len(s))
                if torch.equal(s[t], centre)
            ]
            i, t = hits[0]
            s = seqs[i]
            for r in range(R):
                pos = min(max(t + speed * (r - R // 2), 0), len(s) - 1)
                lo, hi = math.floor(pos), min(math.floor(pos) + 1, len(s) - 1)
                want = s[lo] + (pos - lo) * (s[hi] - s[lo])
                assert torch.allclose(win[b, r], want, atol=1e-6)
            mean = bone_len(s).mean(0)
            assert torch.allclose(lengths[b, 0], mean, atol=1e-6)


def test_keypoints_are_the_projection_of_the_joints(walk):
    """Without noise/offsets the 2D input is K^-1 [u, v, 1] of the projected camera-frame joints
    (the ops pipeline the sampler shortcuts), and the screen variant is normalize_screen."""
    for norm in ("intrinsics", "screen"):
        b = batches(walk, B=48, seed=1, normalize=norm, **CLEAN).sample()
        joints = b["target"][:, 0] + b["root"][:, None]  # (B, J, 3) camera frame, centre frame
        px = project(joints, b["K"])
        if norm == "intrinsics":
            want = normalize_with_intrinsics(px, b["K"])
        else:  # per sample, its own image size
            want = torch.stack([normalize_screen(px[i], *b["size"][i].tolist()) for i in range(48)])
        assert torch.allclose(b["keypoints"][:, R // 2], want, atol=1e-5)


def test_every_keypoint_stays_in_the_image(walk):
    cfg = {**CLEAN, "margin": 0.05}
    sb = batches(walk, B=128, seed=2, **cfg)
    b = sb.sample()
    px = b["keypoints"] * b["K"][:, None, None, [0, 1], [0, 1]] + b["K"][:, None, None, :2, 2]
    size = b["size"][:, None, None]
    assert bool((px >= 0.05 * size - 1e-2).all()) and bool((px <= 0.95 * size + 1e-2).all())
    # portrait and landscape images both occur, and the person fills a sensible part of them
    assert bool((b["size"][:, 1] > b["size"][:, 0]).any()) and bool(
        (b["size"][:, 0] > b["size"][:, 1]).any()
    )
    height = (px[..., 1].amax((1, 2)) - px[..., 1].amin((1, 2))) / b["size"][:, 1]
    assert 0.05 < float(height.median()) < 0.9


def test_target_bones_and_limits(walk):
    """Joint angles of the target within the anatomical limits (also under a mirror); target
    bone lengths: the sequence's mean lengths x the sampled scales (left = right)."""
    seqs, sk = walk
    sb = batches(walk, B=256, seed=3, flip=0.5)
    b = sb.sample()
    ang = joint_angles(b["target"][:, 0].double(), sk)
    lo = torch.tensor([math.radians(v.lo_deg) for v in H36M17_LIMITS.values()])
    hi = torch.tensor([math.radians(v.hi_deg) for v in H36M17_LIMITS.values()])
    assert bool((ang >= lo - 1e-4).all()) and bool((ang <= hi + 1e-4).all())
    bl = bone_len(batches(walk, B=256, seed=3, flip=0.0).sample()["target"][:, 0])
    for a, c in (("l_knee", "r_knee"), ("l_wrist", "r_wrist"), ("l_hip", "r_hip")):
        ia = next(s for s, (_, ch) in enumerate(sk.bones) if ch == sk.index(a))
        ic = next(s for s, (_, ch) in enumerate(sk.bones) if ch == sk.index(c))
        mean = bone_len(torch.cat(seqs)).mean(0)
        ratio = (bl[:, ia] / mean[ia]) / (bl[:, ic] / mean[ic])
        assert torch.allclose(ratio, torch.ones_like(ratio), atol=0.03)  # same group scale
    # no scaling, no rotations: targets are mocap poses (rigidly moved, bones = mean lengths)
    plain = batches(walk, B=64, seed=4, joint_scale=0.0, bone_scale=(1.0, 1.0),
                    bone_group_scale=0.0, **CLEAN)  # fmt: skip
    win, lengths = plain.sample_windows()
    b = plain.augmenter(win, plain.generator, lengths)
    src = apply_rotations(win[:, R // 2], torch.tensor([1.0, 0, 0, 0]).expand(64, 11, 4), sk,
                             lengths=lengths[:, 0])  # fmt: skip
    src = src - src[:, :1]
    aligned = procrustes_align(src, b["target"][:, 0])
    assert float((aligned - b["target"][:, 0]).norm(dim=-1).max()) < 1e-4


@pytest.mark.parametrize("flip", [0.0, 1.0])
def test_joint_weights_and_given_lengths_follow_each_window(walk, flip):
    """Each window gets its sequence's joint weights (mirrored with the pose) and bone
    lengths; the sequence of each window from a twin sampler with the same seed."""
    seqs, sk = walk
    mean = torch.stack([bone_len(s).mean(0) for s in seqs])
    given = mean * torch.tensor([[1.0], [1.3]])  # two sizes: each window's sequence shows
    jw = torch.ones(2, 17)
    jw[0, sk.index("l_wrist")] = 0.0
    jw[1, sk.index("r_knee")] = 0.0
    opts = dict(joint_scale=0.0, bone_scale=(1.0, 1.0), bone_group_scale=0.0,
                **{**CLEAN, "flip": flip})  # fmt: skip

    def sampler(**kw):
        g = torch.Generator().manual_seed(11)
        return SyntheticLiftingBatches(seqs, sk, 64, R, g, SynthConfig(**opts), **kw)

    b = sampler(joint_weights=jw, bone_lengths=given).sample()
    _, lengths = sampler(bone_lengths=given).sample_windows()
    assert set(sampler().sample()) == set(b) - {"weight"}
    fi = sk.flip_index
    for i in range(64):  # naive twin: look each window's sequence up
        k = int(torch.isclose(lengths[i, 0, 0], given[:, 0]).nonzero())
        want = jw[k][list(fi)] if flip else jw[k]
        assert torch.equal(b["weight"][i, 0], want)
        target = b["target"][i, 0][list(fi)] if flip else b["target"][i, 0]  # names unswapped
        torch.testing.assert_close(bone_len(target), given[k], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"joint_weights must have shape \(2, 17\)"):
        sampler(joint_weights=jw[:1])


def test_seeded(walk):
    a, b = batches(walk, seed=5).sample(), batches(walk, seed=5).sample()
    c = batches(walk, seed=6).sample()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["keypoints"], c["keypoints"])


def test_noise_scales_with_the_person(walk):
    """Detector noise in pixels ~ noise x the person's height in pixels: the normalised noise
    relative to the target's size does not depend on distance."""
    clean = {k: v for k, v in CLEAN.items() if k != "noise"}
    near = batches(walk, B=256, seed=7, distance_m=(2.5, 2.5), noise=0.02, **clean).sample()
    far = batches(walk, B=256, seed=7, distance_m=(8.0, 8.0), noise=0.02, **clean).sample()
    ref_near = batches(walk, B=256, seed=7, distance_m=(2.5, 2.5), noise=0.0, **clean).sample()
    ref_far = batches(walk, B=256, seed=7, distance_m=(8.0, 8.0), noise=0.0, **clean).sample()
    rel = []
    for noisy, ref in ((near, ref_near), (far, ref_far)):
        err = (noisy["keypoints"] - ref["keypoints"]).norm(dim=-1).mean((1, 2))
        size = ref["keypoints"][..., 1].amax((1, 2)) - ref["keypoints"][..., 1].amin((1, 2))
        rel.append(float((err / size).median()))
    assert rel[0] == pytest.approx(rel[1], rel=0.25)
    assert rel[0] > 0.005


def test_bad_input(walk):
    seqs, sk = walk
    g = torch.Generator()
    with pytest.raises(ValueError, match=r"sequences\[1\]"):
        SyntheticLiftingBatches([seqs[0], seqs[1][:, :16]], sk, 4, R, g)
    bad = seqs[0].clone()
    bad[3, 2, 1] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        SyntheticLiftingBatches([bad], sk, 4, R, g)
    with pytest.raises(TypeError, match="generator"):
        SyntheticLiftingBatches(seqs, sk, 4, R, 0)
    with pytest.raises(ValueError, match="batch_size"):
        SyntheticLiftingBatches(seqs, sk, 0, R, g)
    with pytest.raises(ValueError, match="normalize"):
        SynthConfig(normalize="pixels")
    with pytest.raises(ValueError, match="flip"):
        SynthConfig(flip=1.5)
    with pytest.raises(ValueError, match="unknown synth settings"):
        SynthConfig.from_dict({"nosie": 0.1})
    with pytest.raises(ValueError, match="windows"):
        KinematicAugmenter(sk)(torch.zeros(2, 5, 16, 3), g)


def test_recipe_file_is_the_defaults():
    """configs/synth_lift.yaml (the recommended recipe) and the SynthConfig defaults agree."""
    d = yaml.safe_load(RECIPE.read_text())["synth"]
    assert SynthConfig.from_dict(d) == SynthConfig()
    assert set(d) == {f.name for f in dataclasses.fields(SynthConfig)}
