"""Time and peak memory of ``tensorpose triangulate`` on long recordings.

The long recordings are the bundled balancing trial (four cameras, 100 frames of OpenPose
BODY_25B JSON at 60 fps) played forwards and backwards (frames 0..99, 98..1, 0..99, ...: the
motion stays continuous, so the people keep their identities) up to ``T`` frames, one JSON
file per frame and camera, as hard links to the trial's files (a folder of ``4 T`` files that
costs no disk space). Made once under ``--folders`` and kept.

Each case runs in a fresh child process with one thread, so that its peak resident memory
(``ru_maxrss``) is its own; no picture is drawn (``plot=False``):

* ``read``: every JSON file parsed, a chunk at a time (what the triangulation reads);
* ``single``: ``triangulate_folder`` (one person, the default);
* ``people``: ``triangulate_folder(people="auto")``.

``--code`` times another checkout's ``tensorpose`` (e.g. the code before chunking, ``--label
before``); rows of other labels already in the results file are kept. Prints a table and writes
``benchmarks/results/triangulate_scale_cpu.json`` with the load average:

    python benchmarks/triangulate_scale.py --frames 100 1000 5000 20000 [--cases single people]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import run_child

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "triangulate_scale_cpu.json"
TRIAL = ROOT / "tensorpose" / "assets" / "tracks" / "openpose_body25b"


def source_frame(t: int, n: int) -> int:
    """Frame of an ``n``-frame trial shown at time ``t`` when played forwards and backwards."""
    k = t % (2 * n - 2)
    return k if k < n else 2 * n - 2 - k


def make_recording(root: Path, T: int) -> Path:
    """``root/T<T>/``: ``T`` frames per camera (hard links to the trial's JSON files) and the
    calibration; reused when complete."""
    folder = root / f"T{T}"
    cams = sorted(TRIAL.glob("cam*_json"))
    done = folder / ".complete"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(TRIAL / "Calib.qca.txt", folder / "Calib.qca.txt")
    for cam in cams:  # four cameras
        files = sorted(cam.glob("*.json"))
        out = folder / cam.name
        out.mkdir()
        for t in range(T):  # one link per frame
            os.link(files[source_frame(t, len(files))], out / f"{cam.name[:5]}.{t:07d}.json")
    done.write_text("ok\n")
    return folder


CHILD = r"""
import json, resource, sys, tempfile, time
sys.path.insert(0, sys.argv[3])
from tensorpose.threads import set_threads
set_threads(1)
import torch
case, folder = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if case == "read":
    from tensorpose.multiview.recording import CHUNK_FRAMES, open_recording
    rec = open_recording(folder, folder + "/Calib.qca.txt")
    people = 0
    for start in range(0, rec.frames, CHUNK_FRAMES):  # the chunks the triangulation reads
        frames = rec.read(start, min(start + CHUNK_FRAMES, rec.frames))
        people += sum(len(f) for cam in frames for f in cam)
    what = {"frames": rec.frames, "detections": people, "layout": rec.layout}
else:
    from tensorpose.apps.triangulate import triangulate_folder
    with tempfile.TemporaryDirectory() as out:
        kw = {"people": "auto"} if case == "people" else {}
        kw["fps"] = 60.0  # the trial's rate
        r = triangulate_folder(folder, folder + "/Calib.qca.txt", out, plot=False, **kw)
    per = r.get("people", [r])
    what = {"frames": r["frames"], "people": len(per),
            "valid_fraction": [p["valid_fraction"] for p in per]}
sec = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": sec, "peak_rss_bytes": rss, **what}))
"""


def run_case(case: str, folder: Path, code: Path, timeout: float) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", CHILD, case, str(folder), str(code)]
    return run_child(cmd, env, timeout, 160)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, nargs="+", default=[100, 1000, 5000, 20000])
    ap.add_argument("--cases", nargs="+", default=["read", "single", "people"],
                    choices=["read", "single", "people"])  # fmt: skip
    ap.add_argument("--label", default="after", help="which code is measured (before / after)")
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose tensorpose is timed")
    ap.add_argument("--folders", type=Path, default=Path(tempfile.gettempdir()) / "tp_scale",
                    help="where the long recordings are made (kept for the next run)")  # fmt: skip
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per case")
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()
    rows = []
    print(f"{'label':<7} {'case':<7} {'T':>7} {'seconds':>9} {'us/frame':>9} {'peak MiB':>9}"
          "  load")  # fmt: skip
    for T in a.frames:
        folder = make_recording(a.folders, T)
        for case in a.cases:
            r = {"label": a.label, "case": case, "T": T,
                 **run_case(case, folder, a.code, a.timeout),
                 "load_average_1min": os.getloadavg()[0]}  # fmt: skip
            rows.append(r)
            if r["status"] != "ok":
                print(f"{a.label:<7} {case:<7} {T:>7}  {r['status']}", flush=True)
                continue
            print(f"{a.label:<7} {case:<7} {T:>7} {r['seconds']:9.2f} "
                  f"{r['seconds'] / T * 1e6:9.0f} {r['peak_rss_bytes'] / 2**20:9.0f}  "
                  f"{r['load_average_1min']:.2f}", flush=True)  # fmt: skip
    if a.no_save:
        return
    old = json.loads(RESULTS.read_text())["rows"] if RESULTS.exists() else []
    new = {(r["label"], r["case"], r["T"]) for r in rows}
    keep = [r for r in old if (r["label"], r["case"], r["T"]) not in new]
    payload = {
        "benchmark": "triangulate_scale",
        "device": "cpu",
        "threads": 1,
        "cpu_count": os.cpu_count(),
        "rows": sorted(keep + rows, key=lambda r: (r["label"], r["case"], r["T"])),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
