"""``tensorpose triangulate`` and ``eval-wild`` on the bundled four-camera recording, and their
bad inputs (one error line, exit 2, nothing written)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch

from tensorpose.cli import main
from tensorpose.config import config_to_dict, load_config
from tensorpose.io.openpose import bundled_tracks
from tensorpose.tasks.lifting import LiftingTask
from tensorpose.train.checkpoint import save_checkpoint

multiview = pytest.importorskip("tensorpose.multiview.recording")
calibration = pytest.importorskip("tensorpose.io.calibration")

TRACKS = bundled_tracks()[0].parent
CALIB = TRACKS / "Calib.qca.txt"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    cfg = load_config(None, ["model.channels=16", "model.receptive_field=9"])
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ck") / "tiny.pt"
    save_checkpoint(path, LiftingTask.build_model(cfg), config_to_dict(cfg))
    return path


def _error(capsys, argv, *needles):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, err


def test_triangulate_command(tmp_path, capsys):
    out = tmp_path / "tri"
    assert main(["triangulate", str(TRACKS), "--calib", str(CALIB), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for cam in ("cam_01", "cam_02", "cam_03", "cam_04"):
        assert f"camera {cam}:" in text
    files = sorted(p.name for p in out.iterdir())
    assert any(n.endswith(".trc") for n in files) and any(n.endswith(".npz") for n in files)
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    _error(capsys, ["triangulate", str(TRACKS), "--calib", str(CALIB), "--out", str(out)],
           "overwrite")  # fmt: skip
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_triangulate_bad_calibration(ckpt, tmp_path, capsys):
    cal = calibration.load_calibration(CALIB)
    three = tmp_path / "three.toml"
    calibration.write_toml(cal.select(cal.names[:3]), three)
    out = tmp_path / "o"
    _error(capsys, ["triangulate", str(TRACKS), "--calib", str(three), "--out", str(out)],
           "3 cameras", "4 track folders")  # fmt: skip
    renamed = tmp_path / "renamed.toml"
    calibration.write_toml(replace(cal, names=[f"side{i}" for i in range(4)]), renamed)
    _error(capsys, ["triangulate", str(TRACKS), "--calib", str(renamed), "--out", str(out)],
           "do not match")  # fmt: skip
    _error(capsys, ["eval-wild", str(TRACKS), "--calib", str(renamed), "--checkpoint", str(ckpt)],
           "do not match")  # fmt: skip
    assert not out.exists()


def test_eval_wild(ckpt, tmp_path, capsys):
    tracks = tmp_path / "t"
    shutil.copytree(TRACKS, tracks)
    argv = ["eval-wild", str(tracks), "--calib", str(tracks / CALIB.name),
            "--checkpoint", str(ckpt), "--json"]  # fmt: skip
    assert main(argv) == 0
    r = json.loads(capsys.readouterr().out)
    rows = r["cameras"]
    assert [c["camera"] for c in rows] == ["cam_01", "cam_02", "cam_03", "cam_04"]
    assert all(c["frames"] > 50 and c["mpjpe_mm"] >= c["p_mpjpe_mm"] > 0 for c in rows)
    assert r["mean"]["mpjpe_mm"] == pytest.approx(np.mean([c["mpjpe_mm"] for c in rows]))
    assert sorted(p.name for p in tracks.iterdir()) == sorted(p.name for p in TRACKS.iterdir())
    assert main([*argv[:-1], "--flip"]) == 0
    text = capsys.readouterr().out
    assert "test-time flip" in text and "mean" in text


def test_eval_wild_compares_only_the_frames_a_camera_saw(ckpt, tmp_path, capsys):
    """Frames where a camera has none of the person's keypoints are bridged in time by the
    lift; they are not that camera's estimate and are left out of its row."""
    tracks = tmp_path / "t"
    shutil.copytree(TRACKS, tracks)
    files = sorted((tracks / "cam02_json").glob("*.json"))
    for f in files[20:50]:  # cam02 sees nobody in 30 frames
        d = json.loads(f.read_text())
        d["people"] = []
        f.write_text(json.dumps(d))
    argv = ["eval-wild", str(tracks), "--calib", str(tracks / CALIB.name),
            "--checkpoint", str(ckpt), "--json"]  # fmt: skip
    assert main(argv) == 0
    rows = {c["camera"]: c for c in json.loads(capsys.readouterr().out)["cameras"]}
    assert 0 < rows["cam_02"]["frames"] <= len(files) - 30
    assert all(rows[c]["frames"] > len(files) - 30 for c in ("cam_01", "cam_03", "cam_04"))


def test_eval_wild_from_the_projected_reference(ckpt, capsys):
    """``--reference-2d``: each camera lifts the triangulated keypoints projected into it
    (equal to cv2.projectPoints with the camera's distortion; NaN stays missing)."""
    cv2 = pytest.importorskip("cv2")
    from tensorpose.apps.eval_wild import _projected_reference

    cal = calibration.load_calibration(CALIB)
    g = torch.Generator().manual_seed(0)
    pts = torch.rand(3, 25, 3, generator=g, dtype=torch.float64) + torch.tensor([0.0, 0.0, 0.5])
    pts[1, 4] = float("nan")
    for c in range(len(cal.names)):
        R, t = cal.R[c].double(), cal.t[c].double()
        kp = _projected_reference(pts, cal.K[c], cal.dist[c], R, t)
        rvec, _ = cv2.Rodrigues(R.numpy())
        flat = pts.reshape(-1, 3).numpy()
        ok = np.isfinite(flat).all(-1)
        want, _ = cv2.projectPoints(flat[ok], rvec, t.numpy(), cal.K[c].double().numpy(),
                                    cal.dist[c].double().numpy())  # fmt: skip
        got = kp.reshape(-1, 3)
        assert np.abs(got[torch.from_numpy(ok), :2].numpy() - want[:, 0]).max() < 1e-6
        assert bool((got[torch.from_numpy(ok), 2] == 1).all())
        assert bool(torch.isnan(got[torch.from_numpy(~ok)]).all())
    argv = ["eval-wild", str(TRACKS), "--calib", str(CALIB), "--checkpoint", str(ckpt), "--json"]
    assert main(argv) == 0
    detected = json.loads(capsys.readouterr().out)
    assert main([*argv, "--reference-2d"]) == 0
    projected = json.loads(capsys.readouterr().out)
    assert projected["reference_2d"] and not detected["reference_2d"]
    for a, b in zip(detected["cameras"], projected["cameras"], strict=True):
        assert a["frames"] == b["frames"] and a["p_mpjpe_mm"] != b["p_mpjpe_mm"]
    assert main([*argv[:-1], "--reference-2d"]) == 0
    assert "2D: the triangulation projected" in capsys.readouterr().out


def test_eval_wild_people(capsys):
    """With ``--people``, each triangulated person is lifted in each camera that saw it: on
    the one-person trial ``--people 1`` gives the single-person rows exactly; on
    ``synthetic_two_people`` the two people seen by every camera are compared in all four, on
    the frames each camera associated them in, and a camera that never saw a person says so."""
    from pathlib import Path

    from tensorpose.apps.eval_wild import eval_wild
    from tensorpose.multiview.people import triangulate_cameras_people

    one = eval_wild(TRACKS, CALIB)
    same = eval_wild(TRACKS, CALIB, people=1)
    assert [r["person"] for r in same["cameras"]] == [1, 1, 1, 1]
    for a, b in zip(one["cameras"], same["cameras"], strict=True):
        assert (a["camera"], a["frames"], a["p_mpjpe_mm"]) == (b["camera"], b["frames"],
                                                                b["p_mpjpe_mm"])  # fmt: skip
    two = Path(__file__).parent / "data" / "synthetic_two_people"
    assert main(["eval-wild", str(two), "--calib", str(two / "Calib.qca.txt"),
                 "--people", "auto", "--json"]) == 0  # fmt: skip
    r = json.loads(capsys.readouterr().out)
    rows = {(c["person"], c["camera"]): c for c in r["cameras"]}
    cams = multiview.read_cameras(two, two / "Calib.qca.txt")
    tris = triangulate_cameras_people(cams)
    for p in (1, 2):  # every frame a camera associated the person in (of 40), and no other
        seen = [int((tris[p - 1].person[:, c] >= 0).sum()) for c in range(4)]
        assert [rows[p, f"cam_0{c}"]["frames"] for c in range(1, 5)] == seen
        assert min(seen) >= 38
    assert rows[3, "cam_03"]["error"] == "not seen by it"
    with pytest.raises(ValueError, match="--people"):
        eval_wild(TRACKS, CALIB, people="several")
