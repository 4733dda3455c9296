"""The commands' reliability families, end to end through ``tensorpose.cli.main``: no code from a
model file, no input lost through ``--out``/``--overwrite``, interrupts leave the old outputs
(one line, exit 130/143), no write through a planted symlink, non-regular input files refused
before they are opened, a second command into a folder in use refused, and nonsense refused
with one line naming the flag or file. Every case asserts on the files on disk."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.cli import main
from tensorpose.config import config_to_dict, load_config
from tensorpose.io.atomic import FolderLock
from tensorpose.io.openpose import bundled_tracks
from tensorpose.tasks.lifting import LiftingTask
from tensorpose.train.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TRACKS = bundled_tracks()[0].parent
CALIB = TRACKS / "Calib.qca.txt"
CAM = ["--calib", str(CALIB), "--camera", "cam_01", "--fps", "60"]


def tree(root: Path) -> dict[str, bytes | str]:
    """Every entry below ``root``: file bytes, ``->target`` for links, ``<dir>`` for folders."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "->" + os.readlink(p)
        elif p.is_dir():
            out[rel] = "<dir>"
        elif not p.is_file():  # a FIFO or a device: never read
            out[rel] = "<special>"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def error(capsys, argv, code=2) -> str:
    capsys.readouterr()
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    cfg = load_config(None, ["model.channels=16", "model.receptive_field=9"])
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ck") / "tiny.pt"
    save_checkpoint(path, LiftingTask.build_model(cfg), config_to_dict(cfg))
    return path


@pytest.fixture
def cam(tmp_path):
    """A copy of the first 30 frames of camera 1."""
    dst = tmp_path / "cam01_json"
    dst.mkdir()
    for f in sorted(bundled_tracks()[0].glob("*.json"))[:30]:
        shutil.copy(f, dst / f.name)
    return dst


# ------------------------------------------------------------------ code execution
class _Marker(torch.nn.Module):
    def forward(self, x):
        return x + 1


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("command", ["lift", "eval-wild"])
def test_a_torchscript_model_file_is_refused_before_torch_jit_load(
    command, cam, tmp_path, capsys, monkeypatch
):
    bad = tmp_path / "pretrained_h36m_cpn.bin"
    torch.jit.save(torch.jit.script(_Marker()), str(bad))

    def never(*args, **kwargs):
        raise AssertionError("torch.jit.load was called on a user's file")

    monkeypatch.setattr(torch.jit, "load", never)
    if command == "lift":
        argv = ["lift", str(cam), "--checkpoint", str(bad), *CAM, "--out", str(tmp_path / "o")]
    else:
        argv = ["eval-wild", str(TRACKS), "--calib", str(CALIB), "--checkpoint", str(bad)]
    err = error(capsys, argv)
    assert "TorchScript archive" in err and str(bad) in err
    assert not (tmp_path / "o").exists()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_torchscript_archive_is_no_tensorpose_checkpoint(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "best.pt"
    torch.jit.save(torch.jit.script(_Marker()), str(bad))
    monkeypatch.setattr(torch.jit, "load", lambda *a, **k: pytest.fail("jit.load called"))
    assert "TorchScript archive" in error(capsys, ["eval", str(bad)])


# ------------------------------------------------------------------ data loss
def test_outputs_never_overlap_inputs(ckpt, cam, tmp_path, capsys):
    before = tree(tmp_path)
    for out in (cam, cam / "sub", tmp_path, Path("/")):
        argv = ["lift", str(cam), "--checkpoint", str(ckpt), *CAM, "--out", str(out)]
        assert "the input" in error(capsys, [*argv, "--overwrite"])
        argv = ["smooth", str(cam), "--out", str(out), "--overwrite", "--no-plot"]
        assert "the input" in error(capsys, argv)
    assert tree(tmp_path) == before


def test_export_never_replaces_its_checkpoint(ckpt, tmp_path, capsys):
    pytest.importorskip("onnx")
    before = ckpt.read_bytes()
    err = error(capsys, ["export", str(ckpt), "--out", str(ckpt)])
    assert "is the input" in err
    assert ckpt.read_bytes() == before


def test_export_out_is_a_file_never_anything_else(ckpt, tmp_path, capsys):
    """A folder, a name ending in a separator, a FIFO or a device at ``--out`` is refused before
    anything is read or written; an existing file only with ``--overwrite``."""
    folder = tmp_path / "userdir"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    mine = tmp_path / "model.onnx"
    mine.write_text("an earlier export")
    before = tree(tmp_path)
    for out, what in ((folder, "is a folder"), (f"{folder}/", "names a folder"),
                      (fifo, "is a FIFO"), ("/dev/null", "is a device"),
                      (mine, "exists; pass --overwrite")):  # fmt: skip
        err = error(capsys, ["export", str(ckpt), "--out", str(out)])
        assert what in err and str(out) in err
    err = error(capsys, ["export", str(ckpt), "--out", str(fifo), "--overwrite"])
    assert "is a FIFO" in err
    assert tree(tmp_path) == before
    assert (folder / "keep.txt").read_text() == "mine" and mine.read_text() == "an earlier export"


def test_overwrite_replaces_exactly_the_command_outputs(ckpt, cam, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["lift", str(cam), "--checkpoint", str(ckpt), *CAM, "--out", str(out), "--quiet"]
    assert main(argv) == 0
    (out / "cam01_json.mp4").write_bytes(b"an earlier run's video")  # as with --video
    (out / "mine.txt").write_text("keep")
    err = error(capsys, argv)
    assert "--overwrite" in err
    assert main([*argv, "--overwrite"]) == 0
    assert not (out / "cam01_json.mp4").exists()  # the stale video of the earlier run is gone
    assert (out / "mine.txt").read_text() == "keep"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_smooth_overwrite_leaves_no_stale_frame(cam, tmp_path):
    out = tmp_path / "out"
    assert main(["smooth", str(cam), "--out", str(out), "--no-plot", "--fps", "60"]) == 0
    assert len(list(out.glob("*.json"))) == 30
    for f in sorted(cam.glob("*.json"))[20:]:  # a shorter recording now
        f.unlink()
    argv = ["smooth", str(cam), "--out", str(out), "--no-plot", "--fps", "60", "--overwrite"]
    assert main(argv) == 0
    assert sorted(p.name for p in out.glob("*.json")) == sorted(p.name for p in cam.iterdir())


def test_a_planted_symlink_is_replaced_not_followed(cam, tmp_path):
    out = tmp_path / "out"
    assert main(["smooth", str(cam), "--out", str(out), "--no-plot", "--fps", "60"]) == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    frame = sorted(out.glob("*.json"))[0]
    frame.unlink()
    frame.symlink_to(victim)
    argv = ["smooth", str(cam), "--out", str(out), "--no-plot", "--fps", "60", "--overwrite"]
    assert main(argv) == 0
    assert victim.read_text() == "precious"
    assert not frame.is_symlink() and frame.read_text().startswith("{")


# ------------------------------------------------------------------ interrupts
def test_ctrl_c_while_writing_keeps_the_old_outputs(ckpt, cam, tmp_path, capsys, monkeypatch):
    import tensorpose.apps.lift as app

    out = tmp_path / "out"
    argv = ["lift", str(cam), "--checkpoint", str(ckpt), *CAM, "--out", str(out), "--quiet"]
    assert main(argv) == 0
    before = tree(out)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(app, "write_csv", interrupted)  # after the npz and TRC are staged
    assert "interrupted" in error(capsys, [*argv, "--overwrite"], code=130)
    assert tree(out) == before


def test_sigterm_while_writing_keeps_the_old_outputs(cam, tmp_path):
    out = tmp_path / "out"
    argv = ["smooth", str(cam), "--out", str(out), "--no-plot", "--fps", "60"]
    assert main(argv) == 0
    before = tree(out)
    code = f"""
import os, signal, sys
import tensorpose.apps.smooth as app
from tensorpose.cli import main
real = app.write_openpose
def slow(*a, **k):
    real(*a, **k)
    os.kill(os.getpid(), signal.SIGTERM)
app.write_openpose = slow
sys.exit(main({[*argv, "--overwrite"]!r}))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert r.returncode == 143, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "SIGTERM" in r.stderr
    assert tree(out) == before


# ------------------------------------------------------------------ files that are no files
@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_non_regular_inputs_are_refused_without_hanging(kind, ckpt, tmp_path, capsys):
    if kind == "fifo":
        src = tmp_path / "keypoints.npz"
        os.mkfifo(src)
        coco = tmp_path / "results.json"
        os.mkfifo(coco)
    else:
        src = coco = Path("/dev/zero")
    codes = []

    def run():
        for path in (src, coco):
            codes.append(main(["lift", str(path), "--checkpoint", str(ckpt), "--size", "9x9",
                               "--out", str(tmp_path / "o")]))  # fmt: skip

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "a command hung on a non-regular file"
    assert codes == [2, 2]
    assert "not a regular file" in capsys.readouterr().err or kind == "dev_zero"
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ concurrency
def test_a_second_command_into_a_folder_in_use_is_refused(ckpt, cam, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    lock = FolderLock(out).acquire()  # a first lift, still running
    try:
        argv = ["lift", str(cam), "--checkpoint", str(ckpt), *CAM, "--out", str(out)]
        err = error(capsys, argv)
        assert "in use by process" in err and str(out) in err
    finally:
        lock.release()
    assert sorted(p.name for p in out.iterdir()) == []


# ------------------------------------------------------------------ nonsense
def test_nonsense_gets_one_line_naming_the_flag(ckpt, cam, tmp_path, capsys):
    out = tmp_path / "o"
    lift = ["lift", str(cam), "--checkpoint", str(ckpt), "--out", str(out)]
    assert "--size" in error(capsys, [*lift, "--size", "1x1"])
    assert "--fps" in error(capsys, [*lift, "--size", "1920x1080", "--fps", "1e-300"])
    assert "--device" in error(capsys, [*lift, "--size", "1920x1080", "--device", "cuda:99"])
    assert "is a folder" in error(capsys, ["lift", str(cam), "--checkpoint", str(ckpt.parent),
                                           "--size", "1920x1080", "--out", str(out)])  # fmt: skip
    kp = np.random.default_rng(0).uniform(0, 100, (30, 17, 3))
    kp[..., 2], kp[3, 4, :2] = 1.0, 1e300  # one value far beyond float32
    np.savez(tmp_path / "huge.npz", keypoints=kp, width=640, height=480)
    argv = ["lift", str(tmp_path / "huge.npz"), "--layout", "H36M_17", "--checkpoint", str(ckpt)]
    assert "far outside the image" in error(capsys, [*argv, "--out", str(out)])
    tri = ["triangulate", str(TRACKS), "--calib", str(CALIB), "--out", str(out)]
    assert "--max-reprojection-px" in error(capsys, [*tri, "--max-reprojection-px", "nan"])
    assert "--fps" in error(capsys, [*tri, "--fps", "0"])
    smooth = ["smooth", str(cam), "--out", str(out)]
    assert "--fps" in error(capsys, [*smooth, "--fps", "1e-300"])
    assert "--process-noise" in error(capsys, [*smooth, "--process-noise", "-1"])
    assert not out.exists()


def test_eval_wild_with_no_camera_lifted_is_an_error_not_nan(ckpt, capsys):
    argv = ["eval-wild", str(TRACKS), "--calib", str(CALIB), "--checkpoint", str(ckpt),
            "--min-confidence", "1.0", "--json"]  # fmt: skip
    err = error(capsys, argv)
    assert "no camera could be lifted" in err and "NaN" not in err


def test_smooth_of_people_without_any_keypoint(tmp_path, capsys):
    import json

    src = tmp_path / "cam"
    src.mkdir()
    kp = np.column_stack([np.arange(25) + 100.0, np.arange(25) + 200.0, np.zeros(25)])
    for t in range(12):
        people = [{"pose_keypoints_2d": kp.ravel().tolist()}]
        (src / f"f{t:04d}.json").write_text(json.dumps({"people": people}))
    out = tmp_path / "out"
    for extra in ([], ["--layout", "BODY_25"]):
        err = error(capsys, ["smooth", str(src), "--out", str(out), *extra])
        assert "no person" in err and str(src) in err
    assert not out.exists()


def test_export_bad_opset_leaves_nothing(tmp_path, capsys):
    pytest.importorskip("onnx")
    from tensorpose.tasks.heatmap import HeatmapTask

    cfg = load_config(None, ["task=heatmap", "model.width=8", "data.input_size=[64,64]"])
    ck = tmp_path / "hm.pt"
    save_checkpoint(ck, HeatmapTask.build_model(cfg), config_to_dict(cfg))
    err = error(capsys, ["export", str(ck), "--opset", "999", "--out", str(tmp_path / "m.onnx")])
    assert "--opset" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hm.pt"]


def test_signals_are_given_back_after_a_command(ckpt, cam, tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    main(["lift", str(cam), "--checkpoint", str(ckpt), *CAM, "--out", str(tmp_path / "o"),
          "--quiet"])  # fmt: skip
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_second_run_into_a_folder_in_use_is_refused_at_once(tmp_path, monkeypatch, capsys):
    """The output folder's lock is taken before the inputs are read: a second triangulate into
    the folder while the first one computes is refused (one line, exit 2), and the first one
    still writes its outputs."""
    from tensorpose.apps import triangulate as app
    from tensorpose.io.openpose import bundled_tracks

    tracks = bundled_tracks()[0].parent
    out = tmp_path / "out"
    argv = ["triangulate", str(tracks), "--calib", str(tracks / "Calib.qca.txt"), "--fps", "60",
            "--out", str(out), "--overwrite"]  # fmt: skip
    seen = {}
    real = app.open_recording

    def while_computing(*a, **k):  # the first run has started reading its inputs
        second = subprocess.run([sys.executable, "-m", "tensorpose", *argv], capture_output=True,
                                text=True, timeout=120)  # fmt: skip
        seen["rc"], seen["err"] = second.returncode, second.stderr.strip()
        return real(*a, **k)

    monkeypatch.setattr(app, "open_recording", while_computing)
    assert main(argv) == 0
    assert seen["rc"] == 2 and len(seen["err"].splitlines()) == 1, seen
    assert "in use by process" in seen["err"] and str(out) in seen["err"]
    assert (out / "openpose_body25b_3d.trc").is_file()


def test_predict_refuses_a_fifo_video_before_opening_it(tmp_path):
    """A FIFO named like a video is refused, never opened (opening one blocks forever)."""
    fifo = tmp_path / "cam01.mp4"
    os.mkfifo(fifo)
    argv = ["predict", str(fifo), "--model", "blazepose", "--out", str(tmp_path / "o")]
    r = subprocess.run([sys.executable, "-m", "tensorpose", *argv], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(fifo) in r.stderr


def test_video_frames_over_the_limits_are_refused_from_the_header(monkeypatch):
    from tensorpose.io import video

    clip = Path(__file__).resolve().parents[1] / "examples/balancing_trial/videos/cam01.mp4"
    video.open_video(clip).release()  # within the limits
    monkeypatch.setattr(video, "MAX_VIDEO_PIXELS", 1_000_000)
    with pytest.raises(ValueError, match=r"cam01.mp4: \d+x\d+ frames, \d+ declared: over"):
        video.open_video(clip)
    monkeypatch.setattr(video, "MAX_VIDEO_PIXELS", 40_000_000)
    monkeypatch.setattr(video, "MAX_VIDEO_FRAMES", 10)
    with pytest.raises(ValueError, match="10 frames"):
        video.open_video(clip)


def test_predict_overwrite_never_removes_a_users_file_in_its_folders(tmp_path, capsys):
    """``--overwrite`` replaces predict's own folders whole: one holding a file predict does not
    write (the user's) is refused, nothing removed; without it the outputs are replaced."""
    images = tmp_path / "images"
    images.mkdir()
    coco = Path(__file__).resolve().parents[1] / "tensorpose" / "assets" / "coco" / "images"
    src = sorted(coco.glob("*.jpg"))
    shutil.copy(src[0], images / src[0].name)
    out = tmp_path / "out"
    argv = ["predict", str(images), "--model", "blazepose", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    mine = out / "openpose" / "mine.txt"
    mine.write_text("my notes")
    before = tree(out)
    err = error(capsys, [*argv, "--overwrite"])
    assert str(mine) in err and "not an output" in err
    assert tree(out) == before  # nothing removed, nothing replaced
    mine.unlink()
    assert main([*argv, "--overwrite"]) == 0
    assert (out / "results.json").is_file() and any((out / "openpose").glob("*.json"))


def test_a_file_size_limit_while_writing_names_the_output_folder(tmp_path):
    """``ulimit -f`` (EFBIG) while the outputs are written: one line naming ``--out``, exit 2,
    the earlier outputs kept."""
    import resource

    out = tmp_path / "out"
    argv = ["triangulate", str(TRACKS), "--calib", str(CALIB), "--fps", "60", "--out", str(out)]
    assert main(argv) == 0
    before = tree(out)

    def small_files():  # in the child: files of at most 16 KiB
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, 16 << 10))

    r = subprocess.run([sys.executable, "-m", "tensorpose", *argv, "--overwrite"],
                       capture_output=True, text=True, timeout=120,
                       preexec_fn=small_files)  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert f"--out {out}" in lines[0] and "File too large" in lines[0]
    assert tree(out) == before
