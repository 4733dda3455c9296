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


def _smooth(args: argparse.Namespace) -> int:
    import torch

    from .io.openpose import LAYOUTS, load_openpose, write_openpose
    from .ops.filters import jitter, kalman_filter, kalman_smoother, lag, one_euro_filter

    src = Path(args.input_dir)
    if not src.is_dir():
        raise FileNotFoundError(f"input folder not found: {src}")
    # One OpenPose folder, or a folder of camera folders (e.g. the bundled tracks).
    if any(src.glob("*.json")):
        inputs = [src]
    else:
        inputs = sorted(d for d in src.iterdir() if d.is_dir() and any(d.glob("*.json")))
        if not inputs:
            raise ValueError(f"{src}: no OpenPose .json files in it or in its subfolders")
    out_root = Path(args.out) if args.out else Path.cwd() / f"smoothed_{src.name}_{args.method}"

    def smooth(x: torch.Tensor) -> torch.Tensor:
        if args.method == "one-euro":
            return one_euro_filter(x, args.fps, args.min_cutoff, args.beta, args.d_cutoff)
        fn = kalman_filter if args.method == "kalman" else kalman_smoother
        kw = {"process_noise": args.process_noise, "measurement_noise": args.measurement_noise}
        return fn(x, model=args.model, **kw)

    for folder in inputs:
        tracks = load_openpose(folder, args.layout, args.min_confidence)
        kp = tracks.keypoints  # (T, P, K, 3), NaN = missing
        raw = kp[..., :2].permute(1, 2, 0, 3)  # (P, K, T, 2): filters run along T
        sm = smooth(raw)
        out_dir = out_root if len(inputs) == 1 else out_root / folder.name
        xy = sm.permute(2, 0, 1, 3)
        write_openpose(torch.cat([xy, kp[..., 2:]], -1), out_dir, [f.name for f in tracks.files])
        T, P, K = kp.shape[:3]
        present = (tracks.raw[..., 2] > 0).any(-1, keepdim=True).expand(T, P, K)
        missing = torch.isnan(kp[..., 0])[present].float().mean() * 100
        low = tracks.low_confidence
        print(
            f"{folder.name}: {T} frames, {P} tracks ({tracks.layout}); of the joints of present "
            f"people {missing:.1f}% are missing, {int(low.sum())} of them detected with "
            f"confidence < {args.min_confidence} and treated as missing; jitter "
            f"{jitter(raw):.3f} -> {jitter(sm.masked_fill(raw.isnan(), float('nan'))):.3f} "
            f"px/frame^2 (on the same frames), lag {lag(raw, sm):+.2f} frames "
            f"({args.method}) -> {out_dir}"
        )
        if args.no_plot:
            continue
        names = LAYOUTS[tracks.layout]
        if args.joint not in names:
            raise ValueError(f"--joint must be one of {names}, got {args.joint!r}")
        j = names.index(args.joint)
        counts = (~torch.isnan(raw[..., 0])).sum((1, 2))  # most observed: main subject
        p = int(counts.argmax()) if args.track is None else args.track
        if not 0 <= p < P:
            raise ValueError(f"--track must be in [0, {P}), got {p}")
        from .viz import plot_joint_xy

        png = out_root / f"{folder.name}_{args.joint}_track{p}.png"
        plot_joint_xy(
            raw[p, j],
            {args.method: sm[p, j]},
            png,
            fps=args.fps,
            title=f"{folder.name}: {args.joint} of track {p}, raw vs {args.method}",
            dropped=tracks.raw[:, p, j, :2].masked_fill(~low[:, p, j, None], float("nan")),
        )
        print(f"  picture: {png}")


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


def _print_2d(m: dict, header: str) -> None:
    print(header)
    print(f"  {m['people']} people, plain crops")
    rows = (("pck", "PCK@0.2 (box)"), ("pck50", "PCK@0.5 (box)"), ("auc", "AUC (PCK 0..0.5)"),
            ("epe_px", "EPE (px)"), ("oks", "mean OKS"), ("AP", "COCO AP"), ("AP50", "COCO AP50"),
            ("AR", "COCO AR"))  # fmt: skip
    for key, label in rows:
        if key in m:
            print(f"  {label:<28s} {m[key]:10.4g}")
    if "AP" not in m:
        print("  COCO AP: install pycocotools (the coco extra) to compute it")


def _train_config(args: argparse.Namespace):
    from .config import load_config

    config, overrides = args.config, list(args.overrides)
    if config and "=" in config:  # no config file, only overrides
        config, overrides = None, [config, *overrides]
    if args.resume:
        stored = Path(args.resume) / "config.yaml"
        if not stored.is_file():
            raise FileNotFoundError(f"--resume {args.resume}: no config.yaml in that run folder")
        config = config or stored
    return load_config(config, overrides)  # no file: the defaults (the lifting recipe)


def _train(args: argparse.Namespace) -> int:
    from .train.trainer import evaluate_checkpoint, train

    cfg = _train_config(args)
    result = train(cfg, args.resume, progress=not args.quiet, resume=bool(args.resume),
                   profile=args.profile)  # fmt: skip
    if result["world_size"] > 1 and int(__import__("os").environ.get("RANK", "0")) != 0:
        return 0
    m = evaluate_checkpoint(result["checkpoint"], device=cfg.train.device)
    if cfg.task == "lift":
        (result["run_dir"] / "metrics.json").write_text(json.dumps(_metrics_json(m), indent=1))
        _print_metrics(m, f"held-out evaluation of {result['checkpoint']}")
    else:
        (result["run_dir"] / "metrics.json").write_text(json.dumps(m, indent=1))
        _print_2d(m, f"evaluation of {result['checkpoint']}")
    print(f"run folder: {result['run_dir']}  ({result['seconds']:.0f} s)")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .config import config_to_dict, load_config
    from .train.trainer import evaluate_checkpoint

    model_config = None
    if args.config:
        model_config = config_to_dict(load_config(args.config))["model"]
    m = evaluate_checkpoint(args.checkpoint, args.bvh, args.mapping, model_config, args.device,
                            annotations=args.coco)  # fmt: skip
    if "task" in m:  # 2D
        if args.json:
            print(json.dumps(m))
        else:
            _print_2d(m, f"evaluation of {args.checkpoint}")
        return 0
    if args.json:
        print(json.dumps(_metrics_json(m)))
    else:
        _print_metrics(m, f"evaluation of {args.checkpoint}")
    return 0


def _profile_data(args: argparse.Namespace) -> int:
    from .config import load_config
    from .train.trainer import profile_data

    cfg = load_config(args.config, args.overrides)
    rows = profile_data(cfg, args.workers, args.batches)
    print(f"input pipeline of {args.config} ({cfg.task}), {args.batches} batches of "
          f"{cfg.train.batch_size}:")  # fmt: skip
    for r in rows:
        print(f"  workers {r['workers']:2d}: {r['samples_per_s']:9.1f} samples/s, "
              f"{r['per_worker']:9.1f} per worker")  # fmt: skip
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

    p = sub.add_parser(
        "smooth",
        help="smooth OpenPose JSON tracks (Kalman, RTS smoother or One-Euro)",
        description="Read OpenPose per-frame JSON (one folder, or a folder of camera folders), "
        "link people into tracks, treat joints below --min-confidence as missing, smooth every "
        "joint of every track at once, write the same JSON format (a joint the filter predicted "
        "through a gap keeps its x, y with confidence 0) and a PNG of one joint's x(t), y(t).",
    )
    p.add_argument("input_dir", help="OpenPose JSON folder (or a folder of such folders)")
    p.add_argument("--method", choices=["kalman", "rts", "one-euro"], default="rts")
    p.add_argument("--out", default=None, help="output folder (default ./smoothed_<name>_<method>)")
    p.add_argument("--fps", type=float, default=30.0, help="frame rate (bundled tracks: 60)")
    p.add_argument("--layout", default=None, help="BODY_25, BODY_25B or COCO_18 (default: detect)")
    p.add_argument("--min-confidence", type=float, default=0.3)
    p.add_argument("--model", choices=["velocity", "acceleration"], default="velocity")
    p.add_argument(
        "--process-noise", type=float, default=0.5, help="Kalman q, (px/frame^2)^2 (default 0.5)"
    )
    p.add_argument(
        "--measurement-noise", type=float, default=9.0, help="Kalman r, px^2 (default 9)"
    )
    p.add_argument("--min-cutoff", type=float, default=1.0, help="One-Euro, Hz (default 1)")
    p.add_argument("--beta", type=float, default=0.01, help="One-Euro, 1/px (default 0.01)")
    p.add_argument("--d-cutoff", type=float, default=1.0, help="One-Euro, Hz (default 1)")
    p.add_argument("--joint", default="r_wrist", help="joint to draw (default r_wrist)")
    p.add_argument(
        "--track", type=int, default=None, help="track to draw (default: the most observed)"
    )
    p.add_argument("--no-plot", action="store_true", help="skip the picture")
    p.set_defaults(func=_smooth)
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
    p = sub.add_parser(
        "train",
        help="train any task from a YAML recipe (configs/lift_cmu.yaml, deeppose_coco.yaml, ...)",
        description="Train a task. Under torchrun (torchrun --nproc_per_node N -m tensorpose "
        "train ...) every process trains a shard of each global batch with DDP.",
    )
    p.add_argument("config", nargs="?", default=None, help="YAML config file")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides, e.g. train.epochs=5")
    p.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its checkpoint.pt")  # fmt: skip
    p.add_argument("--profile", action="store_true",
                   help="write a torch.profiler Chrome trace (RUN_DIR/trace.json)")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_train)

    p = sub.add_parser("profile-data", help="time the input pipeline alone (samples/s per worker)")
    p.add_argument("config", help="YAML config file")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--batches", type=int, default=10)
    p.set_defaults(func=_profile_data)

    p = sub.add_parser("eval", help="evaluate a checkpoint (lifting: BVH files; 2D: COCO)")
    p.add_argument("checkpoint", help="checkpoint.pt written by train/demo")
    p.add_argument("--bvh", nargs="+", default=None, help="BVH files (default: held-out ones)")
    p.add_argument("--mapping", default=None, help="BVH joint mapping (default: detect)")
    p.add_argument("--coco", default=None, help="2D: COCO keypoint JSON (default: the run's)")
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
    except RuntimeError as e:
        from .train.trainer import TrainingStopped

        if not isinstance(e, TrainingStopped):
            raise
        print(f"tensorpose {args.command}: stopped: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
