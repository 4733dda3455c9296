"""``tensorpose triangulate`` on inputs that cannot give 3D, end to end through
``tensorpose.cli.main``: one line naming the file or the flag, exit 2, nothing written.

- a calibration whose cameras do not match the folders (two swapped): the cameras whose
  detections never agree with the others are named, with every camera's median reprojection
  error; the real trial and the synthetic two-person trial pass the same check. The per-camera
  figure is checked against a per-frame, per-detection loop with ``cv2.projectPoints``;
- folders with different frame counts; no person seen by two cameras; ``--people 3`` when
  only two people are found.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from tensorpose.cli import main
from tensorpose.io.openpose import bundled_tracks
from tensorpose.multiview.recording import (
    DISAGREE_FACTOR,
    camera_agreement,
    read_cameras,
    triangulate_cameras,
)

TRACKS = bundled_tracks()[0].parent
CALIB = TRACKS / "Calib.qca.txt"
TWO = Path(__file__).resolve().parent / "data" / "synthetic_two_people"


def error(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def copy_trial(src: Path, dst: Path, frames: int | None = None, swap=("", "")) -> Path:
    """The first ``frames`` of every camera folder of ``src`` (and its calibration), with the
    folders ``swap[0]`` and ``swap[1]`` exchanging names."""
    a, b = swap
    for folder in sorted(src.glob("cam*_json")):  # four cameras
        name = {a: b, b: a}.get(folder.name, folder.name) if a else folder.name
        (dst / name).mkdir(parents=True)
        for f in sorted(folder.glob("*.json"))[:frames]:
            shutil.copy(f, dst / name / f.name)
    shutil.copy(src / "Calib.qca.txt", dst)
    return dst


def test_swapped_cameras_are_named_with_every_camera_error(tmp_path, capsys):
    trial = copy_trial(TRACKS, tmp_path / "t", 40, ("cam01_json", "cam02_json"))
    out = tmp_path / "o"
    argv = ["triangulate", str(trial), "--calib", str(trial / "Calib.qca.txt"), "--fps", "60"]
    err = error(capsys, [*argv, "--out", str(out)])
    assert "Calib.qca.txt: the detections of cam_01, cam_02 never agree" in err
    for cam in ("cam_01 (cam01_json)", "cam_02 (cam02_json)", "cam_03", "cam_04"):
        assert cam in err  # every camera's median error is listed
    assert "people" not in err and not out.exists()
    err = error(capsys, [*argv, "--out", str(out), "--people", "auto"])
    assert "cam_01, cam_02 never agree" in err and not out.exists()
    err = error(capsys, [*argv, "--out", str(out), "--drop-rule", "pose2sim"])
    assert "cam_01, cam_02 never agree" in err and not out.exists()


def test_real_trials_pass_the_check_and_print_each_camera(tmp_path, capsys):
    capsys.readouterr()
    argv = ["triangulate", str(TRACKS), "--calib", str(CALIB), "--out", str(tmp_path / "a"),
            "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.count("median reprojection error") == 4
    argv = ["triangulate", str(TWO), "--calib", str(TWO / "Calib.qca.txt"), "--fps", "60",
            "--people", "auto", "--out", str(tmp_path / "b"), "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    assert (tmp_path / "b" / "synthetic_two_people_p2_3d.trc").exists()


def naive_agreement(cams, tri, min_confidence=0.3) -> list[float | None]:
    """Per camera: per frame the best detection's median (over joints) reprojection error
    against the valid 3D joints, with cv2.projectPoints; the median over frames."""
    cal = cams.calibration
    out = []
    for c in range(len(cams.names)):  # camera by camera, frame by frame, detection by detection
        rvec = cv2.Rodrigues(cal.R[c].numpy())[0]
        K, dist, t = cal.K[c].numpy(), cal.dist[c].numpy(), cal.t[c].numpy()
        per_frame = []
        for f, people in enumerate(cams.detections[c]):
            best = np.inf
            for person in people:
                errs = []
                for j in range(person.shape[0]):
                    if not tri.valid[f, j] or person[j, 2] < min_confidence or person[j, 2] <= 0:
                        continue
                    uv = cv2.projectPoints(tri.points[f, j][None], rvec, t, K, dist)[0].ravel()
                    errs.append(np.hypot(*(uv - person[j, :2])))
                if errs:
                    best = min(best, float(np.median(errs)))
            if np.isfinite(best):
                per_frame.append(best)
        out.append(float(np.median(per_frame)) if per_frame else None)
    return out


@pytest.mark.parametrize("swap", [("", ""), ("cam01_json", "cam03_json")])
def test_camera_agreement_equals_naive_loop(tmp_path, swap):
    trial = copy_trial(TRACKS, tmp_path / "t", 12, swap)
    cams = read_cameras(trial, trial / "Calib.qca.txt")
    tri = triangulate_cameras(cams)
    got = camera_agreement(cams, [tri])
    want = naive_agreement(cams, tri)
    np.testing.assert_allclose([g["median_px"] for g in got], want, rtol=0, atol=1e-6)
    limit = DISAGREE_FACTOR * 15.0
    flagged = [g["camera"] for g in got if g["median_px"] > limit]
    assert flagged == (["cam_01", "cam_03"] if swap[0] else [])
    used = tri.used[tri.valid].mean(0)
    np.testing.assert_allclose([g["used"] for g in got], used)


def test_different_frame_counts(tmp_path, capsys):
    trial = copy_trial(TRACKS, tmp_path / "t", 20)
    (trial / "cam03_json" / "cam03.0019.json").unlink()
    out = tmp_path / "o"
    err = error(capsys, ["triangulate", str(trial), "--calib", str(CALIB), "--fps", "60",
                         "--out", str(out)])  # fmt: skip
    assert "different frame counts" in err and "'cam03_json': 19" in err
    assert not out.exists()


def test_no_person_seen_by_two_cameras(tmp_path, capsys):
    """Each camera sees the person in its own frames only."""
    trial = copy_trial(TRACKS, tmp_path / "t", 20)
    for c, folder in enumerate(sorted(trial.glob("cam*_json"))):  # four cameras
        for i, f in enumerate(sorted(folder.glob("*.json"))):
            if i // 5 != c:
                f.write_text(json.dumps({"version": 1.3, "people": []}))
    out = tmp_path / "o"
    argv = ["triangulate", str(trial), "--calib", str(CALIB), "--fps", "60", "--out", str(out)]
    err = error(capsys, argv)
    assert f"{trial}: no person is seen by two cameras or more" in err
    assert "no person seen by two cameras" in error(capsys, [*argv, "--people", "auto"])
    assert not out.exists()


def test_more_people_asked_than_found(tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["triangulate", str(TWO), "--calib", str(TWO / "Calib.qca.txt"), "--fps", "60",
            "--out", str(out)]  # fmt: skip
    assert "--people 4: found only 3 people" in error(capsys, [*argv, "--people", "4"])
    assert not out.exists()


def test_drop_rule_pose2sim_from_the_command_line(tmp_path, capsys):
    """``--drop-rule pose2sim`` reaches the triangulation (cameras used as the library's rule
    gives) and fills gaps of up to 20 frames linearly (np.interp between the neighbours)."""
    out = tmp_path / "o"
    argv = ["triangulate", str(TRACKS), "--calib", str(CALIB), "--out", str(out),
            "--drop-rule", "pose2sim", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    with np.load(out / "openpose_body25b_3d.npz") as z:
        used, raw, points, filled = z["used"], z["points_raw"], z["points"], z["filled"]
    tri = triangulate_cameras(read_cameras(TRACKS, CALIB), drop="pose2sim")
    assert np.array_equal(used, tri.used)
    np.testing.assert_array_equal(raw, tri.points)
    assert filled.any() and not filled[tri.valid].any()
    frames = np.arange(len(raw))
    for t, j in zip(*np.nonzero(filled), strict=True):  # each filled joint-frame
        seen = np.isfinite(raw[:, j, 0])
        before, after = frames[seen & (frames < t)].max(), frames[seen & (frames > t)].min()
        assert after - before - 1 <= 20
        want = [np.interp(t, frames[seen], raw[seen, j, k]) for k in range(3)]
        np.testing.assert_allclose(points[t, j], want, atol=1e-12)


def test_all_zero_confidences_are_one_line_in_every_mode(tmp_path, capsys):
    """A recording whose every confidence is 0: one line naming the folder, exit 2, in every
    mode (not an empty-quantile traceback)."""
    rec = copy_trial(TRACKS, tmp_path / "zero", frames=12)
    for f in rec.glob("cam*_json/*.json"):  # every keypoint's confidence set to 0
        d = json.loads(f.read_text())
        for p in d["people"]:
            k = np.asarray(p["pose_keypoints_2d"], float).reshape(-1, 3)
            k[:, 2] = 0.0
            p["pose_keypoints_2d"] = k.ravel().tolist()
        f.write_text(json.dumps(d))
    base = ["triangulate", str(rec), "--calib", str(CALIB), "--fps", "60"]
    for i, extra in enumerate(([], ["--drop-rule", "pose2sim"], ["--filter", "butterworth"],
                               ["--filter", "rts"], ["--people", "auto"])):  # fmt: skip
        err = error(capsys, [*base, "--out", str(tmp_path / f"o{i}"), *extra])
        assert "no person" in err and "zero" in err, err
        assert not (tmp_path / f"o{i}").exists()


def test_a_butterworth_cutoff_too_low_is_named(tmp_path, capsys):
    argv = ["triangulate", str(TRACKS), "--calib", str(CALIB), "--fps", "60", "--filter",
            "butterworth", "--out", str(tmp_path / "o")]  # fmt: skip
    for cutoff in ("1e-9", "0", "30"):  # too low, not positive, not below fps / 2
        assert "--cutoff" in error(capsys, [*argv, "--cutoff", cutoff])
    assert not (tmp_path / "o").exists()


def test_an_empty_camera_folder_is_named_not_left_out(tmp_path, capsys):
    rec = copy_trial(TRACKS, tmp_path / "rec", frames=5)
    for f in (rec / "cam04_json").glob("*.json"):
        f.unlink()
    err = error(capsys, ["triangulate", str(rec), "--calib", str(CALIB), "--fps", "60",
                         "--out", str(tmp_path / "o")])  # fmt: skip
    assert "cam04_json" in err and "cam_04" in err and "no OpenPose .json" in err
    (rec / "cam04_json").rmdir()  # no folder: the calibration's fourth camera is simply unused
    assert main(["triangulate", str(rec), "--calib", str(CALIB), "--fps", "60", "--out",
                 str(tmp_path / "o")]) == 0  # fmt: skip
