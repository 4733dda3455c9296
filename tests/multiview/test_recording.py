"""multiview.triangulate_folder on the bundled four-camera trial: outputs, their agreement with
the op and with each other, sanity numbers, and validation before anything is written."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from tensorpose.apps.triangulate import triangulate_folder
from tensorpose.io.calibration import load_calibration, write_toml
from tensorpose.io.motion import read_trc
from tensorpose.io.openpose import bundled_tracks, read_openpose_frames
from tensorpose.layouts import marker_names
from tensorpose.multiview.association import triangulate_people
from tensorpose.multiview.recording import camera_key, match_cameras

TRACKS = bundled_tracks()[0].parent
CALIB = TRACKS / "Calib.qca.txt"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tri")
    return out, triangulate_folder(TRACKS, CALIB, out)


def test_outputs_agree_with_each_other_and_the_op(run):
    _, report = run
    trc = read_trc(report["outputs"]["trc"])
    npz = np.load(report["outputs"]["npz"])
    assert trc.names == list(npz["marker_names"]) == marker_names("BODY_25B")
    assert len(trc.names) == 25 and str(npz["axes"]) == "pose2sim"
    assert trc.fps == 60.0 and trc.units == "m" and "Calib.qca.txt" in trc.comment
    # the TRC is in Pose2Sim's axes: its (X, Y, Z) is the calibration world's (Y, Z, X)
    np.testing.assert_allclose(trc.points, npz["points"][..., [1, 2, 0]], atol=5e-7)
    np.testing.assert_array_equal(np.isnan(npz["points"]).any(-1), ~npz["valid"])
    assert list(npz["cameras"]) == ["cam_01", "cam_02", "cam_03", "cam_04"]
    assert list(npz["folders"]) == ["cam01_json", "cam02_json", "cam03_json", "cam04_json"]
    assert npz["errors"].shape == (100, 25, 4) and npz["person"].shape == (100, 4)
    png = open(report["outputs"]["png"], "rb").read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    # The op on the same detections gives the same points.
    cal = load_calibration(CALIB)
    kps = []
    for d in bundled_tracks():  # one camera at a time
        frames = read_openpose_frames(d)[0]
        k = torch.zeros(100, max(len(f) for f in frames), 25, 3, dtype=torch.float64)
        for t, f in enumerate(frames):
            k[t, : len(f)] = torch.from_numpy(f)
        kps.append(k)
    res = triangulate_people(kps, cal.K, cal.dist, cal.R, cal.t)
    np.testing.assert_array_equal(res.valid.numpy(), npz["valid"])
    np.testing.assert_allclose(res.points[res.valid].numpy(), npz["points"][npz["valid"]])


def test_sanity_numbers_on_the_real_trial(run):
    _, r = run
    assert r["frames"] == 100 and r["joints"] == 25 and r["frames_with_person"] == 100
    assert r["valid_fraction"] > 0.95
    assert 2 < r["median_reprojection_px"] < 10  # OpenPose on 1088 x 1920 images
    assert 2 <= r["mean_cameras_used"] <= 4
    for bone in ("l_hip-l_knee", "r_hip-r_knee"):  # femurs: plausible and steady
        assert 0.35 < r["bones"][bone]["mean_m"] < 0.5
        assert r["bones"][bone]["std_m"] < 0.04
    # The main person is the same detection slot in (almost) every frame of the 1-person views.
    npz = np.load(r["outputs"]["npz"])
    assert (npz["person"][:, 2:] == 0).all()


def test_refuses_to_overwrite(run):
    out, report = run
    before = {k: open(p, "rb").read() for k, p in report["outputs"].items()}
    with pytest.raises(ValueError, match="--overwrite"):
        triangulate_folder(TRACKS, CALIB, out)
    assert {k: open(p, "rb").read() for k, p in report["outputs"].items()} == before
    again = triangulate_folder(TRACKS, CALIB, out, overwrite=True, plot=False)
    assert set(again["outputs"]) == {"trc", "npz"}
    np.testing.assert_allclose(np.load(again["outputs"]["npz"])["points"],
                               np.load(report["outputs"]["npz"])["points"])  # fmt: skip


@pytest.fixture
def tracks_copy(tmp_path):
    """The first 20 frames of the four camera folders."""
    dst = tmp_path / "trial"
    for d in bundled_tracks():  # copy the four camera folders
        (dst / d.name).mkdir(parents=True)
        for f in sorted(d.glob("*.json"))[:20]:
            shutil.copy(f, dst / d.name / f.name)
    return dst


def test_toml_calibration_and_folder_names(tracks_copy, tmp_path):
    reordered = load_calibration(CALIB).select(["cam_04", "cam_03", "cam_02", "cam_01"])
    toml = write_toml(reordered, tmp_path / "Calib.toml")
    (tracks_copy / "cam03_json").rename(tracks_copy / "Cam3")  # matched by name, not order
    r = triangulate_folder(tracks_copy, toml, tmp_path / "out", fps=60, plot=False, name="t")
    assert r["folders"] == ["cam01_json", "cam02_json", "Cam3", "cam04_json"]
    assert r["cameras"] == ["cam_01", "cam_02", "cam_03", "cam_04"]
    assert r["frames"] == 20
    assert r["outputs"]["trc"].endswith("t_3d.trc")
    assert r["valid_fraction"] > 0.95


def test_validation_before_writing(tracks_copy, tmp_path):
    out = tmp_path / "out"
    cal = load_calibration(CALIB)
    three = write_toml(cal.select(["cam_01", "cam_02", "cam_03"]), tmp_path / "three.toml")
    with pytest.raises(ValueError, match=r"3 cameras for 4 track folders: cameras \[") as e:
        triangulate_folder(tracks_copy, three, out, fps=60)
    assert "cam04_json" in str(e.value) and "cam_03" in str(e.value)
    (tracks_copy / "cam04_json").rename(tracks_copy / "side_json")
    with pytest.raises(ValueError, match=r"do not match track folders \['side_json'\]") as e:
        triangulate_folder(tracks_copy, CALIB, out, fps=60)
    assert "cam_04" in str(e.value)
    (tracks_copy / "side_json").rename(tracks_copy / "cam04_json")
    with pytest.raises(ValueError, match="--fps is needed"):
        triangulate_folder(tracks_copy, CALIB, out)
    with pytest.raises(ValueError, match="max-reprojection-px"):
        triangulate_folder(tracks_copy, CALIB, out, fps=60, max_reprojection_px=0)
    sorted((tracks_copy / "cam02_json").glob("*.json"))[-1].unlink()
    with pytest.raises(ValueError, match=r"different frame counts .*'cam02_json': 19"):
        triangulate_folder(tracks_copy, CALIB, out, fps=60)
    with pytest.raises(FileNotFoundError, match="nope"):
        triangulate_folder(tmp_path / "nope", CALIB, out, fps=60)
    assert not out.exists()  # nothing written


def test_camera_key_and_matching(tmp_path):
    assert camera_key("cam01_json") == camera_key("cam_01") == camera_key("Cam1") == "cam1"
    assert camera_key("cam10") != camera_key("cam1")
    folders = [tmp_path / "c2_json", tmp_path / "c1_json"]
    assert match_cameras(folders, ["c_1", "c_2", "c_3"], CALIB) == ["c_2", "c_1"]
    with pytest.raises(ValueError, match="matches several cameras"):
        match_cameras(folders, ["c_1", "c01", "c_2"], CALIB)


def test_column_medians_equal_np_median_per_joint():
    from tensorpose.multiview.recording import _column_medians

    rng = np.random.default_rng(5)
    for T in (1, 2, 7, 40):  # odd and even counts of kept rows
        x = np.round(rng.gamma(2.0, 3.0, (T, 6)), 2)  # rounded: ties
        keep = rng.random((T, 6)) < 0.6
        keep[:, 0], keep[:, 1] = False, True  # a column with none kept, one with all
        got = _column_medians(x, keep)
        want = [float(np.median(x[keep[:, j], j])) if keep[:, j].any() else None
                for j in range(6)]  # fmt: skip
        assert got == want  # bit for bit (floats compare exactly)
        x[0, 1] = np.nan  # a NaN kept: NaN, as np.median says
        assert np.isnan(_column_medians(x, keep)[1])
