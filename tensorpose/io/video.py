"""Pictures and videos in and out: images decoded to RGB, a folder of images or a video decoded
once in batches of frames (counts and sizes checked), and an MP4 written from finished frames.

The commands never decode a video twice: :func:`iter_frames` yields :class:`FrameBatch` es of
``(H, W, 3)`` uint8 RGB frames; :class:`VideoWriter` takes BGR frames the drawing code made
and writes H.264 (browsers play it) when ``imageio-ffmpeg`` is installed, else mp4v.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..errors import InputError, MissingFileError
from .files import read_bytes

# FFmpeg's own log lines (e.g. "moov atom not found") would print beside tensorpose's one-line
# errors; OpenCV reads this when it first opens a video.
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")

__all__ = [
    "IMAGE_EXTENSIONS",
    "IRREGULAR",
    "MAX_IMAGE_PIXELS",
    "MAX_VIDEO_FRAMES",
    "MAX_VIDEO_PIXELS",
    "VIDEO_EXTENSIONS",
    "FrameBatch",
    "ImageReadError",
    "OpenedVideo",
    "VideoWriter",
    "count_frames",
    "frame_rate_spread",
    "image_header_size",
    "image_ids_from_names",
    "is_video",
    "iter_frames",
    "iter_video",
    "list_images",
    "open_video",
    "read_image",
    "video_info",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg")
MAX_IMAGE_BYTES = 256 << 20
"""Largest image file read (256 MiB)."""

MAX_VIDEO_PIXELS = 40_000_000
"""Largest video frame decoded (40 megapixels: 8K video is 35; a batch of 8 such frames is about
1 GB of RGB), read from the video's header before any frame is decoded."""
MAX_VIDEO_FRAMES = 10_000_000
"""Most frames a video's header may declare (46 hours at 60 fps)."""
MAX_IMAGE_PIXELS = 100_000_000
"""Largest image decoded (100 megapixels: 1.2 GB of 8-bit RGB with OpenCV's and the RGB copy),
checked on the width and height in a JPEG's or PNG's header before decoding: a few bytes of
header can claim 30000 x 30000."""

_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers


def image_header_size(data: bytes | np.ndarray) -> tuple[int, int] | None:
    """``(width, height)`` from a PNG's IHDR or a JPEG's first start-of-frame segment; ``None``
    for other formats or a header that cannot be read (the decoder then has its say)."""
    data = memoryview(data).cast("B")
    if bytes(data[:8]) == b"\x89PNG\r\n\x1a\n" and bytes(data[12:16]) == b"IHDR":
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if bytes(data[:2]) != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(data):  # a loop over the header's segments (a few dozen at most)
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD9)):  # markers without a length
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in _JPEG_SOF and i + 9 <= len(data):
            h = int.from_bytes(data[i + 5 : i + 7], "big")
            return int.from_bytes(data[i + 7 : i + 9], "big"), h
        if marker == 0xDA or length < 2:  # start of scan: no frame header before it
            return None
        i += 2 + length
    return None


class ImageReadError(InputError):
    """An image file exists but cannot be decoded (corrupt, truncated or not an image)."""


REDUCED_FLAGS = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2,
                 4: cv2.IMREAD_REDUCED_COLOR_4, 8: cv2.IMREAD_REDUCED_COLOR_8}  # fmt: skip
"""Decoding reduction -> OpenCV flag (libjpeg's scaled IDCT for JPEG files)."""
_RGB = getattr(cv2, "IMREAD_COLOR_RGB", None)  # OpenCV >= 4.10: the decoder writes RGB itself


def decode_rgb(data: np.ndarray, reduction: int) -> np.ndarray | None:
    """``(H, W, 3)`` uint8 RGB at ``reduction``, or None when OpenCV cannot decode it."""
    if _RGB is None:
        img = cv2.imdecode(data, REDUCED_FLAGS[reduction])
        return None if img is None else cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    return cv2.imdecode(data, (REDUCED_FLAGS[reduction] & ~cv2.IMREAD_COLOR) | _RGB)


def is_jpeg(data: np.ndarray) -> bool:
    """Whether the bytes start with the JPEG start-of-image marker."""
    return data.size >= 3 and bytes(data[:3]) == b"\xff\xd8\xff"


def read_image(path: str | Path, expected_size: tuple[int, int] | None = None,
               reduction: int = 1) -> np.ndarray:  # fmt: skip
    """Decode an image file to ``(H, W, 3)`` uint8 RGB.

    Args:
        path: the file.
        expected_size: ``(width, height)`` from the annotations; a different decoded size is an
            error (the keypoints would not match the pixels).
        reduction: 1, 2, 4 or 8: decode a JPEG at ``ceil(W / r) x ceil(H / r)`` (libjpeg's
            scaled IDCT: a fraction of the full decoding's cost). Output pixel ``i`` covers
            full-resolution pixels ``r i .. r i + r - 1``: full-resolution ``x`` is
            ``(x + 0.5) / r - 0.5`` in it. Files other than JPEG are always decoded whole
            (check :func:`is_jpeg` before asking for a reduction).

    Raises:
        FileNotFoundError: no such file.
        ImageReadError: not decodable, not of ``expected_size``, or over
            :data:`MAX_IMAGE_PIXELS` by its JPEG or PNG header (checked before decoding).
    """
    path = Path(path)
    if path.is_dir():
        raise ImageReadError(f"{path}: is a directory, not an image file")
    if not path.exists():
        raise MissingFileError(f"{path}: image file not found")
    data = np.frombuffer(read_bytes(path, MAX_IMAGE_BYTES, "image file"), np.uint8)
    size = image_header_size(data)
    if size is not None and size[0] * size[1] > MAX_IMAGE_PIXELS:
        raise ImageReadError(
            f"{path}: its header says {size[0]}x{size[1]} pixels, over the "
            f"{MAX_IMAGE_PIXELS / 1e6:g} megapixel limit for an image"
        )
    if reduction not in REDUCED_FLAGS:
        raise ValueError(f"reduction must be 1, 2, 4 or 8, got {reduction!r}")
    if reduction > 1 and not is_jpeg(data):
        reduction = 1
    img = decode_rgb(data, reduction) if data.size else None
    if img is None:
        raise ImageReadError(
            f"{path}: cannot decode image ({data.size} bytes; corrupt, truncated or not an image)"
        )
    if expected_size is not None and reduction > 1:
        expected_size = tuple(-(-int(v) // reduction) for v in expected_size)
    if expected_size is not None and (img.shape[1], img.shape[0]) != tuple(expected_size):
        raise ImageReadError(
            f"{path}: decoded size {img.shape[1]}x{img.shape[0]} differs from the annotated "
            f"{expected_size[0]}x{expected_size[1]}"
        )
    return img


@dataclass
class FrameBatch:
    """Decoded frames: ``images`` ``(H, W, 3)`` uint8 RGB each, their ``names`` (image file
    names, or the video stem), ``frame_index`` (0 for images, the frame number in a video),
    COCO ``image_ids`` and, from a video, each frame's ``times_s`` (its time stamp in the
    container, seconds)."""

    images: list[np.ndarray]
    names: list[str]
    frame_index: list[int]
    image_ids: list[int]
    times_s: list[float] | None = None


IRREGULAR = 0.1
"""A video's frame rate is variable (:func:`frame_rate_spread`) when its frame intervals span
more than this share of their median."""


def frame_rate_spread(times_s: Sequence[float]) -> dict | None:
    """The spread of a video's frame intervals from its frames' time stamps ``times_s`` (``N``
    seconds): ``None`` when they are regular (every interval within :data:`IRREGULAR` of the
    median) or too few, else ``{"min_ms", "median_ms", "max_ms", "fps"}`` (``fps``: from the
    median interval)."""
    dt = np.diff(np.asarray(times_s, dtype=np.float64)) * 1000.0
    if len(dt) < 2 or not np.isfinite(dt).all():
        return None
    med = float(np.median(dt))
    if med <= 0 or float(dt.max() - dt.min()) <= IRREGULAR * med:
        return None
    return {"min_ms": float(dt.min()), "median_ms": med, "max_ms": float(dt.max()),
            "fps": 1000.0 / med}  # fmt: skip


def list_images(folder: str | Path) -> list[Path]:
    """The image files of ``folder`` (by extension, not recursive), sorted by name.

    Raises:
        ValueError: no image file in it (the message names the folder).
    """
    folder = Path(folder)
    files = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS
    )
    if not files:
        videos = sorted(p.name for p in folder.iterdir() if is_video(p))
        if videos:  # e.g. the cameras of a recording, read as images (predict --image-mode)
            more = " ..." if len(videos) > 4 else ""
            raise InputError(
                f"{folder}: holds videos ({', '.join(videos[:4])}{more}) but no image files; "
                "give one video at a time for per-frame (image) mode, or "
                "the folder without --image-mode for video mode"
            )
        raise InputError(
            f"{folder}: no image files in this folder (looked for {', '.join(IMAGE_EXTENSIONS)})"
        )
    return files


def image_ids_from_names(names: Sequence[str]) -> list[int]:
    """COCO image ids from file names: the last number in each name's stem
    (``000000000790.jpg`` -> 790); positions ``0..n-1`` when a name has no number or two names
    share one."""
    nums = []
    for n in names:
        found = re.findall(r"\d+", Path(n).stem)
        nums.append(int(found[-1]) if found else None)
    if None in nums or len(set(nums)) != len(nums):
        return list(range(len(names)))
    return nums


def open_video(path: str | Path) -> cv2.VideoCapture:
    """An opened ``cv2.VideoCapture`` of a regular file.

    Raises:
        ValueError: not a regular file, or OpenCV cannot open it (named).
    """
    path = Path(path)
    if not path.is_file():
        raise (MissingFileError if not path.exists() else InputError)(
            f"{path}: no such video file" if not path.exists() else f"{path}: not a video file"
        )
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        cap.release()
        raise InputError(
            f"{path}: cannot open the video: it cannot be decoded (truncated, corrupt, unknown "
            "codec or not a video)"
        )
    w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
    n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    if w * h > MAX_VIDEO_PIXELS or n > MAX_VIDEO_FRAMES:
        cap.release()
        raise InputError(
            f"{path}: {w}x{h} frames, {n} declared: over the limits of "
            f"{MAX_VIDEO_PIXELS // 1_000_000} megapixels a frame and {MAX_VIDEO_FRAMES:,} frames"
        )
    return cap


def video_info(path: str | Path) -> tuple[int, float, tuple[int, int]]:
    """``(declared frame count (0: unknown), fps (0: unknown), (width, height))`` of a video,
    read from its first frame.

    Raises:
        ValueError: the video cannot be opened or its first frame decoded (named).
    """
    cap = open_video(path)
    try:
        ok, img = cap.read()
        if not ok or img is None:
            raise InputError(f"{path}: cannot be decoded (unknown codec or not a video)")
        return int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), cap.get(cv2.CAP_PROP_FPS), img.shape[1::-1]
    finally:
        cap.release()


def iter_video(path: str | Path, frames: int | None = None) -> Iterator[np.ndarray]:
    """The frames of a video in order, ``(H, W, 3)`` uint8 BGR, decoded once.

    Args:
        frames: the number of frames expected: fewer is an error naming both counts.
    """
    cap = open_video(path)
    t = 0
    try:
        while frames is None or t < frames:  # a loop over frames (decoding)
            ok, frame = cap.read()
            if not ok:
                break
            yield frame
            t += 1
    finally:
        cap.release()
    if frames is not None and t < frames:
        raise InputError(f"--video {path} ended after {t} frames, expected {frames}")


def _ids_for(names: list[str], mapping: dict[str, int] | None) -> list[int]:
    if mapping:
        known = [mapping.get(n) for n in names]
        if all(k is not None for k in known):
            return [int(k) for k in known]
    return image_ids_from_names(names)


def _image_batches(
    path: Path, batch_size: int, image_ids: dict[str, int] | None
) -> Iterator[FrameBatch]:
    files = list_images(path) if path.is_dir() else [path]
    names = [f.name for f in files]
    ids = _ids_for(names, image_ids)
    for s in range(0, len(files), batch_size):
        chunk = files[s : s + batch_size]
        yield FrameBatch(
            [read_image(f) for f in chunk],  # ImageReadError (a ValueError) names the file
            names[s : s + batch_size],
            [0] * len(chunk),
            ids[s : s + batch_size],
        )


class OpenedVideo:
    """A video opened once: its declared frame ``count`` (0: unknown) and ``fps`` (0: unknown)
    read from the open capture, then its frames decoded from that same capture
    (:meth:`batches`, or :func:`iter_frames` / :func:`iter_videos_lockstep` given it), which
    closes it at the end.

    Raises:
        ValueError: the video cannot be opened (named, as :func:`open_video`).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.cap = open_video(self.path)
        self.count = int(self.cap.get(cv2.CAP_PROP_FRAME_COUNT))
        self.fps = self.cap.get(cv2.CAP_PROP_FPS)

    def batches(self, batch_size: int) -> Iterator[FrameBatch]:
        """The frames, ``batch_size`` at a time (the errors of :func:`iter_frames`)."""
        return _video_batches(self.path, batch_size, self.cap)

    def close(self) -> None:
        self.cap.release()


def _video_batches(path: Path, batch_size: int,
                   cap: cv2.VideoCapture | None = None) -> Iterator[FrameBatch]:  # fmt: skip
    cap = open_video(path) if cap is None else cap
    declared = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    t = 0
    try:
        while True:
            frames, times = [], []
            while len(frames) < batch_size:
                ok, frame = cap.read()
                if not ok:
                    break
                frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
                times.append(cap.get(cv2.CAP_PROP_POS_MSEC) / 1000.0)  # this frame's time stamp
            if not frames:
                break
            n = len(frames)
            yield FrameBatch(frames, [path.stem] * n, list(range(t, t + n)), list(range(t, t + n)),
                             times)  # fmt: skip
            t += n
            if n < batch_size:
                break
    finally:
        cap.release()
    if t == 0:
        raise InputError(f"{path}: no frame could be decoded (truncated, corrupt or empty video)")
    if declared > 0 and t < declared:
        raise InputError(
            f"{path}: decoded {t} of the {declared} frames its header declares (truncated or "
            "corrupt video)"
        )


def iter_videos_lockstep(
    paths: Sequence[str | Path | OpenedVideo],
) -> Iterator[list[FrameBatch | None]]:
    """Several videos (the cameras of one recording; paths, or :class:`OpenedVideo` s already
    probed) decoded side by side: per time step one single-frame :class:`FrameBatch` per video,
    ``None`` for a video that has ended (until all have). Each video's errors are those of
    :func:`iter_frames`."""
    streams = [p.batches(1) if isinstance(p, OpenedVideo) else _video_batches(Path(p), 1)
               for p in paths]  # fmt: skip
    while True:  # a loop over time steps (decoding)
        step = [next(s, None) if s is not None else None for s in streams]
        if all(fb is None for fb in step):
            return
        streams = [s if fb is not None else None for s, fb in zip(streams, step, strict=True)]
        yield step


def is_video(path: str | Path) -> bool:
    """A file whose extension is a video's."""
    path = Path(path)
    return path.is_file() and path.suffix.lower() in VIDEO_EXTENSIONS


def iter_frames(
    path: str | Path | OpenedVideo, batch_size: int = 16, image_ids: dict[str, int] | None = None
) -> Iterator[FrameBatch]:
    """Decode an image, a folder of images or a video, ``batch_size`` frames at a time.

    Args:
        path: the input (an :class:`OpenedVideo`: decoded from its open capture).
        batch_size: frames per batch.
        image_ids: file name -> COCO id (e.g. from a boxes file); default
            :func:`image_ids_from_names`.

    Raises:
        FileNotFoundError: no such input.
        ValueError: an unreadable or truncated image or video (named), an empty folder, a video
            without frames or with fewer frames than its header declares, an unknown extension.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(path, OpenedVideo):
        yield from path.batches(batch_size)
        return
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"{path}: no such image, folder or video")
    suffix = path.suffix.lower()
    if path.is_dir() or suffix in IMAGE_EXTENSIONS:
        yield from _image_batches(path, batch_size, image_ids)
        return
    if suffix not in VIDEO_EXTENSIONS:
        raise InputError(
            f"{path}: not an image ({', '.join(IMAGE_EXTENSIONS)}) or video "
            f"({', '.join(VIDEO_EXTENSIONS)}) file"
        )
    yield from _video_batches(path, batch_size)


def count_frames(path: str | Path) -> int | None:
    """Frames (images, or the video's declared count) for the progress bar; ``None``: unknown."""
    path = Path(path)
    if path.is_dir():
        return len(list_images(path))
    if path.suffix.lower() in IMAGE_EXTENSIONS:
        return 1
    if not path.is_file():  # a FIFO or a device is never opened (the reader names it)
        return None
    cap = cv2.VideoCapture(str(path))
    n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) if cap.isOpened() else 0
    cap.release()
    return n or None


def _ffmpeg_exe() -> str | None:
    """The ffmpeg binary shipped by ``imageio-ffmpeg`` (``None`` when it is not installed)."""
    try:
        import imageio_ffmpeg
    except ImportError:
        return None
    return imageio_ffmpeg.get_ffmpeg_exe()


class VideoWriter:
    """An MP4 written from finished BGR frames of one size (the first frame's).

    H.264 (``libx264``, ``yuv420p``, ``+faststart``: browsers play it) through the ffmpeg
    binary of ``imageio-ffmpeg`` (``pip install tensorpose[viz]``), frames piped to it raw;
    an odd width or height gets one black row or column (yuv420p needs even sizes). Without
    ``imageio-ffmpeg``, OpenCV's ``mp4v`` with a one-line notice on stderr. The file is
    written under a temporary name beside ``path`` and renamed to ``path`` when closed
    cleanly; on an error (or an exception in a ``with`` block) nothing is left at ``path``.

    Attributes:
        codec: ``"h264"`` or ``"mp4v"``.
    """

    def __init__(self, path: str | Path, fps: float, crf: int = 20) -> None:
        self.path, self.fps, self.crf = Path(path), float(fps), int(crf)
        self.tmp = self.path.with_name(f".{self.path.stem}.{os.getpid()}.part.mp4")
        self.exe = _ffmpeg_exe()
        self.codec = "h264" if self.exe else "mp4v"
        self.size: tuple[int, int] | None = None
        self.writer: cv2.VideoWriter | None = None
        self.proc: subprocess.Popen | None = None
        self.log = None
        self.frames = 0

    def _open(self, w: int, h: int) -> None:
        if self.exe is None:
            sys.stderr.write(
                f"note: imageio-ffmpeg is not installed: {self.path.name} is "
                "mp4v, which browsers do not play (pip install imageio-ffmpeg)\n"
            )
            self.writer = cv2.VideoWriter(str(self.tmp), cv2.VideoWriter_fourcc(*"mp4v"),
                                          self.fps, (w, h))  # fmt: skip
            if not self.writer.isOpened():
                raise InputError(f"{self.path}: cannot write an mp4v video here")
            return
        cmd = [self.exe, "-y", "-hide_banner", "-loglevel", "error", "-f", "rawvideo",
               "-pix_fmt", "bgr24", "-s", f"{w}x{h}", "-r", f"{self.fps:.6g}", "-i", "-",
               "-an", "-c:v", "libx264", "-preset", "veryfast", "-crf", str(self.crf),
               "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-f", "mp4",
               str(self.tmp)]  # fmt: skip
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=self.log)  # fmt: skip

    def write(self, frame: np.ndarray) -> None:
        """Append one ``(H, W, 3)`` uint8 BGR frame."""
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise ValueError(f"frames must be (H, W, 3) uint8 BGR, got {frame.shape} {frame.dtype}")
        h, w = frame.shape[:2]
        if self.size is None:
            self.size = (w, h)
            self._open(w + w % 2, h + h % 2)
        elif (w, h) != self.size:
            raise InputError(f"{self.path}: frame {self.frames} is {w}x{h}, the first was "
                             f"{self.size[0]}x{self.size[1]}")  # fmt: skip
        if w % 2 or h % 2:
            frame = cv2.copyMakeBorder(frame, 0, h % 2, 0, w % 2, cv2.BORDER_CONSTANT, value=0)
        if self.writer is not None:
            self.writer.write(frame)
        else:
            try:
                self.proc.stdin.write(np.ascontiguousarray(frame).tobytes())
            except (BrokenPipeError, OSError):
                raise InputError(f"{self.path}: ffmpeg stopped: {self._ffmpeg_error()}") from None
        self.frames += 1

    def _ffmpeg_error(self) -> str:
        self.proc.wait()
        self.log.seek(0)
        lines = self.log.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else f"exit status {self.proc.returncode}"

    def close(self) -> None:
        """Finish the file and move it to ``path`` (nothing to do without a frame)."""
        if self.writer is not None:
            self.writer.release()
            self.writer = None
        elif self.proc is not None:
            proc, self.proc = self.proc, None
            try:
                proc.stdin.close()
            except OSError:
                pass
            if proc.wait() != 0:
                self.proc = proc
                why = self._ffmpeg_error()
                self.abort()
                raise InputError(f"{self.path}: ffmpeg could not write the video: {why}")
            self.log.close()
        else:
            return
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        """Stop without a file: the encoder ended, the temporary file removed."""
        if self.writer is not None:
            self.writer.release()
            self.writer = None
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self.log is not None:
            self.log.close()
        self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
