"""tensorpose's BlazePose (image mode) against MediaPipe's own ``mp.solutions.pose``.

MediaPipe is never a tensorpose dependency: this script makes its own virtual environment
(``python -m venv`` in the peer environments' folder, ``benchmarks/peers/peer_env.py``; ``pip
install mediapipe==0.10.14`` into it under ``benchmarks/peers/constraints/mediapipe.txt``, every
package pinned; ``--find-links`` for a folder holding the wheel offline), runs
``mp.solutions.pose.Pose(static_image_mode=True, model_complexity=1)`` there on every frame,
and tensorpose's :func:`tensorpose.blazepose.pipeline.image_people` here
(``torch.set_num_threads(1)``, batched), then reports per video the median and 95th
percentile of the landmark pixel distance (the 33 landmarks of the frames where both found a
person), and both frame rates::

    python scripts/compare_mediapipe.py --frames 100 \
        examples/balancing_trial/videos/cam01.mp4

writes ``benchmarks/results/blazepose_vs_mediapipe_cpu.json`` (with the load average).
``--mode video`` compares video mode instead (MediaPipe's ``static_image_mode=False``: its
tracking and landmark smoothing, against :class:`tensorpose.blazepose.pipeline.BlazePoseTracker`
frame
by frame) and writes ``blazepose_vs_mediapipe_video_cpu.json``. The contenders take
``--turns`` turns, each in a process of its own confined to the same single CPU (``--core``,
``os.sched_setaffinity``: every thread of the process, MediaPipe's three included, since its
solution API sets no thread count; ``--no-pin``: the OS places them), with one thread of
torch, OpenMP/MKL/OpenBLAS and OpenCV, timed after one untimed call (MediaPipe
starts its graph, networks included, in its constructor); ``--baseline DIR`` times an older
tensorpose (``git archive COMMIT tensorpose | tar -x -C DIR``) in the same turns.
Each report names the CPU model (``/proc/cpuinfo``) and the pinning; runs already in the
output file on another CPU or with other pinning are kept in its ``other_runs``.
``--noise-floor`` also compares MediaPipe with itself on frames where one pixel value in ten
thousand moved by one grey level: how far MediaPipe's own output moves under an invisible
change (in video mode its tracking feeds each frame's landmarks into the next crop, so such
changes grow).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
from peer_env import constraints_file, cpu_model, peers_root, pin_mismatches  # noqa: E402

DEFAULT_VIDEOS = [
    *sorted((ROOT / "examples/balancing_trial/videos").glob("*.mp4")),
    *sorted((ROOT / "examples/two_people").glob("*.mp4")),
]
OUT = ROOT / "benchmarks/results/blazepose_vs_mediapipe_cpu.json"

WORKER = r"""
import json, sys, time
import cv2, numpy as np
import mediapipe as mp
cv2.setNumThreads(1)
path, n, out, static = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "image"
noise = float(sys.argv[5])
cap = cv2.VideoCapture(path)
frames = []
rng = np.random.default_rng(0)
while len(frames) < n or n <= 0:
    ok, f = cap.read()
    if not ok:
        break
    frames.append(cv2.cvtColor(f, cv2.COLOR_BGR2RGB))
    if noise > 0:  # one grey level up or down on a share `noise` of the values
        hit = rng.random(frames[-1].shape) < noise
        v = frames[-1][hit].astype(int) + rng.choice([-1, 1], int(hit.sum()))
        frames[-1][hit] = np.clip(v, 0, 255)
kp = np.full((len(frames), 33, 3), np.nan)
with mp.solutions.pose.Pose(static_image_mode=static, model_complexity=1) as pose:
    t0 = time.perf_counter()
    for i, rgb in enumerate(frames):
        r = pose.process(rgb)
        if r.pose_landmarks is not None:
            h, w = rgb.shape[:2]
            kp[i] = [[p.x * w, p.y * h, p.visibility] for p in r.pose_landmarks.landmark]
    seconds = time.perf_counter() - t0
    import os
    threads, cpus = len(os.listdir("/proc/self/task")), sorted(os.sched_getaffinity(0))
np.save(out, kp)
print(json.dumps({"frames": len(frames), "seconds": seconds, "threads": threads, "cpus": cpus}))
"""


FIXTURE = ROOT / "tests/data/blazepose_mediapipe_images.npz"

IMAGES_WORKER = r"""
import sys, numpy as np, mediapipe as mp
frames = np.load(sys.argv[1])
out = {}
with mp.solutions.pose.Pose(static_image_mode=True, model_complexity=1) as pose:
    for name in sorted(frames.files):
        rgb = frames[name]
        r = pose.process(rgb)
        h, w = rgb.shape[:2]
        lm = [] if r.pose_landmarks is None else r.pose_landmarks.landmark
        out[name] = np.array([[p.x * w, p.y * h, p.visibility] for p in lm]).reshape(-1, 33, 3)
np.savez(sys.argv[2], **out)
"""


def record_fixture(py: Path, out: Path = FIXTURE, count: int = 3) -> None:
    """MediaPipe's image-mode landmarks on the first ``count`` bundled COCO pictures (decoded by
    tensorpose's reader, so both read the same pixels): ``keypoints_<i> (n, 33, 3)`` pixels and
    visibility, the reference of tests/blazepose/test_pipeline.py."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from tensorpose.io.video import read_image

    images = sorted((ROOT / "tensorpose/assets/coco/images").glob("*.jpg"))[:count]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "frames.npz", Path(tmp) / "kp.npz"
        np.savez(src, **{f"keypoints_{i}": read_image(p) for i, p in enumerate(images)})
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run([str(py), "-c", IMAGES_WORKER, str(src), str(dst)], check=True, env=env)
        got = dict(np.load(dst))
    np.savez(out, names=np.array([p.name for p in images]), **got)
    print(f"-> {out}: " + ", ".join(f"{k} {v.shape}" for k, v in sorted(got.items())))


def make_venv(folder: Path, find_links: Path | None) -> Path:
    """The venv's python, with mediapipe 0.10.14 and every package of it at the version of
    ``benchmarks/peers/constraints/mediapipe.txt`` (made once; filled again, under those
    constraints, where a version differs)."""
    constraints = constraints_file("mediapipe")
    py = folder / "bin" / "python"
    if (
        py.exists()
        and subprocess.run([py, "-c", "import mediapipe"], capture_output=True).returncode == 0
        and not pin_mismatches(py, constraints)
    ):
        return py
    if not py.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    cmd = [str(py), "-m", "pip", "install", "-q", "-c", str(constraints), "mediapipe==0.10.14"]
    if find_links is not None:
        cmd += ["--find-links", str(find_links)]
    subprocess.run(cmd, check=True)
    wrong = pin_mismatches(py, constraints)
    if wrong:
        raise SystemExit(f"{folder}: not as {constraints.name} pins it: {'; '.join(wrong)}")
    return py


def pinned(core: int | None):
    """A ``preexec_fn`` that confines the child process, all its threads, to CPU ``core``
    (``None``: no confinement)."""
    if core is None:
        return None
    return lambda: os.sched_setaffinity(0, {core})


ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def run_mediapipe(py: Path, video: Path, frames: int, mode: str = "image", noise: float = 0.0,
                  core: int | None = None):  # fmt: skip
    """MediaPipe on the video's frames; ``noise``: that share of the pixel values moved by one
    grey level first (seeded), to measure how far MediaPipe moves from itself. ``core``: the
    process confined to that CPU (MediaPipe's solution API sets no thread count: its threads
    share the core)."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kp.npy"
        env = {**os.environ, **ONE_THREAD}
        cmd = [str(py), "-c", WORKER, str(video), str(frames), str(out), mode, str(noise)]
        r = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env,
                           preexec_fn=pinned(core))  # fmt: skip
        info = json.loads(r.stdout.strip().splitlines()[-1])
        return np.load(out), info


TP_WORKER = r"""
import json, sys, time
import numpy as np, torch
root, video, out, mode = sys.argv[1], sys.argv[2], sys.argv[5], sys.argv[6]
n, batch = int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, root)
from tensorpose.blazepose.pipeline import BlazePose, BlazePoseTracker, image_people
from tensorpose.io.video import iter_frames
from tensorpose.pose2d import pad_frames
torch.set_num_threads(1)
bp = BlazePose.load("cpu")
decoded = []
for fb in iter_frames(video, batch):
    decoded += fb.images
    if 0 < n <= len(decoded):
        decoded = decoded[:n]
        break
kp = np.full((len(decoded), 33, 3), np.nan)
# untimed first call (oneDNN builds its kernels), as MediaPipe's graph starts in its constructor
warm = pad_frames(decoded[: 1 if mode == "video" else batch], torch.device("cpu"))
BlazePoseTracker(bp, 1, 1).step(*warm) if mode == "video" else image_people(bp, *warm, 1)
t0 = time.perf_counter()
tracker = BlazePoseTracker(bp, 1, 1) if mode == "video" else None
step = 1 if tracker is not None else batch
for s in range(0, len(decoded), step):
    images, sizes = pad_frames(decoded[s : s + step], torch.device("cpu"))
    found = tracker.step(images, sizes) if tracker else image_people(bp, images, sizes, 1)
    for i, p in enumerate(found):
        if len(p["scores"]):
            kp[s + i] = p["keypoints"][0].numpy()
seconds = time.perf_counter() - t0
np.save(out, kp)
import os
threads, cpus = len(os.listdir("/proc/self/task")), sorted(os.sched_getaffinity(0))
print(json.dumps({"frames": len(decoded), "seconds": seconds, "threads": threads, "cpus": cpus}))
"""


def run_tensorpose(root: Path, video: Path, frames: int, batch: int, mode: str = "image",
                   core: int | None = None):  # fmt: skip
    """The tensorpose package under ``root`` (this checkout, or an older one as a baseline) in a
    process of its own, one thread (``core``: confined to that CPU)."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kp.npy"
        env = {**os.environ, **ONE_THREAD}
        cmd = [sys.executable, "-c", TP_WORKER, str(root), str(video), str(frames), str(batch)]
        r = subprocess.run([*cmd, str(out), mode], check=True, capture_output=True, text=True,
                           env=env, preexec_fn=pinned(core))  # fmt: skip
        info = json.loads(r.stdout.strip().splitlines()[-1])
        return np.load(out), info


def compare(ours, theirs) -> dict:
    import numpy as np

    both = ~np.isnan(ours[:, 0, 0]) & ~np.isnan(theirs[:, 0, 0])
    d = np.linalg.norm(ours[both, :, :2] - theirs[both, :, :2], axis=-1)
    per_frame = np.median(d, axis=1) if len(d) else np.zeros(0)
    return {
        "frames_both": int(both.sum()),
        "frames_only_tensorpose": int((~np.isnan(ours[:, 0, 0]) & ~both).sum()),
        "frames_only_mediapipe": int((~np.isnan(theirs[:, 0, 0]) & ~both).sum()),
        "median_px": float(np.median(d)) if d.size else None,
        "p95_px": float(np.percentile(d, 95)) if d.size else None,
        "frames_median_over_1px": int((per_frame > 1).sum()),
        "largest_frame_median_px": float(per_frame.max()) if len(per_frame) else None,
    }


LEGACY_CPU = "Intel(R) Xeon(R) Processor (2-core VM with AVX-512)"
"""The CPU of the runs written before the reports named theirs (docs/blazepose.md)."""


def other_runs(path: Path, report: dict) -> list[dict]:
    """The runs already in ``path`` (its newest and its ``other_runs``) on another CPU or with
    another thread pinning than ``report``: figures from both CPU kinds are kept side by side.
    A run that names no CPU is the Intel Xeon's of the docs, threads set by OMP only."""
    if not path.exists():
        return []
    old = json.loads(path.read_text())
    runs = [{k: v for k, v in old.items() if k != "other_runs"}, *old.get("other_runs", [])]
    for r in runs:
        r.setdefault("cpu", LEGACY_CPU)
        r.setdefault("pinned", "OMP_NUM_THREADS=1 only")
    return [r for r in runs if (r["cpu"], r["pinned"]) != (report["cpu"], report["pinned"])]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("videos", nargs="*", type=Path, default=DEFAULT_VIDEOS)
    p.add_argument("--frames", type=int, default=0, help="first N frames per video (0: all)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--venv", type=Path, default=peers_root() / "mediapipe",
                   help="MediaPipe's environment (default: the peer environments')")  # fmt: skip
    p.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)), help="the one CPU "
                   "both contenders run on, every thread of each (default: the last one this "
                   "process may use)")  # fmt: skip
    p.add_argument("--no-pin", action="store_true", help="leave the contenders' CPUs to the OS")
    p.add_argument("--find-links", type=Path, default=None, help="a folder holding the wheel")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--turns", type=int, default=2, help="timed runs of each contender, taking "
                   "turns (the frame rates are their medians)")  # fmt: skip
    p.add_argument("--baseline", type=Path, default=None, help="a folder holding an older "
                   "tensorpose package (e.g. `git archive <commit> tensorpose | tar -x -C DIR`), "
                   "timed in the same turns")  # fmt: skip
    p.add_argument("--mode", choices=("image", "video"), default="image", help="video: "
                   "MediaPipe's static_image_mode=False (tracking, smoothing) against "
                   "BlazePoseTracker, frame by frame")  # fmt: skip
    p.add_argument("--baseline-label", default=None, help="what --baseline is (e.g. a commit)")
    p.add_argument("--fixture", action="store_true", help=f"only record MediaPipe's landmarks "
                   f"on three bundled pictures into {FIXTURE.relative_to(ROOT)}")  # fmt: skip
    p.add_argument("--noise-floor", type=float, default=1e-4, help="also compare MediaPipe "
                   "with itself on frames where this share of the pixel values moved by one grey "
                   "level (0: skip)")  # fmt: skip
    a = p.parse_args(argv)
    if a.out == OUT and a.mode == "video":
        a.out = OUT.with_name("blazepose_vs_mediapipe_video_cpu.json")
    py = make_venv(a.venv, a.find_links)
    if a.fixture:
        record_fixture(py)
        return 0
    core = None if a.no_pin else a.core
    load0 = os.getloadavg()
    rows = []
    for video in a.videos:
        rates: dict[str, list[float]] = {"tensorpose": [], "mediapipe": [], "baseline": []}
        for _ in range(max(a.turns, 1)):  # contenders take turns: load changes hit them alike
            theirs, mp_info = run_mediapipe(py, video, a.frames, a.mode, core=core)
            ours, tp_info = run_tensorpose(ROOT, video, a.frames, a.batch_size, a.mode, core)
            rates["mediapipe"].append(mp_info["frames"] / mp_info["seconds"])
            rates["tensorpose"].append(tp_info["frames"] / tp_info["seconds"])
            if a.baseline is not None:
                _, b_info = run_tensorpose(a.baseline, video, a.frames, a.batch_size, a.mode,
                                           core)  # fmt: skip
                rates["baseline"].append(b_info["frames"] / b_info["seconds"])
        row = {"video": str(video), **compare(ours, theirs[: len(ours)])}
        if a.noise_floor > 0:
            noisy, _ = run_mediapipe(py, video, a.frames, a.mode, a.noise_floor, core)
            row["mediapipe_vs_itself"] = {"noise": a.noise_floor, **compare(noisy, theirs)}
        for k, v in rates.items():
            if v:
                row[f"{k}_frames_per_s"] = statistics.median(v)
        row["frames"] = tp_info["frames"]
        if row.get("mediapipe_frames_per_s"):
            row["ratio"] = row["tensorpose_frames_per_s"] / row["mediapipe_frames_per_s"]
        row["threads"] = {"tensorpose": tp_info.get("threads"), "mediapipe": mp_info.get("threads")}
        row["cpus"] = {"tensorpose": tp_info.get("cpus"), "mediapipe": mp_info.get("cpus")}
        rows.append(row)
        print(f"{video.name}: {row['frames_both']}/{row['frames']} frames both, median "
              f"{row['median_px']:.2f} px, p95 {row['p95_px']:.2f} px; tensorpose "
              f"{row['tensorpose_frames_per_s']:.1f} frames/s, MediaPipe "
              f"{row['mediapipe_frames_per_s']:.1f} frames/s (one thread each)")  # fmt: skip
        if "mediapipe_vs_itself" in row:
            f = row["mediapipe_vs_itself"]
            print(f"  MediaPipe against itself (one grey level on {a.noise_floor:g} of the "
                  f"values): "
                  f"median {f['median_px']:.2f} px, p95 {f['p95_px']:.2f} px")  # fmt: skip
        if rates["baseline"]:
            print(f"  baseline tensorpose {row['baseline_frames_per_s']:.1f} frames/s")
    pinning = "OMP_NUM_THREADS=1 only"
    if core is not None:
        pinning = (f"both contenders confined to CPU {core} (os.sched_setaffinity), "
                   "OMP/MKL/OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1), "
                   "cv2.setNumThreads(1)")  # fmt: skip
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    report = {
        "what": f"tensorpose BlazePose {a.mode} mode vs mediapipe==0.10.14 mp.solutions.pose "
        f"(static_image_mode={a.mode == 'image'}, model_complexity=1), landmark pixel distance",
        "machine": platform.processor() or platform.machine(),
        "cpu": cpu_model(),
        "pinned": pinning,
        "mediapipe_constraints": str(constraints_file("mediapipe").relative_to(ROOT)),
        "ratio_median": statistics.median(ratios) if ratios else None,
        "load_average": os.getloadavg(),
        "load_average_start": load0,
        "threads": 1,
        "turns": a.turns,
        "baseline": (a.baseline_label or str(a.baseline)) if a.baseline else None,
        "mode": a.mode,
        "videos": rows,
    }
    report["other_runs"] = other_runs(a.out, report)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
