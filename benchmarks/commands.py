"""Whole-command wall time as users feel it, as a ratio to a bare ``python -c "import torch"``.

Every contender is a fresh process (start-up, imports, reading, computing, writing pictures:
everything a user waits for), one thread each (``OMP_NUM_THREADS=1``, ``--threads 1`` where the
command has it), the contenders taking turns within each round so that the machine's load
falls on all of them alike; median over the rounds, with the load average before and after.

    python benchmarks/commands.py [--repeats 7] [--baseline SRC]

``--baseline SRC`` times the same commands from another source tree as well (e.g. an earlier
commit unpacked with ``git archive``), in the same turns. Writes
``benchmarks/results/commands_cpu.json``.

Targets (issue 23): ``triangulate`` on the bundled trial <= 1.3x, ``lift`` on one camera
without video <= 1.5x, ``--help`` and argument errors without torch.
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

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TRIAL = "tensorpose/assets/tracks/openpose_body25b"


def commands(out: Path) -> dict[str, list[str]]:
    """Name -> argv after ``python``."""
    tp = ["-m", "tensorpose"]
    return {
        "import torch": ["-c", "import torch"],
        "--help": [*tp, "--help"],
        "argument error": [*tp, "triangulate", "--no-such-flag"],
        "triangulate": [
            *tp,
            "triangulate",
            TRIAL,
            "--calib",
            f"{TRIAL}/Calib.qca.txt",
            "--out",
            str(out / "tri"),
            "--overwrite",
        ],
        "lift": [
            *tp,
            "lift",
            f"{TRIAL}/cam01_json",
            "--size",
            "1088x1920",
            "--fps",
            "60",
            "--out",
            str(out / "lift"),
            "--overwrite",
            "--quiet",
        ],
    }


def _environ() -> dict[str, str]:
    """This environment with bytecode caching on, the caches kept in a folder of their own
    (as an installed package has them; without, every run compiles every module again)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(Path(tempfile.gettempdir()) / "tensorpose_pycache")}


def run_once(argv: list[str], src: Path) -> tuple[float, int]:
    """Seconds of one fresh process running from source tree ``src``, and its exit status."""
    env = {**_environ(), "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, *argv], cwd=src, env=env, capture_output=True)
    return time.perf_counter() - t0, p.returncode


def torch_imported(argv: list[str], src: Path) -> bool:
    """Whether the command imports torch (checked once, outside the timed runs)."""
    code = ("import runpy, sys, atexit; sys.argv = ['tensorpose', *sys.argv[1:]]; "
            "atexit.register(lambda: print('TORCH', 'torch' in sys.modules, file=sys.stderr)); "
            "runpy.run_module('tensorpose', run_name='__main__')")  # fmt: skip
    env = {**_environ(), "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", code, *argv[2:]], cwd=src, env=env,
                       capture_output=True, text=True)  # fmt: skip
    return "TORCH True" in p.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--baseline", type=Path, help="another source tree timed in the same turns")
    ap.add_argument("--out", type=Path, default=RESULTS / "commands_cpu.json")
    args = ap.parse_args()
    trees = {"current": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(Path(tmp))
        contenders = [(t, n) for t in trees for n in cmds if not (t == "baseline" and
                      n == "import torch")]  # fmt: skip
        for t, n in contenders:  # warm-up: file caches, outputs in place for --overwrite
            run_once(cmds[n], trees[t])
        times: dict[tuple[str, str], list[float]] = {c: [] for c in contenders}
        status: dict[tuple[str, str], int] = {}
        for _ in range(args.repeats):
            for t, n in contenders:
                s, rc = run_once(cmds[n], trees[t])
                times[(t, n)].append(s)
                status[(t, n)] = rc
        torch_in = {(t, n): torch_imported(cmds[n], trees[t]) for t, n in contenders
                    if n != "import torch"}  # fmt: skip
    load_after = os.getloadavg()
    base = statistics.median(times[("current", "import torch")])
    rows = {}
    for (t, n), ts in times.items():
        med = statistics.median(ts)
        rows.setdefault(t, {})[n] = {
            "median_s": round(med, 3), "ratio_to_import_torch": round(med / base, 3),
            "runs_s": [round(x, 3) for x in ts], "exit_status": status[(t, n)],
            "imports_torch": torch_in.get((t, n)),
        }  # fmt: skip
    result = {
        "what": "whole commands, fresh processes, one thread, turns; median over rounds",
        "repeats": args.repeats,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "targets": {"triangulate": 1.3, "lift": 1.5},
        "commands": {n: " ".join(a) for n, a in commands(Path("OUT")).items()},
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; "
          f"import torch {base:.2f} s")  # fmt: skip
    for t, r in rows.items():
        for n, v in r.items():
            print(f"{t:9s} {n:15s} {v['median_s']:6.2f} s  {v['ratio_to_import_torch']:5.2f}x"
                  f"  torch imported: {v['imports_torch']}  exit {v['exit_status']}")  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
