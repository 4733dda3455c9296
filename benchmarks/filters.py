"""Batched temporal filters vs one filter object per joint, side by side in one process.

Contenders on the same inputs (random-walk pixel tracks, tracks x joints x 2 coordinates x
frames, a fraction missing as NaN):

* Kalman (constant velocity): filterpy, one ``KalmanFilter(dim_x=2, dim_z=1)`` per signal
  (the baseline) vs ``tensorpose.ops.filters.kalman_filter`` in float64 and float32;
* RTS smoother: filterpy filter + ``rts_smoother`` per signal vs ``kalman_smoother``;
* One-Euro: a straightforward per-signal Python loop vs ``one_euro_filter``.

Each timing is the median of several runs after warm-up (``torch.cuda.synchronize()`` around
timed regions on CUDA). ``--quick`` times the slow per-signal baselines on a subset of signals
and scales the time per signal (said so in the output). Writes
``benchmarks/results/filters_<device>.json``.

    python benchmarks/filters.py [--quick] [--device cuda] [--gpu-tracks 100000]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import device_name, times
from tensorpose.ops.filters import kalman_filter, kalman_smoother, one_euro_filter

Q, R, IV = 0.5, 9.0, 1000.0  # process noise, measurement noise, initial variance (px units)
FPS, MIN_CUTOFF, BETA, D_CUTOFF = 30.0, 1.0, 0.01, 1.0


def _timeit(fn, warmup: int, repeats: int, cuda: bool) -> tuple[float, object]:
    """Median wall time of ``fn()`` and the result of its last call."""
    last = []

    def call():
        last[:] = [fn()]

    device = torch.device("cuda" if cuda else "cpu")
    return statistics.median(times(call, device, warmup, repeats)), last[0]


def make_tracks(tracks: int, joints: int, frames: int, missing: float, seed: int = 0):
    """``(tracks, joints, frames, 2)`` float64 random-walk pixel tracks with NaN gaps."""
    g = torch.Generator().manual_seed(seed)
    steps = torch.randn(tracks, joints, frames, 2, generator=g, dtype=torch.float64) * 3.0
    x = 500.0 + 300.0 * torch.rand(tracks, joints, 1, 2, generator=g, dtype=torch.float64)
    x = x + steps.cumsum(2) + torch.randn(steps.shape, generator=g, dtype=torch.float64) * 2.0
    x[torch.rand(x.shape, generator=g) < missing] = float("nan")
    return x


# ----------------------------------------------------------------------------- baselines
def filterpy_signals(signals: np.ndarray, smooth: bool) -> np.ndarray:
    """One filterpy KalmanFilter per signal (rows of ``signals (S, T)``), NaN = missing."""
    from filterpy.common import Q_discrete_white_noise
    from filterpy.kalman import KalmanFilter

    out = np.full(signals.shape, np.nan)
    Qm = Q_discrete_white_noise(2, 1.0, Q)
    for s, z in enumerate(signals):  # the baseline: one Python filter object per joint
        ok = np.flatnonzero(~np.isnan(z))
        if len(ok) == 0:
            continue
        t0 = ok[0]
        kf = KalmanFilter(dim_x=2, dim_z=1)
        kf.F = np.array([[1.0, 1.0], [0.0, 1.0]])
        kf.H = np.array([[1.0, 0.0]])
        kf.Q = Qm
        kf.R = np.array([[R]])
        kf.P = np.eye(2) * IV
        kf.x = np.array([[z[t0]], [0.0]])
        kf.update(z[t0])
        xs, Ps = [kf.x.copy()], [kf.P.copy()]
        for t in range(t0 + 1, len(z)):
            kf.predict()
            kf.update(None if np.isnan(z[t]) else z[t])
            xs.append(kf.x.copy())
            Ps.append(kf.P.copy())
        xs = np.array(xs)
        if smooth:
            xs = kf.rts_smoother(xs, np.array(Ps))[0]
        out[s, t0:] = xs[:, 0, 0]
    return out


def one_euro_signals(signals: np.ndarray) -> np.ndarray:
    """Per-signal One-Euro loop in plain Python floats (missing samples hold the output)."""
    out = np.full(signals.shape, np.nan)
    tau_d = 1.0 / (2 * math.pi * D_CUTOFF)
    for s, z in enumerate(signals.tolist()):  # the baseline: one filter per joint
        first, x_hat = True, math.nan
        row = out[s]
        for t, x in enumerate(z):
            if x != x:  # NaN
                if not first:
                    row[t] = x_hat
                continue
            if first:
                x_hat, dx_hat, x_prev, t_prev, first = x, 0.0, x, t, False
            else:
                te = (t - t_prev) / FPS
                a_d = 1.0 / (1.0 + tau_d / te)
                dx_hat = a_d * ((x - x_prev) / te) + (1 - a_d) * dx_hat
                a = 1.0 / (1.0 + (1.0 / (2 * math.pi * (MIN_CUTOFF + BETA * abs(dx_hat)))) / te)
                x_hat = a * x + (1 - a) * x_hat
                x_prev, t_prev = x, t
            row[t] = x_hat
    return out


# ----------------------------------------------------------------------------- main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--tracks", type=int, default=100)
    p.add_argument("--joints", type=int, default=17)
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--missing", type=float, default=0.1)
    p.add_argument("--quick", action="store_true", help="baselines on a subset, scaled")
    p.add_argument("--subset", type=int, default=200, help="signals timed in --quick mode")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--gpu-tracks", type=int, default=100_000, help="large run on CUDA")
    p.add_argument(
        "--threads", default=None, help="torch CPU threads for the batched runs, e.g. 1,2"
    )
    p.add_argument("--note", default="", help="free text stored in the JSON")
    p.add_argument("--out", default=None, help="JSON path (default results/filters_<dev>.json)")
    args = p.parse_args(argv)
    thread_counts = [int(t) for t in args.threads.split(",")] if args.threads else [None]
    device = torch.device(args.device)
    cuda = device.type == "cuda"

    x64 = make_tracks(args.tracks, args.joints, args.frames, args.missing)
    S = x64.numel() // args.frames  # signals = tracks * joints * 2
    signals = x64.permute(0, 1, 3, 2).reshape(S, args.frames).numpy()
    sub = min(args.subset, S) if args.quick else S
    scale = S / sub
    base_reps = 1 if not args.quick else 3
    rows, diffs = [], {}
    print(
        f"device {device_name(device)} ({device}), torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; {args.tracks} tracks x {args.joints} joints x 2 x "
        f"{args.frames} frames = {S} signals, {args.missing:.0%} missing"
    )
    if args.quick:
        print(f"--quick: per-signal baselines timed on {sub} of {S} signals, scaled x{scale:.1f}")

    def add(group, name, seconds, baseline, diff=None, scaled=False, threads=None):
        rows.append(
            {
                "group": group,
                "name": name,
                "threads": threads,
                "median_s": seconds,
                "ratio_vs_baseline": baseline / seconds,
                "max_abs_diff_vs_reference_px": diff,
                "scaled_from_subset": scaled,
            }
        )

    xd64 = x64.to(device)
    xd32 = xd64.float()
    groups = [
        ("kalman", "filterpy KalmanFilter per joint", lambda s: filterpy_signals(s, False),
         lambda x: kalman_filter(x, process_noise=Q, measurement_noise=R, initial_variance=IV)),
        ("rts", "filterpy KalmanFilter + rts_smoother per joint",
         lambda s: filterpy_signals(s, True),
         lambda x: kalman_smoother(x, process_noise=Q, measurement_noise=R, initial_variance=IV)),
        ("one_euro", "Python One-Euro per joint", one_euro_signals,
         lambda x: one_euro_filter(x, FPS, MIN_CUTOFF, BETA, D_CUTOFF)),
    ]  # fmt: skip
    for group, base_name, baseline, ours in groups:
        t_base, ref = _timeit(lambda b=baseline: b(signals[:sub]), 0, base_reps, False)
        t_base *= scale
        add(group, base_name, t_base, t_base, scaled=args.quick)
        for threads in thread_counts:
            if threads:
                torch.set_num_threads(threads)
            for dtype, x in (("float64", xd64), ("float32", xd32)):
                t, out = _timeit(lambda f=ours, x=x: f(x), 2, args.repeats, cuda)
                flat = out.double().cpu().permute(0, 1, 3, 2).reshape(S, args.frames)[:sub]
                flat = flat.numpy()
                diff = float(np.nanmax(np.abs(flat - ref)))
                assert np.array_equal(np.isnan(flat), np.isnan(ref)), f"{group} {dtype}: NaNs"
                diffs[f"{group}_{dtype}"] = diff
                name = f"tensorpose {group} {dtype} batched"
                if threads and len(thread_counts) > 1:
                    name += f", {threads} thread{'s' if threads > 1 else ''}"
                add(group, name, t, t_base, diff, threads=torch.get_num_threads())

    big = None
    if cuda and args.gpu_tracks:
        xb = make_tracks(args.gpu_tracks // 100, args.joints, args.frames, args.missing)
        xb = xb.repeat(100, 1, 1, 1).to(device, torch.float32)  # 100x the seeded block
        Sb = xb.numel() // args.frames
        big = {"tracks": args.gpu_tracks, "signals": Sb, "dtype": "float32", "median_s": {}}
        for name, fn in (
            ("kalman", lambda: kalman_filter(xb, process_noise=Q, measurement_noise=R)),
            ("rts", lambda: kalman_smoother(xb, process_noise=Q, measurement_noise=R)),
            ("one_euro", lambda: one_euro_filter(xb, FPS, MIN_CUTOFF, BETA, D_CUTOFF)),
        ):
            try:
                t, _ = _timeit(fn, 1, 3, True)
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
                big["median_s"][name] = "out of memory"
                continue
            big["median_s"][name] = t
            big.setdefault("signal_frames_per_s", {})[name] = Sb * args.frames / t

    print(f"\n{'contender':58s} {'median':>10s} {'speed-up':>9s} {'max|diff|':>10s}")
    for r in rows:
        d = r["max_abs_diff_vs_reference_px"]
        print(
            f"{r['name']:58s} {r['median_s'] * 1e3:8.1f}ms {r['ratio_vs_baseline']:8.0f}x "
            f"{'' if d is None else f'{d:10.1e}'}{'  (scaled)' if r['scaled_from_subset'] else ''}"
        )
    if big:
        print(f"\nCUDA, {big['tracks']} tracks ({big['signals']} signals) float32:")
        for name, t in big["median_s"].items():
            print(f"  {name:10s} {t if isinstance(t, str) else f'{t * 1e3:.1f} ms'}")
    result = {
        "benchmark": "filters",
        "device": str(device),
        "device_name": device_name(device),
        "torch": torch.__version__,
        "threads": [t or torch.get_num_threads() for t in thread_counts],
        "note": args.note,
        "python": platform.python_version(),
        "sizes": {
            "tracks": args.tracks,
            "joints": args.joints,
            "coords": 2,
            "frames": args.frames,
            "signals": S,
            "missing": args.missing,
        },
        "quick": args.quick,
        "baseline_signals_timed": sub,
        "repeats": args.repeats,
        "params": {
            "q": Q,
            "r": R,
            "initial_variance": IV,
            "fps": FPS,
            "min_cutoff": MIN_CUTOFF,
            "beta": BETA,
            "d_cutoff": D_CUTOFF,
        },
        "rows": rows,
        "max_abs_diff_px": diffs,
        "gpu_large": big,
    }
    out = Path(args.out) if args.out else (
        Path(__file__).resolve().parent / "results" / f"filters_{device.type}.json"
    )  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
