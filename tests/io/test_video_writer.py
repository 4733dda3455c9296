"""io/video.VideoWriter: H.264 through imageio-ffmpeg's ffmpeg (codec and frame count read back
by ffmpeg's own probe and by OpenCV), the mp4v fallback without the package, nothing left
behind on an error."""

from __future__ import annotations

import sys

import cv2
import numpy as np
import pytest

from tensorpose.io.video import VideoWriter

imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")


def _frames(n: int, w: int, h: int) -> list[np.ndarray]:
    out = []
    for t in range(n):  # a moving bright square on a ramp
        f = np.tile(np.linspace(0, 200, w, dtype=np.uint8)[None, :, None], (h, 1, 3))
        f[10:30, 5 + 3 * t : 25 + 3 * t] = (0, 255, 255)
        out.append(f)
    return out


def _read_back(path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(f)
    cap.release()
    return frames


def test_h264_codec_frame_count_and_pixels(tmp_path):
    path = tmp_path / "a.mp4"
    frames = _frames(15, 97, 61)  # odd sizes: one black column and row added
    with VideoWriter(path, 25.0) as w:
        for f in frames:
            w.write(f)
    assert w.codec == "h264"
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    reader.close()
    assert meta["codec"] == "h264" and meta["pix_fmt"].startswith("yuv420p")
    assert meta["size"] == (98, 62) and meta["fps"] == 25.0
    back = _read_back(path)
    assert len(back) == 15
    err = [np.abs(b[:61, :97].astype(int) - f.astype(int)).mean()
           for b, f in zip(back, frames, strict=True)]  # fmt: skip
    assert max(err) < 4.0  # lossy, but these frames
    assert back[0][61].max() < 8 and back[0][:, 97].max() < 8  # the padding is black
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4"]  # no temporary file left
    with open(path, "rb") as f:  # +faststart: the index (moov) before the data (mdat)
        head = f.read(4096)
    assert head.find(b"moov") != -1 and (head.find(b"mdat") == -1 or
                                         head.find(b"moov") < head.find(b"mdat"))  # fmt: skip


def test_fallback_mp4v_without_imageio_ffmpeg(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # import raises ImportError
    path = tmp_path / "b.mp4"
    with VideoWriter(path, 10.0) as w:
        for f in _frames(6, 64, 48):
            w.write(f)
    assert w.codec == "mp4v"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "imageio-ffmpeg is not installed" in err[0]
    reader = imageio_ffmpeg.read_frames(str(path))  # the module imported before the patch
    assert next(reader)["codec"] == "mpeg4"  # mp4v: MPEG-4 part 2
    reader.close()
    assert len(_read_back(path)) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.mp4"]


def test_error_leaves_nothing(tmp_path):
    path = tmp_path / "c.mp4"
    with pytest.raises(RuntimeError, match="drawing failed"):
        with VideoWriter(path, 10.0) as w:
            w.write(_frames(1, 32, 32)[0])
            raise RuntimeError("drawing failed")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="frame 1 is 16x16, the first was 32x32"):
        with VideoWriter(path, 10.0) as w:
            w.write(_frames(1, 32, 32)[0])
            w.write(np.zeros((16, 16, 3), np.uint8))
    assert list(tmp_path.iterdir()) == []
