"""tensorpose kinematics against Pose2Sim 0.10.49's kinematics step (the registry package, in its
own environment), one thread each, on the balancing trial.

    python benchmarks/peers/pose2sim_kinematics.py [--pose2sim-python PY] [--rounds 1]
        [--blazepose-openpose DIR]

Three TRCs of the balancing trial (60 fps, 100 frames), each given to both tools:

- ``pose2sim``: Pose2Sim's own TRC (``personAssociation`` + ``triangulation`` on the bundled
  OpenPose BODY_25B detections, Pose2Sim's demo config with ``pose_model = 'BODY_25B'``, as
  ``pose2sim_triangulation.py`` makes it);
- ``tensorpose_pose2sim_mode``: ``tensorpose triangulate --drop-rule pose2sim`` on the same
  detections;
- ``tensorpose_blazepose``: ``tensorpose predict --model blazepose`` on the four videos of
  ``examples/balancing_trial/videos`` (or ``--blazepose-openpose``: its ``openpose/`` folder),
  then ``tensorpose triangulate --drop-rule pose2sim``.

Pose2Sim runs ``Pose2Sim.kinematics()`` in a project holding only that TRC (its demo config:
``use_augmentation = false``, ``participant_height = 'auto'``, ``participant_mass = 70``,
``pose_model`` BODY_25B or BLAZEPOSE); tensorpose runs ``tensorpose kinematics TRC --threads 1``
(``--model auto``, ``--mass 70``, height from the TRC). Both are timed as whole processes, the
contenders taking turns in each round (median over rounds). The joint angles (``.mot``) are
compared per rotational coordinate (RMS over the frames, degrees): the median and the largest
over all coordinates, and the main ones (hips, knees, ankles, arms, elbows).

BlazePose against OpenPose: the angles of tensorpose on the BlazePose TRC against Pose2Sim's on
its own TRC, per main joint angle; and what dominates the difference: the same TRC through two
setups (the BlazePose TRC with ``--model blazepose`` against ``--model body25b``: the setup)
against the same setup on two TRCs (``--model body25b`` on Pose2Sim's TRC against on the
BlazePose TRC: the 2D keypoints), with the distance between the two TRCs' markers. Angle
differences are wrapped to (-180, 180] deg. Writes the
``pose2sim_kinematics`` entry of ``benchmarks/results/peers_cpu.json``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_env import cpu_model, peer_python, write_result  # noqa: E402
from pose2sim_triangulation import (  # noqa: E402
    TRIALS,
    load,
    make_project,
    read_trc,
    run,
)

from tensorpose.io.storage import read_storage  # noqa: E402

TRIAL = TRIALS["balancing"]
CALIB = ROOT / "examples" / "balancing_trial" / "Calib.qca.txt"
MAIN = ["hip_flexion_r", "hip_flexion_l", "hip_adduction_r", "hip_adduction_l",
        "hip_rotation_r", "hip_rotation_l", "knee_angle_r", "knee_angle_l", "ankle_angle_r",
        "ankle_angle_l", "arm_flex_r", "arm_flex_l", "arm_add_r", "arm_add_l", "arm_rot_r",
        "arm_rot_l", "elbow_flex_r", "elbow_flex_l"]  # fmt: skip
"""The joint angles of the issue's bar: hips, knees, ankles, arms and elbows."""

TRIANGULATE = """
import sys
from Pose2Sim import Pose2Sim as P
import rtoml
config = rtoml.load(open("Config.toml"))
config["triangulation"]["make_c3d"] = False
config["project"]["project_dir"] = sys.argv[1]
P.personAssociation(config)
P.triangulation(config)
"""

KINEMATICS = """
import os, sys, rtoml, Pose2Sim
from Pose2Sim import Pose2Sim as P
project, model = sys.argv[1], sys.argv[2]
c = rtoml.load(open(os.path.join(os.path.dirname(Pose2Sim.__file__), "Demo_SinglePerson",
                                 "Config.toml")))
c["project"].update(project_dir=project, frame_rate=60, multi_person=False,
                    participant_height="auto", participant_mass=70.0)
c["pose"]["pose_model"] = model
c["kinematics"]["use_augmentation"] = False
P.kinematics(c)
"""


def tensorpose(*argv: str) -> list[str]:
    return [sys.executable, "-m", "tensorpose", *argv, "--threads", "1"]


def tp_env() -> dict:
    return {"PYTHONPATH": str(ROOT)}


def make_trcs(tmp: Path, py: str, blazepose_openpose: Path | None) -> dict[str, Path]:
    """The three TRCs (module docstring)."""
    project = make_project(tmp, "balancing", TRIAL, py)
    run([py, "-c", TRIANGULATE, str(project)], cwd=project)
    (p2s,) = [p for p in (project / "pose-3d").glob("*.trc") if "_filt" not in p.name]
    tracks = str(TRIAL["tracks"])
    rule = ["--fps", "60", "--drop-rule", "pose2sim"]
    run(tensorpose("triangulate", tracks, "--calib", f"{tracks}/Calib.qca.txt", *rule,
                   "--out", str(tmp / "tp_op")), env=tp_env())  # fmt: skip
    if blazepose_openpose is None:
        run(tensorpose("predict", str(TRIAL["videos"]), "--model", "blazepose", "--out",
                       str(tmp / "bp")), env=tp_env())  # fmt: skip
        blazepose_openpose = tmp / "bp" / "openpose"
    run(tensorpose("triangulate", str(blazepose_openpose), "--calib", str(CALIB), *rule,
                   "--out", str(tmp / "tp_bp")), env=tp_env())  # fmt: skip
    trcs = {"pose2sim": p2s,
            "tensorpose_pose2sim_mode": next((tmp / "tp_op").glob("*.trc")),
            "tensorpose_blazepose": next((tmp / "tp_bp").glob("*.trc"))}  # fmt: skip
    for name, trc in trcs.items():  # one TRC per name: each tool's outputs are named after it
        shutil.copy(trc, tmp / f"{name}.trc")
    return {name: tmp / f"{name}.trc" for name in trcs}


def pose2sim_kinematics(py: str, trc: Path, work: Path, model: str) -> tuple[Path, float]:
    """Pose2Sim's kinematics step on ``trc`` alone; its ``.mot`` and the process's seconds."""
    project = work / f"p2s_{trc.stem}"
    shutil.rmtree(project, ignore_errors=True)
    (project / "pose-3d").mkdir(parents=True)
    shutil.copy(trc, project / "pose-3d")
    t0 = time.perf_counter()
    run([py, "-c", KINEMATICS, str(project), model], cwd=project)
    return project / "kinematics" / f"{trc.stem}.mot", time.perf_counter() - t0


def tp_kinematics(trc: Path, out: Path, *extra: str) -> tuple[Path, float]:
    t0 = time.perf_counter()
    run(tensorpose("kinematics", str(trc), "--out", str(out), "--overwrite", *extra),
        env=tp_env())  # fmt: skip
    return out / f"{trc.stem}.mot", time.perf_counter() - t0


def rms_per_coordinate(a: Path, b: Path) -> dict[str, float]:
    """RMS difference (degrees) per rotational coordinate over the frames both have."""
    sa, sb = read_storage(a), read_storage(b)
    ta, tb = np.round(sa.column("time") * 60).astype(int), np.round(sb.column("time") * 60)
    common = np.intersect1d(ta, tb.astype(int))
    ia, ib = np.searchsorted(ta, common), np.searchsorted(tb.astype(int), common)
    out = {}
    for c in sa.columns[1:]:
        if c in sb.columns and not c.startswith("pelvis_t"):  # translations are metres
            d = (sa.column(c)[ia] - sb.column(c)[ib] + 180) % 360 - 180
            out[c] = float(np.sqrt(np.mean(d**2)))
    return out


def stats(rms: dict[str, float]) -> dict:
    main = {c: rms[c] for c in MAIN if c in rms}
    return {"median_all_deg": statistics.median(rms.values()), "max_all_deg": max(rms.values()),
            "worst": max(rms, key=rms.get), "median_main_deg": statistics.median(main.values()),
            "max_main_deg": max(main.values()), "main_deg": main, "all_deg": rms}  # fmt: skip


def marker_distances(a: Path, b: Path) -> dict[str, float]:
    """Median distance (cm) per marker both TRCs have, over the frames both have."""
    (na, fa, xa), (nb, fb, xb) = read_trc(a), read_trc(b)
    frames = np.intersect1d(fa, fb)
    ia, ib = np.searchsorted(fa, frames), np.searchsorted(fb, frames)
    out = {}
    for n in na:
        if n in nb:
            d = np.linalg.norm(xa[ia, na.index(n)] - xb[ib, nb.index(n)], axis=-1) * 100
            if np.isfinite(d).any():
                out[n] = float(np.nanmedian(d))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pose2sim-python", default=None,
                    help="a Python with pose2sim (default: the peer environment)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--blazepose-openpose", type=Path, default=None,
                    help="predict --model blazepose's openpose/ folder of the four videos "
                    "(default: run predict)")  # fmt: skip
    args = ap.parse_args()
    py = args.pose2sim_python or str(
        peer_python("pose2sim", [["pose2sim==0.10.49"]], "import Pose2Sim.kinematics, opensim")
    )
    version = run([py, "-c", "import importlib.metadata as m; print(m.version('pose2sim'), "
                   "m.version('opensim'))"]).split()  # fmt: skip
    payload = {"machine": {"platform": platform.platform(), "cpu": cpu_model(),
                           "cpus": os.cpu_count()},
               "threads": 1, "pose2sim_version": version[0], "opensim_version": version[1],
               "load_before": load(), "trcs": {}}  # fmt: skip
    models = {"pose2sim": "BODY_25B", "tensorpose_pose2sim_mode": "BODY_25B",
              "tensorpose_blazepose": "BLAZEPOSE"}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pose2sim_kin_") as tmp:
        tmp = Path(tmp)
        trcs = make_trcs(tmp, py, args.blazepose_openpose)
        mots: dict[str, dict[str, Path]] = {}
        for name, trc in trcs.items():  # three TRCs
            seconds = {"pose2sim": [], "tensorpose": []}
            for _ in range(args.rounds):  # the contenders take turns
                theirs, s = pose2sim_kinematics(py, trc, tmp, models[name])
                seconds["pose2sim"].append(s)
                ours, s = tp_kinematics(trc, tmp / f"tp_{name}")
                seconds["tensorpose"].append(s)
            mots[name] = {"pose2sim": theirs, "tensorpose": ours}
            payload["trcs"][name] = {
                "pose_model": models[name],
                "seconds": {k: statistics.median(v) for k, v in seconds.items()},
                "angles_rms_deg": stats(rms_per_coordinate(theirs, ours)),
            }  # fmt: skip
        # BlazePose 2D against OpenPose 2D, and what dominates it
        p2s_trc, bp_trc = trcs["pose2sim"], trcs["tensorpose_blazepose"]
        bp_b25, _ = tp_kinematics(bp_trc, tmp / "bp_body25b", "--model", "body25b")
        payload["blazepose_vs_openpose"] = {
            "angles_rms_deg": stats(rms_per_coordinate(mots["pose2sim"]["pose2sim"],
                                                       mots["tensorpose_blazepose"]["tensorpose"])),
            "setup_only_rms_deg": stats(
                rms_per_coordinate(mots["tensorpose_blazepose"]["tensorpose"], bp_b25)
            ),
            "keypoints_only_rms_deg": stats(
                rms_per_coordinate(mots["pose2sim"]["tensorpose"], bp_b25)
            ),
            "marker_median_distance_cm": marker_distances(p2s_trc, bp_trc),
        }  # fmt: skip
    payload["load_after"] = load()
    _print(payload)
    path = write_result("pose2sim_kinematics", payload)
    print(f"load average {payload['load_before']:.2f} -> {payload['load_after']:.2f}; "
          f"wrote {path}")  # fmt: skip


def _print(p: dict) -> None:
    for name, r in p["trcs"].items():
        a = r["angles_rms_deg"]
        print(f"== {name} ({r['pose_model']}): Pose2Sim {r['seconds']['pose2sim']:.1f} s, "
              f"tensorpose {r['seconds']['tensorpose']:.1f} s; angle RMS difference median "
              f"{a['median_all_deg']:.3f} deg, max {a['max_all_deg']:.3f} ({a['worst']}); main "
              f"joints median {a['median_main_deg']:.3f}, max {a['max_main_deg']:.3f}")  # fmt: skip
    b = p["blazepose_vs_openpose"]
    print(
        "== BlazePose (tensorpose) vs OpenPose (Pose2Sim), RMS deg: setup only | keypoints "
        "only | both"
    )
    for c in MAIN:
        print(f"  {c:16s} {b['setup_only_rms_deg']['all_deg'].get(c, float('nan')):6.1f} "
              f"{b['keypoints_only_rms_deg']['all_deg'].get(c, float('nan')):6.1f} "
              f"{b['angles_rms_deg']['all_deg'].get(c, float('nan')):6.1f}")  # fmt: skip
    print("  marker distance (cm, median): " + ", ".join(
        f"{k} {v:.1f}" for k, v in b["marker_median_distance_cm"].items()))  # fmt: skip


if __name__ == "__main__":
    main()
