"""Probe the user-facing commands with hostile inputs and count the outcomes per family.

Each case builds its inputs in a fresh temporary folder, runs ``python -m tensorpose ...`` in a
subprocess (60 s limit, 6 GiB address space) and classifies what happened, from the files on
disk and the exit status:

- ``code ran``: ``torch.jit.load`` was called on the user's file (a TorchScript archive runs its
  own code while loading; the probe's ``sitecustomize`` records the call);
- ``data loss``: an input, or a file beside the output that the command does not write, changed;
- ``write outside``: a file outside the output folder changed (through a planted symlink);
- ``stale``: an output of an earlier run that this run does not write was left behind;
- ``hang``: over the time limit; ``memory``: a MemoryError or killed by the address-space limit;
- ``traceback``: a Python traceback instead of an error line;
- ``clear error``: exit 2 with one line naming the file or flag (exit 130 and one line for the
  ``interrupt`` cases, whose SIGINT is sent a set time after the start); ``accepted``: exit 0
  (wrong for nonsense; right for the ``stale outputs``, ``write outside`` and ``false alarm``
  cases, whose checks above passed); ``warned``: exit 0 with the line a case expects (a
  variable frame rate named); ``other``: anything else.

Run it against any checkout (``PYTHONPATH=CHECKOUT python scripts/probe_commands.py``); it prints
a table and, with ``--json FILE``, writes the outcomes. It never points a command at ``/``.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TRACKS = ROOT / "tensorpose" / "assets" / "tracks" / "openpose_body25b"
IMAGES = ROOT / "tensorpose" / "assets" / "coco" / "images"
COCO = ROOT / "tensorpose" / "assets" / "coco" / "person_keypoints.json"
SITE = """
import os
if os.environ.get("PROBE_MARKER"):
    import torch
    _real = torch.jit.load
    def _load(*args, **kwargs):
        open(os.environ["PROBE_MARKER"], "w").write("torch.jit.load")
        return _real(*args, **kwargs)
    torch.jit.load = _load
"""


def digest(path: Path) -> dict[str, str]:
    """Every entry under ``path`` (or the file itself): content hash or link target."""
    if not path.exists() and not path.is_symlink():
        return {}
    items = [path] if not path.is_dir() else sorted(path.rglob("*"))
    out = {}
    for p in items:
        if p.is_symlink():
            out[str(p)] = "->" + os.readlink(p)
        elif p.is_file():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# ---------------------------------------------------------------------------- fixtures
def lift_checkpoint(d: Path) -> Path:
    import torch

    from tensorpose.config import config_to_dict, load_config
    from tensorpose.tasks.lifting import LiftingTask
    from tensorpose.train.checkpoint import save_checkpoint

    cfg = load_config(None, ["model.channels=16", "model.receptive_field=9"])
    torch.manual_seed(0)
    path = d / "lifter.pt"
    save_checkpoint(path, LiftingTask.build_model(cfg), config_to_dict(cfg))
    return path


def heatmap_checkpoint(d: Path) -> Path:
    from tensorpose.config import config_to_dict, load_config
    from tensorpose.tasks.heatmap import HeatmapTask
    from tensorpose.train.checkpoint import save_checkpoint

    cfg = load_config(None, ["task=heatmap", "model.width=8", "data.input_size=[64,64]"])
    path = d / "best.pt"
    save_checkpoint(path, HeatmapTask.build_model(cfg), config_to_dict(cfg))
    return path


def torchscript(path: Path) -> Path:
    import torch

    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1

    torch.jit.save(torch.jit.script(M()), str(path))
    return path


def camera(d: Path, frames: int = 30) -> Path:
    dst = d / "cam01_json"
    dst.mkdir()
    for f in sorted((TRACKS / "cam01_json").glob("*.json"))[:frames]:
        shutil.copy(f, dst / f.name)
    return dst


def photos(d: Path) -> Path:
    dst = d / "photos"
    dst.mkdir()
    for f in sorted(IMAGES.glob("*.jpg"))[:2]:
        shutil.copy(f, dst / f.name)
    return dst


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def npz(path: Path, keypoints, **extra) -> Path:
    np.savez(path, keypoints=keypoints, **extra)
    return path


def zip_bomb(path: Path) -> Path:
    """An npz whose one array claims 6.7 GiB of float64 zeros (compressed to a few MB)."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros((1, 17, 3)))
    header["shape"] = (17_600_000, 17, 3)
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf,
        zf.open("keypoints.npy", "w", force_zip64=True) as f,
    ):
        np.lib.format.write_array_header_1_0(f, header)
        block = bytes(1 << 24)
        for _ in range(430):  # 7 GB of zeros, deflated
            f.write(block)
    return path


def huge_jpeg(path: Path) -> Path:
    """A JPEG whose header claims 30000 x 30000 pixels."""
    data = bytearray((IMAGES / sorted(p.name for p in IMAGES.glob("*.jpg"))[0]).read_bytes())
    i = 2
    while i < len(data):
        marker = data[i + 1]
        size = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2):
            data[i + 5 : i + 9] = (30000).to_bytes(2, "big") * 2
            break
        i += 2 + size
    path.write_bytes(bytes(data))
    return path


def calib_edit(d: Path, key: str, value: str) -> Path:
    """The bundled calibration with the first ``key="..."`` attribute set to ``value``."""
    text = (TRACKS / "Calib.qca.txt").read_text()
    path = d / "calib.qca.txt"
    path.write_text(re.sub(rf'{key}="[^"]*"', f'{key}="{value}"', text, count=1))
    return path


def toml_calib(d: Path, edit) -> Path:
    from tensorpose.io.calibration import load_calibration, write_toml

    path = d / "calib.toml"
    write_toml(load_calibration(TRACKS / "Calib.qca.txt"), path)
    path.write_text(edit(path.read_text()))
    return path


def tracks_copy(d: Path) -> Path:
    dst = d / "trial"
    shutil.copytree(TRACKS, dst)
    return dst


# ---------------------------------------------------------------------------- cases
def cases():
    """``(family, name, setup(d) -> (argv, watched, outside, stale))``: ``watched`` must not
    change (inputs, other files), ``outside`` must not change (beyond the output folder),
    ``stale`` must not exist after the run."""

    def c(family, name):
        def wrap(fn):
            CASES.append((family, name, fn))
            return fn

        return wrap

    CASES: list = []

    @c("code execution", "lift --checkpoint TorchScript .bin")
    def _(d):
        cam, ts = camera(d), torchscript(d / "pretrained_h36m_cpn.bin")
        return ["lift", str(cam), "--checkpoint", str(ts), "--size", "1920x1088",
                "--out", str(d / "o")], [cam, ts], [], []  # fmt: skip

    @c("code execution", "eval-wild --checkpoint TorchScript .bin")
    def _(d):
        ts = torchscript(d / "x.bin")
        return ["eval-wild", str(TRACKS), "--calib", str(TRACKS / "Calib.qca.txt"),
                "--checkpoint", str(ts)], [ts], [], []  # fmt: skip

    @c("code execution", "eval TorchScript best.pt")
    def _(d):
        return ["eval", str(torchscript(d / "best.pt"))], [], [], []

    @c("code execution", "predict --checkpoint TorchScript")
    def _(d):
        ph = photos(d)
        return ["predict", str(ph), "--checkpoint", str(torchscript(d / "best.pt")), "--boxes",
                str(COCO), "--out", str(d / "o")], [ph], [], []  # fmt: skip

    @c("data loss", "predict photos --out photos --overwrite")
    def _(d):
        ph, ck = photos(d), heatmap_checkpoint(d)
        return ["predict", str(ph), "--checkpoint", str(ck), "--boxes", str(COCO), "--out",
                str(ph), "--overwrite", "--quiet"], [ph], [], []  # fmt: skip

    @c("data loss", "predict photos --out <its parent> --overwrite")
    def _(d):
        ph, ck = photos(d), heatmap_checkpoint(d)
        (d / "notes.txt").write_text("mine")
        return ["predict", str(ph), "--checkpoint", str(ck), "--boxes", str(COCO), "--out",
                str(d), "--overwrite", "--quiet"], [ph, d / "notes.txt", ck], [], []  # fmt: skip

    @c("data loss", "predict with a broken checkpoint --overwrite")
    def _(d):
        ph, out = photos(d), d / "out"
        out.mkdir()
        (out / "results.json").write_text("[]")
        (d / "broken.pt").write_bytes(b"PK\x03\x04 broken")
        return ["predict", str(ph), "--checkpoint", str(d / "broken.pt"), "--boxes", str(COCO),
                "--out", str(out), "--overwrite"], [out], [], []  # fmt: skip

    @c("data loss", "export best.pt --out best.pt")
    def _(d):
        ck = heatmap_checkpoint(d)
        return ["export", str(ck), "--out", str(ck)], [ck], [], []

    @c("data loss", "smooth DIR --out DIR --overwrite")
    def _(d):
        cam = camera(d)
        return ["smooth", str(cam), "--out", str(cam), "--overwrite"], [cam], [], []

    @c("data loss", "triangulate --out <the tracks folder> --overwrite")
    def _(d):
        tr = tracks_copy(d)
        return ["triangulate", str(tr), "--calib", str(tr / "Calib.qca.txt"), "--fps", "60",
                "--out", str(tr / "cam01_json"), "--overwrite"], [tr], [], []  # fmt: skip

    @c("stale outputs", "lift --overwrite after a run with --video")
    def _(d):
        cam, ck, out = camera(d), lift_checkpoint(d), d / "out"
        out.mkdir()
        (out / "cam01_json.mp4").write_bytes(b"old video")
        argv = ["lift", str(cam), "--checkpoint", str(ck), "--size", "1920x1088", "--out",
                str(out), "--overwrite", "--quiet"]  # fmt: skip
        return argv, [cam], [], [out / "cam01_json.mp4"]

    @c("stale outputs", "smooth --overwrite after a longer recording")
    def _(d):
        cam, out = camera(d), d / "out"
        out.mkdir()
        (out / "cam01.9999.json").write_text('{"people": []}')
        return ["smooth", str(cam), "--out", str(out), "--overwrite", "--no-plot"], [cam], [], [
            out / "cam01.9999.json"]  # fmt: skip

    @c("write outside", "smooth --overwrite with a planted symlink")
    def _(d):
        cam, out, victim = camera(d), d / "out", d / "victim.txt"
        out.mkdir()
        victim.write_text("precious")
        (out / sorted(p.name for p in cam.iterdir())[0]).symlink_to(victim)
        return ["smooth", str(cam), "--out", str(out), "--overwrite", "--no-plot"], [cam], [
            victim], []  # fmt: skip

    @c("write outside", "lift --overwrite with a planted symlink")
    def _(d):
        cam, ck, out, victim = camera(d), lift_checkpoint(d), d / "out", d / "victim.txt"
        out.mkdir()
        victim.write_text("precious")
        (out / "cam01_json.trc").symlink_to(victim)
        return ["lift", str(cam), "--checkpoint", str(ck), "--size", "1920x1088", "--out",
                str(out), "--overwrite", "--quiet"], [cam], [victim], []  # fmt: skip

    for what, make in (("npz", "k.npz"), ("COCO results", "r.json")):

        @c("hang", f"lift with a FIFO as the {what} file")
        def _(d, make=make):
            return ["lift", str(fifo(d / make)), "--size", "640x480", "--out",
                    str(d / "o")], [], [], []  # fmt: skip

    @c("hang", "triangulate --calib FIFO")
    def _(d):
        return ["triangulate", str(TRACKS), "--calib", str(fifo(d / "c.qca.txt")), "--fps", "60",
                "--out", str(d / "o")], [], [], []  # fmt: skip

    @c("hang", "predict --boxes FIFO")
    def _(d):
        ph = photos(d)
        return ["predict", str(ph), "--checkpoint", str(heatmap_checkpoint(d)), "--boxes",
                str(fifo(d / "b.json")), "--out", str(d / "o")], [ph], [], []  # fmt: skip

    @c("hang", "lift --checkpoint FIFO.bin")
    def _(d):
        cam = camera(d)
        return ["lift", str(cam), "--checkpoint", str(fifo(d / "m.bin")), "--size", "1920x1088",
                "--out", str(d / "o")], [cam], [], []  # fmt: skip

    @c("hang", "lift /dev/zero as the npz")
    def _(d):
        (d / "zero.npz").symlink_to("/dev/zero")
        return ["lift", str(d / "zero.npz"), "--size", "640x480", "--out", str(d / "o")], [], [], []

    @c("memory", "lift an npz bomb (6.7 GiB of zeros)")
    def _(d):
        return ["lift", str(zip_bomb(d / "bomb.npz")), "--size", "640x480", "--layout",
                "H36M_17", "--out", str(d / "o")], [], [], []  # fmt: skip

    @c("memory", "predict a JPEG claiming 30000x30000")
    def _(d):
        ph = d / "big"
        ph.mkdir()
        huge_jpeg(ph / "000000000001.jpg")
        return ["predict", str(ph), "--checkpoint", str(heatmap_checkpoint(d)), "--boxes",
                str(COCO), "--out", str(d / "o")], [ph], [], []  # fmt: skip

    def nonsense(name, argv_of):
        c("nonsense", name)(lambda d: (argv_of(d), [], [], []))

    tri = ["--fps", "60"]
    for old, new, label in (
        ("focalLengthU", "0", "focal length 0"),
        ("focalLengthU", "-5", "negative focal length"),
        ("focalLengthU", "1e-300", "focal length 1e-300"),
        ("radialDistortion1", "1e12", "k1 = 1e12"),
    ):
        nonsense(f"calibration {label}", lambda d, o=old, n=new: [
            "triangulate", str(TRACKS), "--calib", str(calib_edit(d, o, n)), *tri,
            "--out", str(d / "o")])  # fmt: skip
    nonsense("TOML size [0, 0]", lambda d: [
        "triangulate", str(TRACKS), "--calib", str(toml_calib(
            d, lambda t: re.sub(r"size = \[[^\]]*\]", "size = [0, 0]", t))),
        *tri, "--out", str(d / "o")])  # fmt: skip
    nonsense("TOML 10**400", lambda d: [
        "triangulate", str(TRACKS), "--calib", str(toml_calib(
            d, lambda t: re.sub(r"size = \[[^\]]*\]", f"size = [{10**400}, 1]", t,
                                              count=1))),
        *tri, "--out", str(d / "o")])  # fmt: skip
    nonsense(
        "COCO results with 10**400",
        lambda d: [
            "lift",
            str(_coco_results(d, 10**400)),
            "--size",
            "640x480",
            "--out",
            str(d / "o"),
        ],
    )
    nonsense("boolean keypoints", lambda d: ["lift", str(_coco_results(d, True)), "--size",
                                              "640x480", "--out", str(d / "o")])  # fmt: skip
    nonsense("complex npz keypoints", lambda d: ["lift", str(npz(
        d / "c.npz", np.ones((9, 17, 3)) * (1 + 1j))), "--size", "640x480", "--layout",
        "H36M_17", "--out", str(d / "o")])  # fmt: skip
    nonsense("lift --size 1x1", lambda d: ["lift", str(camera(d)), "--checkpoint",
                                            str(lift_checkpoint(d)), "--size", "1x1", "--out",
                                            str(d / "o")])  # fmt: skip
    nonsense(
        "lift --fps 1e-300",
        lambda d: [
            "lift",
            str(camera(d)),
            "--size",
            "1920x1088",
            "--fps",
            "1e-300",
            "--out",
            str(d / "o"),
        ],
    )
    nonsense("keypoints 1000x outside the image", lambda d: ["lift", str(npz(
        d / "far.npz", np.random.default_rng(0).uniform(0, 640e3, (9, 17, 3)))), "--size",
        "640x480", "--layout", "H36M_17", "--out", str(d / "o")])  # fmt: skip
    nonsense("export --opset 999", lambda d: ["export", str(heatmap_checkpoint(d)), "--opset",
                                               "999"])  # fmt: skip
    nonsense("eval-wild where no camera lifts", lambda d: [
        "eval-wild", str(TRACKS), "--calib", str(TRACKS / "Calib.qca.txt"), "--checkpoint",
        str(lift_checkpoint(d)), "--min-confidence", "1", "--json"])  # fmt: skip
    nonsense("smooth of people with confidence 0", lambda d: ["smooth", str(_zero_people(d)),
                                                               "--layout", "BODY_25", "--out",
                                                               str(d / "o")])  # fmt: skip
    nonsense("smooth --fps 1e-300", lambda d: ["smooth", str(camera(d)), "--fps", "1e-300",
                                                "--out", str(d / "o")])  # fmt: skip
    nonsense("lift --checkpoint FOLDER", lambda d: ["lift", str(camera(d)), "--checkpoint",
                                                     str(TRACKS), "--size", "1920x1088",
                                                     "--out", str(d / "o")])  # fmt: skip
    nonsense("lift --device cuda (no GPU)", lambda d: ["lift", str(camera(d)), "--size",
                                                        "1920x1088", "--device", "cuda",
                                                        "--out", str(d / "o")])  # fmt: skip
    _issue32_cases(c, nonsense)
    return CASES


def _issue32_cases(c, nonsense) -> None:
    """The cases of the remaining reliability items: per-track memory and crowds in
    ``triangulate --people auto``, huge BVH numbers, variable frame rate, a folder of videos in
    image mode, Ctrl-C at set instants of the start, a camera blamed for people out of view."""
    tri = ["--fps", "60"]

    @c("memory", "triangulate --people auto, a crowd of 60 (4 cameras, 200 frames)")
    def _(d):
        rec = _scene(d, frames=200, people=60)
        return ["triangulate", str(rec), "--calib", str(rec / "Calib.qca.txt"), *tri, "--people",
                "auto", "--out", str(d / "o")], [rec], [], []  # fmt: skip

    @c("memory", "triangulate --people auto, a track restarting every 100 frames (2,000)")
    def _(d):
        rec = _scene(d, frames=2000, people=1, restart_every=100)
        return ["triangulate", str(rec), "--calib", str(rec / "Calib.qca.txt"), *tri, "--people",
                "auto", "--out", str(d / "o")], [rec], [], []  # fmt: skip

    for value in ("1e308", "-1e300", "1e8"):
        nonsense(f"BVH root position {value}", lambda d, v=value: ["bvh-info", str(_bvh(d, v))])

    @c("nonsense", "predict a variable-frame-rate video")
    def _(d):
        video = _vfr_video(d / "vfr.mp4")
        return ["predict", str(video), "--model", "blazepose", "--out", str(d / "o"),
                "--quiet"], [video], [], [], {"says": "variable frame rate"}  # fmt: skip

    @c("nonsense", "predict FOLDER_OF_VIDEOS --image-mode")
    def _(d):
        cams = d / "cams"
        cams.mkdir()
        for k in (1, 2):
            _vfr_video(cams / f"cam0{k}.mp4")
        return ["predict", str(cams), "--model", "blazepose", "--image-mode", "--out",
                str(d / "o")], [cams], [], []  # fmt: skip

    @c("false alarm", "triangulate --people auto keeps a person cam03, cam04 never see")
    def _(d):
        rec = _bystander_kept(d)
        return ["triangulate", str(rec), "--calib", str(rec / "Calib.qca.txt"), *tri, "--people",
                "auto", "--out", str(d / "o")], [rec], [], []  # fmt: skip

    for at in (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0):  # the run takes seconds

        @c("interrupt", f"Ctrl-C {at:g} s after triangulate starts")
        def _(d, at=at):
            return ["triangulate", str(TRACKS), "--calib", str(TRACKS / "Calib.qca.txt"), *tri,
                    "--out", str(d / "o")], [], [], [], {"sigint": at}  # fmt: skip


def _scene(d: Path, frames: int, people: int, restart_every: int = 0) -> Path:
    """A synthetic recording (benchmarks/scene_people.py) written as four OpenPose folders."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch
    from scene_people import SceneCameras

    from tensorpose.io.openpose import write_openpose

    scene = SceneCameras(frames, people, restart_every)
    rec = d / "rec"
    rec.mkdir()
    shutil.copy(TRACKS / "Calib.qca.txt", rec / "Calib.qca.txt")
    det = scene.read(0, frames)
    for c, folder in enumerate(scene.folders):  # the four cameras
        kp = torch.from_numpy(np.stack(det[c]))  # (T, P, 25, 3)
        write_openpose(kp, rec / folder.name, [f"{folder.stem[:5]}.{t:06d}.json"
                                               for t in range(frames)], "BODY_25B")  # fmt: skip
    return rec


def _bvh(d: Path, value: str) -> Path:
    """A bundled CMU BVH excerpt (3 frames) whose second frame has the root at ``value``."""
    from tensorpose.io.bvh import bundled_bvh

    lines = bundled_bvh()[0].read_text().splitlines()
    cut = lines.index("MOTION")
    rows = lines[cut + 3 : cut + 6]
    rows[1] = " ".join([value, *rows[1].split()[1:]])
    path = d / "huge.bvh"
    path.write_text("\n".join([*lines[: cut + 1], "Frames: 3", lines[cut + 2], *rows]) + "\n")
    return path


def _vfr_video(path: Path) -> Path:
    """Twelve frames of a person photo, 100 ms apart and then 500 ms (variable frame rate)."""
    from tensorpose.io.video import _ffmpeg_exe

    image = sorted(IMAGES.glob("*.jpg"))[0]
    subprocess.run([_ffmpeg_exe(), "-loglevel", "error", "-y", "-loop", "1", "-framerate", "10",
                    "-i", str(image), "-frames:v", "12", "-vf",
                    "scale=256:-2,setpts='if(lt(N,8),N*0.1,0.8+(N-8)*0.5)/TB'", "-fps_mode",
                    "vfr", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)],
                   check=True)  # fmt: skip
    return path


def _bystander_kept(d: Path) -> Path:
    """tests/data/synthetic_two_people with the composited person removed from cam03 and cam04
    and the other person only in its first 3 of 40 frames: ``--people auto`` keeps the
    composited person alone, whom cam03 and cam04 never see."""
    rec = d / "rec"
    shutil.copytree(ROOT / "tests" / "data" / "synthetic_two_people", rec)
    for folder in sorted(rec.glob("cam*_json")):  # the four cameras
        for t, f in enumerate(sorted(folder.glob("*.json"))):  # the 40 frames
            data = json.loads(f.read_text())
            composited = [set(p["pose_keypoints_2d"][2::3]) <= {0, 1} for p in data["people"]]
            keep = [p for p, comp in zip(data["people"], composited, strict=True)
                    if (comp and folder.name not in ("cam03_json", "cam04_json"))
                    or (not comp and t < 3)]  # fmt: skip
            f.write_text(json.dumps({**data, "people": keep}))
    return rec


def _coco_results(d: Path, value) -> Path:
    kp = [10.0, 20.0, 1.0] * 17
    kp[0] = value
    path = d / "results.json"
    path.write_text(json.dumps([{"image_id": t, "keypoints": kp, "score": 1.0}
                                for t in range(5)]))  # fmt: skip
    return path


def _zero_people(d: Path) -> Path:
    src = d / "zero"
    src.mkdir()
    kp = [v for j in range(25) for v in (100.0 + j, 200.0 + j, 0.0)]
    for t in range(12):
        (src / f"f{t:04d}.json").write_text(json.dumps({"people": [{"pose_keypoints_2d": kp}]}))
    return src


# ---------------------------------------------------------------------------- running
def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def run_case(setup, site: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="probe.") as tmp:
        d = Path(tmp)
        argv, watched, outside, stale, *more = setup(d)
        opts = more[0] if more else {}
        before = {str(p): digest(p) for p in [*watched, *outside]}
        marker = d / "jit_load_called"
        env = {
            **os.environ,
            "PROBE_MARKER": str(marker),
            "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        }
        if "sigint" in opts:  # the hook's own torch import would be the start interrupted
            del env["PROBE_MARKER"]
        try:
            r = _run(argv, d, env, opts.get("sigint"))
        except subprocess.TimeoutExpired:
            return "hang"
        if marker.exists():
            return "code ran"
        if any(digest(Path(p)) != h for p, h in before.items() if Path(p) in watched):
            return "data loss"
        if any(digest(Path(p)) != h for p, h in before.items() if Path(p) in outside):
            return "write outside"
        if any(p.exists() for p in stale):
            return "stale"
        # the lines a terminal shows (a progress bar cleared with \r leaves nothing)
        stderr = r.stderr.decode(errors="replace")  # bytes: keep the \r of progress bars
        err = [line.rsplit("\r", 1)[-1] for line in stderr.split("\n")]
        err = [line for line in err if line.strip()]
        if "sigint" in opts and r.returncode == -2 and not err:
            return "killed by SIGINT before Python ran"
        if "MemoryError" in stderr or r.returncode < 0:
            return "memory"
        if any(line.startswith("Traceback") for line in err):
            return "traceback"
        if r.returncode == (130 if "sigint" in opts else 2) and len(err) == 1:
            return "clear error"
        if r.returncode == 0 and "says" in opts:
            said = re.search(opts["says"], r.stdout.decode(errors="replace") + stderr)
            return "warned" if said else "accepted"
        if r.returncode == 0:
            return "accepted"
        return f"other (exit {r.returncode})"


def _run(argv: list[str], d: Path, env: dict, sigint: float | None):
    """The command, with a SIGINT ``sigint`` seconds after its start."""
    cmd = [sys.executable, "-m", "tensorpose", *argv]
    if sigint is None:
        return subprocess.run(cmd, cwd=d, env=env, capture_output=True, timeout=60,
                              preexec_fn=_limit)  # fmt: skip
    import signal
    import time

    def start() -> None:  # as from a terminal: a shell's background job ignores SIGINT
        _limit()
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    p = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=start)  # fmt: skip
    time.sleep(sigint)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the outcomes here")
    p.add_argument("-k", default="", help="only cases whose name contains this")
    args = p.parse_args()
    site = Path(tempfile.mkdtemp(prefix="probe_site."))
    (site / "sitecustomize.py").write_text(SITE)
    rows = []
    for family, name, setup in cases():
        if args.k in name:
            outcome = run_case(setup, site)
            rows.append({"family": family, "case": name, "outcome": outcome})
            print(f"{family:15s} {outcome:15s} {name}", flush=True)
    shutil.rmtree(site)
    table = collections.Counter((r["family"], r["outcome"]) for r in rows)
    print("\nper family:")
    for family in dict.fromkeys(r["family"] for r in rows):
        counts = {o: n for (f, o), n in table.items() if f == family}
        print(f"  {family:15s} " + ", ".join(f"{o} {n}" for o, n in sorted(counts.items())))
    if args.json:
        Path(args.json).write_text(json.dumps({"cases": rows, "load": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
