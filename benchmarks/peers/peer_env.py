"""Peer tools in their own virtual environments, never project dependencies.

Each peer benchmark calls :func:`peer_python`, which creates ``<root>/<name>`` once (root:
``$TENSORPOSE_PEERS``, default ``~/.cache/tensorpose-peers``) with ``python -m venv`` and installs
the given pip steps into it from the package index pip is configured with.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def peers_root() -> Path:
    return Path(os.environ.get("TENSORPOSE_PEERS", Path.home() / ".cache" / "tensorpose-peers"))


def peer_python(name: str, steps: Sequence[Sequence[str]], check: str) -> Path:
    """The Python of the peer environment ``name``, created and filled on first use.

    Args:
        name: folder under :func:`peers_root`.
        steps: ``pip install`` argument lists, run in order (e.g. ``["torch==2.13.0"]``).
        check: a Python statement that must run in the finished environment (an import): the
            environment is (re)filled until it does.
    """
    root = peers_root() / name
    python = root / "bin" / "python"
    if python.exists() and _runs(python, check):
        return python
    if not python.exists():
        print(f"creating {root} (one time)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    for step in steps:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *step], check=True)
    if not _runs(python, check):
        raise SystemExit(f"{root}: `{check}` still fails after installing {list(steps)}")
    return python


def _runs(python: Path, check: str) -> bool:
    return subprocess.run([str(python), "-c", check], capture_output=True).returncode == 0


def peer_version(python: Path, package: str) -> str:
    out = subprocess.run([str(python), "-m", "pip", "show", package], capture_output=True,
                         text=True).stdout  # fmt: skip
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                 if ln.startswith("Version:")), "?")  # fmt: skip
