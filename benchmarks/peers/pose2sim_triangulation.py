"""tensorpose triangulate against Pose2Sim (the registry package, in its own environment), one
thread each, on the bundled balancing trial and on ``synthetic_two_people``.

    python benchmarks/peers/pose2sim_triangulation.py [--pose2sim-python PY] [--rounds 3]

Pose2Sim runs in a subprocess of its own environment (``peer_env.py``: created by this script on
first use, ``pose2sim==0.10.49``; or ``--pose2sim-python PY``)
with ``OMP/MKL/OPENBLAS_NUM_THREADS=1``; tensorpose in a subprocess too, with one torch
thread. Each trial gets a temporary Pose2Sim project (``Config.toml`` from Pose2Sim's own
``Demo_SinglePerson`` with ``pose_model = 'BODY_25B'``, ``frame_rate = 60``, ``multi_person``
for the two-person trial; ``calibration/`` with the trial's ``Calib.qca.txt`` converted once by
``Pose2Sim.calibration()``, untimed; ``pose/camNN_json``).

Timed, the contenders taking turns in every round (median over rounds):

- folder run: in one warm process, ``Pose2Sim.personAssociation()`` +
  ``Pose2Sim.triangulation()`` (``make_c3d = false``) against
  ``tensorpose.apps.triangulate.triangulate_folder(..., plot=False)`` (association and
  triangulation, JSON in, TRC/NPZ out), median of ``--repeats`` after a warm-up;
- whole command: a fresh process each, Pose2Sim's two steps with its default config (c3d
  files too) against ``python -m tensorpose triangulate ... --threads 1`` (its PNG too).

Then the 3D difference per person between Pose2Sim's TRC and tensorpose's (both in Pose2Sim's
Y-up axes; frames matched by time, markers by name, persons by the smallest median
distance), for ``--drop-rule pose2sim`` and for the default rule; and both rules' reprojection
error, cameras per joint, limb-length std and acceleration on the same detections (with a
bootstrap over frames of the limb-length std difference). Writes the ``pose2sim_triangulation``
entry of ``benchmarks/results/peers_cpu.json``.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_env import cpu_model, peer_python, write_result  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "tracks"
TRIALS = {
    "balancing": {"tracks": ROOT / "tensorpose/assets/tracks/openpose_body25b", "people": None,
                  "videos": ROOT / "examples/balancing_trial/videos"},
    "synthetic_two_people": {"tracks": SHARED / "synthetic_two_people", "people": "auto"},
}  # fmt: skip
RULES = {"pose2sim": "pose2sim", "default": "leave_one_out"}
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

SETUP = """
import os, sys, rtoml, Pose2Sim
from Pose2Sim import Pose2Sim as P
project, multi = sys.argv[1], sys.argv[2] == "1"
c = rtoml.load(open(os.path.join(os.path.dirname(Pose2Sim.__file__), "Demo_SinglePerson",
                                 "Config.toml")))
c["project"].update(project_dir=project, frame_rate=60, multi_person=multi)
c["pose"]["pose_model"] = "BODY_25B"
c["calibration"]["calibration_type"] = "convert"
c["calibration"]["convert"]["convert_from"] = "qualisys"
rtoml.dump(c, open(os.path.join(project, "Config.toml"), "w"))
P.calibration()
"""

POSE2SIM_FOLDER = """
import json, logging, sys, time, rtoml
from Pose2Sim import Pose2Sim as P
config = rtoml.load(open("Config.toml"))
config["triangulation"]["make_c3d"] = False
config["project"]["project_dir"] = sys.argv[1]
seconds = []
for i in range(int(sys.argv[2]) + 1):  # a warm-up, then the timed runs
    t0 = time.perf_counter()
    P.personAssociation(config)
    P.triangulation(config)
    seconds.append(time.perf_counter() - t0)
    logging.getLogger().handlers.clear()
print("RESULT", json.dumps(seconds[1:]))
"""

TENSORPOSE_FOLDER = """
import json, sys, time, torch
torch.set_num_threads(1)
from tensorpose.apps.triangulate import triangulate_folder
tracks, out, people, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
seconds = {}
for rule in ("leave_one_out", "pose2sim"):
    s = []
    for i in range(repeats + 1):  # a warm-up, then the timed runs
        t0 = time.perf_counter()
        triangulate_folder(tracks, tracks + "/Calib.qca.txt", out + "/" + rule, fps=60,
                           people=None if people == "none" else people, drop=rule,
                           plot=False, overwrite=True)
        s.append(time.perf_counter() - t0)
    seconds[rule] = s[1:]
print("RESULT", json.dumps(seconds))
"""

POSE2SIM_WHOLE = "from Pose2Sim import Pose2Sim as P; P.personAssociation(); P.triangulation()"


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> str:
    """Run a command with one thread per library; its stdout (stderr shown on failure)."""
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, **ONE_THREAD, **(env or {})})  # fmt: skip
    if r.returncode:
        raise RuntimeError(f"{argv[:3]} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def result(stdout: str):
    return json.loads(next(ln for ln in stdout.splitlines() if ln.startswith("RESULT"))[7:])


def make_project(root: Path, name: str, trial: dict, py: str) -> Path:
    """A Pose2Sim project for ``trial`` (the calibration converted by Pose2Sim)."""
    project = root / name
    (project / "calibration").mkdir(parents=True)
    shutil.copy(trial["tracks"] / "Calib.qca.txt", project / "calibration")
    for cam in sorted(trial["tracks"].glob("cam*_json")):  # the four cameras
        shutil.copytree(cam, project / "pose" / cam.name)
    run([py, "-c", SETUP, str(project), "1" if trial["people"] else "0"], cwd=project)
    return project


def tensorpose_cli(trial: dict, out: Path, rule: str) -> list[str]:
    tracks = str(trial["tracks"])
    people = ["--people", trial["people"]] if trial["people"] else []
    return [sys.executable, "-m", "tensorpose", "triangulate", tracks, "--calib",
            f"{tracks}/Calib.qca.txt", "--out", str(out), "--fps", "60", "--threads", "1",
            "--overwrite", "--drop-rule", rule, *people]  # fmt: skip


def time_trial(project: Path, trial: dict, py: str, rounds: int, repeats: int, tmp: Path):
    """Folder runs and whole commands, the contenders taking turns in each round."""
    folder = {"pose2sim": [], "tensorpose default": [], "tensorpose pose2sim mode": []}
    whole = {"pose2sim": [], "tensorpose default": [], "tensorpose pose2sim mode": []}
    people = trial["people"] or "none"
    env = {"PYTHONPATH": str(ROOT)}
    for _ in range(rounds):  # the contenders take turns
        folder["pose2sim"] += result(run([py, "-c", POSE2SIM_FOLDER, str(project),
                                          str(repeats)], cwd=project))  # fmt: skip
        tp = result(run([sys.executable, "-c", TENSORPOSE_FOLDER, str(trial["tracks"]),
                         str(tmp / "folder"), people, str(repeats)], env=env))  # fmt: skip
        folder["tensorpose default"] += tp["leave_one_out"]
        folder["tensorpose pose2sim mode"] += tp["pose2sim"]
        for label, argv, cwd in (
            ("pose2sim", [py, "-c", POSE2SIM_WHOLE], project),
            ("tensorpose default", tensorpose_cli(trial, tmp / "tp_default", "tensorpose"), ROOT),
            ("tensorpose pose2sim mode", tensorpose_cli(trial, tmp / "tp_pose2sim", "pose2sim"),
             ROOT),
        ):  # fmt: skip
            t0 = time.perf_counter()
            run(argv, cwd=cwd, env=env)
            whole[label].append(time.perf_counter() - t0)
    med = {k: {key: statistics.median(v[key]) for key in v} for k, v in
           (("folder_s", folder), ("whole_command_s", whole))}  # fmt: skip
    for k in ("folder_s", "whole_command_s"):
        base = med[k]["pose2sim"]
        med[k.replace("_s", "_speedup")] = {key: base / v for key, v in med[k].items()}
    return med


# ----------------------------------------------------------------------------- differences
def read_trc(path: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Marker names, frame indices (from the time column at 60 fps) and ``(T, M, 3)``."""
    lines = path.read_text().splitlines()
    names = [n for n in lines[3].split("\t")[2:] if n.strip()]
    frames, rows = [], []
    for line in lines[5:]:  # the data rows
        cells = line.split("\t")
        if len(cells) < 2 or not cells[0].strip():
            continue
        frames.append(round(float(cells[1]) * 60))
        vals = [float(v) if v.strip() else np.nan for v in cells[2 : 2 + 3 * len(names)]]
        rows.append(vals + [np.nan] * (3 * len(names) - len(vals)))
    return names, np.array(frames), np.array(rows).reshape(len(rows), len(names), 3)


def distances(a: tuple, b: tuple) -> np.ndarray:
    """Per common frame and marker, the distance in mm (NaN where either is missing)."""
    (na, fa, xa), (nb, fb, xb) = a, b
    common = [n for n in na if n in nb]
    frames = np.intersect1d(fa, fb)
    ia, ib = np.searchsorted(fa, frames), np.searchsorted(fb, frames)
    A = xa[ia][:, [na.index(n) for n in common]]
    B = xb[ib][:, [nb.index(n) for n in common]]
    return np.linalg.norm(A - B, axis=-1) * 1000


def differences(p2s_dir: Path, tp_dir: Path) -> list[dict]:
    """Each Pose2Sim person against its nearest tensorpose person."""
    ours = {p.name: read_trc(p) for p in sorted(tp_dir.glob("*.trc"))}
    out = []
    for trc in sorted(p2s_dir.glob("*.trc")):  # Pose2Sim's people
        theirs = read_trc(trc)
        scored = {name: distances(theirs, x) for name, x in ours.items()}
        name = min(scored, key=lambda n: np.nanmedian(scored[n]))
        d = scored[name]
        ok = np.isfinite(d)
        only_p2s = int((np.isnan(d) & np.isfinite(distances(theirs, theirs))).sum())
        out.append({
            "pose2sim": trc.name, "tensorpose": name, "joint_frames": int(ok.sum()),
            "median_mm": float(np.median(d[ok])), "p90_mm": float(np.percentile(d[ok], 90)),
            "max_mm": float(d[ok].max()), "over_1mm": float((d[ok] > 1).mean()),
            "pose2sim_only_joint_frames": only_p2s,
        })  # fmt: skip
    return out


# ----------------------------------------------------------------------------- the two rules
def _limb_std(points: np.ndarray, names: list[str], common: np.ndarray) -> np.ndarray:
    """Per limb of :data:`tensorpose.multiview.recording.LIMBS`, the length std (mm) over
    ``common``."""
    from tensorpose.multiview.recording import LIMBS

    out = []
    for a, b in LIMBS:  # the eight limbs
        ia, ib = names.index(a), names.index(b)
        m = common[:, ia] & common[:, ib]
        lengths = np.linalg.norm(points[m, ia] - points[m, ib], axis=-1)
        out.append(lengths.std() * 1000 if m.sum() > 1 else np.nan)
    return np.array(out)


def _acceleration(points: np.ndarray, common: np.ndarray) -> float:
    """Median norm of the second difference over time (mm/frame^2) on ``common``."""
    x = np.where(common[..., None], points, np.nan) * 1000
    return float(np.nanmedian(np.linalg.norm(x[2:] - 2 * x[1:-1] + x[:-2], axis=-1)))


def _bootstrap(tris: dict, names: list[str], common: np.ndarray, n: int = 1000) -> dict:
    """Mean over limbs of the limb-length std, pose2sim minus default, over frames resampled
    with replacement: the 2.5, 50 and 97.5 percentiles (mm)."""
    g = np.random.default_rng(0)
    T = common.shape[0]
    diffs = []
    for _ in range(n):  # bootstrap resamples
        idx = g.integers(0, T, T)
        a = _limb_std(tris["pose2sim"].points[idx], names, common[idx]).mean()
        b = _limb_std(tris["default"].points[idx], names, common[idx]).mean()
        diffs.append(a - b)
    q = np.percentile(diffs, [2.5, 50, 97.5]).tolist()
    return dict(zip(("p2.5", "p50", "p97.5"), q, strict=True))


def rules(trial: dict) -> list[dict]:
    """Both rules on the same detections (no gap filling): per person, the figures of
    :func:`tensorpose.multiview.recording.summarize` and limb-length std / acceleration on the
    joint-frames
    valid under both rules."""
    import torch

    from tensorpose.multiview.people import triangulate_cameras_people
    from tensorpose.multiview.recording import LIMBS, read_cameras, summarize, triangulate_cameras

    torch.set_num_threads(1)
    tracks = trial["tracks"]
    cams = read_cameras(tracks, tracks / "Calib.qca.txt")
    if trial["people"]:
        per = {k: triangulate_cameras_people(cams, None, drop=d) for k, d in RULES.items()}
    else:
        per = {k: [triangulate_cameras(cams, drop=d)] for k, d in RULES.items()}
    out = []
    for i in range(len(per["default"])):  # each person (a handful)
        tris = {k: per[k][i] for k in RULES}
        names = tris["default"].names
        common = tris["default"].valid & tris["pose2sim"].valid
        person = {"joint_frames_valid_in_both": int(common.sum())}
        for k, tri in tris.items():  # the two rules
            s = summarize(tri)
            limbs = _limb_std(tri.points, names, common)
            person[k] = {
                "valid_fraction": s["valid_fraction"],
                "median_reprojection_px": s["median_reprojection_px"],
                "p90_reprojection_px": s["p90_reprojection_px"],
                "mean_cameras_used": s["mean_cameras_used"],
                "limb_std_mm": dict(zip([f"{a}-{b}" for a, b in LIMBS], limbs.tolist(),
                                        strict=True)),
                "limb_std_mean_mm": float(limbs.mean()),
                "acceleration_median_mm_per_frame2": _acceleration(tri.points, common),
            }  # fmt: skip
        person["limb_std_mean_difference_bootstrap_mm"] = _bootstrap(tris, names, common)
        out.append(person)
    return out


# ----------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--pose2sim-python",
        default=None,
        help="a Python with pose2sim (default: the peer environment, made once)",
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--trials", nargs="*", default=list(TRIALS))
    args = ap.parse_args()
    py = args.pose2sim_python or str(
        peer_python("pose2sim", [["pose2sim==0.10.49"]], "import Pose2Sim.triangulation")
    )
    version = run([py, "-c", "import importlib.metadata as m; print(m.version('pose2sim'))"])
    payload = {
        "machine": {"platform": platform.platform(), "cpu": cpu_model(), "cpus": os.cpu_count()},
        "threads": 1, "pose2sim_version": version.strip(), "load_before": load(),
        "trials": {},
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pose2sim_bench_") as tmp:
        tmp = Path(tmp)
        for name in args.trials:  # the two trials
            trial = TRIALS[name]
            project = make_project(tmp, name, trial, py)
            work = tmp / f"{name}_tp"
            timing = time_trial(project, trial, py, args.rounds, args.repeats, work)
            diff = {label: differences(project / "pose-3d", work / f"tp_{rule}")
                    for label, rule in (("pose2sim_mode", "pose2sim"),
                                        ("default", "default"))}  # fmt: skip
            payload["trials"][name] = {"tracks": str(trial["tracks"]), **timing,
                                       "difference_to_pose2sim": diff,
                                       "rules": rules(trial)}  # fmt: skip
            _print(name, payload["trials"][name])
    payload["load_after"] = load()
    path = write_result("pose2sim_triangulation", payload)
    print(f"load average {payload['load_before']:.2f} -> {payload['load_after']:.2f}; "
          f"wrote {path}")  # fmt: skip


def _print(name: str, r: dict) -> None:
    print(f"== {name}")
    for k in ("folder_s", "whole_command_s"):
        sp = r[k.replace("_s", "_speedup")]
        print(f"  {k:16s} " + "  ".join(f"{c}: {v:.3f} s ({sp[c]:.1f}x)"
                                         for c, v in r[k].items()))  # fmt: skip
    for mode, people in r["difference_to_pose2sim"].items():
        for p in people:  # a handful of people
            print(f"  {mode:14s} {p['pose2sim']} ~ {p['tensorpose']}: median "
                  f"{p['median_mm']:.3f} mm, p90 {p['p90_mm']:.3f} mm, max {p['max_mm']:.1f}, "
                  f">1 mm {p['over_1mm']:.1%} of {p['joint_frames']} joint-frames, "
                  f"Pose2Sim only {p['pose2sim_only_joint_frames']}")  # fmt: skip
    for i, p in enumerate(r["rules"]):
        for k in RULES:
            f = p[k]
            print(f"  p{i + 1} rule {k:8s}: valid {f['valid_fraction']:.1%}, reprojection "
                  f"{f['median_reprojection_px']:.2f} px median, {f['mean_cameras_used']:.2f} "
                  f"cameras/joint, limb std {f['limb_std_mean_mm']:.1f} mm, acceleration "
                  f"{f['acceleration_median_mm_per_frame2']:.1f} mm/frame^2")  # fmt: skip
        b = p["limb_std_mean_difference_bootstrap_mm"]
        print(f"  p{i + 1} limb std pose2sim - default: {b['p50']:+.1f} mm "
              f"[{b['p2.5']:+.1f}, {b['p97.5']:+.1f}] (bootstrap 95%)")  # fmt: skip


if __name__ == "__main__":
    main()
