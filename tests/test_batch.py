"""``tensorpose batch``: recordings found by layout or manifest, outputs equal to the single
commands' (file for file), failures isolated, a second run resumes, a killed worker changes
nothing. The Ray tests run a real local Ray with 2 CPUs (skipped where Ray is not installed).

The recordings are copies of the first frames of two cameras of the bundled balancing trial
(``examples/balancing_trial``), re-encoded: a few seconds of BlazePose per recording."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import zipfile
from pathlib import Path

import cv2
import pytest

from tensorpose.apps.batch import COMMANDS, run_batch, step_options
from tensorpose.cli import main
from tensorpose.errors import InputError
from tensorpose.io.recordings import find_recordings

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "balancing_trial"
CAMERAS = ("cam01", "cam02")
FRAMES = 6
ray_installed = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                   reason="ray is not installed (tensorpose[ray])")  # fmt: skip


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> Path:
    """The first FRAMES frames of two cameras of the balancing trial, re-encoded."""
    out = tmp_path_factory.mktemp("videos")
    for cam in CAMERAS:  # two cameras
        cap = cv2.VideoCapture(str(EXAMPLE / "videos" / f"{cam}.mp4"))
        fps, writer = cap.get(cv2.CAP_PROP_FPS), None
        for _ in range(FRAMES):  # a few frames
            ok, frame = cap.read()
            assert ok
            if writer is None:
                h, w = frame.shape[:2]
                writer = cv2.VideoWriter(str(out / f"{cam}.mp4"),
                                         cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))  # fmt: skip
            writer.write(frame)
        writer.release()
        cap.release()
    return out


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray with 2 CPUs for the module's tests (``run_batch`` uses it, leaves it)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


def _trial(folder: Path, videos: Path) -> Path:
    shutil.copytree(videos, folder / "videos")
    return folder


def _swapped_calibration(path: Path) -> Path:
    """The balancing trial's calibration with cameras 1 and 2 exchanged: it does not match."""
    text = (EXAMPLE / "Calib.qca.txt").read_text()
    text = text.replace('serial="cam_01"', "@@").replace('serial="cam_02"', 'serial="cam_01"')
    path.write_text(text.replace("@@", 'serial="cam_02"'))
    return path


def _hashes(folder: Path, outputs=("pose", "sync", "pose-3d")) -> dict[str, str]:
    """sha256 of every output file; an NPZ by its members (a zip entry carries its write
    time; the arrays are what is compared)."""
    out = {}
    for name in outputs:  # a step's output folder
        for p in sorted((folder / name).rglob("*")):
            if not p.is_file():
                continue
            if p.suffix == ".npz":
                with zipfile.ZipFile(p) as z:
                    data = b"".join(z.read(n) for n in sorted(z.namelist()))
            else:
                data = p.read_bytes()
            out[p.relative_to(folder).as_posix()] = hashlib.sha256(data).hexdigest()
    return out


def test_layout_and_manifest(tmp_path, videos):
    root = tmp_path / "root"
    (root / "S01" / "calibration").mkdir(parents=True)
    shutil.copy(EXAMPLE / "Calib.qca.txt", root / "S01" / "calibration")
    for t in ("T1", "T2"):
        _trial(root / "S01" / "P01" / t, videos)
    own = _swapped_calibration(root / "S01" / "P01" / "T2" / "Own.qca.txt")  # trial level wins
    base, recs = find_recordings(root)
    assert base == root
    assert [r.name for r in recs] == ["S01/P01/T1", "S01/P01/T2"]
    assert recs[0].calibration == root / "S01" / "calibration" / "Calib.qca.txt"
    assert recs[1].calibration == own and recs[1].videos == root / "S01" / "P01" / "T2" / "videos"
    # a trial without a calibration anywhere up to the root: one line naming it
    _trial(tmp_path / "bare" / "T9", videos)
    with pytest.raises(InputError, match="T9: no calibration"):
        find_recordings(tmp_path / "bare")
    # a manifest CSV: paths relative to it
    csv = root / "list.csv"
    csv.write_text("recording,videos,calibration\nS01/P01/T1,,S01/calibration/Calib.qca.txt\n"
                   "x,S01/P01/T2/videos,S01/P01/T2/Own.qca.txt\n")  # fmt: skip
    base, recs = find_recordings(csv)
    assert [(r.name, r.videos, r.calibration) for r in recs] == [
        ("S01/P01/T1", root / "S01/P01/T1/videos", root / "S01/calibration/Calib.qca.txt"),
        ("x", root / "S01/P01/T2/videos", own)]  # fmt: skip
    csv.write_text("recording,videos,calibration\nS01/P01/T1,,nope.toml\n")
    with pytest.raises(InputError, match="line 2: .*nope.toml: no calibration file"):
        find_recordings(csv)


def test_options_are_the_single_commands_defaults(tmp_path):
    import inspect

    from tensorpose.apps.sync import sync_folder
    from tensorpose.apps.triangulate import triangulate_folder

    opts = step_options(["predict", "sync", "triangulate"], None)
    for step, f in (("sync", sync_folder), ("triangulate", triangulate_folder)):
        sig = inspect.signature(f).parameters
        assert opts[step] == {k: sig[k].default for k in opts[step]}
        assert set(opts[step]) | set(COMMANDS[step].fixed) >= {
            k for k, p in sig.items() if p.default is not p.empty}  # fmt: skip
    assert opts["predict"]["model"] == "blazepose" and opts["predict"]["batch_size"] == 8
    cfg = tmp_path / "c.yaml"
    cfg.write_text("triangulate: {people: auto, bogus: 1}\n")
    with pytest.raises(InputError, match="triangulate: unknown option.*bogus"):
        step_options(["triangulate"], cfg)
    cfg.write_text("triangulate: {people: auto}\n")
    assert step_options(["triangulate"], cfg)["triangulate"]["people"] == "auto"
    assert main(["batch", str(tmp_path), "--steps", "predict,lift"]) == 2


@ray_installed
def test_batch_on_ray_equals_the_single_commands_with_a_worker_killed(tmp_path, videos,
                                                                      local_ray):  # fmt: skip
    """predict, sync and triangulate on Ray (its model worker killed once, halfway through
    the recording's frames: Ray restarts it and the recording runs again) write the same
    files as the three commands run one by one."""
    root = tmp_path / "root"
    trial = _trial(root / "S01" / "P01" / "T1", videos)
    shutil.copy(EXAMPLE / "Calib.qca.txt", trial)
    marker = tmp_path / "killed"
    r = run_batch(root, steps="predict,sync,triangulate", workers=1, cpus=2, progress=False,
                  fault=marker)  # fmt: skip
    assert marker.exists(), "the fault was not injected: the test proves nothing"
    assert r["mode"] == "ray" and [d["recording"] for d in r["done"]] == ["S01/P01/T1"]
    assert r["done"][0]["frames"] == FRAMES * len(CAMERAS) and not r["failed"]
    batch = _hashes(trial)
    assert len(batch) > 3 * FRAMES and "pose-3d/openpose_3d.trc" in batch
    for name in ("pose", "sync", "pose-3d"):
        shutil.rmtree(trial / name)
    calib = str(trial / "Calib.qca.txt")
    tracks = str(trial / "pose" / "openpose")
    assert main(["predict", str(trial / "videos"), "--model", "blazepose", "--out",
                 str(trial / "pose"), "--quiet"]) == 0  # fmt: skip
    assert main(["sync", tracks, "--calib", calib, "--out", str(trial / "sync")]) == 0
    assert main(["triangulate", tracks, "--calib", calib, "--out", str(trial / "pose-3d"),
                 "--sync", str(trial / "sync" / "sync.json")]) == 0  # fmt: skip
    assert _hashes(trial) == batch


@ray_installed
def test_six_recordings_two_failing_then_resumed(tmp_path, videos, local_ray):
    root = tmp_path / "root"
    (root / "S01" / "calibration").mkdir(parents=True)
    shutil.copy(EXAMPLE / "Calib.qca.txt", root / "S01" / "calibration")
    trials = [_trial(root / "S01" / f"P0{p}" / f"T{t}", videos) for p in (1, 2) for t in (1, 2, 3)]
    (trials[1] / "videos" / "cam02.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"x" * 999)
    _swapped_calibration(trials[4] / "Calib.qca.txt")
    r = run_batch(root, steps="predict,triangulate", workers=2, cpus=2, progress=False)
    failed = {f["recording"]: f["reason"] for f in r["failed"]}
    assert sorted(d["recording"] for d in r["done"]) == [
        "S01/P01/T1", "S01/P01/T3", "S01/P02/T1", "S01/P02/T3"]  # fmt: skip
    assert sorted(failed) == ["S01/P01/T2", "S01/P02/T2"]
    assert "cam02.mp4" in failed["S01/P01/T2"]
    assert any(why in failed["S01/P02/T2"] for why in (  # the cameras swapped: nothing agrees
        "never agree", "no person is seen by two cameras"))  # fmt: skip
    assert json.loads((root / "batch.json").read_text())["failed"] == r["failed"]
    done = {t: _hashes(t, ("pose", "pose-3d")) for t in (trials[0], trials[2])}
    stamps = {p: p.stat().st_mtime_ns for t in trials for p in (t / "pose-3d").glob("*")}
    # the second run (sequential: the same recipe and digests) skips 4, retries only the 2
    r2 = run_batch(root, steps="predict,triangulate", local=True, progress=False)
    assert sorted(s["recording"] for s in r2["skipped"]) == sorted(d["recording"]
                                                                   for d in r["done"])  # fmt: skip
    assert {f["recording"]: f["reason"] for f in r2["failed"]} == failed and not r2["done"]
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert {t: _hashes(t, ("pose", "pose-3d")) for t in done} == done
    # the recording fixed: only it runs
    shutil.copy(EXAMPLE / "Calib.qca.txt", trials[4] / "Calib.qca.txt")
    r3 = run_batch(root, steps="predict,triangulate", local=True, progress=False)
    assert [d["recording"] for d in r3["done"]] == ["S01/P02/T2"] and len(r3["skipped"]) == 4
