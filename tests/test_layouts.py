"""Keypoint layouts: to_h36m17 against a per-joint loop written here, layout detection on the
bundled BODY_25B tracks and on a BODY_25 reordering of them."""

import math

import numpy as np
import pytest
import torch

from tensorpose.io import openpose
from tensorpose.io.openpose import bundled_tracks
from tensorpose.io.tracks import read_tracks
from tensorpose.layouts import (
    COCO17_INDEX,
    LAYOUTS,
    check_layout,
    detect_layout,
    layouts_with,
    to_h36m17,
)
from tensorpose.skeleton import coco17, h36m17

H36M = list(h36m17().names)

# The conversion rules as documented, written out independently of the library's table.
REF_RULES = {
    "BODY_25": {
        "pelvis": [("mid_hip", 1.0)],
        "spine": [("mid_hip", 0.5), ("neck", 0.5)],
        "thorax": [("neck", 1.0)],
        "neck": [("nose", 1.0)],
        "head": [("nose", 1.5), ("neck", -0.5)],
    },
    "BODY_25B": {
        "pelvis": [("l_hip", 0.5), ("r_hip", 0.5)],
        "spine": [("l_hip", 0.25), ("r_hip", 0.25), ("l_shoulder", 0.25), ("r_shoulder", 0.25)],
        "thorax": [("l_shoulder", 0.5), ("r_shoulder", 0.5)],
        "neck": [("neck", 1.0)],
        "head": [("head_top", 1.0)],
    },
    "COCO_18": {
        "pelvis": [("l_hip", 0.5), ("r_hip", 0.5)],
        "spine": [("l_hip", 0.25), ("r_hip", 0.25), ("neck", 0.5)],
        "thorax": [("neck", 1.0)],
        "neck": [("nose", 1.0)],
        "head": [("nose", 1.5), ("neck", -0.5)],
    },
    "COCO_17": {
        "pelvis": [("l_hip", 0.5), ("r_hip", 0.5)],
        "spine": [("l_hip", 0.25), ("r_hip", 0.25), ("l_shoulder", 0.25), ("r_shoulder", 0.25)],
        "thorax": [("l_shoulder", 0.5), ("r_shoulder", 0.5)],
        "neck": [("nose", 1.0)],
        "head": [("nose", 1.5), ("l_shoulder", -0.25), ("r_shoulder", -0.25)],
    },
    "H36M_17": {},
}
REF_RULES["BLAZEPOSE_33"] = REF_RULES["COCO_17"]  # the same joints made the same way


def naive_to_h36m17(kp: np.ndarray, layout: str) -> np.ndarray:
    """Per person, per joint: the weighted sum of the sources and their smallest confidence
    (NaN if any is NaN); a joint whose confidence is not positive gets NaN x, y."""
    names = LAYOUTS[layout]
    flat = kp.reshape(-1, len(names), 3)
    out = np.empty((len(flat), 17, 3))
    for n in range(len(flat)):
        for j, target in enumerate(H36M):
            rule = REF_RULES[layout].get(target, [(target, 1.0)])
            src = [flat[n, names.index(s)] for s, _ in rule]
            confs = [p[2] for p in src]
            conf = math.nan if any(math.isnan(c) for c in confs) else min(confs)
            x = sum(w * p[0] for (_, w), p in zip(rule, src, strict=True))
            y = sum(w * p[1] for (_, w), p in zip(rule, src, strict=True))
            out[n, j] = (x, y, conf) if conf > 0 else (math.nan, math.nan, conf)
    return out.reshape(*kp.shape[:-2], 17, 3)


def body25_from_body25b(kp: np.ndarray) -> np.ndarray:
    """BODY_25B keypoints ``(..., 25, 3)`` re-ordered as BODY_25 (OpenPose's default): joints
    by name; BODY_25's neck and mid-hip, which BODY_25B lacks, as the mean of the shoulders and
    of the hips (smallest confidence), as OpenPose's own BODY_25 places them."""
    b, a = LAYOUTS["BODY_25B"], LAYOUTS["BODY_25"]
    out = np.zeros(kp.shape)
    for j, name in enumerate(a):  # a loop over joints: test reference
        if name in ("neck", "mid_hip"):
            pair = ("l_shoulder", "r_shoulder") if name == "neck" else ("l_hip", "r_hip")
            p, q = kp[..., b.index(pair[0]), :], kp[..., b.index(pair[1]), :]
            out[..., j, :2] = (p[..., :2] + q[..., :2]) / 2
            out[..., j, 2] = np.minimum(p[..., 2], q[..., 2])
        else:
            out[..., j, :] = kp[..., b.index(name), :]
    return out


@pytest.fixture(scope="module")
def body25b():
    """``(T, P, 25, 3)`` raw OpenPose values (0 for missing) of the bundled camera 1."""
    tr = read_tracks(bundled_tracks()[0], min_confidence=0.0)
    return torch.nan_to_num(tr.raw, nan=0.0).numpy()


# ----------------------------------------------------------------------------- layouts
def test_layout_tables():
    assert {k: len(v) for k, v in LAYOUTS.items()} == {
        "BODY_25": 25, "BODY_25B": 25, "COCO_18": 18, "COCO_17": 17, "H36M_17": 17,
        "BLAZEPOSE_33": 33,
    }  # fmt: skip
    assert openpose.LAYOUTS is LAYOUTS and openpose.COCO17_INDEX is COCO17_INDEX
    for names in LAYOUTS.values():
        assert len(set(names)) == len(names)
    assert LAYOUTS["COCO_17"] == list(coco17().names) and LAYOUTS["H36M_17"] == H36M
    coco = list(coco17().names)
    assert set(COCO17_INDEX) == {"BODY_25", "BODY_25B", "COCO_18", "COCO_17", "BLAZEPOSE_33"}
    for layout, idx in COCO17_INDEX.items():
        assert [LAYOUTS[layout][i] for i in idx] == coco
    assert layouts_with(25) == ["BODY_25", "BODY_25B"] and layouts_with(20) == []
    with pytest.raises(ValueError, match=r"layout BODY_25 has 25 keypoints but keypoints has 18"):
        check_layout("BODY_25", 18)
    with pytest.raises(ValueError, match="layout must be one of"):
        check_layout("MPI_15")


# ----------------------------------------------------------------------------- to_h36m17
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_to_h36m17_against_per_joint_loop(layout, device):
    rng = np.random.default_rng(1)
    K = len(LAYOUTS[layout])
    kp = np.concatenate([rng.uniform(0, 500, (3, 4, K, 2)), rng.uniform(0.05, 1, (3, 4, K, 1))], -1)
    drop = rng.random((3, 4, K)) < 0.15
    kp[..., 2][drop] = 0.0  # not found
    kp[..., 2][rng.random((3, 4, K)) < 0.05] = np.nan  # missing, NaN convention
    want = naive_to_h36m17(kp, layout)
    for dtype in (torch.float64, torch.float32):
        got = to_h36m17(torch.tensor(kp, dtype=dtype, device=device), layout)
        assert got.shape == (3, 4, 17, 3) and got.dtype == dtype and got.device.type == device.type
        tol = 1e-12 if dtype == torch.float64 else 1e-4
        np.testing.assert_allclose(got.cpu().double().numpy(), want, rtol=tol, atol=tol * 500)
    # one joint with no leading dims
    one = to_h36m17(torch.tensor(kp[0, 0], device=device), layout)
    np.testing.assert_allclose(one.cpu().numpy(), want[0, 0], rtol=1e-12)


def test_made_joints_take_the_smallest_confidence_and_missing_sources():
    K = 17
    kp = torch.ones(K, 3) * 100
    kp[:, 2] = torch.linspace(0.9, 0.5, K)
    names = LAYOUTS["COCO_17"]
    out = to_h36m17(kp, "COCO_17")
    l_hip, r_hip = names.index("l_hip"), names.index("r_hip")
    assert out[H36M.index("pelvis"), 2] == min(kp[l_hip, 2], kp[r_hip, 2])
    kp[l_hip, 2] = 0.0  # a missing source: pelvis and spine missing, the hip copied as missing
    out = to_h36m17(kp, "COCO_17")
    for j in ("pelvis", "spine", "l_hip"):
        assert torch.isnan(out[H36M.index(j), :2]).all() and out[H36M.index(j), 2] == 0
    assert not torch.isnan(out[H36M.index("thorax")]).any()
    kp[l_hip, 2] = float("nan")
    assert torch.isnan(to_h36m17(kp, "COCO_17")[H36M.index("pelvis")]).all()


def test_to_h36m17_on_real_tracks(body25b):
    kp = torch.from_numpy(body25b[:, 0])  # the main subject, standing: image y grows downwards
    h = to_h36m17(kp, "BODY_25B")
    med = {j: h[:, H36M.index(j), 1].nanmedian() for j in H36M}
    assert med["head"] < med["neck"] < med["thorax"] < med["spine"] < med["pelvis"]
    assert med["pelvis"] < med["r_knee"] < med["r_ankle"]
    # the same people through COCO_17 and BODY_25 agree where the rules agree
    coco = to_h36m17(kp[:, :17], "COCO_17")
    b25 = to_h36m17(torch.from_numpy(body25_from_body25b(kp.numpy())), "BODY_25")
    for j in ("pelvis", "spine", "thorax", "l_knee", "r_wrist"):
        i = H36M.index(j)
        torch.testing.assert_close(coco[:, i], h[:, i], equal_nan=True)
        torch.testing.assert_close(b25[:, i], h[:, i], equal_nan=True)


def test_to_h36m17_bad_input():
    with pytest.raises(ValueError, match="layout BODY_25 has 25 keypoints but keypoints has 17"):
        to_h36m17(torch.zeros(2, 17, 3), "BODY_25")
    with pytest.raises(ValueError, match=r"\(\.\.\., K, 3\)"):
        to_h36m17(torch.zeros(2, 17, 2), "COCO_17")
    with pytest.raises(TypeError, match="floating-point"):
        to_h36m17(torch.zeros(2, 17, 3, dtype=torch.long), "COCO_17")
    with pytest.raises(TypeError, match="floating-point"):
        to_h36m17(np.zeros((17, 3)), "COCO_17")
    with pytest.raises(ValueError, match="layout must be one of"):
        to_h36m17(torch.zeros(17, 3), "coco")


# ----------------------------------------------------------------------------- detection
def test_detect_layout_on_bundled_tracks_and_a_body25_reordering(body25b):
    name, reason = detect_layout(body25b)
    assert name == "BODY_25B" and "BODY_25B" in reason and "weak" not in reason
    name, reason = detect_layout(body25_from_body25b(body25b))
    assert name == "BODY_25" and "weak" not in reason
    # a single frame with one person is enough
    assert detect_layout(body25_from_body25b(body25b[:1, :1]))[0] == "BODY_25"
    assert detect_layout(body25b[:1, :1])[0] == "BODY_25B"
    # torch input, NaN for missing (the Tracks convention)
    tr = read_tracks(bundled_tracks()[3])
    assert detect_layout(tr.raw)[0] == "BODY_25B"


def test_detect_layout_17_and_18(body25b):
    assert detect_layout(body25b[..., :17, :])[0] == "COCO_17"
    h36 = to_h36m17(torch.from_numpy(body25b), "BODY_25B").nan_to_num(0.0)
    assert detect_layout(h36)[0] == "H36M_17"
    name, reason = detect_layout(np.zeros((2, 18, 3)))
    assert name == "COCO_18" and "only layout with 18" in reason


def test_detect_layout_without_evidence_or_count():
    name, reason = detect_layout(np.zeros((3, 2, 25, 3)))  # nobody found
    assert name == "BODY_25" and "assumed BODY_25" in reason
    with pytest.raises(ValueError, match=r"20 keypoints match no known layout"):
        detect_layout(np.zeros((1, 20, 3)))
    with pytest.raises(ValueError, match=r"\(\.\.\., K, 3\)"):
        detect_layout(np.zeros((1, 25, 2)))
