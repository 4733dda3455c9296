"""The ``tensorpose`` command. Each subcommand is a small function; heavy imports happen inside
it so ``tensorpose --help`` stays fast."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def _bench_kinematics(args: argparse.Namespace) -> int:
    bench = Path(__file__).resolve().parent.parent / "benchmarks" / "kinematics.py"
    if not bench.exists():
        print(
            f"benchmark script not found at {bench} (run from a source checkout)", file=sys.stderr
        )
        return 2
    import runpy

    sys.argv = [str(bench), *args.rest]
    runpy.run_path(str(bench), run_name="__main__")
    return 0


def _bvh_info(args: argparse.Namespace) -> int:
    from .io.bvh import bundled_bvh, load_bvh

    paths = args.files or bundled_bvh()
    for p in paths:
        m = load_bvh(p)
        pos, sk = m.to_skeleton(args.mapping)
        height = (pos[:, sk.index("head"), 1] - pos[:, :, 1].min(1).values).median()
        print(
            f"{p}: {m.num_frames} frames at {m.fps:.1f} fps, {len(m.joint_names)} joints, "
            f"{len(m.end_sites)} end sites; {sk.name} median height {height:.2f} m"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tensorpose", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("bench-kinematics", help="run benchmarks/kinematics.py (source checkout)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    p.set_defaults(func=_bench_kinematics)

    p = sub.add_parser("bvh-info", help="summarise BVH files (default: the bundled CMU files)")
    p.add_argument("files", nargs="*", help="BVH files")
    p.add_argument("--mapping", default=None, help="joint-name mapping (default: detect)")
    p.set_defaults(func=_bvh_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as e:
        print(f"tensorpose {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
