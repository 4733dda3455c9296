"""The ``tensorpose`` command. Each subcommand parses its arguments, calls one library function
and prints what it returns; heavy imports happen inside the command so ``tensorpose --help``
stays fast."""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from .errors import InputError


# ---------------------------------------------------------------------- commands
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


BVH_UNITS = ("m", "cm", "mm", "inch", "cmu")
"""The keys of ``tensorpose.io.bvh_mappings.UNITS`` (named here: the CLI starts without torch)."""


def _bvh_info(args: argparse.Namespace) -> int:
    from .io.info import bvh_info

    print("\n".join(bvh_info(args.files, args.mapping, args.units or "")))
    return 0


def _coco_info(args: argparse.Namespace) -> int:
    from .io.info import coco_info

    print("\n".join(coco_info(args.file, args.min_keypoints, args.images)))
    return 0


def _smooth(args: argparse.Namespace) -> int:
    from .apps.smooth import smooth_folder, summary
    from .smoothing import FilterSettings

    if args.layout is not None and args.layout not in SMOOTH_LAYOUTS:
        raise InputError(
            f"--layout must be one of {', '.join(SMOOTH_LAYOUTS)}, got {args.layout!r}"
        )
    settings = FilterSettings(args.method, 30.0 if args.fps is None else args.fps, args.model,
                              args.process_noise,
                              args.measurement_noise, args.min_cutoff, args.beta,
                              args.d_cutoff)  # fmt: skip
    report = smooth_folder(args.input_dir, args.out, settings, args.layout, args.min_confidence,
                           None if args.no_plot else args.joint, args.track,
                           args.overwrite, fps_from_files=args.fps is None)  # fmt: skip
    _print(summary(report, settings, args.min_confidence))
    return 0


def _viz(args: argparse.Namespace) -> int:
    from .viz.draw import augment_picture

    people = augment_picture(args.out, args.coco, tuple(args.size), args.people, args.rows,
                             args.augmentations, args.backend, args.seed,
                             overwrite=args.overwrite)  # fmt: skip
    print(
        f"wrote {args.out}: {len(people)} people x (plain + {args.augmentations} augmented) "
        f"crops, {args.backend} backend; green = person's left, orange = right"
    )
    return 0


def _print_evaluation(m: dict, header: str, as_json: bool = False) -> None:
    """An evaluation as the task reports it (or its JSON part)."""
    from .tasks import get_task

    task = get_task(m["task"])
    if as_json:
        print(json.dumps(task.metrics_json(m)))
    else:
        print("\n".join([header, *task.report(m)]))


def _train(args: argparse.Namespace) -> int:
    from .apps.train import train_command

    result, m = train_command(args.config, list(args.overrides), args.resume, not args.quiet,
                              args.profile)  # fmt: skip
    if m is None:  # a DDP rank other than 0
        return 0
    _print_evaluation(m, f"evaluation of {result['checkpoint']}")
    print(f"run folder: {result['run_dir']}  ({result['seconds']:.0f} s)")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .config import config_to_dict, load_config
    from .inference import evaluate

    model_config = config_to_dict(load_config(args.config))["model"] if args.config else None
    options = {"bvh": args.bvh, "mapping": args.mapping, "units": args.units,
               "annotations": args.coco}  # fmt: skip
    m = evaluate(args.checkpoint, args.device, model_config, flip=args.flip,
                 **{k: v for k, v in options.items() if v is not None})  # fmt: skip
    flip = " (test-time flip averaged)" if args.flip else ""
    _print_evaluation(m, f"evaluation of {args.checkpoint}{flip}", args.json)
    return 0


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WxH (e.g. 1920x1080), got {text!r}") from None
    return w, h


def _lift(args: argparse.Namespace) -> int:
    from .apps.lift import lift, summary

    r = lift(args.input, args.checkpoint, args.out, layout=args.layout, person=args.person,
             fps=args.fps, calib=args.calib, camera=args.camera, size=args.size,
             video=args.video, flip=args.flip, min_confidence=args.min_confidence,
             reproject=args.reproject, root_relative=args.root_relative,
             overwrite=args.overwrite, device=args.device, vp3d_joints=args.vp3d_joints,
             progress=not args.quiet)  # fmt: skip
    _print(summary(r))
    return 0


def _profile_data(args: argparse.Namespace) -> int:
    from .apps.profile_data import profile_data, summary

    cfg, prof = profile_data(args.config, args.overrides, args.workers, args.batches,
                             args.sample, not args.no_model_step)  # fmt: skip
    _print(summary(args.config, cfg, prof))
    return 0


def _predict(args: argparse.Namespace) -> int:
    from .apps.predict import predict_command, summary

    r, pose, out = predict_command(
        args.input, args.checkpoint, model=args.model, detector=args.detector, out=args.out,
        device=args.device, max_people=args.max_people, boxes=args.boxes,
        batch_size=args.batch_size, box_threshold=args.box_threshold, min_score=args.min_score,
        overwrite=args.overwrite, progress=not args.quiet, tracking=not args.image_mode,
    )  # fmt: skip
    _print(summary(r, pose, out))
    return 0 if r.empty_frames < r.frames else 1


def _export(args: argparse.Namespace) -> int:
    from .apps.export import export_checkpoint, summary

    try:
        r = export_checkpoint(
            args.checkpoint, args.out, args.with_decoding, args.opset, overwrite=args.overwrite
        )
    except ImportError as e:
        print(f"tensorpose export: error: {e}", file=sys.stderr)
        return 2
    _print(summary(r))
    if r["max_error"] > args.tolerance:
        print(f"tensorpose export: error: max error {r['max_error']:.2e} exceeds "
              f"{args.tolerance:g}", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .apps.demo import demo

    out = demo(args.overrides, args.head, args.out, args.name, progress=not args.quiet)
    head = out["config"].model.head
    _print_evaluation(out["metrics"], f"held-out evaluation ({head} head)")
    print(f"wall time {out['seconds']:.0f} s; run folder {out['run_dir']}: config.yaml, "
          "checkpoint.pt, metrics.json, history.json, curves.png, skeletons.png")  # fmt: skip
    return 0


def _triangulate(args: argparse.Namespace) -> int:
    from .apps.triangulate import summary, triangulate_folder
    from .multiview.recording import drop_rule

    out = args.out or f"triangulated_{Path(args.tracks_dir).resolve().name}"
    r = triangulate_folder(args.tracks_dir, args.calib, out, min_confidence=args.min_confidence,
                    max_reprojection_px=args.max_reprojection_px, layout=args.layout,
                    fps=args.fps, overwrite=args.overwrite, people=args.people, axes=args.axes,
                    filter=args.filter, cutoff=args.cutoff, max_gap=args.max_gap,
                    drop=drop_rule(args.drop_rule),
                    chunk_frames=args.chunk_frames, sync=args.sync,
                    left_right=args.left_right, write_2d=args.write_2d)  # fmt: skip
    _print(summary(r))
    if args.kinematics:  # each person's TRC -> <out>/kinematics/ (unscalable people skipped)
        from .apps import kinematics

        trcs = [Path(p) for p in r["outputs"].values() if p.endswith(".trc")]
        k = kinematics.kinematics_files(trcs, Path(out) / "kinematics", height=args.height,
                                        mass=args.mass, overwrite=args.overwrite,
                                        skip_unscalable=True)  # fmt: skip
        _print(kinematics.summary(k))
    return 0


def _kinematics(args: argparse.Namespace) -> int:
    from .apps.kinematics import kinematics_files, summary

    r = kinematics_files([Path(p) for p in args.trc], Path(args.out), height=args.height,
                         mass=args.mass, model=args.model, overwrite=args.overwrite)  # fmt: skip
    _print(summary(r))
    return 0


def _sync(args: argparse.Namespace) -> int:
    from .apps.sync import summary, sync_folder

    out = args.out or f"synced_{Path(args.tracks_dir).resolve().name}"
    r = sync_folder(args.tracks_dir, out, calib_path=args.calib, fps=args.fps,
                    max_lag=args.max_lag, min_confidence=args.min_confidence,
                    cutoff=args.cutoff, overwrite=args.overwrite)  # fmt: skip
    _print(summary(r))
    return 0


def _convert_blazepose(args: argparse.Namespace) -> int:
    from .apps.convert_blazepose import convert_blazepose, summary

    _print(summary(convert_blazepose(args.source, args.out, overwrite=args.overwrite)))
    return 0


def _eval_wild(args: argparse.Namespace) -> int:
    from .apps.eval_wild import eval_wild, summary

    r = eval_wild(args.tracks_dir, args.calib, args.checkpoint, flip=args.flip,
                  reproject=args.reproject, reference_2d=args.reference_2d,
                  min_confidence=args.min_confidence, layout=args.layout,
                  device=args.device, people=args.people)  # fmt: skip
    _print([json.dumps(r)] if args.json else summary(r))
    return 0


def _batch(args: argparse.Namespace) -> int:
    from .apps.batch import run_batch, summary

    r = run_batch(args.root, steps=args.steps, config=args.config, address=args.address,
                  workers=args.workers, cpus=args.cpus, local=args.local,
                  overwrite=args.overwrite, progress=not args.quiet,
                  threads=args.threads)  # fmt: skip
    _print(summary(r))
    return 1 if r["failed"] else 0


def _print(lines: list[str]) -> None:
    print("\n".join(lines))


# ---------------------------------------------------------------------- arguments
def _thread_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=_thread_count, default=None,
                   help="CPU threads (default: half the CPUs, at least one)")  # fmt: skip


def add_bench_kinematics(sub) -> None:
    p = sub.add_parser("bench-kinematics", help="run benchmarks/kinematics.py (source checkout)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    p.set_defaults(func=_bench_kinematics)


def add_bvh_info(sub) -> None:
    p = sub.add_parser("bvh-info", help="summarise BVH files (default: the bundled CMU files)")
    p.add_argument("files", nargs="*", help="BVH files")
    p.add_argument("--mapping", default=None, help="joint-name mapping (default: detect)")
    p.add_argument("--units", default=None, choices=BVH_UNITS,
                   help="length unit (default: from the skeleton's standing height)")  # fmt: skip
    p.set_defaults(func=_bvh_info)


SMOOTH_LAYOUTS = ("BODY_25", "BODY_25B", "COCO_18", "COCO_17", "H36M_17", "BLAZEPOSE_33")
"""``smooth --layout`` names: the keys of :data:`tensorpose.layouts.LAYOUTS` (a test keeps them
equal; spelled out so ``tensorpose --help`` does not import torch)."""


def add_smooth(sub) -> None:
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
    p.add_argument(
        "--fps",
        type=float,
        default=None,
        help="frame rate (default: what the JSON records, else 30; bundled tracks: 60)",
    )
    p.add_argument("--layout", default=None,
                   help=f"one of {', '.join(SMOOTH_LAYOUTS)} (default: detect)")  # fmt: skip
    p.add_argument("--min-confidence", type=float, default=0.3)
    p.add_argument("--model", choices=["velocity", "acceleration"], default="velocity")
    p.add_argument("--process-noise", type=float, default=0.5,
                   help="Kalman q, (px/frame^2)^2 (default 0.5)")  # fmt: skip
    p.add_argument("--measurement-noise", type=float, default=9.0,
                   help="Kalman r, px^2 (default 9)")  # fmt: skip
    p.add_argument("--min-cutoff", type=float, default=1.0, help="One-Euro, Hz (default 1)")
    p.add_argument("--beta", type=float, default=0.01, help="One-Euro, 1/px (default 0.01)")
    p.add_argument("--d-cutoff", type=float, default=1.0, help="One-Euro, Hz (default 1)")
    p.add_argument("--joint", default="r_wrist", help="joint to draw (default r_wrist)")
    p.add_argument("--track", type=int, default=None,
                   help="track to draw (default: the most observed)")  # fmt: skip
    p.add_argument("--no-plot", action="store_true", help="skip the picture")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of an existing output folder")  # fmt: skip
    _add_threads(p)
    p.set_defaults(func=_smooth)


def add_coco_info(sub) -> None:
    p = sub.add_parser("coco-info", help="summarise a COCO keypoint file and its bad records")
    p.add_argument("file", nargs="?", help="annotation JSON (default: the bundled subset)")
    p.add_argument("--min-keypoints", type=int, default=1)
    p.add_argument("--images", default=None,
                   help="image folder (default: next to the file); lists missing ones")  # fmt: skip
    p.set_defaults(func=_coco_info)


def add_viz(sub) -> None:
    p = sub.add_parser("viz", help="draw augmented crops with keypoints and skeleton links")
    p.add_argument("--coco", default=None, help="annotation JSON (default: the bundled subset)")
    p.add_argument("--out", default="runs/viz/augment.png", help="output picture")
    p.add_argument("--overwrite", action="store_true", help="replace an existing picture")
    p.add_argument("--people", type=int, nargs="*", help="dataset indices (default: spread)")
    p.add_argument("--rows", type=int, default=4, help="people when --people is not given")
    p.add_argument("--augmentations", type=int, default=5, help="random crops per person")
    p.add_argument("--size", type=int, nargs=2, default=(256, 192), metavar=("H", "W"))
    p.add_argument("--backend", choices=("device", "cpu"), default="device")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_viz)


def add_train(sub) -> None:
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


def add_profile_data(sub) -> None:
    p = sub.add_parser(
        "profile-data",
        help="diagnose the input pipeline of a 2D config (time per stage, verdict, fix)",
        description="Time each input stage of a top-down 2D config (file read, JPEG decode, "
        "augmentation, targets, collate, worker-to-main transfer, host-to-device copy) and real "
        "DataLoaders per worker count against one model step; print the verdict (io-, decode-, "
        "augmentation-, transfer- or device-bound) and the suggested fix.",
    )
    p.add_argument("config", help="YAML config file (task heatmap or deeppose)")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--batches", type=int, default=4, help="batches per DataLoader measurement")
    p.add_argument("--sample", type=int, default=64, help="people timed per stage")
    p.add_argument(
        "--no-model-step",
        action="store_true",
        help="do not time a model step (the verdict then ignores the model)",
    )
    p.set_defaults(func=_profile_data)


def add_predict(sub) -> None:
    p = sub.add_parser(
        "predict",
        help="2D poses of every person in an image, a folder of images or a video",
        description="Run a heatmap or deeppose checkpoint (top-down: person boxes from --boxes "
        "or a CenterNet --detector) or a centernet checkpoint (no boxes) on INPUT. Writes "
        "results.json (COCO keypoint results), openpose/ (per-frame JSON, COCO_18 layout: input "
        "of `tensorpose smooth` and `tensorpose lift`) and drawn/ pictures or an MP4. Outputs "
        "are written under temporary names and renamed when the whole input is done. With "
        "--model blazepose a folder of videos (the cameras of one recording) gives one folder "
        "per camera, openpose/<video stem>/, the input of `tensorpose triangulate`.",
    )
    p.add_argument("input", help="image, folder of images, video, or (blazepose) folder of videos")
    p.add_argument("--checkpoint", default=None, help="checkpoint.pt of a 2D run")
    p.add_argument("--model", choices=("checkpoint", "blazepose", "blazepose-heavy"),
                   default="checkpoint",
                   help="blazepose: MediaPipe's BlazePose (shipped, no checkpoint; OpenPose "
                   "JSON in the BLAZEPOSE_33 layout); blazepose-heavy: its heavy landmark "
                   "network, installed once by `tensorpose convert-blazepose`")  # fmt: skip
    p.add_argument("--max-people", type=int, default=None, help="blazepose: people per frame "
                   "(default 1: video mode as MediaPipe's; 2 or more: video mode looks for "
                   "everyone, the detector every 10 frames and on overlapping squares of the "
                   "frame, and keeps them apart)")  # fmt: skip
    p.add_argument("--image-mode", action="store_true", help="blazepose on videos: each frame "
                   "alone (default: video mode, people tracked from their landmarks)")  # fmt: skip
    group = p.add_mutually_exclusive_group()
    group.add_argument("--boxes", default=None, help="COCO detections JSON (top-down models)")
    group.add_argument(
        "--detector",
        default=None,
        help="centernet checkpoint used as person detector (top-down models)",
    )
    p.add_argument("--out", default=None, help="output folder (default runs/predict/<name>)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    p.add_argument("--batch-size", type=int, default=8, help="frames per batch")
    p.add_argument("--box-threshold", type=float, default=0.3, help="boxes scoring less unused")
    p.add_argument(
        "--min-score",
        type=float,
        default=0.1,
        help="people scoring less are left out of OpenPose JSON and pictures",
    )
    p.add_argument("--device", default="auto", help="auto, cpu, cuda")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_threads(p)
    p.set_defaults(func=_predict)


def add_export(sub) -> None:
    p = sub.add_parser(
        "export",
        help="export a 2D checkpoint to ONNX (dynamic batch) and check it with onnxruntime",
    )
    p.add_argument("checkpoint", help="checkpoint.pt of a heatmap, deeppose or centernet run")
    p.add_argument("--format", choices=["onnx"], default="onnx")
    p.add_argument("--with-decoding", action="store_true",
                   help="decoding inside the graph: keypoints in input pixels")  # fmt: skip
    p.add_argument("--out", default=None, help="output file (default: next to the checkpoint)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--opset", type=int, default=18, help="ONNX opset (>= 18)")
    p.add_argument(
        "--tolerance",
        type=float,
        default=1e-4,
        help="largest accepted onnxruntime vs PyTorch difference (exit 1 above)",
    )
    _add_threads(p)
    p.set_defaults(func=_export)


def add_eval(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a checkpoint (lifting: BVH files; 2D: COCO)")
    p.add_argument("checkpoint", help="checkpoint.pt written by train/demo")
    p.add_argument("--bvh", nargs="+", default=None, help="BVH files (default: held-out ones)")
    p.add_argument("--mapping", default=None, help="BVH joint mapping (default: detect)")
    p.add_argument("--units", default=None, choices=BVH_UNITS,
                   help="BVH length unit (default: from the standing height)")  # fmt: skip
    p.add_argument("--coco", default=None, help="2D: COCO keypoint JSON (default: the run's)")
    p.add_argument("--config", default=None, help="fail unless its model section matches")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--flip", action="store_true",
                   help="lifting: average with the mirrored input's prediction")  # fmt: skip
    _add_threads(p)
    p.set_defaults(func=_eval)


def add_lift(sub) -> None:
    p = sub.add_parser(
        "lift",
        help="2D keypoints of a recording (OpenPose folder, COCO results, npz) -> 3D files",
        description="Lift one person's 2D keypoints to 3D joints placed in the camera frame "
        "(metres; --root-relative: the pelvis at the origin) and write <name>_3d.npz, "
        "<name>.trc (OpenSim, Y up), <name>.csv, a PNG of "
        "skeletons and, with --video, an MP4. Joints below --min-confidence or missing are "
        "bridged by linear interpolation in time. Nothing is written unless all inputs are "
        "valid; existing outputs are refused without --overwrite.",
    )
    p.add_argument("input", help="OpenPose JSON folder, COCO results .json, or .npz")
    p.add_argument("--checkpoint", default=None,
                   help="lifting checkpoint.pt or VideoPose3D .bin (default: bundled)")  # fmt: skip
    p.add_argument("--layout", default=None, help="keypoint layout (default: detect)")
    p.add_argument(
        "--person",
        type=int,
        default=None,
        help="track (default: the one seen whole, with every joint the lifter needs, in the "
        "most frames); the summary names every person found",
    )
    p.add_argument("--fps", type=float, default=None, help="frame rate (default: file's or 30)")
    p.add_argument("--calib", default=None, help="calibration file (.qca.txt, .toml)")
    p.add_argument("--camera", default=None, help="camera name in --calib")
    p.add_argument("--size", type=_size, default=None, metavar="WxH",
                   help="image size (default: --calib's, else --video's)")  # fmt: skip
    p.add_argument("--video", default=None,
                   help="the recording: write an MP4 overlay (and its image size is the "
                   "default --size)")  # fmt: skip
    p.add_argument("--flip", action="store_true", help="test-time flip averaging")
    p.add_argument("--reproject", action="store_true",
                   help="slide each detected joint onto its camera ray (3D re-projects onto the "
                   "2D; bone lengths then vary)")  # fmt: skip
    p.add_argument(
        "--root-relative",
        action="store_true",
        help="write root-relative joints (no trajectory; the pelvis at the origin)",
    )
    p.add_argument("--min-confidence", type=float, default=0.3)
    p.add_argument("--out", default=None, help="output folder (default ./lift_<name>)")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    p.add_argument("--device", default="cpu", help="cpu, cuda, auto")
    p.add_argument("--vp3d-joints", choices=("coco17", "h36m17"), default=None,
                   help="VideoPose3D input joints (default: coco17 if the file name says "
                   "coco/detectron)")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_threads(p)
    p.set_defaults(func=_lift)


def add_demo(sub) -> None:
    p = sub.add_parser(
        "demo", help="train + evaluate the default lifter on CMU mocap, with pictures"
    )
    p.add_argument("overrides", nargs="*", help="section.key=value overrides")
    p.add_argument("--head", default="kinematic", choices=["kinematic", "direct"])
    p.add_argument("--out", default="runs", help="parent folder of the run folder")
    p.add_argument("--name", default="", help="run folder name (default demo_<head>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_demo)


DROP_RULE_CHOICES = ("tensorpose", "pose2sim")
"""``--drop-rule``'s choices: the keys of :data:`tensorpose.multiview.recording.DROP_FLAGS`
(kept here so that ``tensorpose --help`` imports no torch; a test checks they agree)."""


def add_triangulate(sub) -> None:
    p = sub.add_parser(
        "triangulate",
        help="multi-camera OpenPose folders + calibration -> 3D joints (TRC, NPZ)",
        description="Triangulate one folder of OpenPose JSON per camera with a Qualisys "
        ".qca.txt or Pose2Sim .toml calibration (folders matched to cameras by name).",
    )
    p.add_argument("tracks_dir", help="folder with one OpenPose JSON folder per camera")
    p.add_argument("--calib", required=True, help="calibration (.qca.txt or .toml)")
    p.add_argument("--out", default=None, help="output folder (default ./triangulated_<name>)")
    p.add_argument("--min-confidence", type=float, default=0.3)
    p.add_argument("--max-reprojection-px", type=float, default=15.0)
    p.add_argument("--layout", default=None, help="keypoint layout (default: detect)")
    p.add_argument("--fps", type=float, default=None,
                   help="frame rate (default: an .npz fps key or the videos next to the tracks; "
                   "bundled trial: 60)")  # fmt: skip
    p.add_argument("--axes", default="pose2sim", choices=("pose2sim", "calibration"),
                   help="TRC frame: pose2sim (Y up; its X, Y, Z = the calibration's Y, Z, X) or "
                   "the calibration's world frame (default: pose2sim)")  # fmt: skip
    p.add_argument("--filter", default="none", choices=("none", "butterworth", "kalman", "rts"),
                   help="3D filter over time (default: none)")  # fmt: skip
    p.add_argument("--cutoff", type=float, default=6.0,
                   help="Butterworth cut-off in Hz (zero-phase, order 4; default 6)")  # fmt: skip
    p.add_argument("--max-gap", type=int, default=None,
                   help="fill gaps of up to this many frames linearly (default: 10 with a "
                   "filter, 20 with --drop-rule pose2sim, 0 otherwise)")  # fmt: skip
    p.add_argument("--drop-rule", default="tensorpose", choices=DROP_RULE_CHOICES,
                   help="camera dropping: tensorpose (while any camera's error is over "
                   "--max-reprojection-px, drop the camera without which the others agree "
                   "best) or pose2sim (Pose2Sim's: while the mean error is over it, the best "
                   "subset with one camera fewer; gaps <= 20 frames filled linearly); default "
                   "tensorpose")  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    p.add_argument("--people", default=None, metavar="auto|N",
                   help="several people: auto (each found in a tenth of the frames) or N (the "
                   "N best seen); a TRC and an NPZ per person (default: one person)")  # fmt: skip
    p.add_argument("--left-right", default="fix", metavar="fix|keep",
                   help="fix (default): make each person's left and right consistent across "
                   "cameras (a camera whose detection fits the others only with every "
                   "left/right pair exchanged is swapped back; counted per camera in the summary "
                   "and the NPZ's swapped); keep: the labels as they are")  # fmt: skip
    p.add_argument("--write-2d", action="store_true",
                   help="also write <name>_2d/: the input's OpenPose folders with those swaps "
                   "repaired (the input of smooth and lift)")  # fmt: skip
    p.add_argument("--chunk-frames", type=int, default=1000,
                   help="frames read and triangulated at a time: bounds the memory, same result "
                   "(default 1000)")  # fmt: skip
    p.add_argument("--sync", default=None, metavar="SYNC_JSON",
                   help="frame offsets of `tensorpose sync`: drop each camera's first frames, "
                   "keep the frames common to all")  # fmt: skip
    p.add_argument("--kinematics", action="store_true",
                   help="then `tensorpose kinematics` on each person's TRC into "
                   "<out>/kinematics/ (people that cannot be scaled are skipped)")  # fmt: skip
    _add_body_flags(p)
    _add_threads(p)
    p.set_defaults(func=_triangulate)


KINEMATICS_MODELS = ("auto", "body25b", "body25", "coco17", "blazepose", "halpe26")
"""``--model``'s choices: the keys of :data:`tensorpose.biomech.SETUPS` and ``auto`` (kept here
so that ``tensorpose --help`` imports no numpy; a test checks they agree)."""


def _add_body_flags(p) -> None:
    p.add_argument("--height", type=float, default=None,
                   help="the person's height in metres (default: estimated from the TRC, as "
                   "Pose2Sim)")  # fmt: skip
    p.add_argument("--mass", type=float, default=70.0, help="kilograms (default 70)")


def add_kinematics(sub) -> None:
    p = sub.add_parser(
        "kinematics",
        help="TRC -> scaled OpenSim model + joint angles (Pose2Sim's scaling and IK)",
        description="Scale Pose2Sim's OpenSim model on the frames where the person stands "
        "upright and run OpenSim's inverse kinematics, as Pose2Sim 0.10's kinematics step. "
        "Writes per TRC <stem>.osim, <stem>.mot (joint angles), <stem>_ik_marker_errors.sto "
        "and <stem>_angles.png. Needs OpenSim: pip install 'tensorpose[opensim]'.",
    )
    p.add_argument("trc", nargs="+", help="TRC files in metres, one person each")
    p.add_argument("--out", required=True, help="output folder")
    _add_body_flags(p)
    p.add_argument("--model", default="auto", choices=KINEMATICS_MODELS,
                   help="Pose2Sim setup (default auto: from the TRC's markers)")  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    _add_threads(p)
    p.set_defaults(func=_kinematics)


def add_sync(sub) -> None:
    p = sub.add_parser(
        "sync",
        help="unsynchronised cameras: each camera's frame offset from the keypoint speeds",
        description="Cross-correlate each camera's keypoint speeds with the first camera's over "
        "a range of lags; with --calib, the epipolar agreement of the keypoints picks the lag. "
        "Writes sync.json for `tensorpose triangulate --sync`.",
    )
    p.add_argument("tracks_dir", help="folder with one OpenPose JSON folder per camera")
    p.add_argument("--calib", default=None, help="calibration (.qca.txt or .toml), optional")
    p.add_argument("--out", default=None, help="output folder (default ./synced_<name>)")
    p.add_argument("--fps", type=float, default=None,
                   help="frame rate (default: as triangulate; bundled trial: 60)")  # fmt: skip
    p.add_argument("--max-lag", type=int, default=None,
                   help="largest offset tried, frames (default: half the shortest "
                   "camera)")  # fmt: skip
    p.add_argument("--min-confidence", type=float, default=0.3)
    p.add_argument("--cutoff", type=float, default=6.0,
                   help="low-pass cut-off of the keypoint tracks in Hz (default 6)")  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    _add_threads(p)
    p.set_defaults(func=_sync)


def add_eval_wild(sub) -> None:
    p = sub.add_parser(
        "eval-wild",
        help="monocular lift of each camera vs the multi-view triangulation (limb joints)",
    )
    p.add_argument("tracks_dir", help="folder with one OpenPose JSON folder per camera")
    p.add_argument("--calib", required=True, help="calibration (.qca.txt or .toml)")
    p.add_argument("--checkpoint", default=None, help="lifter (default: bundled)")
    p.add_argument("--flip", action="store_true", help="test-time flip averaging")
    p.add_argument("--reproject", action="store_true", help="as lift --reproject")
    p.add_argument(
        "--reference-2d",
        action="store_true",
        help="lift the triangulated keypoints projected into each camera instead of its "
        "detections (noise-free 2D: the error left is the lifter's)",
    )
    p.add_argument("--min-confidence", type=float, default=0.3)
    p.add_argument("--layout", default=None, help="keypoint layout (default: detect)")
    p.add_argument("--people", default=None, metavar="auto|N",
                   help="several people, as triangulate --people: each person's lift in each "
                   "camera against that person's triangulation (default: one person)")  # fmt: skip
    p.add_argument("--device", default="cpu", help="cpu, cuda, auto")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _add_threads(p)
    p.set_defaults(func=_eval_wild)


def add_convert_blazepose(sub) -> None:
    p = sub.add_parser(
        "convert-blazepose",
        help="install BlazePose's heavy landmark network (for predict --model blazepose-heavy)",
        description="Convert pose_landmark_heavy.tflite of the npm package @mediapipe/pose "
        "(`npm pack @mediapipe/pose@0.5.1675469404`; Apache-2.0) to tensorpose's float16 "
        "PyTorch graph and install it in $TENSORPOSE_MODELS, else "
        "$XDG_CACHE_HOME/tensorpose/models or ~/.cache/tensorpose/models. Needs the tflite "
        "package.",
    )
    p.add_argument("source", help="the npm package (.tgz), pose_landmark_heavy.tflite, or a "
                   "folder holding it")  # fmt: skip
    p.add_argument("--out", default=None, help="models folder (default: as described above)")
    p.add_argument("--overwrite", action="store_true", help="replace an installed network")
    p.set_defaults(func=_convert_blazepose)


def add_batch(sub) -> None:
    p = sub.add_parser(
        "batch",
        help="every recording of a session/participant/trial tree (or a manifest CSV) through "
        "predict, sync, triangulate, kinematics; on Ray, resumable",
        description="Find the recordings under ROOT (Pose2Sim's batch layout: trial folders "
        "with the videos in videos/, the calibration at trial, participant or session level) "
        "or in a manifest CSV (recording,videos,calibration), and run each through --steps with "
        "the single commands' defaults, writing their outputs inside each trial folder "
        "(pose/, sync/, pose-3d/, kinematics/). Recordings whose outputs exist for the same "
        "inputs and options are skipped; a failing recording is recorded and the others go "
        "on; ROOT/batch.json lists done, skipped and failed. On Ray when installed "
        "(tensorpose[ray]), else sequentially. Exit 1 when a recording failed.",
    )
    p.add_argument("root", help="batch folder (session/participant/trial) or manifest .csv")
    p.add_argument("--steps", default=None,
                   help="comma-separated: predict,sync,triangulate,kinematics (default "
                   "predict,triangulate)")  # fmt: skip
    p.add_argument("--config", default=None,
                   help="YAML of options per step, e.g. 'triangulate: {people: auto}'")  # fmt: skip
    p.add_argument("--address", default=None,
                   help="an existing Ray cluster (default: a local Ray here)")  # fmt: skip
    p.add_argument("--workers", type=int, default=None,
                   help="2D model workers (default: the GPUs, else half the CPUs)")  # fmt: skip
    p.add_argument("--cpus", type=int, default=None,
                   help="CPUs of the local Ray (default: all)")  # fmt: skip
    p.add_argument("--local", action="store_true",
                   help="sequentially in this process, without Ray")  # fmt: skip
    p.add_argument("--overwrite", action="store_true",
                   help="replace outputs that the batch did not write")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--threads", type=_thread_count, default=None,
                   help="torch threads per Ray worker (default 1); with --local or without "
                   "Ray, in this process (default: half the CPUs)")  # fmt: skip
    p.set_defaults(func=_batch)


COMMANDS = (add_bench_kinematics, add_bvh_info, add_smooth, add_coco_info, add_viz, add_train,
            add_profile_data, add_eval, add_demo, add_predict, add_export, add_lift,
            add_triangulate, add_sync, add_eval_wild, add_kinematics, add_batch,
            add_convert_blazepose)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tensorpose", description=__doc__)
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error")  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def _one_line(e: BaseException) -> str:
    """An exception as one line: its message with line breaks joined by ``; ``, and any other
    control character (a raw ESC from a file, which would drive the terminal) escaped."""
    text = str(e) if not isinstance(e, OSError) or not e.strerror else _os_error(e)
    line = "; ".join(part.strip() for part in text.splitlines() if part.strip()) or repr(e)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def _os_error(e: OSError) -> str:
    """An OSError naming the file: ``path: reason`` (one message per file, as the OS says)."""
    if e.filename is not None and str(e.filename) not in str(e.args[-1]):
        return f"{e.filename}: {e.strerror}"
    return str(e.args[-1]) if e.args else e.strerror


EX_SOFTWARE = 70
"""Exit status of an internal error (a bug in tensorpose), as ``sysexits.h`` names it."""

USER_OS_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""``OSError`` numbers that are the user's to fix, not tensorpose's: a full disk, a quota."""


def _users_os_error(e: BaseException) -> bool:
    """An ``OSError`` that :data:`USER_OS_ERRORS` names (also as the cause of another error)."""
    while e is not None:
        if isinstance(e, OSError) and e.errno in USER_OS_ERRORS:
            return True
        e = e.__cause__
    return False


class _Terminated(BaseException):
    """SIGTERM, raised where the command is, so that its outputs are cleaned up as for Ctrl-C."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def _import_holding_ctrl_c() -> bool:
    """Import numpy, torch and the trainer (a second or more) with Ctrl-C held back; whether
    one came meanwhile. Python stops an import where the interrupt lands and leaves a
    half-initialised module behind (numpy without ``numpy.matrix``), so a later, unrelated
    error would follow; held back, the interrupt is answered once the imports are whole."""
    if threading.current_thread() is not threading.main_thread():
        return False  # signals reach the main thread only
    came: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401

        from .train import trainer  # noqa: F401
    finally:
        signal.signal(signal.SIGINT, old)
    return bool(came)


def _stdout_closed() -> bool:
    """True when standard output's reader has gone (a pipe into ``head``): the rest of the
    output is then discarded silently, as other command-line tools do (exit 141, SIGPIPE's)."""
    import select

    try:
        fd = sys.stdout.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        closed = any(ev & select.POLLERR for _, ev in poll.poll(0))  # a pipe without reader
    except (AttributeError, OSError, ValueError):
        return False
    if closed:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)  # the interpreter's last flush writes nowhere
        os.close(devnull)
    return closed


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command (:func:`run_command`); a Ctrl-C at any instant, while the command's
    modules (torch among them) are still being imported included, is one line and 130."""
    try:
        return run_command(argv)
    except KeyboardInterrupt:
        if "--debug" in (sys.argv[1:] if argv is None else argv):
            raise
        print("tensorpose: interrupted (Ctrl-C) before the command started; nothing was "
              "written", file=sys.stderr)  # fmt: skip
        return 130


def run_command(argv: Sequence[str] | None = None) -> int:
    """Run a command. Bad input (:class:`tensorpose.errors.InputError`: a file that cannot be
    read or parsed, a bad flag, setting or checkpoint) prints ``tensorpose CMD: error: <one
    line>`` naming the file or flag and returns 2; so does an ``OSError`` that says the disk is
    full or over quota (``ENOSPC``, ``EDQUOT``, :data:`USER_OS_ERRORS`), the user's to fix. Any
    other exception is a bug in tensorpose: one ``internal error`` line with its type, and
    :data:`EX_SOFTWARE` (70). A stopped training run returns 3; an interrupt 130 (SIGINT) or
    143 (SIGTERM). ``--debug`` re-raises with the full traceback. Before the command runs (and
    so before torch is loaded) the thread policy's environment is set
    (:func:`tensorpose.threads.prepare_environment`)."""
    args = build_parser().parse_args(argv)
    from .threads import prepare_environment

    prepare_environment()  # before torch: waiting OpenMP threads sleep (tensorpose.threads)
    if _import_holding_ctrl_c():
        print(f"tensorpose {args.command}: interrupted (Ctrl-C) before the command started; "
              "nothing was written", file=sys.stderr)  # fmt: skip
        return 130
    from .train.interrupt import Interrupted
    from .train.trainer import TrainingStopped

    main_thread = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        if getattr(args, "device", None) is not None:  # checked first, named as the flag
            from .train.distributed import resolve_device

            resolve_device(args.device, what="--device")
        if hasattr(args, "threads"):  # the commands that compute (tensorpose.threads)
            from .threads import set_threads

            set_threads(args.threads)
        return int(args.func(args) or 0)
    except _Terminated:
        print(f"tensorpose {args.command}: terminated (SIGTERM); every output is complete, "
              "the earlier one or the new one", file=sys.stderr)  # fmt: skip
        return 143
    except Interrupted as e:
        print(f"tensorpose {args.command}: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"tensorpose {args.command}: interrupted (Ctrl-C); every output is complete, the "
              "earlier one or the new one", file=sys.stderr)  # fmt: skip
        return 130
    except TrainingStopped as e:
        if args.debug:
            raise
        print(f"tensorpose {args.command}: stopped: {_one_line(e)}", file=sys.stderr)
        return 3
    except Exception as e:
        if isinstance(e, BrokenPipeError) and _stdout_closed():  # `tensorpose ... | head`
            return 141
        if args.debug:
            raise
        if isinstance(e, InputError) or _users_os_error(e):
            print(f"tensorpose {args.command}: error: {_one_line(e)}", file=sys.stderr)
            return 2
        print(f"tensorpose {args.command}: internal error: {type(e).__name__}: {_one_line(e)} "
              "(a bug in tensorpose: rerun with --debug for the traceback and report it)",
              file=sys.stderr)  # fmt: skip
        return EX_SOFTWARE
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


if __name__ == "__main__":
    raise SystemExit(main())
