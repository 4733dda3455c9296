"""``tensorpose lift``: one person's 2D keypoints of a recording -> 3D files: the joints placed
in the camera frame with the root's trajectory (``root_relative``: the pelvis at the origin).

Check the inputs (keypoints, calibration or size, video, lifter), lift
(:func:`tensorpose.lifting.inference.lift_keypoints`), then commit ``<name>_3d.npz``,
``<name>.trc``,
``<name>.csv``, ``<name>_skeletons.png`` and with a video ``<name>.mp4`` all at once
(:class:`tensorpose.io.atomic.OutputFolder`).
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from ..errors import InputError
from ..io.atomic import OutputFolder
from ..io.calibration import load_calibration
from ..io.motion import write_csv, write_npz, write_trc
from ..io.openpose import MIN_TRACK_KEYPOINTS
from ..io.tracks import read_person
from ..io.video import VideoWriter, iter_video, video_info
from ..layouts import joint_marker_names
from ..lifting.inference import lift_keypoints, load_lifter
from ..ops.camera import camera_to_opensim
from ..ops.trajectory import path_length
from ..skeleton import Skeleton
from ..viz.charts import skeletons_3d_picture
from ..viz.draw import bone_colours_bgr, draw_lift_frame
from ..viz.panel3d import Panel3D

__all__ = ["DEFAULT_FPS", "lift", "output_names", "summary"]

DEFAULT_FPS = 30.0


def output_names(name: str) -> list[str]:
    """Every file ``lift`` may write for an input named ``name`` (the MP4 with ``--video``)."""
    return [f"{name}_3d.npz", f"{name}.trc", f"{name}.csv", f"{name}_skeletons.png",
            f"{name}.mp4"]  # fmt: skip


def _check_options(size, calib, camera, fps) -> None:
    if size is not None and calib is not None:
        raise InputError("pass either --size or --calib/--camera, not both")
    if camera is not None and calib is None:
        raise InputError("--camera needs --calib")
    if size is not None and (len(size) != 2 or min(size) < 1 or max(size) > 100_000):
        raise InputError(f"--size must be WxH with integers in 1..100000, got {size}")
    if fps is not None and not (math.isfinite(fps) and 0.1 <= fps <= 10_000):
        raise InputError(f"--fps must be a frame rate in 0.1..10000, got {fps}")


def _calibration_camera(calib: str | os.PathLike, camera: str | None):
    """``(K (3, 3), dist (5,), size (w, h))`` of one camera of a calibration file."""
    cal = load_calibration(calib)
    names = list(cal.names)
    if camera is None:
        raise InputError(f"--calib needs --camera (one of {names})")
    if camera not in names:
        raise InputError(f"--camera {camera!r} is not in {calib} (cameras: {names})")
    c = names.index(camera)
    w, h = (int(v) for v in cal.size[c].tolist())
    return cal.K[c].double(), cal.dist[c].double(), (w, h)


def _check_inside_image(keypoints: torch.Tensor, size, src: Path) -> None:
    """Most keypoints must lie within one image size of the image: else the image size (or
    the calibration) does not belong to these keypoints; more than a fifth of them beyond a
    tenth of the image is said in a note (a person may leave the picture)."""
    if size is None:
        return
    xy = keypoints[..., :2]
    xy = xy[torch.isfinite(xy).all(-1)]
    wh = xy.new_tensor([float(size[0]), float(size[1])])
    far = ((xy < -wh) | (xy > 2 * wh)).any(-1).double().mean() if len(xy) else xy.new_zeros(())
    if float(far) > 0.5:
        raise InputError(
            f"{src}: {float(far):.0%} of the keypoints lie more than one image size outside the "
            f"{size[0]}x{size[1]} image: check --size, or --calib/--camera"
        )
    out = ((xy < -0.1 * wh) | (xy > 1.1 * wh)).any(-1).double().mean() if len(xy) else far
    if float(out) > 0.2:  # implausible, yet possible (a person leaving the picture): said
        print(f"tensorpose lift: note: {float(out):.0%} of the keypoints of {src} lie outside the "
              f"{size[0]}x{size[1]} image by more than a tenth of it: check --size, or "
              "--calib/--camera", file=sys.stderr)  # fmt: skip


CODEC_PAD_PX = 16
"""Video encoders store frames in 16 x 16 blocks: a 1080-pixel side may be calibrated as 1088."""


def _check_video(video: str | os.PathLike, frames: int, size) -> tuple[int, int]:
    """The video's frame count must equal ``frames`` and its size the image size, or differ
    from it by less than :data:`CODEC_PAD_PX` per side (an encoder's padding or crop, which
    leaves the pixel coordinates as they are: drawn as is, with a one-line notice). Returns the
    image size: ``size``, or the video's when ``size`` is ``None``."""
    try:
        n, _, vsize = video_info(video)
    except ValueError as e:
        raise InputError(f"--video {e}") from None
    if n > 0 and n != frames:
        raise InputError(f"--video {video} has {n} frames but the keypoints have {frames}")
    if size is None or tuple(size) == tuple(vsize):
        return tuple(int(v) for v in vsize)
    what = f"--video {video} is {vsize[0]}x{vsize[1]} but the image size is {size[0]}x{size[1]}"
    if any(abs(int(a) - int(b)) >= CODEC_PAD_PX for a, b in zip(size, vsize, strict=True)):
        raise InputError(what)
    print(f"tensorpose lift: {what}: drawn on as is (the difference of under {CODEC_PAD_PX} px "
          "is taken for an encoder's padding)", file=sys.stderr)  # fmt: skip
    return size


def lift(
    input: str | os.PathLike,
    checkpoint: str | os.PathLike | None = None,
    out: str | os.PathLike | None = None,
    *,
    layout: str | None = None,
    person: int | None = None,
    fps: float | None = None,
    calib: str | os.PathLike | None = None,
    camera: str | None = None,
    size: tuple[int, int] | None = None,
    video: str | os.PathLike | None = None,
    flip: bool = False,
    min_confidence: float = 0.3,
    reproject: bool = False,
    root_relative: bool = False,
    overwrite: bool = False,
    device: str | torch.device = "cpu",
    vp3d_joints: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Lift a recording's 2D keypoints to 3D and write the files (``tensorpose lift``).

    Every input is checked before anything is written; the files are written under temporary
    names and moved into ``out`` at the end; existing outputs are refused unless ``overwrite``.

    Args:
        input: OpenPose JSON folder, COCO results ``.json`` or ``.npz``
            (:func:`tensorpose.io.tracks.read_person`; default person: the track seen whole
            in the most frames).
        checkpoint: ``.pt`` lifting checkpoint, VideoPose3D ``.bin``, or None (bundled).
        out: output folder (default ``./lift_<name>``, ``name`` the input's stem).
        calib, camera: a calibration file and camera name (image size, and ``K`` for
            intrinsics-normalised models); ``size``: ``(w, h)`` instead; with neither (and
            none in the keypoint file), the ``video``'s.
        video: the recording, for ``<name>.mp4`` (2D skeleton on the frames, 3D beside).
        flip: test-time flip averaging.
        min_confidence: joints below it are missing (bridged).
        reproject: slide the joints onto their 2D rays (see
            :func:`tensorpose.lifting.inference.lift_keypoints`).
        root_relative: write root-relative joints (the pelvis at the origin) instead of the
            joints placed in the camera frame with the root's trajectory.
        vp3d_joints: VideoPose3D input joints (see
        :func:`tensorpose.lifting.inference.load_lifter`).

    Returns:
        a report: input, kind, layout (+ reason), tracks, person, frames, joints, bridged
        counts, model, normalisation, size, fps, flip, reproject, root_relative, the root's
        mean depth and distance travelled (metres, up to the lifter's skeleton scale), files
        written, seconds.
    """
    t0 = time.perf_counter()
    src = Path(input)
    name = src.stem if src.suffix.lower() in (".json", ".npz") else src.resolve().name
    out_dir = Path(out) if out is not None else Path(f"lift_{name}")
    _check_options(size, calib, camera, fps)
    outputs = OutputFolder(out_dir, output_names(name), inputs=[src, checkpoint, calib, video],
                           overwrite=overwrite)  # fmt: skip
    with outputs:  # the folder's lock from here on: a second run is refused at once
        kp = read_person(src, layout, person, progress, min_confidence)
        K = dist = None
        if calib is not None:
            K, dist, size = _calibration_camera(calib, camera)
        size_source = ("--calib" if calib is not None else "--size" if size is not None
                       else "the keypoint file" if kp.size is not None else None)  # fmt: skip
        size = size if size is not None else kp.size
        T = kp.keypoints.shape[0]
        if video is not None:  # without a size given, the video's
            size = _check_video(video, T, size)
            size_source = size_source or "--video"
        fps_used = fps if fps is not None else kp.fps if kp.fps is not None else DEFAULT_FPS
        if not (math.isfinite(fps_used) and 0.1 <= fps_used <= 10_000):  # the file's own fps
            raise InputError(f"{src}: its fps {fps_used!r} is not a frame rate in 0.1..10000; "
                             "pass --fps")  # fmt: skip
        _check_inside_image(kp.keypoints, size, src)
        lifter = load_lifter(checkpoint, device, vp3d_joints)
        r = lift_keypoints(kp, lifter, size, K, flip, min_confidence, dist, reproject, fps_used)
        skel_in = lifter.skeleton_in
        _write_files(outputs, name, r, skel_in, lifter.skeleton_out, fps_used, root_relative)
        if video is not None:
            _write_video(outputs.path(f"{name}.mp4"), video, r, skel_in, lifter.skeleton_out,
                         fps_used, progress, root_relative)  # fmt: skip
        written = outputs.commit()
    return _report(src, kp, lifter, r, size, fps, fps_used, flip, reproject, min_confidence,
                   out_dir, written, t0) | {"root_relative": root_relative,
                                            "size_source": size_source}  # fmt: skip


def _report(src, kp, lifter, r, size, fps, fps_used, flip, reproject, min_confidence, out_dir,
            written, t0) -> dict[str, Any]:  # fmt: skip
    """What :func:`lift` did (see its Returns)."""
    return {
        "root_depth_m": float(r["root"][:, 2].mean()),
        "distance_m": float(path_length(r["root"])),
        "input": str(src),
        "kind": kp.kind,
        "layout": kp.layout,
        "layout_reason": kp.layout_reason,
        "tracks": kp.track_frames,
        "person": kp.person,
        "people": [
            {
                "track": p,
                "frames": kp.track_frames[p],
                "centre_px": [round(v, 1) for v in kp.track_centres[p]],
            }
            for p in kp.people()
        ],
        "dropped_detections": kp.dropped_detections,
        "frames": kp.keypoints.shape[0],
        "joints": lifter.skeleton_out.num_joints,
        "bridged_joints": r["bridged_joints"],
        "bridged_frames": r["bridged_frames"],
        "absent_frames": r["absent_frames"],
        "min_confidence": min_confidence,
        "model": f"{lifter.kind} {lifter.path}",
        "normalization": lifter.normalization,
        "size": tuple(size) if size is not None else None,
        "fps": fps_used,
        "fps_given": fps is not None or kp.fps is not None,
        "flip": flip,
        "reproject": reproject,
        "out_dir": str(out_dir),
        "files": [str(p) for p in written],
        "seconds": time.perf_counter() - t0,
    }


MAX_VIDEO_HEIGHT = 1080
"""The MP4's frames are scaled down to at most this height (encoding time, browsers)."""
AXES_NPZ = "camera frame: x right, y down, z forward (the camera at the origin), metres"
AXES_TRC = ("X/Y/Z: camera frame turned Y up (x, -y, -z): X right, Y up, Z towards the camera "
            "(the camera at the origin), metres")  # fmt: skip


def _write_files(outputs: OutputFolder, name: str, r: dict, skel_in: Skeleton,
                 skel_out: Skeleton, fps: float, root_relative: bool) -> None:  # fmt: skip
    """The npz, TRC, CSV and skeleton picture into the staging folder: joints placed with the
    root's trajectory, or root-relative (``root_relative``, the files as they were before
    the trajectory existed)."""
    rel = r["joints"].double()
    joints = rel if root_relative else rel + r["root"].double()[:, None]
    names = list(skel_out.names)
    arrays = {
        "joints": joints.float().numpy(), "names": np.array(names), "fps": np.float64(fps),
        "missing": r["missing"].numpy(), "input_names": np.array(skel_in.names),
        "keypoints_2d": r["pixels"].float().numpy(),
        "marker_names": np.array(joint_marker_names(names)),
    }  # fmt: skip
    if not root_relative:
        arrays |= {
            "root": r["root"].float().numpy(), "root_raw": r["root_raw"].float().numpy(),
            "joints_root_relative": rel.float().numpy(), "axes": np.array(AXES_NPZ),
        }  # fmt: skip
    write_npz(outputs.path(f"{name}_3d.npz"), arrays)
    up = camera_to_opensim(joints).numpy()
    if root_relative:
        axes = "X/Y/Z: camera frame turned Y up (x, -y, -z), root-relative, metres"
    else:
        axes = AXES_TRC
    markers = joint_marker_names(names)  # Pose2Sim's marker names, as triangulate's TRC
    write_trc(outputs.path(f"{name}.trc"), up, markers, fps, units="m", axes=axes)
    write_csv(outputs.path(f"{name}.csv"), up, names, fps, units="m")
    T = joints.shape[0]
    idx = torch.linspace(0, T - 1, min(4, T)).round().long().unique()
    skeletons_3d_picture(outputs.path(f"{name}_skeletons.png"), r["joints"][idx].double().numpy(),
                         skel_out.bones, bone_colours_bgr(skel_out),
                         [f"frame {int(i)}" for i in idx],
                         f"{name}: lifted 3D ({T} frames)")  # fmt: skip


def _write_video(path: Path, video, r: dict, skel_in: Skeleton, skel_out: Skeleton, fps: float,
                 progress: bool, root_relative: bool) -> None:  # fmt: skip
    """2D skeleton over each frame, the 3D panel beside (:class:`tensorpose.viz.panel3d.Panel3D`;
    frames decoded once, in order, scaled down to :data:`MAX_VIDEO_HEIGHT`)."""
    from tqdm import tqdm

    miss = r["missing"].numpy()
    rel = r["joints"].double()
    joints = (rel if root_relative else rel + r["root"].double()[:, None]).numpy()
    T = len(miss)
    panel = px = None
    with VideoWriter(path, fps) as writer:
        frames = tqdm(iter_video(video, T), total=T, desc="video", leave=False,
                      disable=not progress or T < 300)  # fmt: skip
        for t, frame in enumerate(frames):  # a loop over frames (decoding and drawing)
            s = min(1.0, MAX_VIDEO_HEIGHT / frame.shape[0])
            if s < 1.0:
                frame = cv2.resize(frame, (round(frame.shape[1] * s), round(frame.shape[0] * s)),
                                   interpolation=cv2.INTER_AREA)  # fmt: skip
            if panel is None:
                px = ((r["pixels"] + 0.5) * s - 0.5).round().long().numpy()
                panel = Panel3D(joints, skel_out.names, skel_out.bones,
                                bone_colours_bgr(skel_out), frame.shape[0], fps,
                                root=skel_out.root)  # fmt: skip
            writer.write(draw_lift_frame(frame, px[t], miss[t], panel.draw(t), skel_in))


def _dropped(n: int) -> str:
    """The note on detections too small to start a track (none: nothing)."""
    if not n:
        return ""
    return (
        f"; {n} detection(s) with fewer than {MIN_TRACK_KEYPOINTS} found keypoints matched no "
        "track and were left out"
    )


def _xy(centre) -> str:
    return (
        "never found"
        if any(math.isnan(v) for v in centre)
        else (f"around ({centre[0]:.0f}, {centre[1]:.0f}) px")
    )


def people_line(r: dict[str, Any]) -> list[str]:
    """With more than one person (a track in a tenth of the frames or more), the line that
    says so: the person taken, the others (frames seen, where in the image), ``--person``."""
    people = r.get("people", [])
    if len(people) < 2:
        return []
    took = next(p for p in people if p["track"] == r["person"])
    others = "; ".join(f"person {p['track']} ({p['frames']} frames, {_xy(p['centre_px'])})"
                       for p in people if p is not took)  # fmt: skip
    return [
        f"  {len(people)} people found: lifted person {took['track']} (seen in "
        f"{took['frames']} frames, {_xy(took['centre_px'])}); also {others}; pass "
        "--person N to lift another"
    ]


def summary(r: dict[str, Any]) -> list[str]:
    """The lines ``tensorpose lift`` prints."""
    tracks = ", ".join(map(str, r["tracks"]))
    size = "x".join(map(str, r["size"])) if r["size"] else "none"
    if r["size"] and r.get("size_source") == "--video":
        size += " (the video's)"
    fps = f"{r['fps']:g} fps" + ("" if r["fps_given"] else " (default; pass --fps)")
    return [
        f"{r['input']} ({r['kind']}): {r['frames']} frames, layout {r['layout']} "
        f"({r['layout_reason']})",
        f"  person {r['person']} of {len(r['tracks'])} track(s) (frames present: {tracks})"
        + _dropped(r.get("dropped_detections", 0)),
        *people_line(r),
        f"  bridged {r['bridged_joints']} joint-frames in {r['bridged_frames']} frames "
        f"(confidence < {r['min_confidence']} or missing; {r['absent_frames']} frames with no "
        "joint), by linear interpolation in time",
        f"  model {r['model']}, {r['normalization']} normalisation, size {size}, {fps}"
        + (", test-time flip" if r["flip"] else "")
        + (", joints slid onto their 2D rays" if r["reproject"] else ""),
        f"  root: mean depth {r['root_depth_m']:.2f} m, travelled {r['distance_m']:.2f} m "
        "(camera frame, up to the lifter's skeleton scale); files "
        + ("root-relative" if r["root_relative"] else "with the trajectory"),
        f"wrote {len(r['files'])} files to {r['out_dir']} ({r['seconds']:.1f} s):",
        *[f"  {f}" for f in r["files"]],
    ]
