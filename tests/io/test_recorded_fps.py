"""The frame rate travels with the JSON: ``predict`` and ``smooth`` record ``fps`` in the
OpenPose files they write, and ``smooth``, ``lift`` and ``triangulate`` take it when no
``--fps`` is given (a value that is not a number or not a frame rate is ignored)."""

from __future__ import annotations

import json
import shutil

import pytest

from tensorpose.apps.smooth import smooth_folder
from tensorpose.io.openpose import bundled_tracks, frame_files, recorded_fps
from tensorpose.io.tracks import read_detections
from tensorpose.multiview.motion3d import find_fps
from tensorpose.smoothing import FilterSettings


def _with_fps(src, dst, fps) -> None:
    """``src``'s frames with a top-level ``"fps": fps``."""
    dst.mkdir(parents=True)
    for f in frame_files(src):
        data = json.loads(f.read_text())
        (dst / f.name).write_text(json.dumps({**data, "fps": fps}))


def test_recorded_fps_is_read_and_checked(tmp_path):
    cam = bundled_tracks()[0]
    assert recorded_fps(frame_files(cam)) is None  # OpenPose records none
    for value, expected in ((50, 50.0), (29.97, 29.97), ("60", None), (0, None), (1e9, None),
                            (True, None)):  # fmt: skip
        folder = tmp_path / f"f{len(list(tmp_path.iterdir()))}"
        _with_fps(cam, folder, value)
        assert recorded_fps(frame_files(folder)) == expected
        assert read_detections(folder).fps == expected


def test_smooth_and_triangulate_take_the_recorded_rate(tmp_path):
    root = tmp_path / "trial"
    for cam in bundled_tracks():
        _with_fps(cam, root / cam.name, 50)
    assert find_fps(root, sorted(root.iterdir()), None, None) == (50.0, "JSON cam01_json")
    assert find_fps(root, sorted(root.iterdir()), 25.0, None) == (25.0, "--fps")
    one = root / "cam01_json"
    # One-Euro depends on the rate: the recorded 50 gives what an explicit 50 gives, not 30
    got = smooth_folder(one, tmp_path / "a", FilterSettings("one-euro"), joint=None,
                        fps_from_files=True)  # fmt: skip
    given = smooth_folder(one, tmp_path / "b", FilterSettings("one-euro", 50.0), joint=None)
    smooth_folder(one, tmp_path / "c", FilterSettings("one-euro", 30.0), joint=None)
    assert got[0]["fps"] == given[0]["fps"] == 50.0
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    differ = 0
    for name in files:  # every frame
        a, b, c = (json.loads((tmp_path / d / name).read_text()) for d in "abc")
        assert a == b and a["fps"] == 50.0
        differ += a["people"] != c["people"]
    assert differ > len(files) // 2
    # without a recorded rate, the fallback is used and not recorded
    plain = tmp_path / "plain"
    shutil.copytree(bundled_tracks()[0], plain)
    r = smooth_folder(plain, tmp_path / "d", FilterSettings("one-euro"), joint=None,
                      fps_from_files=True)  # fmt: skip
    assert r[0]["fps"] is None
    first = json.loads(next((tmp_path / "d").glob("*.json")).read_text())
    assert "fps" not in first
    with pytest.raises(ValueError, match="--fps"):
        find_fps(tmp_path / "d", [tmp_path / "d"], None, None)
