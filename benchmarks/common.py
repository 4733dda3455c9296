"""Shared benchmark harness: timing with device synchronisation, a ratio table, JSON results.

Every benchmark runs its contenders side by side in one process on the same inputs: warm-up,
several repeats, median. Absolute times mean something on a GPU; on shared CPUs quote ratios.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def times(
    fn: Callable[[], object], device: torch.device, warmup: int = 3, repeats: int = 20
) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` untimed calls
    (synchronised before and after each timed call)."""
    for _ in range(warmup):
        fn()
    sync(device)
    out = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        out.append(time.perf_counter() - t0)
    return out


def timeit(
    fn: Callable[[], object], device: torch.device, warmup: int = 3, repeats: int = 20
) -> float:
    """Median seconds of one call of ``fn``."""
    return statistics.median(times(fn, device, warmup, repeats))


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU model from /proc/cpuinfo where there is one."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from benchmarks.peers.peer_env import cpu_model

    return cpu_model()


def device_info(device: torch.device) -> dict:
    info = {
        "device": str(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "device_name": device_name(device),
    }
    return info


def device_tag(device: torch.device) -> str:
    """``cpu`` or ``cuda``: the results file's suffix (the JSON names the device itself)."""
    return device.type


def print_table(title: str, rows: list[dict], baseline: str) -> None:
    """``rows``: dicts with ``case``, ``contender``, ``ms``; ratio = baseline ms / this ms."""
    print(f"\n{title}")
    print(f"{'case':<22} {'contender':<26} {'median ms':>10} {'speed-up':>9}")
    by_case: dict[str, float] = {r["case"]: r["ms"] for r in rows if r["contender"] == baseline}
    for r in rows:
        base = by_case.get(r["case"])
        r["speedup_vs_" + baseline] = base / r["ms"] if base else None
        ratio = f"{base / r['ms']:8.2f}x" if base else "        -"
        print(f"{r['case']:<22} {r['contender']:<26} {r['ms']:>10.3f} {ratio}")


def write_json(name: str, device: torch.device, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}_{device_tag(device)}.json"
    payload = {"benchmark": name, **device_info(device), **payload}
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {path}")
    return path


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", default=None, help="cpu, cuda, or both (default: every available)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--no-save", action="store_true", help="do not write JSON results")
    return p


def devices(arg: str | None) -> list[torch.device]:
    if arg in (None, "both"):
        out = [torch.device("cpu")]
        if torch.cuda.is_available():
            out.append(torch.device("cuda"))
        return out
    return [torch.device(arg)]


def run_child(cmd: list[str], env: dict, timeout: float, tail: int = 160) -> dict:
    """Run a measuring child process whose last stdout line is a JSON object: ``{"status":
    "ok", **that}``, or a status naming the time limit or the child's last error line."""
    import subprocess

    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": f"over the {timeout:g} s time limit", "seconds": None}
    if p.returncode:
        last = (p.stderr.strip().splitlines() or ["?"])[-1][:tail]
        return {"status": f"failed: {last}", "seconds": time.perf_counter() - t0}
    return {"status": "ok", **json.loads(p.stdout.strip().splitlines()[-1])}
