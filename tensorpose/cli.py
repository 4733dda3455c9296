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


def _coco_info(args: argparse.Namespace) -> int:
    from .io.coco import bundled_coco, load_coco_keypoints

    path = args.file or bundled_coco()
    d = load_coco_keypoints(path, min_keypoints=args.min_keypoints, warn=False)
    vis = sum(r.num_keypoints for r in d.records)
    print(
        f"{path}: {len(d.images)} images, {len(d)} people kept ({vis} labelled keypoints, "
        f"K={len(d.keypoint_names)}); skipped: "
        + ", ".join(f"{k} {v}" for k, v in d.skipped.items())
    )
    for p in d.problems:
        print(f"  bad record: {p}")
    return 0


def _viz(args: argparse.Namespace) -> int:
    import cv2

    from . import skeletons
    from .augment import AugmentConfig
    from .data.images import TopDownDataset
    from .io.coco import bundled_coco, load_coco_keypoints
    from .viz import augment_grid

    H, W = args.size
    coco = load_coco_keypoints(args.coco or bundled_coco())
    ds = TopDownDataset(coco, aspect_ratio=W / H, cache_images=True)
    if args.people:
        people = args.people
    else:  # spread over the dataset
        n = min(args.rows, len(ds))
        people = [round(i * (len(ds) - 1) / max(n - 1, 1)) for i in range(n)]
    bad = [i for i in people if not 0 <= i < len(ds)]
    if bad:
        raise ValueError(f"--people {bad}: the dataset has {len(ds)} people (0..{len(ds) - 1})")
    cfg = AugmentConfig(output_size=(H, W), shift=0.05)
    sk = skeletons.get("coco17")
    grid = augment_grid(
        ds, sk, cfg, people, args.augmentations, args.seed, args.backend, links=coco.links
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(out), cv2.cvtColor(grid, cv2.COLOR_RGB2BGR)):
        raise ValueError(f"{out}: could not write the picture (unknown extension?)")
    print(
        f"wrote {out}: {len(people)} people x (plain + {args.augmentations} augmented) crops, "
        f"{args.backend} backend; green = person's left, orange = right"
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

    p = sub.add_parser("coco-info", help="summarise a COCO keypoint file and its bad records")
    p.add_argument("file", nargs="?", help="annotation JSON (default: the bundled subset)")
    p.add_argument("--min-keypoints", type=int, default=1)
    p.set_defaults(func=_coco_info)

    p = sub.add_parser("viz", help="draw augmented crops with keypoints and skeleton links")
    p.add_argument("--coco", default=None, help="annotation JSON (default: the bundled subset)")
    p.add_argument("--out", default="runs/viz/augment.png", help="output picture")
    p.add_argument("--people", type=int, nargs="*", help="dataset indices (default: spread)")
    p.add_argument("--rows", type=int, default=4, help="people when --people is not given")
    p.add_argument("--augmentations", type=int, default=5, help="random crops per person")
    p.add_argument("--size", type=int, nargs=2, default=(256, 192), metavar=("H", "W"))
    p.add_argument("--backend", choices=("device", "cpu"), default="device")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_viz)
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
