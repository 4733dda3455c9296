"""smooth_folder on the bundled OpenPose tracks: what it writes equals the filter run directly
on the loaded tracks, its report numbers are those of the written files, and errors name the
argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensorpose.apps.smooth import smooth_folder
from tensorpose.io.openpose import bundled_tracks, openpose_folders
from tensorpose.io.tracks import read_tracks
from tensorpose.ops.filters import jitter, kalman_smoother, one_euro_filter
from tensorpose.smoothing import FilterSettings, smooth


def test_one_folder_writes_the_smoothed_tracks(tmp_path):
    src = bundled_tracks()[3]
    report = smooth_folder(src, tmp_path / "out", FilterSettings("rts", fps=60), joint=None)
    assert len(report) == 1
    r = report[0]
    assert (r["folder"], r["frames"], r["layout"], r["picture"]) == (
        src.name,
        100,
        "BODY_25B",
        None,
    )
    files = sorted((tmp_path / "out").glob("*.json"))
    assert len(files) == 100 and r["out_dir"] == tmp_path / "out"
    # the written coordinates are the smoother run directly on the loaded tracks (NaN = missing)
    raw = read_tracks(src)
    direct = kalman_smoother(raw.keypoints[..., :2].permute(1, 2, 0, 3), model="velocity",
                             process_noise=0.5, measurement_noise=9.0)  # fmt: skip
    back = read_tracks(tmp_path / "out", min_confidence=0.0)
    got = back.keypoints[..., :2].permute(1, 2, 0, 3)
    seen = ~torch.isnan(got)
    assert seen.float().mean() > 0.5
    torch.testing.assert_close(got[seen], direct[seen], atol=1e-3, rtol=0)
    # the report's numbers: the jitter of the raw tracks, lower after the smoother
    raw_xy = raw.keypoints[..., :2].permute(1, 2, 0, 3)
    assert r["jitter_raw"] == pytest.approx(float(jitter(raw_xy)))
    assert r["jitter_smoothed"] < r["jitter_raw"] / 3
    assert abs(r["lag"]) < 0.5  # zero-phase smoother
    assert r["low_confidence"] == int(raw.low_confidence.sum()) > 0


def test_folder_of_camera_folders_and_picture(tmp_path):
    pytest.importorskip("matplotlib")
    root = bundled_tracks()[0].parent
    assert openpose_folders(root) == bundled_tracks()
    report = smooth_folder(root, tmp_path, FilterSettings("one-euro", fps=60), track=0)
    assert [r["folder"] for r in report] == [p.name for p in bundled_tracks()]
    for r in report:
        assert r["out_dir"] == tmp_path / r["folder"]
        assert r["picture"] == tmp_path / f"{r['folder']}_r_wrist_track0.png"
        assert r["picture"].stat().st_size > 10_000
        assert r["lag"] > 0.1  # a causal filter lags


def test_smooth_dispatches_to_the_filters():
    x = torch.tensor(np.cumsum(np.random.default_rng(0).normal(size=(3, 40, 2)), 1))
    s = FilterSettings("one-euro", fps=30, min_cutoff=2.0, beta=0.1)
    torch.testing.assert_close(smooth(x, s), one_euro_filter(x, 30, 2.0, 0.1, 1.0))
    with pytest.raises(ValueError, match="method must be one of kalman, rts, one-euro"):
        smooth(x, FilterSettings("median"))


def test_errors_name_the_argument(tmp_path):
    with pytest.raises(FileNotFoundError, match="OpenPose folder not found"):
        smooth_folder(tmp_path / "missing")
    with pytest.raises(ValueError, match="no OpenPose .json files"):
        smooth_folder(tmp_path)
    src = bundled_tracks()[3]
    with pytest.raises(ValueError, match="joint must be one of"):
        smooth_folder(src, tmp_path / "a", joint="tail")
    with pytest.raises(ValueError, match=r"track must be in \[0, "):
        smooth_folder(src, tmp_path / "b", track=99)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # checked first


def test_output_never_overwrites_the_input_or_existing_files(tmp_path):
    import shutil

    src = tmp_path / "cam"
    shutil.copytree(bundled_tracks()[3], src)
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    for out in (src, src / "smoothed", tmp_path):  # the input, inside it, containing it
        with pytest.raises(ValueError, match="the input would be overwritten"):
            smooth_folder(src, out, joint=None)
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(ValueError, match="pass --overwrite"):
        smooth_folder(src, out, joint=None)
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    report = smooth_folder(src, out, joint=None, overwrite=True)
    assert report[0]["layout_reason"] and (out / "mine.txt").read_text() == "keep"
