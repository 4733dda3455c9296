"""Peer tools in their own virtual environments, never project dependencies, every package pinned.

Each peer benchmark calls :func:`peer_python`, which creates ``<root>/<name>`` once (root:
``$TENSORPOSE_PEERS``, default ``~/.cache/tensorpose-peers``) with ``python -m venv`` and installs
the given pip steps into it from the package index pip is configured with, each step under the
pip constraints file ``constraints/<name>.txt`` (every package of the environment at one version,
torch as PyTorch's CPU build: no step can replace torch or pull CUDA packages). The finished
environment is checked against the file (:func:`pin_mismatches`): a package at another version
stops the benchmark, naming it. An environment filled under other constraints (the file's
SHA-256 is kept in the environment) is filled again.

    python benchmarks/peers/peer_env.py --dry-run mmpose   # pip's resolution, nothing installed
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

CONSTRAINTS = Path(__file__).resolve().parent / "constraints"
STAMP = "tensorpose-constraints.sha256"


def peers_root() -> Path:
    return Path(os.environ.get("TENSORPOSE_PEERS", Path.home() / ".cache" / "tensorpose-peers"))


def constraints_file(name: str) -> Path:
    """``constraints/<name>.txt``: the pins of the peer environment ``name`` (required)."""
    path = CONSTRAINTS / f"{name}.txt"
    if not path.is_file():
        raise SystemExit(f"{path}: no pip constraints for the peer environment {name!r}")
    return path


def pins(path: Path) -> dict[str, str]:
    """``{normalised name: version}`` of a constraints file's ``name==version`` lines."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^\s*([A-Za-z0-9._-]+)\s*==\s*([^\s;#]+)", line)
        if m:
            out[_norm(m[1])] = m[2]
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pin_mismatches(python: Path, constraints: Path) -> list[str]:
    """``name installed X, pinned Y`` for each pinned package installed at another version."""
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=json"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    import json

    have = {_norm(p["name"]): p["version"] for p in json.loads(out)}
    want = pins(constraints)
    return [f"{n} installed {have[n]}, pinned {v}" for n, v in sorted(want.items())
            if n in have and have[n] != v]  # fmt: skip


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``), else the platform's
    processor string: every peer figure is recorded with it (speed ratios differ by CPU kind)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


RESULTS = Path(__file__).resolve().parent.parent / "results" / "peers_cpu.json"


def _no_nan(x):
    """``x`` with NaN floats as ``None`` (strict JSON)."""
    if isinstance(x, dict):
        return {k: _no_nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_nan(v) for v in x]
    return None if isinstance(x, float) and x != x else x


def write_result(key: str, entry: dict) -> Path:
    """Put ``entry`` (NaN as ``null``) under ``key`` in ``benchmarks/results/peers_cpu.json``,
    keeping the other peers' entries; returns the file's path."""
    import json

    peers = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    peers[key] = _no_nan(entry)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(peers, indent=1) + "\n")
    return RESULTS


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def peer_python(name: str, steps: Sequence[Sequence[str]], check: str) -> Path:
    """The Python of the peer environment ``name``, created and filled on first use.

    Args:
        name: folder under :func:`peers_root`, and the constraints file ``constraints/<name>.txt``.
        steps: ``pip install`` argument lists, run in order (e.g. ``["torch"]``), each with
            ``-c constraints/<name>.txt``.
        check: a Python statement that must run in the finished environment (an import): the
            environment is (re)filled until it does.
    """
    constraints = constraints_file(name)
    root = peers_root() / name
    python = root / "bin" / "python"
    stamp = root / STAMP
    current = stamp.exists() and stamp.read_text().strip() == _sha(constraints)
    if python.exists() and current and _runs(python, check):
        _check_pins(python, constraints, root)
        return python
    if not python.exists():
        print(f"creating {root} (one time)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    for step in steps:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(constraints), *step],
                       check=True)  # fmt: skip
    if not _runs(python, check):
        raise SystemExit(f"{root}: `{check}` still fails after installing {list(steps)}")
    _check_pins(python, constraints, root)
    stamp.write_text(_sha(constraints) + "\n")
    return python


def _check_pins(python: Path, constraints: Path, root: Path) -> None:
    wrong = pin_mismatches(python, constraints)
    if wrong:
        raise SystemExit(f"{root}: not as {constraints.name} pins it: {'; '.join(wrong)}")


def _runs(python: Path, check: str) -> bool:
    return subprocess.run([str(python), "-c", check], capture_output=True).returncode == 0


def peer_version(python: Path, package: str) -> str:
    out = subprocess.run([str(python), "-m", "pip", "show", package], capture_output=True,
                         text=True).stdout  # fmt: skip
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                 if ln.startswith("Version:")), "?")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """``--dry-run NAME REQUIREMENT...``: what pip would install into a fresh environment under
    the constraints of ``NAME`` (``pip install --dry-run``, nothing installed)."""
    p = argparse.ArgumentParser(description="pip's resolution of a peer environment, dry run")
    p.add_argument("--dry-run", required=True, metavar="NAME", help="mmpose, pose2sim, mediapipe")
    p.add_argument("requirements", nargs="*", help="default: the environment's top package")
    a = p.parse_args(argv)
    top = {
        "mmpose": ["--no-build-isolation", "torch", "mmpose", "mmengine", "mmcv-lite"],
        "pose2sim": ["pose2sim"],
        "mediapipe": ["mediapipe"],
    }  # chumpy: setup.py, no wheel
    reqs = a.requirements or top.get(a.dry_run, [])
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
           "-c", str(constraints_file(a.dry_run)), *reqs]  # fmt: skip
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    raise SystemExit(main())
