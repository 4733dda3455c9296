"""DeepMimic motions: forward kinematics against an independent per-joint numpy loop (its own
quaternion -> matrix from the axis-angle formula), bone lengths = the character's offsets."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tensorpose.io.deepmimic import (
    deepmimic_to_h36m17,
    find_character,
    load_character,
    load_deepmimic,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "mocap_extra" / "deepmimic"
CLIP = DATA / "motions" / "09_02.txt"


def quat_reference(w, x, y, z):
    """Rodrigues' formula from the quaternion's axis and angle (w first, as DeepMimic)."""
    n = math.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / n, x / n, y / n, z / n
    angle = 2 * math.atan2(math.sqrt(x * x + y * y + z * z), w)
    s = math.sqrt(x * x + y * y + z * z)
    if s < 1e-12:
        return np.eye(3)
    k = np.array([x, y, z]) / s
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K


def reference_fk(frame, joints):
    """One frame's joint positions, joint by joint from the raw JSON."""
    p_root, R = np.array(frame[1:4]), quat_reference(*frame[4:8])
    pos, rot, col = [p_root], [R], 8
    for j in joints[1:]:
        par = j["Parent"]
        if j["Type"] == "spherical":
            local = quat_reference(*frame[col : col + 4])
            col += 4
        elif j["Type"] == "revolute":
            a = frame[col]
            local = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0],
                              [0, 0, 1]])  # fmt: skip
            col += 1
        else:
            local = np.eye(3)
        attach = np.array([j["AttachX"], j["AttachY"], j["AttachZ"]])
        pos.append(pos[par] + rot[par] @ attach)
        rot.append(rot[par] @ local)
    assert col == len(frame)
    return np.stack(pos)


def test_fk_matches_a_per_joint_loop_and_keeps_the_offsets():
    raw = json.loads(CLIP.read_text())["Frames"]
    joints = json.loads((DATA / "characters" / "humanoid3d.txt").read_text())["Skeleton"]["Joints"]
    m = load_deepmimic(CLIP)
    assert find_character(CLIP) == (DATA / "characters" / "humanoid3d.txt").resolve()
    pos = m.positions().numpy()
    assert pos.shape == (len(raw), 15, 3) and m.fps == pytest.approx(30)
    for t in range(len(raw)):
        np.testing.assert_allclose(pos[t], reference_fk(raw[t], joints), atol=1e-12)
    ch = m.character
    for j in range(1, 15):
        lengths = np.linalg.norm(pos[:, j] - pos[:, ch.parents[j]], axis=-1)
        np.testing.assert_allclose(lengths, np.linalg.norm(ch.offsets[j]), atol=1e-12)


def test_h36m17_is_upright_y_up_and_right_handed():
    pos, sk = deepmimic_to_h36m17(load_deepmimic(CLIP))
    p = pos.numpy()
    i = {n: sk.index(n) for n in sk.names}
    # Y up: head above pelvis above ankles in every frame of this jump (legs tucked: 0.38 m)
    assert (p[:, i["head"], 1] > p[:, i["pelvis"], 1]).all()
    assert (p[:, i["pelvis"], 1] > p[:, i["l_ankle"], 1] + 0.3).all()
    # not mirrored: facing = (left hip - right hip) x up; bent knees point forward
    up = np.array([0.0, 1.0, 0.0])
    face = np.cross(p[:, i["l_hip"]] - p[:, i["r_hip"]], up)
    for side in "lr":
        mid = (p[:, i[f"{side}_hip"]] + p[:, i[f"{side}_ankle"]]) / 2
        ahead = ((p[:, i[f"{side}_knee"]] - mid) * face).sum(-1)
        bent = np.linalg.norm(p[:, i[f"{side}_hip"]] - p[:, i[f"{side}_ankle"]], axis=-1) < 0.75
        assert bent.sum() >= 3 and (ahead[bent] > 0).all()
    np.testing.assert_allclose(p[:, i["pelvis"]], load_deepmimic(CLIP).root, atol=1e-12)


def test_bad_files_are_named(tmp_path):
    bad = tmp_path / "clip.txt"
    bad.write_text('{"Frames": [[0.03, 1, 2]]}')
    with pytest.raises(ValueError, match=r"clip.txt: Frames must be rows of 44 numbers"):
        load_deepmimic(bad, DATA / "characters" / "humanoid3d.txt")
    with pytest.raises(ValueError, match=r"no characters/humanoid3d.txt.*data.character"):
        load_deepmimic(bad)
    bad.write_text("not json")
    with pytest.raises(ValueError, match=r"clip.txt: not a DeepMimic character file"):
        load_character(bad)


def test_hostile_motions_are_named_before_they_expand(tmp_path):
    """A frame lasting a million seconds, JSON nested too deeply, a number of 5000 digits, a
    file over the size limit: one error naming the file, before anything is resampled."""
    char = DATA / "characters" / "humanoid3d.txt"
    rows = json.loads(CLIP.read_text())["Frames"][:3]
    long = tmp_path / "long.txt"
    long.write_text(json.dumps({"Frames": [[1e6, *rows[0][1:]], *rows[1:]]}))
    with pytest.raises(ValueError, match=r"long.txt: the frames last 1e\+06 s, over the limit"):
        load_deepmimic(long, char)
    deep = tmp_path / "deep.txt"
    deep.write_text('{"Frames": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match=r"deep.txt: .*nested too deeply"):
        load_deepmimic(deep, char)
    digits = tmp_path / "digits.txt"
    digits.write_text('{"Frames": [[' + "9" * 5000 + "]]}")
    with pytest.raises(ValueError, match=r"digits.txt: not a DeepMimic motion file"):
        load_deepmimic(digits, char)
    big = tmp_path / "big.txt"
    big.write_bytes(b" " * (17 << 20))
    with pytest.raises(ValueError, match=r"big.txt"):
        load_deepmimic(big, char)
