"""tensorpose sync against Pose2Sim's synchronisation (the registry package, in its own
environment), one thread each, on the bundled balancing trial with cameras made to start at
other instants.

    python benchmarks/peers/pose2sim_sync.py [--pose2sim-python PY] [--rounds 3]

Each case is a copy of the trial's OpenPose tracks (BODY_25B, 4 cameras, 100 frames at 60 fps)
where camera ``c`` keeps its frames from ``starts[c]`` on, renumbered from 0: its delay
against cam01 is then ``starts[c] - starts[cam01]`` frames on top of the original's own (the
original itself is not quite in step; ``docs/triangulation.md``). The delays each tool finds
on a shifted copy, minus those it finds on the original, are compared with the shifts made.

- Pose2Sim 0.10.49 (``peer_env.py``: created on first use; or ``--pose2sim-python PY``):
  ``Pose2Sim.synchronization()`` with its demo ``Config.toml`` (``pose_model = 'BODY_25B'``,
  ``frame_rate = 60``, ``synchronization_gui = false``, no plots, every other setting its
  default: all keypoints, the whole sequence, likelihood 0.4, 6 Hz). Its offsets are read from
  its log (``--> Camera A and B: N frames offset``) against its reference camera (the one with
  the fewest frames) and turned into delays against cam01 (``delay = -offset``).
- tensorpose: ``tensorpose sync TRACKS --fps 60`` without and with ``--calib``.

Timed: the whole command in a fresh process each, the contenders taking turns in every round
(median over rounds), ``OMP/MKL/OPENBLAS_NUM_THREADS=1``. Writes the ``pose2sim_sync`` entry
of ``benchmarks/results/peers_cpu.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_env import cpu_model, peer_python, peer_version, write_result  # noqa: E402
from pose2sim_triangulation import load, run  # noqa: E402

TRACKS = ROOT / "tensorpose/assets/tracks/openpose_body25b"
CAMERAS = ["cam01_json", "cam02_json", "cam03_json", "cam04_json"]
CASES = {  # frames dropped at the start of each camera
    "original": [0, 0, 0, 0],
    "cam02 +7, cam04 -5": [5, 12, 5, 0],
    "cam02 -3, cam03 +10, cam04 +6": [10, 7, 20, 16],
    "cam02 +15, cam03 -10, cam04 +4": [10, 25, 0, 14],
}

SETUP = """
import os, sys, rtoml, Pose2Sim
project = sys.argv[1]
c = rtoml.load(open(os.path.join(os.path.dirname(Pose2Sim.__file__), "Demo_SinglePerson",
                                 "Config.toml")))
c["project"].update(project_dir=project, frame_rate=60, multi_person=False)
c["pose"]["pose_model"] = "BODY_25B"
c["synchronization"].update(synchronization_gui=False, display_sync_plots=False,
                            save_sync_plots=False)
rtoml.dump(c, open(os.path.join(project, "Config.toml"), "w"))
"""

POSE2SIM = "from Pose2Sim import Pose2Sim as P; P.synchronization()"
OFFSET = re.compile(r"--> Camera (\S+) and (\S+): (-?\d+) frames offset")


def make_case(root: Path, name: str, starts: list[int], py: str) -> Path:
    """A Pose2Sim project whose ``pose/`` holds the shifted copy; tensorpose reads the same."""
    project = root / re.sub(r"\W+", "_", name)
    for cam, start in zip(CAMERAS, starts, strict=True):
        (project / "pose" / cam).mkdir(parents=True)
        for i, f in enumerate(sorted((TRACKS / cam).glob("*.json"))[start:]):
            shutil.copy(f, project / "pose" / cam / f"{cam[:5]}.{i:04d}.json")
    shutil.copy(TRACKS / "Calib.qca.txt", project / "pose")
    run([py, "-c", SETUP, str(project)], cwd=project)
    return project


def pose2sim_delays(project: Path, py: str) -> tuple[dict[str, int], float]:
    """Pose2Sim's delays against cam01 (frames) and the command's wall time."""
    shutil.rmtree(project / "pose-sync", ignore_errors=True)
    t0 = time.perf_counter()
    run([py, "-c", POSE2SIM], cwd=project)
    seconds = time.perf_counter() - t0
    log = (project / "logs.txt").read_text()
    found = OFFSET.findall(log.split("Camera synchronization")[-1])
    ref = found[0][0]
    delay = {ref: 0} | {cam: -int(offset) for _, cam, offset in found}
    return {f"{cam}_json": delay[cam] - delay["cam01"] for cam in delay}, seconds


def tensorpose_delays(project: Path, calib: bool) -> tuple[dict[str, float], float]:
    """``tensorpose sync``'s delays against cam01 (whole frames, as ``triangulate --sync``
    applies them, and fractional) and the command's wall time."""
    out = project / ("tp_calib" if calib else "tp")
    argv = [sys.executable, "-m", "tensorpose", "sync", str(project / "pose"), "--fps", "60",
            "--out", str(out), "--overwrite"]  # fmt: skip
    if calib:
        argv += ["--calib", str(project / "pose" / "Calib.qca.txt")]
    t0 = time.perf_counter()
    run(argv, env={"PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - t0
    sync = json.loads((out / "sync.json").read_text())
    whole, d = sync["delays"], sync["delays_fractional"]
    return {cam: whole[cam] - whole["cam01_json"] for cam in d} | {
        f"{cam} fractional": d[cam] - d["cam01_json"] for cam in d
    }, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pose2sim-python", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    py = args.pose2sim_python or str(
        peer_python("pose2sim", [["pose2sim==0.10.49"]], "import Pose2Sim.synchronization")
    )
    load_before = load()
    cases, seconds = {}, {"pose2sim": [], "tensorpose": [], "tensorpose --calib": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name, starts in CASES.items():
            project = make_case(Path(tmp), name, starts, py)
            made = {cam: s - starts[0] for cam, s in zip(CAMERAS, starts, strict=True)}
            found = {}
            for r in range(args.rounds):  # the contenders take turns
                for tool in seconds:
                    if tool == "pose2sim":
                        d, s = pose2sim_delays(project, py)
                    else:
                        d, s = tensorpose_delays(project, calib=tool.endswith("calib"))
                    found[tool] = d
                    seconds[tool].append(s)
                    print(f"{name:32s} round {r} {tool:20s} {s:6.2f} s", file=sys.stderr)
            cases[name] = {"made": made, "found": found}
    base = cases["original"]["found"]
    print("on the original:", base)
    for case in cases.values():
        case["found_minus_original"] = {
            tool: {cam: round(d[cam] - base[tool][cam], 2) for cam in CAMERAS}
            for tool, d in case["found"].items()
        }
        case["frames_off"] = {
            tool: {cam: round(abs(diff[cam] - case["made"][cam]), 2) for cam in CAMERAS}
            for tool, diff in case["found_minus_original"].items()
        }
        case["fractional_off"] = {
            tool: {
                cam: round(
                    abs(
                        d[f"{cam} fractional"] - base[tool][f"{cam} fractional"] - case["made"][cam]
                    ),
                    2,
                )
                for cam in CAMERAS
            }
            for tool, d in case["found"].items()
            if tool != "pose2sim"
        }
    entry = {
        "command": "python benchmarks/peers/pose2sim_sync.py",
        "cpu": cpu_model(),
        "load_average": [load_before, load()],
        "pose2sim": peer_version(Path(py), "pose2sim"),
        "threads": 1,
        "rounds": args.rounds,
        "cases": cases,
        "seconds_median": {tool: round(statistics.median(s), 3) for tool, s in seconds.items()},
    }
    write_result("pose2sim_sync", entry)
    for name, case in cases.items():
        print(name, "made", case["made"], "fractional off", case["fractional_off"])
        for tool, off in case["frames_off"].items():
            print(f"  {tool:20s} found-original {case['found_minus_original'][tool]}  off {off}")
    print("median seconds", entry["seconds_median"], "load", entry["load_average"])


if __name__ == "__main__":
    main()
