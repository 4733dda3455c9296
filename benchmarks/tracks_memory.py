"""Peak memory and time of reading 2D tracks with one spurious detection per frame.

Each frame holds one real person (25 keypoints, walking slowly) and one spurious detection of a
single keypoint at a random place: what a detector's false positives look like. Before the
evidence rule of :func:`tensorpose.io.openpose.link_tracks`, each spurious detection started a
track of its own, every track stayed in the matching and the result was ``(T, T, K, 3)``.

Two cases per frame count ``T``, each in a fresh child process (one thread) so that its peak
resident memory (``ru_maxrss``) is its own, under an address-space limit (``--limit-gib``) and a
time limit (``--timeout``):

* ``link``: ``link_tracks`` on the ``T`` frames as arrays (what every reader calls);
* ``read``: ``read_tracks`` on an OpenPose folder of ``T`` JSON files (what ``smooth`` and
  ``lift`` call; the folder is written once per ``T``, outside the timing).

and four cases of ``triangulate`` on a synthetic multi-camera recording of ``T`` frames
(:mod:`benchmarks.scene_people`, generated a chunk at a time, so the input takes no memory):

* ``restarts-one`` / ``restarts-auto``: one person whose track restarts every 100 frames (it
  jumps 3 m), triangulated as ``triangulate`` does (the person most cameras see longest) and as
  ``triangulate --people auto`` does;
* ``crowd-one`` / ``crowd-auto``: a crowd of 60 people on a 1.5 m grid, the same two ways.

A case that ends in an error (a refusal, or a MemoryError under the address-space limit) reports
its peak memory and the error's line.

Prints a table and writes ``benchmarks/results/tracks_memory_cpu.json`` (with the load average;
``--label`` names the code measured, rows of other labels already in the file are kept):

    python benchmarks/tracks_memory.py [--frames 1000 10000 100000] [--label after]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np

from benchmarks.common import run_child

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "tracks_memory_cpu.json"
K = 25
CASES = ["link", "read", "restarts-one", "restarts-auto", "crowd-one", "crowd-auto"]


def make_frames(T: int, seed: int = 0) -> list[np.ndarray]:
    """Per frame ``(2, K, 3)``: a walking person and a one-keypoint spurious detection."""
    rng = np.random.default_rng(seed)
    angles = np.linspace(0, 2 * np.pi, K, endpoint=False)
    ring = 60.0 * np.column_stack([np.cos(angles), np.sin(angles)])  # (K, 2)
    t = np.arange(T)
    center = np.column_stack([500 + 200 * np.sin(t / 300), 400 + 100 * np.cos(t / 500)])
    out = np.zeros((T, 2, K, 3))
    out[:, 0, :, :2] = center[:, None] + ring + rng.normal(0, 1.0, (T, K, 2))
    out[:, 0, :, 2] = 0.9
    joint = rng.integers(0, K, T)
    out[t, 1, joint, :2] = rng.uniform(0, 1000, (T, 2))
    out[t, 1, joint, 2] = 0.5
    return list(out)


def write_folder(folder: Path, frames: list[np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for t, f in enumerate(frames):
        people = [{"pose_keypoints_2d": [round(float(v), 3) for v in p.ravel()]} for p in f]
        (folder / f"f{t:06d}.json").write_text(json.dumps({"version": 1.3, "people": people}))


CHILD = r"""
import resource, sys, time, json
from pathlib import Path
import numpy as np, torch
torch.set_num_threads(1)
limit = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.path.insert(0, sys.argv[4])
sys.path.insert(0, sys.argv[5])
import tensorpose  # the checkout measured (importing tracks_memory puts this one first)
from tracks_memory import make_frames
case, arg = sys.argv[1], sys.argv[2]
outcome = "ok"
if case in ("restarts-one", "restarts-auto", "crowd-one", "crowd-auto"):
    from scene_people import SceneCameras
    from tensorpose.multiview import people as P
    cams = (SceneCameras(int(arg), 1, 100) if case.startswith("restarts")
            else SceneCameras(int(arg), 60))
    t0 = time.perf_counter()
    try:
        if case.endswith("one"):
            tri, found, taken = P.triangulate_cameras_one(cams)
            shape = (len(found), *tri.points.shape)
        else:
            tris = P.triangulate_cameras_people(cams)
            shape = (len(tris), *tris[0].points.shape)
    except Exception as e:  # a refusal, or out of memory under the limit
        shape, outcome = None, f"{type(e).__name__}: {e}"[:200]
elif case == "link":
    from tensorpose.io.openpose import link_tracks
    frames = make_frames(int(arg))
    t0 = time.perf_counter()
    out = link_tracks(frames)
    shape = tuple(out.shape)
else:
    from tensorpose.io.tracks import read_tracks
    t0 = time.perf_counter()
    tr = read_tracks(arg, layout="BODY_25B")
    shape = tuple(tr.raw.shape)
sec = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": sec, "peak_rss_bytes": rss, "shape": shape, "outcome": outcome,
                  "code": str(Path(tensorpose.__file__).parents[1])}))
"""


def run_case(case: str, arg: str, code: Path, limit: int, timeout: float) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", CHILD, case, arg, str(limit), str(code),
           str(Path(__file__).resolve().parent)]  # fmt: skip
    return run_child(cmd, env, timeout, 120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--cases", nargs="+", default=["link", "read"], choices=CASES)
    ap.add_argument("--label", default="after", help="which code is measured (before / after)")
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose tensorpose is timed")
    ap.add_argument("--limit-gib", type=float, default=6.0, help="address-space limit per case")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()
    limit = int(a.limit_gib * 2**30)
    rows = []
    print(f"{'label':<8} {'case':<5} {'T':>7} {'seconds':>9} {'peak RSS MiB':>13}  shape / status")
    for T in a.frames:
        with tempfile.TemporaryDirectory() as tmp:
            if "read" in a.cases:
                write_folder(Path(tmp) / "json", make_frames(T))
            for case in a.cases:
                arg = str(Path(tmp) / "json") if case == "read" else str(T)
                r = {"label": a.label, "case": case, "frames": T,
                     **run_case(case, arg, a.code, limit, a.timeout),
                     "load_average": os.getloadavg()}  # fmt: skip
                rows.append(r)
                sec = f"{r['seconds']:9.2f}" if r.get("seconds") is not None else "        -"
                rss = r.get("peak_rss_bytes")
                mib = f"{rss / 2**20:13.0f}" if rss else "            -"
                what = (
                    r["status"]
                    if r["status"] != "ok"
                    else (r["shape"] if r.get("outcome", "ok") == "ok" else r["outcome"])
                )
                print(f"{a.label:<8} {case:<5} {T:>7} {sec} {mib}  {what}", flush=True)
    if a.no_save:
        return
    old = json.loads(RESULTS.read_text())["rows"] if RESULTS.exists() else []
    keep = [r for r in old if r.get("label") != a.label]
    payload = {
        "benchmark": "tracks_memory",
        "device": "cpu",
        "threads": 1,
        "address_space_limit_gib": a.limit_gib,
        "timeout_s": a.timeout,
        "load_average": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "rows": keep + rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
