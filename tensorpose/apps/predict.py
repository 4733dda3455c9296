"""``tensorpose predict``: 2D poses of every person in an image, a folder of images or a video.

Check the inputs (model, boxes, input, output folder), then per batch of frames decode
(:func:`tensorpose.io.video.iter_frames`), find people (:mod:`tensorpose.pose2d`) and stage the
outputs; commit them all at once when the whole input is done
(:class:`tensorpose.io.atomic.OutputFolder`).

Outputs in ``out_dir``:

- ``results.json``: COCO keypoint results (``COCO.loadRes`` input), every person;
- ``openpose/<name>_<frame:012d>_keypoints.json``: OpenPose per-frame JSON in the ``COCO_18``
  layout (:func:`tensorpose.layouts.to_coco18`), people scoring at least ``min_score``;
  ``<name>`` is the image's or video's stem (frame 0 for an image);
- pictures: ``drawn/<image file name>`` for images, ``<video stem>.mp4`` for a video (H.264 with
  ``imageio-ffmpeg``, else mp4v: :class:`~tensorpose.io.video.VideoWriter`).

With ``--model blazepose`` a video runs in video mode (``tracking``, see
:class:`~tensorpose.blazepose.pipeline.BlazePoseTracker`: the next region of interest from the
smoothed landmarks, the detector again when someone is lost; with ``max_people`` > 1 also on a
schedule, on overlapping squares of the frame, people kept apart: ``find_everyone``), and a
folder of videos (the cameras of one recording, decoded side by side, one batch per time step)
writes one OpenPose folder per camera,
``openpose/<video stem>/<video stem>_<frame:012d>_keypoints.json`` (person_id = track), and
``<video stem>.mp4`` each; ``results.json`` then holds every camera (each result names its
``video``; image ids are frame numbers). ``tensorpose triangulate OUT/openpose CALIB`` reads the
camera folders directly (matched to the calibration's cameras by name: ``cam01`` <-> ``cam_01``).

COCO image ids: from the boxes file when it is a COCO file with an ``images`` list (matched by
file name), otherwise the number in the file name (COCO's own ``000000000790.jpg`` is image
790); when some file has no number, or two share one, every file gets its position in the
sorted folder. Video frames are numbered from 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import torch

from ..blazepose.pipeline import check_frame_size
from ..errors import InputError, MissingFileError
from ..io.atomic import OutputFolder
from ..io.coco import coco_results, load_detections
from ..io.openpose import write_openpose
from ..io.video import (
    IMAGE_EXTENSIONS,
    FrameBatch,
    OpenedVideo,
    VideoWriter,
    count_frames,
    frame_rate_spread,
    is_video,
    iter_frames,
    iter_videos_lockstep,
)
from ..layouts import COCO17_INDEX, COCO_LINKS, to_coco18
from ..pose2d import PoseModel, pad_frames, topdown_people
from ..skeleton import get_skeleton
from ..viz.draw import draw_people

__all__ = [
    "BLAZEPOSE_MODELS",
    "PredictResult",
    "load_models",
    "predict",
    "predict_command",
    "summary",
]

BLAZEPOSE_MODELS = {"blazepose": "full", "blazepose-heavy": "heavy"}
"""``--model`` values of BlazePose -> their landmark network (``BlazePose.load``'s variant)."""


@dataclass
class PredictResult:
    """What :func:`predict` did: ``frames`` processed, ``people`` found (all scores),
    ``seconds`` of wall time, ``frames_per_s``, and the ``outputs`` written (name -> path)."""

    frames: int
    people: int
    seconds: float
    outputs: dict[str, Path] = field(default_factory=dict)
    image_ids: list[int] = field(default_factory=list)
    empty_frames: int = 0
    detector_frames: int | None = None  # video mode: frames the detector ran on
    cameras: int = 0  # a folder of videos: one output per camera
    variable_rate: dict[str, dict] = field(default_factory=dict)  # video stem -> its spread

    @property
    def frames_per_s(self) -> float:
        return self.frames / max(self.seconds, 1e-9)


class _Staged:
    """The outputs of one run, staged in an :class:`OutputFolder`."""

    def __init__(self, outputs: OutputFolder, stem: str, video: bool, fps: float,
                 which: dict[str, bool], min_score: float, min_kp: float,
                 skeleton: str, camera: bool = False) -> None:  # fmt: skip
        self.outputs, self.stem, self.video, self.which = outputs, stem, video, which
        self.sub = stem if camera else ""  # the OpenPose JSON in openpose/<stem>/ per camera
        self.skeleton = get_skeleton(skeleton)
        self.min_score, self.min_kp = min_score, min_kp
        self.results: list[dict] = []
        self.writer = VideoWriter(outputs.path(f"{stem}.mp4"), fps) if video else None
        self.fps = fps if video else None  # recorded in the OpenPose JSON
        self.times: list[float] = []  # a video's frame time stamps (seconds)

    def add(self, frames: FrameBatch, people: list[dict]) -> None:
        if self.video and frames.times_s is not None:
            self.times += frames.times_s
        if self.which["coco"]:
            for iid, p in zip(frames.image_ids, people, strict=True):
                if len(p["scores"]):
                    self.results += coco_results(
                        [iid] * len(p["scores"]), p["keypoints"][..., :2],
                        p["keypoints"][..., 2].clamp(0, 1), p["scores"],
                    )  # fmt: skip
        shown = [{k: v[p["scores"] >= self.min_score] for k, v in p.items()} for p in people]
        if self.which["openpose"]:
            # people at their track slot when tracked (OpenPose's person_id), else in order
            slots = [p["track"] if "track" in p else torch.arange(len(p["scores"])) for p in shown]
            P = max((int(t.max()) + 1 for t in slots if len(t)), default=0)
            kp = np.full((len(shown), max(P, 1), 18, 3), np.nan)
            if any("landmarks" in p for p in shown):  # BlazePose: its own 33 landmarks
                kp = np.full((len(shown), max(P, 1), 33, 3), np.nan)
            for i, (p, t) in enumerate(zip(shown, slots, strict=True)):  # per frame
                kp[i, t.numpy()] = (p["landmarks"].numpy() if "landmarks" in p
                                    else to_coco18(p["keypoints"].numpy()))  # fmt: skip
            names = [f"{Path(n).stem if not self.video else n}_{t:012d}_keypoints.json"
                     for n, t in zip(frames.names, frames.frame_index, strict=True)]  # fmt: skip
            write_openpose(torch.from_numpy(kp), self.outputs.path("openpose") / self.sub, names,
                           "BLAZEPOSE_33" if kp.shape[2] == 33 else "COCO_18",
                           identities=any("track" in p for p in shown), fps=self.fps,
                           times_s=frames.times_s if self.video else None)  # fmt: skip
        if self.which["draw"]:
            for img, name, p in zip(frames.images, frames.names, shown, strict=True):
                drawn = draw_people(img, p, self.min_kp, self.skeleton, COCO_LINKS)
                bgr = cv2.cvtColor(drawn, cv2.COLOR_RGB2BGR)
                self._picture(bgr, name)

    def _picture(self, bgr: np.ndarray, name: str) -> None:
        if self.writer is not None:
            self.writer.write(bgr)
            return
        path = self.outputs.path("drawn") / name
        path.parent.mkdir(exist_ok=True)
        if not cv2.imwrite(str(path), bgr):
            raise InputError(f"{path}: could not write the picture")

    def finish(self, results: bool = True) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.which["coco"] and results:
            self.outputs.path("results.json").write_text(json.dumps(self.results))
        if self.which["openpose"]:
            (self.outputs.path("openpose") / self.sub).mkdir(parents=True, exist_ok=True)
        if self.which["draw"] and not self.video:
            self.outputs.path("drawn").mkdir(exist_ok=True)


def _check_options(batch_size: int, box_threshold: float, min_score: float, input: Path) -> None:
    if not input.exists():
        raise MissingFileError(f"{input}: no such image, folder or video")
    if not (input.is_dir() or input.is_file()):  # never opened: a FIFO would block
        raise InputError(f"{input}: not a regular file or a folder (a FIFO, a socket or a device)")
    if not (isinstance(batch_size, int) and 1 <= batch_size <= 4096):
        raise InputError(f"--batch-size must be an integer in 1..4096, got {batch_size!r}")
    for flag, v in (("--box-threshold", box_threshold), ("--min-score", min_score)):
        if not 0 <= v <= 1:  # NaN fails too
            raise InputError(f"{flag} must be in [0, 1], got {v!r}")


def _check_models(pose: PoseModel, boxes, detector: PoseModel | None) -> None:
    if pose.finds_people:
        if boxes is not None or detector is not None:
            raise InputError(f"a {pose.kind} model finds people itself: --boxes/--detector are "
                             "not used")  # fmt: skip
        return
    if (boxes is None) == (detector is None):
        raise InputError(
            f"a top-down {pose.kind} model needs person boxes: give exactly one of --boxes (a "
            "COCO detections JSON) or --detector (a CenterNet model)"
        )
    if detector is not None and not detector.finds_people:
        raise InputError(
            f"--detector must be a model that finds people itself (CenterNet), got a top-down "
            f"{detector.kind} model"
        )


def _with_coco(pose, found: list[dict]) -> list[dict]:
    """People of a model with its own landmark layout (BlazePose's 33): COCO-17 ``keypoints``
    for results and pictures, the model's ``landmarks`` for the OpenPose JSON."""
    if pose.landmark_layout is None:
        return found
    index = COCO17_INDEX[pose.landmark_layout]
    for p in found:
        p["landmarks"], p["keypoints"] = p["keypoints"], p["keypoints"][:, index]
    return found


def _people(pose, detector, dets, fb: FrameBatch, images, size, box_threshold, batch_size,
            max_people):  # fmt: skip
    """Per frame of the batch: the people found, and whether a boxes file had any box."""
    if pose.finds_people:
        return _with_coco(pose, pose.find_people(fb, images, size, max_people)), False
    matched = False
    if detector is not None:
        found = detector.find_people(fb, images, size, max_people, box_threshold)
        per_frame = [torch.cat([p["boxes"], p["scores"][:, None]], -1) for p in found]
    else:
        per_frame = []
        for iid in fb.image_ids:  # per frame: a dictionary lookup
            d = dets.get(iid)
            matched |= d is not None
            d = np.zeros((0, 5)) if d is None else d[d[:, 4] >= box_threshold]
            per_frame.append(torch.from_numpy(d))
    return topdown_people(pose, images, per_frame, 4 * batch_size), matched


def _no_match(boxes, frames: int, ids: list[int], dets: dict) -> InputError:
    have = sorted(dets)[:5]
    return InputError(
        f"{boxes}: no detection for any of the {frames} input frames (their image ids: "
        f"{ids[:5]}{' ...' if len(ids) > 5 else ''}; the file has ids {have}"
        f"{' ...' if len(dets) > 5 else ''}); image ids come from the numbers in the file "
        "names, or from the boxes file's 'images' list"
    )


def _run(input, pose, detector, dets, names, staged, batch_size, box_threshold, bar,
         max_people: int = 1) -> dict:  # fmt: skip
    """Decode, find people and stage the outputs, batch by batch; the counts."""
    counts = {"frames": 0, "people": 0, "matched": False, "ids": [], "empty": 0}
    for fb in iter_frames(input, batch_size, names):
        images, size = pad_frames(fb.images, pose.device)
        people, hit = _people(pose, detector, dets, fb, images, size, box_threshold, batch_size,
                              max_people)  # fmt: skip
        counts["empty"] += sum(len(p["scores"]) == 0 for p in people)
        staged.add(fb, people)
        counts["matched"] |= hit
        counts["frames"] += len(fb.images)
        counts["people"] += sum(len(p["scores"]) for p in people)
        counts["ids"] += fb.image_ids
        bar.update(len(fb.images))
    return counts


def _tracked_videos(input: Path, video: bool, pose: PoseModel,
                    tracking: bool) -> list[Path] | None:  # fmt: skip
    """The videos BlazePose's video mode runs on: the input ``video``, or the videos of a folder
    (the cameras of one recording); ``None``: per-frame (image) mode."""
    if not pose.tracks_video or not tracking:
        return None
    if video:
        return [input]
    if not input.is_dir():
        return None
    videos = sorted(p for p in input.iterdir() if is_video(p))
    if not videos:
        return None
    if any(p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS for p in input.iterdir()):
        raise InputError(f"{input}: holds both videos and images; give a folder of one kind")
    stems = [v.stem for v in videos]
    if len(set(stems)) < len(stems):
        raise InputError(f"{input}: two videos share a name stem ({stems}): rename one")
    return videos


def _run_tracked(videos: list[OpenedVideo], pose, staged: list[_Staged], bar,
                 max_people: int, decoded: Iterable | None = None) -> dict:  # fmt: skip
    """BlazePose's video mode over the videos side by side, one frame of each per step (one
    batch); a video that ended early gets black frames, its outputs dropped. ``decoded``: the
    steps of :func:`~tensorpose.io.video.iter_videos_lockstep` decoded elsewhere (``None``:
    decoded here)."""
    counts = {"frames": 0, "people": 0, "matched": False, "ids": [], "empty": 0}
    tracker = pose.tracker(len(videos), max_people)
    last: list[np.ndarray | None] = [None] * len(videos)
    steps = iter_videos_lockstep(videos) if decoded is None else decoded
    for step in steps:  # a loop over time: the tracking recurrence
        for i, fb in enumerate(step):
            if fb is not None:
                if last[i] is None:
                    check_frame_size(fb.images[0].shape, str(videos[i].path))
                last[i] = fb.images[0]
            elif last[i] is not None and last[i].any():
                last[i] = np.zeros_like(last[i])
        images, size = pad_frames([f for f in last if f is not None], pose.device)
        people = _with_coco(pose, tracker.step(images, size))
        for fb, p, st in zip(step, people, staged, strict=True):
            if fb is None:
                continue
            st.add(fb, [p])
            counts["empty"] += len(p["scores"]) == 0
            counts["people"] += len(p["scores"])
            counts["frames"] += 1
            counts["ids"] += fb.image_ids
            bar.update(1)
    counts["detector_frames"] = tracker.detections
    return counts


@torch.no_grad()
def predict(
    input: str | Path,
    pose: PoseModel,
    out_dir: str | Path,
    *,
    boxes: str | Path | None = None,
    detector: PoseModel | None = None,
    batch_size: int = 8,
    box_threshold: float = 0.3,
    min_score: float = 0.1,
    min_keypoint_score: float = 0.2,
    coco: bool = True,
    openpose: bool = True,
    draw: bool = True,
    overwrite: bool = False,
    inputs: tuple = (),
    progress: bool = True,
    max_people: int | None = None,
    tracking: bool = True,
    decoded: Iterable[list[FrameBatch | None]] | None = None,
) -> PredictResult:
    """Predict every person's keypoints in an image, a folder of images or a video (with
    BlazePose also a folder of videos: see the module docstring).

    Args:
        input: image file, folder of images, or video file.
        pose: the model (:class:`~tensorpose.pose2d.PoseModel`), on its device, in eval mode.
        out_dir: where outputs go (see the module docstring); created.
        boxes: COCO detections JSON (top-down models; :func:`~tensorpose.io.coco.load_detections`).
        detector: a ``"centernet"`` model used as person detector (top-down models).
        batch_size: frames per batch (and people per top-down forward pass: ``4 x`` this).
        box_threshold: boxes (file or detector) scoring less are not used (0: all).
        min_score: people scoring less are left out of the OpenPose JSON and the pictures (the
            COCO results keep everyone: AP ranks by score).
        min_keypoint_score: joints drawn from this confidence on.
        coco, openpose, draw: which outputs to write.
        overwrite: replace the outputs of an earlier run in ``out_dir``.
        inputs: other input files (checkpoints) the output may not overlap.
        progress: a tqdm progress bar over frames.
        max_people, tracking: BlazePose: people per frame (default 1; a model that keeps its
            own number of people refuses it); video mode on videos.
        decoded: video mode only: the frames of the videos decoded elsewhere, as
            :func:`~tensorpose.io.video.iter_videos_lockstep` yields them (``tensorpose batch``
            streams them from its decoding tasks); the videos are then only probed here. The
            outputs are the same.

    Raises:
        ValueError: a bad input (named), a top-down model without ``boxes``/``detector``, a
            CenterNet model with them, a ``detector`` that is not a CenterNet model, or a boxes
            file whose image ids match none of the input's frames.
    """
    from tqdm.auto import tqdm

    t0, input = time.perf_counter(), Path(input)
    _check_options(batch_size, box_threshold, min_score, input)
    _check_models(pose, boxes, detector)
    if max_people is not None and not pose.counts_people:
        raise InputError(f"--max-people applies to a model told how many people to find "
                         f"(--model blazepose), not to a {pose.kind} model")  # fmt: skip
    max_people = 1 if max_people is None else max_people
    video = is_video(input)
    stem = input.stem if input.is_file() else input.resolve().name
    videos = _tracked_videos(input, video, pose, tracking)
    cameras = videos is not None and input.is_dir()  # one output per camera video
    movies = [f"{v.stem}.mp4" for v in videos] if cameras else [f"{stem}.mp4"]
    outputs = OutputFolder(out_dir, ["openpose", "results.json", "drawn", *movies], inputs=[
        input, boxes, *inputs], overwrite=overwrite, whole_folder=True,
        owned_suffixes=(".json", *IMAGE_EXTENSIONS))  # fmt: skip
    dets, names = load_detections(boxes) if boxes is not None else ({}, {})
    opened: list[OpenedVideo] = []  # each video opened once: probed, then decoded
    which = {"coco": coco, "openpose": openpose, "draw": draw}
    args = (which, min_score, min_keypoint_score, pose.skeleton)
    bar = None
    try:
        for v in videos or ([input] if video else []):  # a handful of videos
            opened.append(OpenedVideo(v))
        total = (sum(o.count for o in opened) if videos
                 else (opened[0].count or None) if video else count_frames(input))  # fmt: skip
        bar = tqdm(total=total, unit="frame", disable=not progress, desc=f"predict {input.name}",
                   leave=False)  # fmt: skip
        with outputs:
            if videos is None:
                fps = (opened[0].fps or 30.0) if video else 30.0
                staged = [_Staged(outputs, stem, video, fps, *args)]
                counts = _run(opened[0] if video else input, pose, detector, dets, names,
                              staged[0], batch_size, box_threshold, bar, max_people)  # fmt: skip
            else:
                staged, counts = _run_videos(outputs, opened, cameras, args, pose, bar, max_people,
                                             decoded)  # fmt: skip
            if boxes is not None and not counts["matched"]:
                raise _no_match(boxes, counts["frames"], counts["ids"], dets)
            _finish(outputs, staged, cameras)
            written = outputs.commit()
    finally:
        for o in opened:  # a handful of videos
            o.close()
        if bar is not None:
            bar.close()
    spread = {st.stem: s for st in staged if (s := frame_rate_spread(st.times)) is not None}
    return _result(counts, written, time.perf_counter() - t0, len(staged) if cameras else 0,
                   spread)  # fmt: skip


def _result(counts: dict, written: list[Path], seconds: float, cameras: int,
            spread: dict[str, dict]) -> PredictResult:  # fmt: skip
    keys = {"results.json": "results", "openpose": "openpose", "drawn": "pictures"}
    done = {keys.get(p.name, p.stem if cameras else "pictures"): p for p in written}
    return PredictResult(counts["frames"], counts["people"], seconds, done, counts["ids"],
                         counts["empty"], counts.get("detector_frames"), cameras,
                         spread)  # fmt: skip


def _run_videos(outputs, videos: list[OpenedVideo], cameras: bool, args: tuple, pose, bar,
                max_people: int,
                decoded: Iterable | None) -> tuple[list[_Staged], dict]:  # fmt: skip
    """BlazePose's video mode: the staged outputs of each (opened) video and the counts."""
    staged = [_Staged(outputs, v.path.stem, True, v.fps or 30.0, *args, cameras)
              for v in videos]  # fmt: skip
    return staged, _run_tracked(videos, pose, staged, bar, max_people, decoded)


def _finish(outputs: OutputFolder, staged: list[_Staged], cameras: bool) -> None:
    """Close the staged outputs; with several cameras one ``results.json`` for all (each
    result names its ``video``; image ids are frame numbers)."""
    for st in staged:
        st.finish(results=not cameras)
    if cameras and staged[0].which["coco"]:
        results = [{**r, "video": st.stem} for st in staged for r in st.results]
        outputs.path("results.json").write_text(json.dumps(results))


def predict_command(
    input: str | Path,
    checkpoint: str | Path | None = None,
    *,
    model: str = "checkpoint",
    detector: str | Path | None = None,
    out: str | Path | None = None,
    device: str = "auto",
    max_people: int | None = None,
    **options,
) -> tuple[PredictResult, object, Path]:
    """``tensorpose predict``: the pose model (a 2D checkpoint, or with ``model="blazepose"``
    the shipped BlazePose networks, ``"blazepose-heavy"`` its heavy landmark network installed
    by ``tensorpose convert-blazepose``) and a CenterNet ``detector`` loaded, the default output
    folder ``runs/predict/<name>``, then :func:`predict` with ``options``. BlazePose on a CPU
    first sets the process's allocator to keep freed memory for reuse
    (:func:`tensorpose.blazepose.memory.keep_freed_memory`: process-wide, as a command may).

    Returns:
        the result, the pose model and the output folder.

    Raises:
        ValueError: ``--model blazepose[-heavy]`` with a ``--checkpoint``, neither given, the
            heavy network not installed (naming ``tensorpose convert-blazepose``), or
            ``--max-people`` outside 1..64 (each naming the flag).
    """
    src = Path(input)
    out = Path(out) if out else Path("runs") / "predict" / src.resolve().stem
    pose, det = load_models(checkpoint, model=model, detector=detector, device=device,
                            max_people=max_people)  # fmt: skip
    r = predict(src, pose, out, detector=det, inputs=(checkpoint, detector),
                max_people=max_people, **options)  # fmt: skip
    return r, pose, out


def load_models(
    checkpoint: str | Path | None = None,
    *,
    model: str = "checkpoint",
    detector: str | Path | None = None,
    device: str = "auto",
    max_people: int | None = None,
) -> tuple[PoseModel, PoseModel | None]:
    """The pose model and the CenterNet ``detector`` of :func:`predict_command` (its flags
    checked), loaded once: ``tensorpose batch`` keeps them in each of its model workers.

    Raises:
        ValueError: as :func:`predict_command`.
    """
    from ..blazepose.memory import keep_freed_memory
    from ..blazepose.pipeline import BlazePose
    from ..pose2d import load_pose_model
    from ..train.distributed import resolve_device

    blaze = model in BLAZEPOSE_MODELS
    if blaze and checkpoint is not None:
        raise InputError(f"--model {model} takes no --checkpoint")
    if not blaze and checkpoint is None:
        raise InputError("--checkpoint is required (or --model blazepose)")
    if max_people is not None and not 1 <= max_people <= 64:
        raise InputError(f"--max-people must be in 1..64, got {max_people}")
    if blaze:
        dev = resolve_device(device, what="--device")
        if dev.type == "cpu":  # the command's process: keep freed activations for reuse
            keep_freed_memory()
        pose = BlazePose.load(dev, BLAZEPOSE_MODELS[model])
    else:
        pose = load_pose_model(checkpoint, device)
    det = load_pose_model(detector, device) if detector else None
    return pose, det


def summary(r: PredictResult, pose: PoseModel, out: Path) -> list[str]:
    """The lines ``tensorpose predict`` prints."""
    lines = [
        f"{r.frames} frames, {r.people} people, {r.seconds:.1f} s ({r.frames_per_s:.1f} "
        f"frames/s, {pose.kind} on {pose.device}) -> {out}"
    ]
    if r.empty_frames:
        lines.append(f"  {r.empty_frames} of {r.frames} frames without a person")
    if r.detector_frames is not None:
        lines.append(f"  video mode: the detector ran on {r.detector_frames} of {r.frames} frames")
    if r.cameras:
        lines.append(f"  {r.cameras} cameras: one OpenPose folder each in {out / 'openpose'} "
                     "(the input of `tensorpose triangulate`)")  # fmt: skip
    for stem, s in r.variable_rate.items():  # a handful of videos
        lines.append(f"  warning: {stem} has a variable frame rate: frame intervals "
                     f"{s['min_ms']:.1f} to {s['max_ms']:.1f} ms (median {s['median_ms']:.1f} "
                     "ms); each frame's time stamp is in its OpenPose JSON (time_s), the fps "
                     "recorded there and in the MP4 is the header's")  # fmt: skip
    return lines + [f"  {name}: {path}" for name, path in r.outputs.items()]
