"""BVH parsing against an independent per-joint FK written here with plain Python loops."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.io.bvh import (
    MAPPINGS,
    BVHError,
    bundled_bvh,
    detect_mapping,
    get_mapping,
    load_bvh,
    parse_bvh,
)
from tensorpose.ops import bone_lengths
from tensorpose.skeleton import get_skeleton

FRAMES = {"131_01.bvh": 994, "131_02.bvh": 1247, "131_03.bvh": 1102}


def rot(axis, deg):
    a = math.radians(deg)
    c, s = math.cos(a), math.sin(a)
    return np.array(
        {
            "X": [[1, 0, 0], [0, c, -s], [0, s, c]],
            "Y": [[c, 0, s], [0, 1, 0], [-s, 0, c]],
            "Z": [[c, -s, 0], [s, c, 0], [0, 0, 1]],
        }[axis]
    )


def reference_positions(text, frame):
    """Independent FK: walk the hierarchy text joint by joint for one frame."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    i = lines.index(["MOTION"])
    values = [float(v) for v in lines[i + 3 + frame]]
    out, stack, col = {}, [], 0
    for toks in lines[:i]:
        if toks[0] in ("ROOT", "JOINT"):
            name = toks[1]
            stack.append([name, None, None])
        elif toks[0] == "End":
            stack.append([stack[-1][0] + "_End", None, None])
        elif toks[0] == "OFFSET":
            off = np.array([float(v) for v in toks[1:4]])
            parent = stack[-2] if len(stack) > 1 else None
            G = np.eye(3) if parent is None else parent[2]
            p = np.zeros(3) if parent is None else parent[1]
            stack[-1][1] = p + G @ off
            stack[-1][2] = G.copy()  # end sites: no channels
            out[stack[-1][0]] = stack[-1][1]
        elif toks[0] == "CHANNELS":
            n = int(toks[1])
            R, T = np.eye(3), np.zeros(3)
            for k, ch in enumerate(toks[2 : 2 + n]):
                v = values[col + k]
                if ch.endswith("rotation"):
                    R = R @ rot(ch[0], v)
                else:
                    T["XYZ".index(ch[0])] = v
            col += n
            parent = stack[-2] if len(stack) > 1 else None
            Gp = np.eye(3) if parent is None else parent[2]
            stack[-1][1] = stack[-1][1] + Gp @ T
            stack[-1][2] = Gp @ R
            out[stack[-1][0]] = stack[-1][1]
        elif toks[0] == "}":
            stack.pop()
    return out


@pytest.mark.parametrize("path", bundled_bvh(), ids=lambda p: p.name)
def test_bundled_files_parse_and_match_reference_fk(path):
    m = load_bvh(path)
    assert m.num_frames == FRAMES[path.name]
    assert m.fps == pytest.approx(120, rel=1e-4)
    assert len(m.joint_names) == 31 and len(m.end_sites) == 7
    assert sum(len(c) for c in m.channels) == 96
    pos = m.positions(end_sites=True)
    names = m.joint_names + m.end_site_names
    assert pos.shape == (m.num_frames, 38, 3)
    text = path.read_text()
    for frame in (0, m.num_frames // 2, m.num_frames - 1):
        ref = reference_positions(text, frame)
        got = pos[frame].numpy()
        want = np.stack([ref[n] for n in names])
        scale = np.abs(want).max()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * scale)


def test_bone_lengths_constant_over_frames():
    m = load_bvh(bundled_bvh()[2])
    L = bone_lengths(m.positions(), m.skeleton())
    assert (L.std(0) < 1e-9 * L.mean(0).clamp_min(1)).all()
    offsets = np.linalg.norm(m.offsets[[c for _, c in m.skeleton().bones]], axis=-1)
    np.testing.assert_allclose(L[0].numpy(), offsets, atol=1e-9)


@pytest.mark.parametrize("path", bundled_bvh(), ids=lambda p: p.name)
def test_h36m17_mapping_gives_a_plausible_human(path):
    m = load_bvh(path)
    assert detect_mapping(m.joint_names + m.end_site_names) == "cmu_3dsmax"
    x, sk = m.to_skeleton()
    assert sk.name == "h36m17" and x.shape == (m.num_frames, 17, 3)
    # Y is up: head above pelvis above ankles; head-to-ankle height of a standing adult
    head, pelvis = x[:, sk.index("head"), 1], x[:, sk.index("pelvis"), 1]
    ankles = x[:, [sk.index("l_ankle"), sk.index("r_ankle")], 1].min(1).values
    assert (head > pelvis).all() and (pelvis > ankles).all()
    height = (head - ankles).median().item()
    assert 1.1 < height < 2.0, height
    L = bone_lengths(x, sk).mean(0)
    thigh = L[[c for _, c in sk.bones].index(sk.index("l_knee"))].item()
    assert 0.3 < thigh < 0.55, thigh  # a femur, in metres
    # the pelvis is the mean of the two hips
    torch.testing.assert_close(x[:, 0], x[:, [1, 4]].mean(1))


def test_motionbuilder_naming_maps_to_the_same_pose(motionbuilder_copy):
    src = bundled_bvh()[0]
    renamed = motionbuilder_copy(src)
    m = load_bvh(renamed)
    assert detect_mapping(m.joint_names + m.end_site_names) == "cmu_motionbuilder"
    a, _ = load_bvh(src).to_skeleton("cmu_3dsmax")
    b, _ = m.to_skeleton()
    torch.testing.assert_close(a, b)


def test_unknown_mapping_and_missing_joints():
    m = load_bvh(bundled_bvh()[0])
    with pytest.raises(ValueError, match="unknown mapping 'h36m'.*cmu_3dsmax"):
        m.to_skeleton("h36m")
    with pytest.raises(ValueError, match="needs joints.*LeftUpLeg"):
        m.to_skeleton("cmu_motionbuilder")
    assert set(MAPPINGS) == {"cmu_3dsmax", "cmu_motionbuilder", "cmu_daz", "mixamo"}
    assert get_mapping("cmu_3dsmax").target().name == "h36m17"


SMALL = """HIERARCHY
ROOT root
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT a
  {
    OFFSET 1 0 0
    CHANNELS 3 Xrotation Yrotation Zrotation
    JOINT b
    {
      OFFSET 0 2 0
      CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
      End Site
      {
        OFFSET 0 0 3
      }
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.04
1 2 3 10 20 30 40 50 60 0.5 0.25 0 70 80 90
0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
"""


def test_channel_orders_and_child_position_channels_match_reference():
    m = parse_bvh(SMALL, "small.bvh")
    assert m.fps == pytest.approx(25)
    assert [len(c) for c in m.channels] == [6, 3, 6]
    pos = m.positions(end_sites=True).numpy()
    for frame in (0, 1):
        ref = reference_positions(SMALL, frame)
        want = np.stack([ref[n] for n in ["root", "a", "b", "b_End"]])
        np.testing.assert_allclose(pos[frame], want, atol=1e-12)
    np.testing.assert_allclose(pos[1], [[0, 0, 0], [1, 0, 0], [1, 2, 0], [1, 2, 3]], atol=1e-12)


def frame_time(value):
    return lambda s: s.replace("Frame Time: 0.04", f"Frame Time: {value}")


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda s: s.replace("OFFSET 1 0 0", "OFFSET 1 x 0"), r"small\.bvh:8: .*not a number"),
        (lambda s: s.replace("OFFSET 1 0 0", "OFFSET 1 0"), r"small\.bvh:8: .*needs 3 numbers"),
        (lambda s: s.replace("Frames: 2", "Frames: 3"), r"small\.bvh:24: header says 3 frames"),
        (lambda s: s.replace("0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", "0 0"), r"small\.bvh:25: frame 1"),
        (lambda s: s.replace("Xrotation Yrotation Zrotation", "Xrotation Yrotation Wrotation"),
         r"small\.bvh:9: .*unknown channels"),
        (lambda s: s.replace("CHANNELS 3", "CHANNELS 4"), r"small\.bvh:9: .*declares 4"),
        (lambda s: s.split("MOTION")[0], r"small\.bvh:\d+: unexpected end of file"),
        (lambda s: s.replace("HIERARCHY", "HIERARCH"), r"small\.bvh:1: "),
        (lambda s: s.replace("Frame Time: 0.04", "Frame Time: 0"), r"small\.bvh:23: .*positive"),
        (lambda s: s.replace("1 2 3 10", "1 2 nan 10"), r"small\.bvh:24: .*non-finite"),
        (frame_time("-0.04"), r"small\.bvh:23: .*positive"),
        (frame_time("nan"), r"small\.bvh:23: .*non-finite"),
        (frame_time("inf"), r"small\.bvh:23: .*non-finite"),
        (frame_time("1e300"), r"small\.bvh:23: .*60 seconds"),
        (frame_time("1e-300"), r"small\.bvh:23: .*1e-6"),
        (lambda s: s.replace("Xrotation Yrotation Zrotation", "Xrotation Yrotation Xrotation"),
         r"small\.bvh:9: joint 'a' lists channel\(s\) \['Xrotation'\] more than once"),
        (lambda s: s.replace("Xposition Yposition Zposition Zrotation Yrotation",
                             "Xposition Yposition Yposition Zrotation Yrotation"),
         r"small\.bvh:13: joint 'b' lists channel\(s\) \['Yposition'\]"),
        (lambda s: s.replace("JOINT b", "JOINT a"), r"small\.bvh:10: joint name 'a' is used twice"),
        (lambda s: s.replace("JOINT b", "JOINT root"), r"small\.bvh:10: joint name 'root'"),
        (lambda s: s.replace("Frames: 2", "Frames: \u00b2"), r"small\.bvh:22: expected 'Frames"),
    ],
)  # fmt: skip
def test_parse_errors_name_file_and_line(edit, match):
    with pytest.raises(BVHError, match=match):
        parse_bvh(edit(SMALL), "small.bvh")


def test_load_missing_file_folder_and_binary(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_bvh(Path("/nonexistent/x.bvh"))
    (tmp_path / "x.bvh").mkdir()
    with pytest.raises(BVHError, match=r"x\.bvh: is a folder, expected a BVH file"):
        load_bvh(tmp_path / "x.bvh")
    binary = tmp_path / "b.bvh"
    binary.write_bytes(SMALL.encode().replace(b"JOINT b", b"JOINT \xff"))
    with pytest.raises(BVHError, match=r"b\.bvh:10: not UTF-8 text \(byte 196\)"):
        load_bvh(binary)


def chain(depth: int) -> str:
    """A root and a chain of ``depth`` joints, each bent by its own angles, two frames."""
    parts = ["HIERARCHY", "ROOT r", "{", "OFFSET 0 0 0",
             "CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation"]  # fmt: skip
    for i in range(depth):
        parts += [
            f"JOINT j{i}",
            "{",
            "OFFSET 0.01 0.02 0",
            "CHANNELS 3 Zrotation Xrotation Yrotation",
        ]
    parts += ["End Site", "{", "OFFSET 0 0.01 0", "}"] + ["}"] * (depth + 1)
    rng = np.random.default_rng(0)
    rows = [" ".join(f"{v:.4f}" for v in rng.uniform(-3, 3, 3 * depth + 6)) for _ in range(2)]
    return "\n".join([*parts, "MOTION", "Frames: 2", "Frame Time: 0.01", *rows]) + "\n"


def test_deep_hierarchy_parses_without_recursion():
    text = chain(1100)  # deeper than Python's recursion limit (1000)
    m = parse_bvh(text, "deep.bvh")
    assert len(m.joint_names) == 1101 and m.skeleton().depth[-1] == 1100
    pos = m.positions(end_sites=True)
    ref = reference_positions(text, 1)
    names = m.joint_names + m.end_site_names
    want = np.stack([ref[n] for n in names[-50:]])
    np.testing.assert_allclose(pos[1, -50:].numpy(), want, atol=1e-9)
    with pytest.raises(BVHError, match=r"deep\.bvh:\d+: unexpected end of file"):
        parse_bvh(text.split("MOTION")[0].rstrip("}\n"), "deep.bvh")


def test_cmu31_skeleton_from_file_matches_builtin():
    m = load_bvh(bundled_bvh()[1])
    assert m.skeleton().names == get_skeleton("cmu31").names
