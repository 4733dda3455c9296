"""The demo on a shared CPU: quiet and with one competing CPU-bound process, the previous
default thread policy against the new one (issue 23: loaded at most 2x quiet).

A shortened demo (``tensorpose demo train.max_steps=N``, default 30 steps; ``--steps 0`` runs
the whole demo) with its pinned ``train.threads=2``, in fresh processes:

- **previous default**: OpenMP's own wait policy (waiting threads spin for a while before
  sleeping), reproduced by importing torch before tensorpose with ``OMP_WAIT_POLICY`` unset;
- **new policy** (:mod:`tensorpose.threads`): ``OMP_WAIT_POLICY=PASSIVE``, set by the command
  before torch is loaded.

Each round runs both quiet, then starts the competitor (``python -c "while True: pass"``) and
runs both again; median over the rounds of the wall time and of the training step time (batch
size over the first epoch's samples/s). The final training loss of every run is recorded: the
same seed and thread count must give the same bits, quiet or loaded, under either policy.

    python benchmarks/shared_cpu.py [--rounds 5] [--steps 30]

Writes ``benchmarks/results/shared_cpu.json``.
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
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PREVIOUS = ("import sys, runpy, torch; sys.argv = ['tensorpose', *sys.argv[1:]]; "
            "runpy.run_module('tensorpose', run_name='__main__')")  # fmt: skip
POLICIES = {"previous default": ["-c", PREVIOUS], "new policy": ["-m", "tensorpose"]}


def run_demo(policy: str, steps: int, out: Path) -> dict:
    """One demo run in a fresh process: wall seconds, ms per training step, final loss."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, *POLICIES[policy], "demo", "--out", str(out), "--name", "run",
            "--quiet", *([f"train.max_steps={steps}"] if steps else [])]  # fmt: skip
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{policy}: demo failed ({p.returncode}): {p.stderr[-2000:]}")
    run = out / "run"
    history = json.loads((run / "history.json").read_text())
    batch = yaml.safe_load((run / "config.yaml").read_text())["train"]["batch_size"]
    result = {
        "seconds": seconds,
        "step_ms": 1000 * batch / history[0]["samples_per_s"],
        "final_train_loss": history[-1]["train_loss"],
        "val_mpjpe_mm": history[-1]["val_mpjpe_mm"],
    }
    subprocess.run(["rm", "-rf", str(run)], check=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30, help="train.max_steps (0: the whole demo)")
    ap.add_argument("--out", type=Path, default=RESULTS / "shared_cpu.json")
    args = ap.parse_args()
    load_before = os.getloadavg()
    runs: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for condition in ("quiet", "loaded"):
                hog = None
                if condition == "loaded":
                    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    time.sleep(1.0)
                try:
                    for policy in POLICIES:
                        res = run_demo(policy, args.steps, Path(tmp))
                        runs.setdefault((policy, condition), []).append(res)
                        print(f"round {r + 1} {condition:6s} {policy:16s} {res['seconds']:6.1f} s"
                              f"  {res['step_ms']:6.1f} ms/step", flush=True)  # fmt: skip
                finally:
                    if hog is not None:
                        hog.kill()
                        hog.wait()
    load_after = os.getloadavg()
    table: dict[str, dict] = {}
    for (policy, condition), rs in runs.items():
        table.setdefault(policy, {})[condition] = {
            "median_s": round(statistics.median(x["seconds"] for x in rs), 2),
            "median_step_ms": round(statistics.median(x["step_ms"] for x in rs), 1),
            "runs_s": [round(x["seconds"], 2) for x in rs],
        }
    for t in table.values():
        t["loaded_over_quiet_wall"] = round(t["loaded"]["median_s"] / t["quiet"]["median_s"], 2)
        t["loaded_over_quiet_step"] = round(
            t["loaded"]["median_step_ms"] / t["quiet"]["median_step_ms"], 2
        )
    losses = {x["final_train_loss"] for rs in runs.values() for x in rs}
    result = {
        "what": (
            f"tensorpose demo train.max_steps={args.steps} (a shortened demo)"
            if args.steps
            else "the whole tensorpose demo"
        )
        + ", train.threads=2 (the demo's pin), "
        "quiet and with one competing `python -c 'while True: pass'`",
        "rounds": args.rounds,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "policies": {
            "previous default": "OpenMP's default wait (spin, then sleep): torch imported first",
            "new policy": "OMP_WAIT_POLICY=PASSIVE set by tensorpose before torch is loaded",
        },
        "results": table,
        "bit_identical_final_loss": len(losses) == 1,
        "final_train_losses": sorted(losses),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    for policy, t in table.items():
        print(f"{policy:16s} quiet {t['quiet']['median_s']:6.1f} s  loaded "
              f"{t['loaded']['median_s']:6.1f} s  ({t['loaded_over_quiet_wall']:.2f}x wall, "
              f"{t['loaded_over_quiet_step']:.2f}x per step)")  # fmt: skip
    print(f"final training loss identical in every run: {result['bit_identical_final_loss']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
