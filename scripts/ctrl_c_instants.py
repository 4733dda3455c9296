"""Ctrl-C at every instant of a command's start: SIGINT 0, 10, ..., 300 ms after
``python -m tensorpose triangulate`` (bundled trial) starts, each checkout taking its turn at
each instant, and where each run ended:

- ``one line, 130``: the promised outcome;
- ``killed before Python ran``: exit by the signal, nothing printed (no Python handler yet);
- ``traceback in interpreter start-up``: Python's own start (``site``, an editable install's
  path finder, ``runpy`` locating the package), before any line of tensorpose runs;
- ``traceback in tensorpose code``: a frame of the package in the traceback.

    python scripts/ctrl_c_instants.py CHECKOUT [CHECKOUT ...]
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time

B = "tensorpose/assets/tracks/openpose_body25b"


def _default_sigint() -> None:  # as from a terminal (a background job ignores SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run(code: str, after: float, out: str) -> str:
    env = {**os.environ, "PYTHONPATH": code, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "tensorpose", "triangulate", f"{code}/{B}", "--calib",
           f"{code}/{B}/Calib.qca.txt", "--fps", "60", "--out", out, "--overwrite"]  # fmt: skip
    p = subprocess.Popen(cmd, env=env, cwd="/tmp", stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, preexec_fn=_default_sigint)  # fmt: skip
    time.sleep(after)
    p.send_signal(signal.SIGINT)
    lines = [x for x in p.communicate(timeout=120)[1].decode().splitlines() if x.strip()]
    if p.returncode == 130 and len(lines) == 1:
        return "one line, 130"
    if p.returncode == -2 and not lines:
        return "killed before Python ran"
    if any(x.startswith("Traceback") for x in lines):
        files = [x.strip() for x in lines if x.strip().startswith("File")]
        ours = any("tensorpose" in f and "_finder" not in f for f in files)
        return f"traceback in {'tensorpose code' if ours else 'interpreter start-up'}"
    return f"other (exit {p.returncode})"


def main() -> None:
    codes = sys.argv[1:]
    counts = {c: collections.Counter() for c in codes}
    for ms in range(0, 301, 10):  # every instant, each checkout in turn
        for k, code in enumerate(codes):
            counts[code][run(code, ms / 1000, f"/tmp/ctrl_c_instants_{os.getpid()}_{k}")] += 1
    for code in codes:
        print(code, dict(counts[code]))
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
