"""triangulate's outputs as users open them: Pose2Sim's marker names and axes in the TRC, the
frame rate from what the input says, the 3D filters with gap filling and their jitter."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tensorpose.apps.triangulate import summary, triangulate_folder
from tensorpose.io.motion import read_trc
from tensorpose.io.openpose import bundled_tracks
from tensorpose.io.video import VideoWriter
from tensorpose.layouts import LAYOUTS, joint_marker_names, marker_names
from tensorpose.multiview.motion3d import Filter3D, filter_points

TRACKS = bundled_tracks()[0].parent
CALIB = TRACKS / "Calib.qca.txt"

POSE2SIM_BODY_25B = {  # Pose2Sim/skeletons.py BODY_25B: keypoint id -> marker name
    0: "Nose", 5: "LShoulder", 6: "RShoulder", 7: "LElbow", 8: "RElbow", 9: "LWrist",
    10: "RWrist", 11: "LHip", 12: "RHip", 13: "LKnee", 14: "RKnee", 15: "LAnkle", 16: "RAnkle",
    17: "Neck", 18: "Head", 19: "LBigToe", 20: "LSmallToe", 21: "LHeel", 22: "RBigToe",
    23: "RSmallToe", 24: "RHeel",
}  # fmt: skip
POSE2SIM_BODY_25 = {
    0: "Nose", 1: "Neck", 2: "RShoulder", 3: "RElbow", 4: "RWrist", 5: "LShoulder", 6: "LElbow",
    7: "LWrist", 8: "CHip", 9: "RHip", 10: "RKnee", 11: "RAnkle", 12: "LHip", 13: "LKnee",
    14: "LAnkle", 19: "LBigToe", 20: "LSmallToe", 21: "LHeel", 22: "RBigToe", 23: "RSmallToe",
    24: "RHeel",
}  # fmt: skip
POSE2SIM_COCO_17 = {
    0: "Nose", 5: "LShoulder", 6: "RShoulder", 7: "LElbow", 8: "RElbow", 9: "LWrist",
    10: "RWrist", 11: "LHip", 12: "RHip", 13: "LKnee", 14: "RKnee", 15: "LAnkle", 16: "RAnkle",
}  # fmt: skip


@pytest.mark.parametrize("layout,table", [("BODY_25B", POSE2SIM_BODY_25B),
                                          ("BODY_25", POSE2SIM_BODY_25),
                                          ("COCO_17", POSE2SIM_COCO_17)])  # fmt: skip
def test_marker_names_are_pose2sims(layout, table):
    names = marker_names(layout)
    assert {i: names[i] for i in table} == table
    assert len(set(names)) == len(names)


POSE2SIM_HALPE_26 = {  # Pose2Sim/skeletons.py HALPE_26 (its default model): the named points
    "Hip": "mid-hip", "Neck": "base of the neck", "Head": "head top", "Nose": "nose",
}  # fmt: skip


def test_lift_names_its_joints_as_triangulate():
    """lift's h36m17 joints get the marker name triangulate writes for the same keypoint
    (BODY_25B, BODY_25, COCO_17), the others HALPE_26's names for the same body points."""
    h36m = LAYOUTS["H36M_17"]
    lifted = dict(zip(h36m, joint_marker_names(h36m), strict=True))
    assert lifted == dict(zip(h36m, marker_names("H36M_17"), strict=True))
    for layout in ("BODY_25B", "BODY_25", "COCO_17"):
        ours = dict(zip(LAYOUTS[layout], marker_names(layout), strict=True))
        shared = [j for j in h36m if j in ours and j != "neck"]  # BODY_25B's neck: upper neck
        assert len(shared) == 12 and all(lifted[j] == ours[j] for j in shared)
    assert [lifted[j] for j in ("pelvis", "thorax", "neck", "head", "spine")] == [
        "Hip", "Neck", "Nose", "Head", "Spine"]  # fmt: skip
    assert set(POSE2SIM_HALPE_26) <= set(lifted.values())
    assert len(set(lifted.values())) == 17


@pytest.fixture(scope="module")
def both_axes(tmp_path_factory):
    out = tmp_path_factory.mktemp("axes")
    p2s = triangulate_folder(TRACKS, CALIB, out / "p2s", plot=False)
    cal = triangulate_folder(TRACKS, CALIB, out / "cal", plot=False, axes="calibration")
    return p2s, cal


def test_trc_is_the_npz_in_the_stated_axes(both_axes):
    p2s, cal = both_axes
    trc, npz = read_trc(p2s["outputs"]["trc"]), np.load(p2s["outputs"]["npz"])
    assert trc.names == [POSE2SIM_BODY_25B.get(i, n) for i, n in enumerate(trc.names)]
    assert trc.names[:1] + trc.names[5:] == list(POSE2SIM_BODY_25B.values())
    assert "Y/Z/X" in trc.comment and "Y up" in trc.comment and str(npz["axes"]) == "pose2sim"
    world = npz["points"]
    np.testing.assert_allclose(trc.points[..., 0], world[..., 1], atol=5e-7)  # X = world Y
    np.testing.assert_allclose(trc.points[..., 1], world[..., 2], atol=5e-7)  # Y = world Z (up)
    np.testing.assert_allclose(trc.points[..., 2], world[..., 0], atol=5e-7)  # Z = world X
    assert np.nanmedian(trc.points[:, trc.names.index("Head"), 1]) > np.nanmedian(
        trc.points[:, trc.names.index("LAnkle"), 1]
    )  # Y up: the head above the ankles
    trc_cal, npz_cal = read_trc(cal["outputs"]["trc"]), np.load(cal["outputs"]["npz"])
    np.testing.assert_allclose(trc_cal.points, npz_cal["points"], atol=5e-7)
    np.testing.assert_array_equal(npz_cal["points"], world)  # the NPZ does not change
    assert str(npz_cal["axes"]) == "calibration" and "Y/Z/X" not in trc_cal.comment


@pytest.fixture(scope="module")
def copied(tmp_path_factory):
    """The bundled trial copied elsewhere (so it is not recognised as the bundled trial)."""
    root = tmp_path_factory.mktemp("copy") / "trial"
    for cam in bundled_tracks():
        shutil.copytree(cam, root / cam.name)
    return root


def test_fps_sources(copied, tmp_path):
    r = triangulate_folder(TRACKS, CALIB, tmp_path / "b", plot=False)
    assert r["fps"] == 60 and "bundled" in r["fps_source"]
    with pytest.raises(ValueError, match="--fps is needed"):
        triangulate_folder(copied, CALIB, tmp_path / "none", plot=False)
    assert not (tmp_path / "none").exists()
    r = triangulate_folder(copied, CALIB, tmp_path / "given", plot=False, fps=30)
    assert r["fps"] == 30 and r["fps_source"] == "--fps"
    assert read_trc(r["outputs"]["trc"]).fps == 30
    videos = copied.parent / "videos"
    videos.mkdir()
    with VideoWriter(videos / "cam01.mp4", 25.0) as w:
        for _ in range(3):
            w.write(np.zeros((32, 48, 3), np.uint8))
    r = triangulate_folder(copied, CALIB, tmp_path / "video", plot=False)
    assert r["fps"] == 25 and r["fps_source"].startswith("video") and "cam01.mp4" in r[
        "fps_source"]  # fmt: skip
    assert triangulate_folder(copied, CALIB, tmp_path / "o", plot=False, fps=50)["fps"] == 50
    np.savez(copied / "cam01_json" / "meta.npz", fps=np.float64(50.0))
    r = triangulate_folder(copied, CALIB, tmp_path / "npz", plot=False)
    assert r["fps"] == 50 and r["fps_source"].startswith("npz")
    np.savez(copied / "meta2.npz", fps=np.float64(48.0))
    with pytest.raises(ValueError, match="disagree.*--fps"):
        triangulate_folder(copied, CALIB, tmp_path / "bad", plot=False)
    with pytest.raises(ValueError, match="--fps must be"):
        triangulate_folder(copied, CALIB, tmp_path / "bad", plot=False, fps=-1)


def test_filters_on_the_bundled_trial(tmp_path):
    raw = triangulate_folder(TRACKS, CALIB, tmp_path / "raw", plot=False)
    assert "jitter_raw" not in raw and raw["filter"] == "none"
    npz_raw = np.load(raw["outputs"]["npz"])
    for method in ("butterworth", "kalman", "rts"):
        r = triangulate_folder(TRACKS, CALIB, tmp_path / method, plot=False, filter=method)
        assert r["jitter_filtered"] < r["jitter_raw"] / 2, (method, r)
        assert abs(r["jitter_raw"] - 35.5) < 0.5  # issue 21's measured figure
        npz = np.load(r["outputs"]["npz"])
        np.testing.assert_array_equal(npz["points_raw"], npz_raw["points"])
        have = ~np.isnan(npz["points"]).any(-1)
        np.testing.assert_array_equal(have, npz_raw["valid"] | npz["filled"])
        assert npz["filled"].sum() == r["filled"] > 0 and str(npz["filter"]) == method
        trc = read_trc(r["outputs"]["trc"])
        np.testing.assert_allclose(trc.points, npz["points"][..., [1, 2, 0]], atol=5e-7)
        assert any("jitter 35.5 ->" in line for line in summary(r))


def test_butterworth_equals_scipy_on_whole_tracks():
    import scipy.signal as ss

    rng = np.random.default_rng(0)
    pts = np.cumsum(rng.normal(scale=0.01, size=(2, 200, 4, 3)), axis=1)  # people, T, J, xyz
    got, filled, fig = filter_points(pts, Filter3D("butterworth", 6.0), 60.0)
    b, a = ss.butter(2, 6.0 / 30.0)
    np.testing.assert_allclose(got, ss.filtfilt(b, a, pts, axis=1), atol=1e-12)
    assert not filled.any() and fig["jitter_filtered"] < fig["jitter_raw"]


def test_gaps_filled_up_to_max_gap():
    pts = np.linspace(0, 1, 50)[:, None, None] * np.ones((50, 2, 3))
    pts[10:13, 0] = np.nan  # 3 frames: filled
    pts[20:40, 1] = np.nan  # 20 frames: stays missing
    got, filled, _ = filter_points(pts, Filter3D("none", max_gap=5), 60.0)
    np.testing.assert_allclose(got[10:13, 0], np.linspace(0, 1, 50)[10:13, None] * np.ones(3))
    assert filled[10:13, 0].all() and np.isnan(got[20:40, 1]).all() and filled.sum() == 3


def test_bad_options_name_the_flag(tmp_path):
    for kw, flag in [({"filter": "median"}, "--filter"), ({"axes": "zup"}, "--axes"),
                     ({"filter": "butterworth", "cutoff": 40.0}, "--cutoff"),
                     ({"cutoff": -1.0}, "--cutoff"), ({"max_gap": -2}, "--max-gap")]:  # fmt: skip
        with pytest.raises(ValueError, match=flag):
            triangulate_folder(TRACKS, CALIB, tmp_path / "x", plot=False, **kw)
    assert not (tmp_path / "x").exists()
