"""``python -X importtime`` of whole commands: the 15 slowest imports by cumulative time.

    python benchmarks/importtime.py [--baseline SRC] > docs/importtime.md

Each command runs once per tree (a fresh process, one thread); ``--baseline SRC`` shows the
same for another source tree (e.g. an earlier commit unpacked with ``git archive``). Import
times are absolute: read them with the load average printed beside them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.commands import _environ  # noqa: E402
from benchmarks.commands import commands as _timed  # noqa: E402

NAMES = {
    "--help": "tensorpose --help",
    "triangulate": "tensorpose triangulate (bundled trial)",
    "lift": "tensorpose lift (one camera, no video)",
}


def commands(out: Path) -> dict[str, list[str]]:
    """The commands of :mod:`benchmarks.commands` (their arguments after ``-m tensorpose``)."""
    timed = _timed(out)
    return {title: timed[key][2:] for key, title in NAMES.items()}


def importtime(argv: list[str], src: Path) -> list[tuple[int, int, str]]:
    """``(self_us, cumulative_us, name)`` of every import of one run."""
    env = {**_environ(), "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "tensorpose", *argv], cwd=src,
                       env=env, capture_output=True, text=True)  # fmt: skip
    rows = []
    for line in p.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            own, cum, name = line[len("import time:") :].split("|")
            rows.append((int(own), int(cum), name.rstrip()))
    return rows


def table(rows: list[tuple[int, int, str]], top: int = 15) -> list[str]:
    total = sum(r[0] for r in rows)
    out = [f"all imports: {total / 1e6:.2f} s (sum of self times), {len(rows)} modules", "",
           "| cumulative (ms) | self (ms) | module (indented as imported) |",
           "|---:|---:|---|"]  # fmt: skip
    for own, cum, name in sorted(rows, key=lambda r: -r[1])[:top]:
        depth = (len(name) - len(name.lstrip())) // 2
        out.append(f"| {cum / 1000:.0f} | {own / 1000:.0f} | {'. ' * depth}`{name.strip()}` |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", type=Path, help="another source tree")
    args = ap.parse_args()
    trees = {"this tree": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    lines = ["# Import time of whole commands", "",
             "`python benchmarks/importtime.py [--baseline SRC]`: `python -X importtime -m "
             "tensorpose ...`, one run each, the 15 imports with the largest cumulative time. "
             f"Load average at the start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
             "(absolute times; `benchmarks/commands.py` gives the ratios).", ""]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for title, argv in commands(Path(tmp)).items():
            for tree, src in trees.items():
                lines += [f"## {title}: {tree}", "", *table(importtime(argv, src)), ""]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
