"""Kinematic augmentation ops against naive per-sample references (numpy loops, the kinematics
FK with rotation matrices, explicit formulas) and on the bundled CMU mocap."""

import math

import numpy as np
import pytest
import torch

from tensorpose.data.mocap import load_bvh_sequences
from tensorpose.ops import flip, forward_kinematics
from tensorpose.ops.camera import intrinsic_matrix, project
from tensorpose.ops.poseaug_bones import (
    H36M17_BONE_GROUPS,
    bone_scales,
    retarget_lengths,
    sample_bone_scales,
)
from tensorpose.ops.poseaug_cameras import (
    default_intrinsics,
    fit_in_frame,
    global_rotation,
    normalize_with_intrinsics,
    sample_cameras,
    sample_global_angles,
)
from tensorpose.ops.poseaug_detector import (
    H36M17_DETECTOR_OFFSETS,
    H36M17_DETECTOR_RULES,
    derive_joints,
    detector_offsets,
    drop_joints,
    keypoint_noise,
    sample_detector_offsets,
    window_positions,
)
from tensorpose.ops.poseaug_frames import H36M17_FRAMES
from tensorpose.ops.poseaug_joints import (
    H36M17_LIMITS,
    JointLimit,
    apply_rotations,
    joint_angles,
    joint_rotations,
    rotate_joints,
    sample_joint_angles,
)
from tensorpose.skeleton import get_skeleton

f64 = torch.float64
SK = get_skeleton("h36m17")
LIMITS = H36M17_LIMITS
NAMES = list(LIMITS)
LO = torch.tensor([math.radians(v.lo_deg) for v in LIMITS.values()], dtype=f64)
HI = torch.tensor([math.radians(v.hi_deg) for v in LIMITS.values()], dtype=f64)


@pytest.fixture(scope="module")
def mocap():
    """Every frame of the four bundled CMU recordings, float64 metres."""
    seqs, sk = load_bvh_sequences(["131_01", "131_02", "131_03", "01_01_jump_30fps"])
    assert sk == SK
    return torch.cat([s.positions for s in seqs]).to(f64)


# ----------------------------------------------------------------------------- naive references
def naive_frame(x, name):
    """Body frame (left, up, fwd) of one pose (numpy, (J, 3))."""
    lj, rj, lo, up = (SK.index(n) for n in H36M17_FRAMES[name])
    left = x[lj] - x[rj]
    left = left / np.linalg.norm(left)
    u = x[up] - x[lo]
    u = u - u.dot(left) * left
    u = u / np.linalg.norm(u)
    return left, u, np.cross(left, u)


def naive_angles(x):
    """Per pose, per limited joint: the angle between its bone and its reference axis."""
    out = np.zeros((len(x), len(LIMITS)))
    for i, pose in enumerate(x):
        for k, (name, lim) in enumerate(LIMITS.items()):
            j, c = SK.index(name), SK.index(lim.child)
            bone = pose[c] - pose[j]
            if lim.kind == "hinge" or lim.axis is None:
                axis = pose[j] - pose[SK.parents[j]]
            else:
                left, up, fwd = naive_frame(pose, lim.frame)
                axis = lim.axis[0] * lim.side * left + lim.axis[1] * up + lim.axis[2] * fwd
            cos = bone.dot(axis) / np.linalg.norm(bone) / np.linalg.norm(axis)
            out[i, k] = math.acos(min(1.0, max(-1.0, cos)))
    return out


def quat_to_matrix(q):
    w, x, y, z = q.unbind(-1)
    rows = (
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    )  # fmt: skip
    return torch.stack(rows, -1).reshape(*q.shape[:-1], 3, 3)


def bone_len(x):
    return torch.stack([(x[..., c, :] - x[..., p, :]).norm(dim=-1) for p, c in SK.bones], -1)


def random_poses(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 17, 3, generator=g, dtype=f64)


# ----------------------------------------------------------------------------- joint rotations
def test_mocap_lies_inside_the_limits(mocap):
    """The table is anatomical, not arbitrary: every recorded frame already satisfies it."""
    ang = joint_angles(mocap, SK)
    assert bool((ang >= LO).all()) and bool((ang <= HI).all())


def test_joint_angles_match_naive(mocap):
    x = torch.cat([mocap[::40], random_poses(20)])
    got = joint_angles(x, SK)
    # acos near 0 (straight knees) is good to ~1e-8 only
    assert torch.allclose(got, torch.from_numpy(naive_angles(x.numpy())), atol=1e-7)


@pytest.mark.parametrize("scale", [1.0, 4.0])
def test_rotations_keep_bone_lengths_and_respect_limits(mocap, scale):
    """scale 4 pushes most joints past their limits: they must be clamped onto them."""
    x = torch.cat([mocap[::7], random_poses(50, seed=1)])
    g = torch.Generator().manual_seed(3)
    a = sample_joint_angles((len(x),), g, scale=scale, dtype=f64)
    y = rotate_joints(x, a, SK)
    assert torch.allclose(bone_len(y), bone_len(x), rtol=0, atol=1e-12)
    after = torch.from_numpy(naive_angles(y.numpy()))  # measured independently
    assert bool((after >= LO - 1e-9).all()) and bool((after <= HI + 1e-9).all())
    assert float((y - x).norm(dim=-1).mean()) > 0.05  # it did move them
    if scale == 4.0:  # clamped onto the boundary, exactly
        assert bool((torch.isclose(after, HI, atol=1e-9)).any(0)[:4].all())


def test_identity_parameters_give_back_the_input(mocap):
    y = rotate_joints(mocap, torch.zeros(len(mocap), len(LIMITS), 4, dtype=f64), SK)
    assert torch.allclose(y, mocap, rtol=0, atol=1e-12)


def test_apply_rotations_is_forward_kinematics(mocap):
    """The level loop over quaternions equals kinematics.forward_kinematics with the same local
    rotations as matrices and the bone vectors as offsets (the naive twin)."""
    x = mocap[::25]
    g = torch.Generator().manual_seed(0)
    q = joint_rotations(x, sample_joint_angles((len(x),), g, dtype=f64), SK)
    got = apply_rotations(x, q, SK)
    R = torch.eye(3, dtype=f64).repeat(len(x), 17, 1, 1)
    for k, name in enumerate(LIMITS):  # the naive way: one joint at a time
        R[:, SK.index(name)] = quat_to_matrix(q[:, k])
    parent = [p if p >= 0 else j for j, p in enumerate(SK.parents)]
    want = forward_kinematics(R, x - x[:, parent], x[:, SK.root], SK)
    assert torch.allclose(got, want, atol=1e-12)
    assert torch.allclose((q * q).sum(-1), torch.ones(len(x), len(LIMITS), dtype=f64))


def test_windows_share_one_rotation_and_lengths_are_set(mocap):
    """(B, 1, L, 4) rotations turn every frame of a window; lengths replace bone lengths."""
    x = mocap[:27].reshape(3, 9, 17, 3)
    g = torch.Generator().manual_seed(1)
    q = joint_rotations(x[:, 4:5], sample_joint_angles((3, 1), g, dtype=f64), SK)
    lengths = torch.rand(3, 1, 16, generator=g, dtype=f64) + 0.1
    y = apply_rotations(x, q, SK, lengths=lengths)
    assert torch.allclose(bone_len(y), lengths.expand(3, 9, 16), atol=1e-12)
    frame = apply_rotations(x[:, 2], q[:, 0], SK, lengths=lengths[:, 0])
    assert torch.allclose(y[:, 2], frame, atol=1e-12)
    assert torch.allclose(y[..., SK.root, :], x[..., SK.root, :])


def test_straight_limbs_bend_the_anatomical_way():
    """A standing pose with straight knees and arms: knee flexion moves the ankle backwards,
    elbow flexion moves the wrist forwards (the body faces +z: left = +x, up = +y)."""
    pos = {
        "pelvis": (0, 1.0, 0), "r_hip": (-0.1, 1.0, 0), "r_knee": (-0.1, 0.55, 0),
        "r_ankle": (-0.1, 0.1, 0), "l_hip": (0.1, 1.0, 0), "l_knee": (0.1, 0.55, 0),
        "l_ankle": (0.1, 0.1, 0), "spine": (0, 1.25, 0), "thorax": (0, 1.5, 0),
        "neck": (0, 1.6, 0), "head": (0, 1.7, 0), "l_shoulder": (0.18, 1.48, 0),
        "l_elbow": (0.18, 1.2, 0), "l_wrist": (0.18, 0.95, 0), "r_shoulder": (-0.18, 1.48, 0),
        "r_elbow": (-0.18, 1.2, 0), "r_wrist": (-0.18, 0.95, 0),
    }  # fmt: skip
    x = torch.tensor([pos[n] for n in SK.names], dtype=f64)
    a = torch.zeros(len(LIMITS), 4, dtype=f64)
    for n in ("l_knee", "r_knee", "l_elbow", "r_elbow"):
        a[NAMES.index(n), 0] = math.radians(90)
    y = rotate_joints(x, a, SK)
    for side in "lr":
        assert float(y[SK.index(f"{side}_ankle"), 2]) == pytest.approx(-0.45, abs=1e-9)
        assert float(y[SK.index(f"{side}_wrist"), 2]) == pytest.approx(0.25, abs=1e-9)
    ang = joint_angles(y, SK)
    assert float(ang[NAMES.index("l_knee")]) == pytest.approx(math.pi / 2, abs=1e-12)


def test_left_right_parameters_act_as_mirror_images(mocap):
    """mirror(rotate(x, a)) == rotate(mirror(x), a'): a' swaps the left/right entries, and for
    midline joints mirrors the rotation (axis-angle (o, u, f) -> (o, -u, -f), twist -> -twist:
    a rotation is a pseudovector)."""
    x = mocap[::30]
    g = torch.Generator().manual_seed(5)
    a = sample_joint_angles((len(x),), g, dtype=f64)
    swap = [NAMES.index(n.replace("l_", "#").replace("r_", "l_").replace("#", "r_"))
            for n in NAMES]  # fmt: skip
    mirrored = a[:, swap].clone()
    mid = torch.tensor([v.side == 1 and not n.startswith("l_") for n, v in LIMITS.items()])
    mirrored[:, mid, 1:] *= -1
    got = rotate_joints(flip(x, SK), mirrored, SK)
    assert torch.allclose(got, flip(rotate_joints(x, a, SK), SK), atol=1e-12)


def test_twist_moves_grandchildren_only(mocap):
    x = mocap[100:101]
    a = torch.zeros(1, len(LIMITS), 4, dtype=f64)
    a[0, NAMES.index("l_hip"), 3] = 0.4
    y = rotate_joints(x, a, SK)
    knee, ankle = SK.index("l_knee"), SK.index("l_ankle")
    assert torch.allclose(y[0, knee], x[0, knee], atol=1e-12)
    assert float((y[0, ankle] - x[0, ankle]).norm()) > 0.01
    assert torch.allclose(joint_angles(y, SK), joint_angles(x, SK), atol=1e-9)


def test_rotation_sampling_is_seeded_and_bounded():
    a1 = sample_joint_angles((64, 1), torch.Generator().manual_seed(7))
    a2 = sample_joint_angles((64, 1), torch.Generator().manual_seed(7))
    a3 = sample_joint_angles((64, 1), torch.Generator().manual_seed(8))
    assert torch.equal(a1, a2) and not torch.equal(a1, a3)
    assert a1.shape == (64, 1, len(LIMITS), 4)
    swing = torch.tensor([math.radians(v.swing_deg) for v in LIMITS.values()])
    twist = torch.tensor([math.radians(v.twist_deg) for v in LIMITS.values()])
    assert bool((a1[..., :3].norm(dim=-1) <= swing + 1e-6).all())
    assert bool((a1[..., 3].abs() <= twist + 1e-6).all())
    hinge = torch.tensor([v.kind == "hinge" for v in LIMITS.values()])
    assert bool((a1[..., hinge, 1:3] == 0).all())
    assert torch.equal(
        sample_joint_angles((3,), torch.Generator(), scale=0.0), torch.zeros(3, 11, 4)
    )


def test_rotation_bad_input():
    x = random_poses(2)
    with pytest.raises(ValueError, match="angles"):
        rotate_joints(x, torch.zeros(2, 10, 4, dtype=f64), SK)
    with pytest.raises(ValueError, match="joints"):
        rotate_joints(x[:, :16], torch.zeros(2, 11, 4, dtype=f64), SK)
    with pytest.raises(TypeError, match="joints"):
        rotate_joints(x.numpy(), torch.zeros(2, 11, 4), SK)
    bad = {"l_knee": JointLimit("l_hip", "hinge", "pelvis", None, 0, 150, 10)}
    with pytest.raises(ValueError, match="not a child"):
        rotate_joints(x, torch.zeros(2, 1, 4, dtype=f64), SK, bad)
    bad = {"l_knee": JointLimit("l_ankle", "ball", "pelvis", None, 0, 150, 10)}
    with pytest.raises(ValueError, match="kind"):
        joint_angles(x, SK, bad)
    with pytest.raises(TypeError, match="generator"):
        sample_joint_angles((2,), 0)
    with pytest.raises(ValueError, match="scale"):
        sample_joint_angles((2,), torch.Generator(), scale=-1)


def test_rotation_device(device, mocap):
    x = mocap[:8].to(device)
    g = torch.Generator(device=device).manual_seed(0)
    y = rotate_joints(x, sample_joint_angles((8,), g, dtype=f64), SK)
    assert y.device == x.device
    assert torch.allclose(bone_len(y), bone_len(x), atol=1e-12)


# ----------------------------------------------------------------------------- bone lengths
def test_bone_scales_match_naive():
    g = torch.Generator().manual_seed(0)
    gs = sample_bone_scales((5,), g, (0.8, 1.2), 0.1, dtype=f64)
    got = bone_scales(gs, SK)
    names = list(H36M17_BONE_GROUPS)
    for s, (p, c) in enumerate(SK.bones):  # the naive way: look each bone up
        pair = (SK.names[p], SK.names[c])
        (k,) = [i for i, n in enumerate(names) if pair in H36M17_BONE_GROUPS[n]]
        assert torch.equal(got[:, s], gs[:, k])
    # left and right bones of a limb get the same scale
    li, ri = SK.index("l_knee"), SK.index("r_knee")
    sl = next(s for s, (_, c) in enumerate(SK.bones) if c == li)
    sr = next(s for s, (_, c) in enumerate(SK.bones) if c == ri)
    assert torch.equal(got[:, sl], got[:, sr])
    assert bool((gs >= 0.8 * 0.9 - 1e-12).all()) and bool((gs <= 1.2 * 1.1 + 1e-12).all())


def test_bone_groups_must_cover_every_bone():
    groups = dict(H36M17_BONE_GROUPS)
    groups.pop("head")
    with pytest.raises(ValueError, match="every bone"):
        bone_scales(torch.ones(len(groups)), SK, groups)
    with pytest.raises(ValueError, match="not a bone"):
        bone_scales(torch.ones(1), SK, {"x": (("l_hip", "r_knee"),)})
    with pytest.raises(ValueError, match="group_range"):
        sample_bone_scales((1,), torch.Generator(), group_range=1.5)


def test_retarget_lengths_matches_naive():
    """The template's proportions at each row's height (head + right ankle paths from the
    root), against a walk up the parents."""
    g = torch.Generator().manual_seed(0)
    lengths = 0.05 + torch.rand(4, 2, SK.num_bones, generator=g, dtype=f64)
    template = 0.05 + torch.rand(SK.num_bones, generator=g, dtype=f64)
    bone_into = {c: s for s, (_, c) in enumerate(SK.bones)}

    def height(row):  # naive: the bones from each of the two joints up to the root
        total = 0.0
        for j in (SK.index("head"), SK.index("r_ankle")):
            while SK.parents[j] >= 0:
                total += float(row[bone_into[j]])
                j = SK.parents[j]
        return total

    got = retarget_lengths(lengths, template, SK)
    for idx in np.ndindex(lengths.shape[:-1]):
        want = template * height(lengths[idx]) / height(template)
        torch.testing.assert_close(got[idx], want, rtol=1e-12, atol=0)
        assert height(got[idx]) == pytest.approx(height(lengths[idx]), rel=1e-12)
    with pytest.raises(ValueError, match="template"):
        retarget_lengths(lengths, template[:-1], SK)


# ----------------------------------------------------------------------------- global rotation
def test_global_rotation_matches_explicit_matrices():
    yaw, pitch, roll = 0.7, -0.1, 0.05
    Ry = np.array(
        [[math.cos(yaw), 0, math.sin(yaw)], [0, 1, 0], [-math.sin(yaw), 0, math.cos(yaw)]]
    )
    Rx = np.array([[1, 0, 0], [0, math.cos(pitch), -math.sin(pitch)],
                   [0, math.sin(pitch), math.cos(pitch)]])  # fmt: skip
    Rz = np.array([[math.cos(roll), -math.sin(roll), 0], [math.sin(roll), math.cos(roll), 0],
                   [0, 0, 1]])  # fmt: skip
    got = global_rotation(torch.tensor([yaw, pitch, roll], dtype=f64))
    assert np.allclose(got.numpy(), Ry @ Rx @ Rz, atol=1e-15)
    a = sample_global_angles((1000,), torch.Generator().manual_seed(0), 180, 10, 5)
    assert float(a[:, 0].abs().max()) > 3.0  # any yaw
    assert float(a[:, 1].abs().max()) <= math.radians(10) and float(
        a[:, 2].abs().max()
    ) <= math.radians(5)
    with pytest.raises(ValueError, match="pitch_deg"):
        sample_global_angles((1,), torch.Generator(), pitch_deg=-1)


# ----------------------------------------------------------------------------- cameras
def test_cameras_keep_the_subject_in_frame(mocap):
    n = 200
    g = torch.Generator().manual_seed(0)
    sizes = ((1000, 1000), (1080, 1920), (1920, 1080))
    cam = sample_cameras(n, g, torch.zeros(3, dtype=f64), sizes, (40, 75), 0.03, (1.0, 4.0))
    assert cam["K"].shape == (n, 3, 3) and cam["R"].shape == (n, 3, 3) and cam["t"].shape == (n, 3)
    assert torch.allclose(
        cam["R"] @ cam["R"].transpose(1, 2), torch.eye(3, dtype=f64).expand(n, 3, 3)
    )
    portrait = cam["size"][:, 1] > cam["size"][:, 0]
    assert 0 < int(portrait.sum()) < n
    fov = 2 * torch.atan(cam["size"].amax(-1) / 2 / cam["K"][:, 0, 0])
    assert (
        float(fov.min()) >= math.radians(40) - 1e-9 and float(fov.max()) <= math.radians(75) + 1e-9
    )
    # a tall pose (centred at the origin) seen by each camera, pushed into the frame
    pose = mocap[:27] - mocap[13:14, SK.root : SK.root + 1]
    xc = pose.reshape(1, -1, 3) @ cam["R"].transpose(1, 2) + cam["t"][:, None]
    push = fit_in_frame(xc, cam["K"], cam["size"], 0.05)
    xc = xc + push[:, None, None] * torch.tensor([0.0, 0.0, 1.0], dtype=f64)
    px = project(xc, cam["K"])
    for i in range(n):  # naive per camera check
        w, h = cam["size"][i].tolist()
        assert (
            float(px[i, :, 0].min()) >= 0.05 * w - 1e-6
            and float(px[i, :, 0].max()) <= 0.95 * w + 1e-6
        )
        assert (
            float(px[i, :, 1].min()) >= 0.05 * h - 1e-6
            and float(px[i, :, 1].max()) <= 0.95 * h + 1e-6
        )
    # the push is the smallest one: some point touches an edge (or the minimum depth)
    assert bool((push > 0).any())
    touched = []
    for i in torch.nonzero(push > 0)[:, 0].tolist():
        w, h = cam["size"][i].tolist()
        m = torch.stack([px[i, :, 0] - 0.05 * w, 0.95 * w - px[i, :, 0],
                         px[i, :, 1] - 0.05 * h, 0.95 * h - px[i, :, 1]])  # fmt: skip
        touched.append(float(m.abs().min()) < 1e-6 or float(xc[i, :, 2].min()) < 0.5 + 1e-9)
    assert all(touched)


def test_camera_bad_input():
    g = torch.Generator()
    t = torch.zeros(3)
    with pytest.raises(ValueError, match="fov_deg"):
        sample_cameras(2, g, t, fov_deg=(80, 40))
    with pytest.raises(ValueError, match="distance_m"):
        sample_cameras(2, g, t, distance_m=(0, 1))
    with pytest.raises(ValueError, match="image_sizes"):
        sample_cameras(2, g, t, image_sizes=((0, 10),))
    with pytest.raises(ValueError, match="first dim"):
        fit_in_frame(torch.zeros(2, 5, 3), torch.eye(3).expand(3, 3, 3), torch.ones(2, 2))


# ----------------------------------------------------------------------------- detector model
def test_detector_offsets_match_naive(mocap):
    x = mocap[::50]
    g = torch.Generator().manual_seed(0)
    off = sample_detector_offsets((len(x),), g, dtype=f64)
    got = detector_offsets(x, off, SK)
    want = x.clone().numpy()
    for i, pose in enumerate(x.numpy()):
        for k, (name, o) in enumerate(H36M17_DETECTOR_OFFSETS.items()):
            left, up, fwd = naive_frame(pose, o.frame)
            v = off[i, k].numpy()
            want[i, SK.index(name)] += v[0] * o.side * left + v[1] * up + v[2] * fwd
    assert np.allclose(got.numpy(), want, atol=1e-12)
    assert torch.equal(detector_offsets(x, torch.zeros_like(off), SK), x)
    # the documented rule: hip keypoints wider and higher than the joint centres on average
    many = sample_detector_offsets((4000,), g, dtype=f64)
    k = list(H36M17_DETECTOR_OFFSETS).index("l_hip")
    assert many[:, k, 0].mean() == pytest.approx(0.03, abs=2e-3)
    assert float(many[:, k, 0].min()) >= 0.01 - 1e-12


def test_derive_joints_match_naive(mocap):
    x = mocap[::60]
    got = derive_joints(x, SK)
    want = x.clone()
    for name, rule in H36M17_DETECTOR_RULES.items():
        want[:, SK.index(name)] = sum(w * x[:, SK.index(s)] for s, w in rule.items())
    assert torch.allclose(got, want, atol=1e-14)
    px = x[..., :2]  # works in 2D too
    assert torch.allclose(derive_joints(px, SK), want[..., :2], atol=1e-14)
    with pytest.raises(ValueError, match="rules"):
        derive_joints(x, SK, {"chin": {"nose": 1.0}})


# ----------------------------------------------------------------------------- 2D noise, time
def test_keypoint_noise_statistics():
    g = torch.Generator().manual_seed(0)
    sigma = torch.tensor([1.0, 2.0, 4.0], dtype=f64)
    n = keypoint_noise((20000, 3), sigma, g)
    assert torch.allclose(n.std(dim=(0, 2)), sigma, rtol=0.03)
    n = keypoint_noise((20000, 3), sigma, g, outlier_prob=0.1, outlier_scale=10.0)
    big = (n.abs() > 6 * sigma[:, None]).any(-1).double().mean()
    assert 0.06 < float(big) < 0.11


def test_drop_joints():
    g = torch.Generator().manual_seed(0)
    kp = torch.randn(64, 27, 17, 2, generator=g)
    out, mask = drop_joints(kp, g, prob=0.1, window_prob=0.05, fill=-5.0)
    assert mask.shape == (64, 27, 17) and mask.dtype == torch.bool
    assert bool((out[mask] == -5.0).all()) and torch.equal(out[~mask], kp[~mask])
    assert 0.12 < float(mask.double().mean()) < 0.17  # 1 - 0.9 * 0.95
    whole = mask.all(1)  # (64, 17) joints dropped for a whole window
    assert 0.02 < float(whole.double().mean()) < 0.09
    with pytest.raises(ValueError, match="prob"):
        drop_joints(kp, g, prob=2.0)


def test_window_positions():
    centre = torch.tensor([10.0, 3.5])
    speed = torch.tensor([1.0, 0.5])
    jit = torch.full((2, 5), 0.25)
    got = window_positions(centre, 5, speed, jit)
    want = torch.tensor([[c + s * o + (0.25 if o else 0.0) for o in range(-2, 3)]
                         for c, s in ((10.0, 1.0), (3.5, 0.5))])  # fmt: skip
    assert torch.allclose(got, want)
    with pytest.raises(ValueError, match="receptive_field"):
        window_positions(centre, 0, speed)


# ----------------------------------------------------------------------------- normalisation
def test_normalize_with_intrinsics_matches_naive():
    g = torch.Generator().manual_seed(0)
    K = torch.tensor(
        [[[1500.0, 2.0, 540.0], [0, 1490.0, 960.0], [0, 0, 1]],
         [[1145.0, 0.0, 512.0], [0, 1145.0, 515.0], [0, 0, 1]]], dtype=f64
    )  # fmt: skip
    px = torch.rand(2, 7, 2, generator=g, dtype=f64) * 1000
    got = normalize_with_intrinsics(px, K)
    for b in range(2):  # per point: K^-1 [u, v, 1], divided by its last coordinate
        Kinv = np.linalg.inv(K[b].numpy())
        for i in range(7):
            h = Kinv @ np.array([*px[b, i].tolist(), 1.0])
            assert np.allclose(got[b, i].numpy(), h[:2] / h[2], atol=1e-14)
    # the inverse of projection: normalised points are the rays x/z, y/z
    X = torch.rand(2, 7, 3, generator=g, dtype=f64) + torch.tensor([0.0, 0.0, 2.0], dtype=f64)
    ray = normalize_with_intrinsics(project(X, K[:, None]), K[:, None])
    assert torch.allclose(ray, X[..., :2] / X[..., 2:], atol=1e-12)


def test_default_intrinsics_rule():
    K = default_intrinsics(torch.tensor([1080.0, 1000.0]), torch.tensor([1920.0, 1000.0]))
    want = intrinsic_matrix(torch.tensor([[1920.0, 1920.0], [1000.0, 1000.0]]),
                            torch.tensor([[540.0, 960.0], [500.0, 500.0]]))  # fmt: skip
    assert torch.equal(K, want)
    K = default_intrinsics(1080, 1920, focal_factor=0.9)
    assert float(K[0, 0]) == pytest.approx(0.9 * 1920)
    with pytest.raises(ValueError, match="focal_factor"):
        default_intrinsics(10, 10, focal_factor=0)


def test_normalize_bad_input():
    with pytest.raises(ValueError, match="pixels"):
        normalize_with_intrinsics(torch.zeros(4, 3), torch.eye(3))
    with pytest.raises(ValueError, match="K"):
        normalize_with_intrinsics(torch.zeros(4, 2), torch.eye(2))
    with pytest.raises(TypeError, match="pixels"):
        normalize_with_intrinsics(torch.zeros(4, 2, dtype=torch.long), torch.eye(3))
