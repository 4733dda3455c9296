"""Batched Procrustes alignment (``tensorpose.ops.procrustes``) against the per-pose loop.

Cases: ``B`` poses of 17 joints (default 1104: the held-out lifting evaluation, 276 frames x 4
cameras), float64. Contenders on the same inputs: the obvious loop (numpy Umeyama, one pose at a
time: the baseline) and ``procrustes_align`` (one batched SVD). The results are checked equal.

Usage: python benchmarks/procrustes.py [--device cpu|cuda|both] [--threads 1] [--poses 1104]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, print_table, timeit, write_json
from tensorpose.ops.procrustes import procrustes_align


def naive_align(p: np.ndarray, t: np.ndarray) -> np.ndarray:
    """One pose at a time: the similarity (s, R, trans) minimising |s R p + trans - t|^2."""
    out = np.empty_like(p)
    for i in range(len(p)):
        a, b = p[i], t[i]
        ma, mb = a.mean(0), b.mean(0)
        ac, bc = a - ma, b - mb
        U, D, Vt = np.linalg.svd(bc.T @ ac / len(a))
        S = np.eye(3)
        if np.linalg.det(U) * np.linalg.det(Vt) < 0:
            S[2, 2] = -1
        s = np.trace(np.diag(D) @ S) / ((ac**2).sum() / len(a))
        out[i] = (s * ((U @ S @ Vt) @ ac.T)).T + mb
    return out


def main() -> None:
    ap = base_parser(__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--poses", type=int, nargs="+", default=[64, 1104])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    for device in devices(args.device):
        rows = []
        for B in args.poses:
            t = rng.normal(size=(B, 17, 3))
            p = 1.3 * t + 0.05 * rng.normal(size=t.shape)
            pt, tt = torch.tensor(p, device=device), torch.tensor(t, device=device)
            got = procrustes_align(pt, tt).cpu().numpy()
            np.testing.assert_allclose(got, naive_align(p, t), rtol=1e-9, atol=1e-12)
            case = f"B={B}, J=17, f64"
            reps = args.repeats
            naive_ms = 1e3 * timeit(
                lambda p=p, t=t: naive_align(p, t), device, 1, max(3, reps // 4)
            )
            rows.append({"case": case, "contender": "per-pose loop (numpy)", "ms": naive_ms})
            ms = 1e3 * timeit(lambda pt=pt, tt=tt: procrustes_align(pt, tt), device, args.warmup,
                              reps)  # fmt: skip
            rows.append({"case": case, "contender": "procrustes_align", "ms": ms})
        print_table(f"Procrustes alignment on {device}", rows, "per-pose loop (numpy)")
        if not args.no_save:
            write_json("procrustes", device, {"rows": rows})


if __name__ == "__main__":
    main()
