"""Skeleton compose/decompose: the kinematics article's measurement, side by side.

Batch 128, T = 243 frames, the article's 15-joint tree (``seed15``), 3D. Per iteration:
decompose -> mean bone lengths over time -> compose. Contenders:
  loop         the article's loop over bones writing into a zeros tensor
  matmul       the article's 4D broadcast matmul with a (1, 1, J, J) ancestor matrix
  tensorpose   tensorpose.ops.compose / decompose (one GEMM each way), eager
  tp+compile   the same functions under torch.compile (skip with --no-compile)
  copy         a plain copy of the joints tensor: the memory floor (for the GPU target)

Usage: python benchmarks/kinematics.py [--device cpu|cuda|both] [--iters 100] [--no-compile]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, devices, print_table, timeit, write_json
from tensorpose.ops import compose, decompose
from tensorpose.skeleton import get_skeleton

SK = get_skeleton("seed15")


class Article:
    """The article's functions, as written there (indices and ancestor matrix as constants)."""

    def __init__(self, device: torch.device) -> None:
        self.sidx = torch.tensor([p for p, _ in SK.bones], device=device)
        self.eidx = torch.tensor([c for _, c in SK.bones], device=device)
        anc = torch.tensor(SK.ancestor_matrix, dtype=torch.float32, device=device)
        self.adj = anc.view(1, 1, *anc.shape)
        self.device = device

    def decompose(self, joints):
        bones = joints[:, :, self.eidx, :] - joints[:, :, self.sidx, :]
        length = torch.sqrt(torch.sum(bones**2, dim=-1, keepdim=True))
        return length, bones / length

    def compose_loop(self, lens, dirs):
        length = lens.view(-1, 1, lens.shape[1], 1)
        B, T, S, D = dirs.shape
        joints = torch.zeros((B, T, S + 1, D), dtype=dirs.dtype, device=self.device)
        for i in range(S):
            joints[:, :, self.eidx[i]] = (
                joints[:, :, self.sidx[i]] + length[:, :, i] * dirs[:, :, i]
            )
        return joints

    def compose_matmul(self, lens, dirs):
        length = lens.view(-1, 1, lens.shape[1], 1)
        B, T, S, D = dirs.shape
        joints = torch.zeros((B, T, S + 1, D), dtype=dirs.dtype, device=self.device)
        joints[:, :, self.eidx] = length * dirs
        return torch.matmul(self.adj, joints)


def tp_compose(lens, dirs):
    return compose(lens.unsqueeze(1), dirs, SK)


def tp_round_trip(joints):
    lengths, directions = decompose(joints, SK)
    return compose(lengths.mean(1, keepdim=True), directions, SK)


def run(device: torch.device, args) -> list[dict]:
    torch.manual_seed(0)
    B, T, J, D = 128, 243, SK.num_joints, 3
    joints = torch.randn(B, T, J, D, device=device)
    art = Article(device)
    lens, dirs = art.decompose(joints)
    lens = lens.mean(1)  # (B, S, 1), the article's per-sequence lengths
    grad = torch.randn(B, T, J, D, device=device)

    composers = {"loop": art.compose_loop, "matmul": art.compose_matmul, "tensorpose": tp_compose}

    def article_trip(compose_fn):
        def trip(x):
            length, direction = art.decompose(x)
            return compose_fn(length.mean(1), direction)

        return trip

    trips = {
        "loop": article_trip(art.compose_loop),
        "matmul": article_trip(art.compose_matmul),
        "tensorpose": tp_round_trip,
    }
    if not args.no_compile:
        composers["tp+compile"] = torch.compile(tp_compose)
        trips["tp+compile"] = torch.compile(tp_round_trip)

    # Same result from every contender (float32 tolerance).
    ref = art.compose_loop(lens, dirs)
    for name, fn in composers.items():
        err = (fn(lens, dirs) - ref).abs().max().item()
        assert err < 1e-3, f"{name} compose differs from the loop by {err}"

    rows = []

    def add(case, name, fn):
        sec = timeit(fn, device, warmup=args.warmup, repeats=args.iters)
        rows.append({"case": case, "contender": name, "ms": sec * 1e3})

    lens_g = lens.clone().requires_grad_()
    dirs_g = dirs.clone().requires_grad_()
    joints_g = joints.clone().requires_grad_()
    for name, fn in composers.items():
        add("compose fwd", name, lambda fn=fn: fn(lens, dirs))
    for name, fn in composers.items():
        add("compose fwd+bwd", name, lambda fn=fn: fn(lens_g, dirs_g).backward(grad))
    # The article's fastest round trip is whichever of its two is faster on this device.
    for name, fn in trips.items():
        add("round trip fwd", name, lambda fn=fn: fn(joints))
    for name, fn in trips.items():
        add("round trip fwd+bwd", name, lambda fn=fn: fn(joints_g).backward(grad))
    add("compose fwd", "copy", lambda: joints.clone())
    return rows


def main(argv=None) -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=100, help="timed iterations per contender")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile contender")
    args = p.parse_args(argv)
    for device in devices(args.device):
        rows = run(device, args)
        print_table(f"kinematics on {device} (batch 128, T 243, seed15, 3D)", rows, "loop")
        best_article = {}
        for r in rows:
            if r["contender"] in ("loop", "matmul"):
                best_article[r["case"]] = min(best_article.get(r["case"], 1e9), r["ms"])
        for r in rows:
            r["speedup_vs_article_best"] = best_article[r["case"]] / r["ms"]
        print("\nspeed-up vs the article's fastest per case:")
        for r in rows:
            if r["contender"] in ("tensorpose", "tp+compile"):
                print(
                    f"  {r['case']:<20} {r['contender']:<12} {r['speedup_vs_article_best']:5.2f}x"
                )
        if not args.no_save:
            write_json(
                "kinematics",
                device,
                {
                    "batch": 128,
                    "frames": 243,
                    "skeleton": "seed15",
                    "iters": args.iters,
                    "rows": rows,
                },
            )


if __name__ == "__main__":
    main()
