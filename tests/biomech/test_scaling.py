"""Pose2Sim's scaling rules (:mod:`tensorpose.biomech.scaling`) against naive per-frame loops,
the setup choice from a TRC's markers, and the one-line refusals that need no OpenSim."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from tensorpose.biomech import (
    CORE_MARKERS,
    SETUPS,
    choose_setup,
    estimate_height,
    hip_knee_angles,
    opensim_module,
    standing_frames,
    trimmed_mean,
)
from tensorpose.cli import main
from tensorpose.errors import InputError
from tensorpose.io.motion import write_trc
from tensorpose.layouts import marker_names

NAMES = ["Nose", "Neck", "Head", "RShoulder", "LShoulder", "RHip", "LHip", "RKnee", "LKnee",
         "RAnkle", "LAnkle", "RHeel", "LHeel"]  # fmt: skip


def figure(knee_deg: np.ndarray, hip_deg: np.ndarray, seed: int = 0) -> np.ndarray:
    """Stick people ``(T, 13, 3)`` (Y up) with knee and hip flexion ``(T,)`` degrees in the
    sagittal plane (both sides), a little noise."""
    rng = np.random.default_rng(seed)
    T = len(knee_deg)
    p = np.zeros((T, len(NAMES), 3))
    for t in range(T):
        k, h = math.radians(knee_deg[t]), math.radians(hip_deg[t])
        thigh = np.array([0, -math.cos(h), math.sin(h)]) * 0.42  # hip -> knee, forward +Z
        shank = np.array([0, -math.cos(h - k), math.sin(h - k)]) * 0.40
        for s, x in (("R", -0.09), ("L", 0.09)):
            hip = np.array([x, 1.0, 0.0])
            pos = {f"{s}Hip": hip, f"{s}Knee": hip + thigh, f"{s}Ankle": hip + thigh + shank,
                   f"{s}Shoulder": hip + np.array([0.08 * np.sign(x), 0.5, 0])}  # fmt: skip
            pos[f"{s}Heel"] = pos[f"{s}Ankle"] + np.array([0, -0.05, -0.05])
            for n, v in pos.items():
                p[t, NAMES.index(n)] = v
        p[t, NAMES.index("Neck")] = [0, 1.6, 0.0]
        p[t, NAMES.index("Head")] = [0, 1.78, 0.0]
        p[t, NAMES.index("Nose")] = [0, 1.68, 0.1]
    return p + rng.normal(0, 0.003, p.shape)


def naive_flexion(p: np.ndarray) -> list[float]:
    """Mean |knee| and |hip| flexion per frame with acos, one frame and side at a time."""

    def angle(u, v):
        c = np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v))
        return math.degrees(math.acos(max(-1.0, min(1.0, c))))

    out = []
    for f in p:
        m = {n: f[i] for i, n in enumerate(NAMES)}
        mid_hip = (m["RHip"] + m["LHip"]) / 2
        vals = [180 - angle(m[s + "Ankle"] - m[s + "Knee"], m[s + "Hip"] - m[s + "Knee"])
                for s in "RL"]  # fmt: skip
        vals += [angle(m[s + "Hip"] - m[s + "Knee"], m["Neck"] - mid_hip) for s in "RL"]
        out.append(float(np.mean(vals)))
    return out


def test_flexion_and_standing_frames_match_a_naive_loop():
    T = 120
    knee = np.concatenate([np.linspace(5, 150, 60), np.linspace(150, 10, 60)])
    hip = knee * 0.8
    p = figure(knee, hip)
    p[7] = np.nan  # a frame without any marker is left out
    p[9, NAMES.index("RKnee")] = np.nan  # one without a knee has no flexion
    naive = naive_flexion(p)
    got = hip_knee_angles(p, NAMES)
    ok = [i for i in range(T) if i not in (7, 9)]
    np.testing.assert_allclose(got[ok], np.array(naive)[ok], atol=1e-6)
    want = [i for i in ok if naive[i] < 90]
    assert len(want) >= 50
    np.testing.assert_array_equal(standing_frames(p, NAMES), want)
    # fewer than 50 frames under 90 deg: the 50 smallest, in increasing flexion
    crouched = figure(np.full(T, 120.0) - np.linspace(0, 60, T), np.full(T, 100.0))
    fl = np.array(naive_flexion(crouched))
    assert (fl < 90).sum() < 50
    np.testing.assert_array_equal(standing_frames(crouched, NAMES), np.argsort(fl)[:50])


def test_nobody_upright_is_one_line():
    p = figure(np.full(60, 130.0), np.full(60, 110.0))
    with pytest.raises(InputError, match=r"x\.trc: the person never stands upright enough"):
        standing_frames(p, NAMES, "x.trc")
    p[:, NAMES.index("LKnee")] = np.nan
    with pytest.raises(InputError, match="no frame has all of the shoulders"):
        standing_frames(p, NAMES, "x.trc")


def test_trimmed_mean_and_height_match_naive():
    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 50, 101):
        x = rng.normal(size=n)
        x[rng.random(n) < 0.2] = np.nan
        s = sorted(x, key=lambda v: (math.isnan(v), v))
        kept = [v for v in s[int(n * 0.25) : int(n * 0.75)] if not math.isnan(v)]
        want = np.mean(kept) if kept else np.nanmean(x) if not np.isnan(x).all() else np.nan
        np.testing.assert_allclose(trimmed_mean(x), want, equal_nan=True)
    p = figure(np.full(40, 5.0), np.full(40, 3.0))
    heights = []
    for f in p:
        m = {n: f[i] for i, n in enumerate(NAMES)}

        def d(a, b, m=m):
            return float(np.linalg.norm(m[a] - m[b]))

        mid_sh = (m["RShoulder"] + m["LShoulder"]) / 2
        legs = sum((d(s + "Heel", s + "Ankle") + d(s + "Ankle", s + "Knee")
                    + d(s + "Knee", s + "Hip") + d(s + "Hip", s + "Shoulder")) / 2
                   for s in "RL")  # fmt: skip
        heights.append(legs + float(np.linalg.norm(mid_sh - m["Head"])) * 1.008)
    h = sorted(heights)[10:30]
    assert estimate_height(p, NAMES) == pytest.approx(np.mean(h), rel=1e-12)
    assert 1.6 < estimate_height(p, NAMES) < 1.75  # heel .07 + .40 + .42 + .51 + head .28


@pytest.mark.parametrize(("layout", "setup"), [
    ("BODY_25B", "body25b"), ("BODY_25", "body25"), ("BLAZEPOSE_33", "blazepose"),
    ("COCO_17", "coco17"), ("H36M_17", "coco17")])  # fmt: skip
def test_auto_setup_from_markers(layout, setup):
    assert choose_setup(marker_names(layout)).name == setup


def test_halpe26_and_explicit_models():
    halpe = SETUPS["halpe26"].ik_markers
    assert choose_setup(halpe).name == "halpe26"
    assert choose_setup(marker_names("BODY_25B"), "coco17").name == "coco17"
    with pytest.raises(InputError, match="--model must be auto or one of"):
        choose_setup(halpe, "body135")
    with pytest.raises(InputError, match=r"a\.trc: too few markers .*RAnkle, LAnkle missing"):
        choose_setup([m for m in CORE_MARKERS if "Ankle" not in m], source="a.trc")
    with pytest.raises(InputError, match=r"a\.trc: has 8 of the 25 markers of the blazepose"):
        choose_setup(list(CORE_MARKERS), "blazepose", "a.trc")


def test_missing_opensim_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "opensim", None)  # import opensim -> ImportError
    with pytest.raises(InputError, match=r"pip install 'tensorpose\[opensim\]'"):
        opensim_module()
    trc = tmp_path / "p.trc"
    write_trc(trc, figure(np.full(60, 5.0), np.full(60, 3.0)), NAMES, 30.0, units="m")
    assert main(["kinematics", str(trc), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tensorpose[opensim]" in err[0]
    assert not (tmp_path / "o").exists()


def test_cli_model_choices_are_the_setups():
    from tensorpose.cli import KINEMATICS_MODELS

    assert list(KINEMATICS_MODELS) == ["auto", *SETUPS]
