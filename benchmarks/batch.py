"""``tensorpose batch``: throughput with 1 and 2 model workers, a two-node Ray cluster on this
machine, and Ray's fixed cost against the sequential loop on one small recording.

The recordings are copies of the first ``--frames`` frames of ``--cameras`` cameras of the
bundled balancing trial (``examples/balancing_trial``, re-encoded), in Pose2Sim's batch
layout with the calibration at session level. Every run is a fresh ``python -m tensorpose
batch ... --quiet`` process (Ray's start, the model's load, decoding, BlazePose, triangulation,
the outputs: all a user waits for), with ``OMP_NUM_THREADS=1`` and ``--threads 1``; the outputs
and digests are removed before each run so that every recording runs. The contenders take
turns within each round; the median over the rounds, with the load average before and after.

    python benchmarks/batch.py [--recordings 4] [--cameras 2] [--frames 24] [--repeats 2]

Writes ``benchmarks/results/batch_cpu.json`` (``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "balancing_trial"
RESULTS = ROOT / "benchmarks" / "results"
CAMS = ("cam01", "cam02", "cam04", "cam03")
OUTPUTS = ("pose", "sync", "pose-3d", "kinematics")


def make_batch(root: Path, recordings: int, cameras: int, frames: int) -> None:
    """``recordings`` trials of the balancing trial's first ``frames`` frames."""
    (root / "S01" / "calibration").mkdir(parents=True)
    shutil.copy(EXAMPLE / "Calib.qca.txt", root / "S01" / "calibration")
    first = root / "S01" / "P01" / "T1" / "videos"
    first.mkdir(parents=True)
    for cam in CAMS[:cameras]:  # a few cameras
        cap = cv2.VideoCapture(str(EXAMPLE / "videos" / f"{cam}.mp4"))
        writer = None
        for _ in range(frames):  # a few frames
            _, frame = cap.read()
            if writer is None:
                h, w = frame.shape[:2]
                writer = cv2.VideoWriter(str(first / f"{cam}.mp4"), cv2.VideoWriter_fourcc(*"mp4v"),
                                         cap.get(cv2.CAP_PROP_FPS), (w, h))  # fmt: skip
            writer.write(frame)
        writer.release()
    for i in range(1, recordings):  # copies
        shutil.copytree(first, root / "S01" / f"P0{1 + i // 3}" / f"T{1 + i % 3}" / "videos")


def clean(root: Path) -> None:
    """Every output and digest removed: the next run runs every recording."""
    for trial in root.glob("S01/P*/T*"):
        for name in OUTPUTS:
            shutil.rmtree(trial / name, ignore_errors=True)
            (trial / f"{name}.digest.json").unlink(missing_ok=True)


def run(root: Path, args: list[str], env: dict) -> dict:
    clean(root)
    cmd = [sys.executable, "-m", "tensorpose", "batch", str(root), "--quiet", "--threads", "1",
           *args]  # fmt: skip
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    report = json.loads((root / "batch.json").read_text())
    if p.returncode != 0 or report["failed"]:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return {"wall_s": wall, "frames": report["frames"], "report": report}


def ray_cli(*args: str, env: dict) -> str:
    ray = Path(sys.executable).parent / "ray"
    p = subprocess.run([str(ray), *args], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"ray {' '.join(args)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def two_nodes(root: Path, env: dict, steps: str) -> dict:
    """A head node and a second node (its own CPU and a resource of its own) on this machine,
    then ``batch --address`` with 2 model workers: which nodes ran the models."""
    port = "6399"
    env = {**env, "RAY_AUTH_MODE": "token"}  # `ray start --head` makes a token: every node uses it
    ray_cli("start", "--head", "--port", port, "--num-cpus", "1", "--include-dashboard=false",
            "--disable-usage-stats", env=env)  # fmt: skip
    try:
        ray_cli("start", "--address", f"127.0.0.1:{port}", "--num-cpus", "1", "--resources",
                '{"second_node": 1}', env=env)  # fmt: skip
        got = run(root, ["--address", f"127.0.0.1:{port}", "--workers", "2", "--steps", steps],
                  env)  # fmt: skip
    finally:
        ray_cli("stop", env=env)
    r = got["report"]
    return {"wall_s": round(got["wall_s"], 2), "frames": got["frames"], "nodes": r["nodes"],
            "nodes_running_the_model": len({d.get("node") for d in r["done"]}),
            "done": len(r["done"]), "failed": len(r["failed"])}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recordings", type=int, default=4)
    ap.add_argument("--cameras", type=int, default=2)
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", default="predict,triangulate")
    ap.add_argument("--json", default=str(RESULTS / "batch_cpu.json"), help="results file")
    args = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        many, one = Path(tmp) / "many", Path(tmp) / "one"
        make_batch(many, args.recordings, args.cameras, args.frames)
        make_batch(one, 1, args.cameras, 6)
        contenders = {
            "ray, 1 model worker": (many, ["--workers", "1", "--cpus", "2"]),
            "ray, 2 model workers": (many, ["--workers", "2", "--cpus", "2"]),
            "sequential (--local)": (many, ["--local"]),
            "one small recording, ray": (one, ["--workers", "1", "--cpus", "2"]),
            "one small recording, sequential": (one, ["--local"]),
        }
        walls: dict[str, list[float]] = {k: [] for k in contenders}
        frames = {}
        for _ in range(args.repeats):  # rounds: the contenders take turns
            for name, (root, extra) in contenders.items():  # each once per round
                got = run(root, [*extra, "--steps", args.steps], env)
                walls[name].append(got["wall_s"])
                frames[name] = got["frames"]
                print(f"{name}: {got['wall_s']:.1f} s, {got['frames']} frames", flush=True)
        cluster = two_nodes(many, env, args.steps)
        print(f"two nodes: {cluster}", flush=True)
    load1 = os.getloadavg()
    med = {k: statistics.median(v) for k, v in walls.items()}
    rows = {k: {"median_s": round(med[k], 2), "runs_s": [round(x, 2) for x in v],
                "frames": frames[k], "frames_per_s": round(frames[k] / med[k], 2)}
            for k, v in walls.items()}  # fmt: skip
    payload = {
        "what": "tensorpose batch: whole-command wall time, fresh processes taking turns",
        "command": "python benchmarks/batch.py " + " ".join(sys.argv[1:]),
        "recordings": args.recordings, "cameras": args.cameras, "frames": args.frames,
        "steps": args.steps, "repeats": args.repeats, "cpus": os.cpu_count(),
        "threads_per_worker": 1, "machine": platform.machine(), "python": platform.python_version(),
        "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in load1],
        "results": rows,
        "speedup_2_workers_over_1": round(med["ray, 1 model worker"]
                                          / med["ray, 2 model workers"], 3),
        "ray_over_sequential_many": round(med["ray, 2 model workers"]
                                          / med["sequential (--local)"], 3),
        "ray_fixed_cost_s_one_small_recording": round(
            med["one small recording, ray"] - med["one small recording, sequential"], 2),
        "two_nodes": cluster,
    }  # fmt: skip
    for k, r in rows.items():
        print(f"{k:34s} {r['median_s']:7.1f} s  {r['frames_per_s']:6.2f} frames/s")
    print(f"2 workers / 1 worker: {payload['speedup_2_workers_over_1']}x; Ray's fixed cost on one "
          f"small recording: {payload['ray_fixed_cost_s_one_small_recording']} s; load "
          f"{load0[0]:.1f} -> {load1[0]:.1f}")  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    Path(args.json).write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
