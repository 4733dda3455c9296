"""The ``tensorpose`` command. Each subcommand is a small function; heavy imports happen inside
it so ``tensorpose --help`` stays fast."""

from __future__ import annotations

import argparse
import json
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


# ---------------------------------------------------------------------- 3D lifting
_METRIC_ROWS = (
    ("mpjpe_mm", "MPJPE", "mm"),
    ("p_mpjpe_mm", "P-MPJPE (Procrustes)", "mm"),
    ("n_mpjpe_mm", "N-MPJPE (scale)", "mm"),
    ("mpjve_mm", "MPJVE (velocity)", "mm/frame"),
    ("bone_std_mm", "bone length std", "mm"),
    ("mean_pose_mpjpe_mm", "mean-pose MPJPE (baseline)", "mm"),
)
_JSON_KEYS = ("mpjpe_mm", "p_mpjpe_mm", "n_mpjpe_mm", "mpjve_mm", "bone_std_mm", "frames")


def _metrics_json(m: dict) -> dict:
    out = {k: m[k] for k in _JSON_KEYS}
    if "mean_pose_mpjpe_mm" in m:
        out["mean_pose_mpjpe_mm"] = m["mean_pose_mpjpe_mm"]
    return out


def _print_metrics(m: dict, header: str) -> None:
    print(header)
    print(
        f"  {', '.join(m['sequences'])}: {m['frames']} poses ({m['cameras']} virtual cameras, "
        f"{m['fps']:.0f} fps)"
    )
    for key, label, unit in _METRIC_ROWS:
        if key in m:
            print(f"  {label:<28s} {m[key]:10.4g} {unit}")


def _train(args: argparse.Namespace) -> int:
    from .config import load_config
    from .train.trainer import evaluate_checkpoint, train

    cfg = load_config(args.config, args.overrides)
    result = train(cfg, progress=not args.quiet)
    m = evaluate_checkpoint(result["checkpoint"], device=cfg.train.device)
    (result["run_dir"] / "metrics.json").write_text(json.dumps(_metrics_json(m), indent=1))
    _print_metrics(m, f"held-out evaluation of {result['checkpoint']}")
    print(f"run folder: {result['run_dir']}  ({result['seconds']:.0f} s)")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .config import config_to_dict, load_config
    from .train.trainer import evaluate_checkpoint

    model_config = None
    if args.config:
        model_config = config_to_dict(load_config(args.config))["model"]
    m = evaluate_checkpoint(args.checkpoint, args.bvh, args.mapping, model_config, args.device)
    if args.json:
        print(json.dumps(_metrics_json(m)))
    else:
        _print_metrics(m, f"evaluation of {args.checkpoint}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    import time

    from .config import load_config
    from .train.trainer import evaluate_checkpoint, train
    from .viz import plot_curves, plot_skeletons_3d

    t0 = time.perf_counter()
    overrides = [f"model.head={args.head}", *args.overrides]
    cfg = load_config(None, overrides)
    run_dir = Path(args.out) / (args.name or f"demo_{cfg.model.head}")
    print(
        f"tensorpose demo: training the {cfg.model.head} lifter on CMU {', '.join(cfg.data.train)}"
        f" ({cfg.data.train_cameras} virtual cameras, {cfg.train.epochs} epochs), held out: "
        f"{', '.join(cfg.data.val)} -> {run_dir}"
    )
    result = train(cfg, run_dir, progress=not args.quiet)
    m = evaluate_checkpoint(result["checkpoint"], device=cfg.train.device, return_predictions=True)
    metrics = _metrics_json(m)
    metrics["seconds"] = round(time.perf_counter() - t0, 1)
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
    title = f"{cfg.model.head} head, held out {', '.join(m['sequences'])}"
    plot_curves(result["history"], run_dir / "curves.png", title)
    clip = m["predictions"][0]
    T = clip["pred"].shape[0]
    frames = [int(T * q) for q in (0.2, 0.4, 0.6, 0.8)]
    err = (clip["pred"] - clip["target"]).norm(dim=-1).mean(-1)
    labels = [f"frame {f}: {1000 * float(err[f]):.0f} mm" for f in frames]
    sk = m["data"].skeleton
    plot_skeletons_3d(
        clip["target"][frames], clip["pred"][frames], sk, run_dir / "skeletons.png",
        labels=labels, title=f"{title}, camera {m['data'].clips[clip['clip']].camera}",
    )  # fmt: skip
    metrics["seconds"] = round(time.perf_counter() - t0, 1)
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
    _print_metrics(m, f"held-out evaluation ({cfg.model.head} head)")
    print(f"wall time {metrics['seconds']:.0f} s; run folder {run_dir}: config.yaml, "
          "checkpoint.pt, metrics.json, history.json, curves.png, skeletons.png")  # fmt: skip
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

    p = sub.add_parser("train", help="train a 3D lifter from a YAML recipe (configs/lift_cmu.yaml)")
    p.add_argument("config", help="YAML config file")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides, e.g. train.epochs=5")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_train)

    p = sub.add_parser("eval", help="evaluate a lifter checkpoint on BVH files")
    p.add_argument("checkpoint", help="checkpoint.pt written by train/demo")
    p.add_argument("--bvh", nargs="+", default=None, help="BVH files (default: held-out ones)")
    p.add_argument("--mapping", default=None, help="BVH joint mapping (default: detect)")
    p.add_argument("--config", default=None, help="fail unless its model section matches")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_eval)

    p = sub.add_parser(
        "demo", help="train + evaluate the default lifter on CMU mocap, with pictures"
    )
    p.add_argument("overrides", nargs="*", help="section.key=value overrides")
    p.add_argument("--head", default="kinematic", choices=["kinematic", "direct"])
    p.add_argument("--out", default="runs", help="parent folder of the run folder")
    p.add_argument("--name", default="", help="run folder name (default demo_<head>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_demo)
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
