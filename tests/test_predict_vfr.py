"""A variable-frame-rate video in predict: each frame's time stamp (as ffprobe reads it from the
container) is written into its OpenPose JSON as ``time_s``, and the summary warns with the
spread of the frame intervals; a constant-rate video gets its time stamps and no warning."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

from tensorpose.apps.predict import predict, summary
from tensorpose.centernet.model import build_model as centernet_model
from tensorpose.io.video import _ffmpeg_exe, frame_rate_spread
from tensorpose.pose2d import PoseModel

FFMPEG = _ffmpeg_exe()
pytestmark = pytest.mark.skipif(FFMPEG is None, reason="imageio-ffmpeg is not installed")


def _video(path, setpts: str | None) -> None:
    """Twelve 96x64 test-pattern frames at 10 fps; ``setpts``: their times rewritten (VFR)."""
    vf = ["-vf", f"setpts='{setpts}'", "-fps_mode", "vfr"] if setpts else []
    subprocess.run([FFMPEG, "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=96x64:rate=10", "-frames:v", "12", *vf, "-c:v", "libx264",
                    "-pix_fmt", "yuv420p", str(path)], check=True)  # fmt: skip


def _pts(path) -> list[float]:
    """The frames' time stamps as ffmpeg's own showinfo filter prints them (an independent
    reader of the container)."""
    r = subprocess.run([FFMPEG, "-i", str(path), "-vf", "showinfo", "-f", "null", "-"],
                       capture_output=True, text=True, check=True)  # fmt: skip
    return [float(line.split("pts_time:")[1].split()[0])
            for line in r.stderr.splitlines() if "pts_time:" in line]  # fmt: skip


def _run(path, out):
    torch.manual_seed(0)
    net = PoseModel(centernet_model(17, 10, 8).eval(), "centernet", (64, 64), top_k=4)
    r = predict(path, net, out, batch_size=5, min_score=0, progress=False)
    times = [json.loads((out / "openpose" / f"{path.stem}_{t:012d}_keypoints.json").read_text())
             ["time_s"] for t in range(r.frames)]  # fmt: skip
    return r, times, net


def test_variable_frame_rate_is_written_and_named(tmp_path):
    path = tmp_path / "vfr.mp4"
    _video(path, "if(lt(N,8),N*0.1,0.8+(N-8)*0.5)/TB")  # 100 ms, then 500 ms intervals
    r, times, net = _run(path, tmp_path / "out")
    assert r.frames == 12
    assert times == pytest.approx(_pts(path), abs=1e-3)
    assert times[-1] == pytest.approx(2.2, abs=1e-3)
    s = r.variable_rate["vfr"]
    assert s["min_ms"] == pytest.approx(100, abs=1) and s["max_ms"] == pytest.approx(500, abs=1)
    warning = [line for line in summary(r, net, tmp_path / "out") if "warning" in line]
    assert len(warning) == 1 and "vfr has a variable frame rate" in warning[0]
    assert "100.0 to 500.0 ms" in warning[0]


def test_constant_frame_rate_has_time_stamps_and_no_warning(tmp_path):
    path = tmp_path / "cfr.mp4"
    _video(path, None)
    r, times, net = _run(path, tmp_path / "out")
    assert times == pytest.approx([t / 10 for t in range(12)], abs=1e-3)
    assert r.variable_rate == {}
    assert not any("warning" in line for line in summary(r, net, tmp_path / "out"))


def test_frame_rate_spread():
    assert frame_rate_spread([0.0, 0.1, 0.2, 0.3]) is None
    assert frame_rate_spread([0.0, 0.1]) is None  # one interval: nothing to compare
    assert frame_rate_spread([0.0, 0.1, 0.2, 0.305]) is None  # within 10 %
    s = frame_rate_spread([0.0, 0.1, 0.2, 0.4])
    assert s == pytest.approx({"min_ms": 100, "median_ms": 100, "max_ms": 200, "fps": 10})
