"""Every kind of TRC tensorpose writes, loaded by OpenSim's own reader
(``opensim.TimeSeriesTableVec3``, ``pip install tensorpose[opensim]``; skipped without it): the
marker names, the frame count, the rate and times, and the values equal to what tensorpose meant
(NaN where a marker is missing, the numbers elsewhere). Kinds: ``triangulate`` on the bundled
trial (one person), ``--people auto`` on tests/data/synthetic_two_people (rows ending in missing
markers), gaps at the end of a row and frames without any marker (``write_trc``), ``lift``;
and tensorpose's ``read_trc`` reads the TRC OpenSim's writer makes of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.cli import main
from tensorpose.io.motion import read_trc, write_trc
from tensorpose.io.openpose import bundled_tracks
from tensorpose.multiview.motion3d import to_axes
from tensorpose.ops.camera import camera_to_opensim

opensim = pytest.importorskip("opensim")

BUNDLED = bundled_tracks()[0].parent
CALIB = BUNDLED / "Calib.qca.txt"
TWO = Path(__file__).resolve().parents[1] / "data" / "synthetic_two_people"
LIFT_MARKERS = ["Hip", "RHip", "RKnee", "RAnkle", "LHip", "LKnee", "LAnkle", "Spine", "Neck",
                "Nose", "Head", "LShoulder", "LElbow", "LWrist", "RShoulder", "RElbow",
                "RWrist"]  # fmt: skip


def opensim_trc(path: Path) -> dict:
    """The TRC as OpenSim 4.6 reads it: ``points (T, J, 3)``, ``names``, ``time (T,)`` and
    the header's ``rate``, ``frames`` and ``units`` (an error if OpenSim rejects the file)."""
    table = opensim.TimeSeriesTableVec3(str(path))
    flat = table.flatten()  # kept alive: getMatrix() refers into it
    T, J = table.getNumRows(), table.getNumColumns()
    points = np.array(flat.getMatrix().to_numpy(), dtype=np.float64).reshape(T, J, 3)
    meta = table.getTableMetaDataAsString
    return {
        "points": points, "names": list(table.getColumnLabels()),
        "time": np.array(list(table.getIndependentColumn())), "rate": float(meta("DataRate")),
        "frames": int(meta("NumFrames")), "units": meta("Units"),
    }  # fmt: skip


def check_same(path: Path, meant: np.ndarray, names: list[str], fps: float) -> dict:
    """OpenSim's reading of ``path`` is ``meant (T, J, 3)`` (NaN at the same places, the
    numbers within the 6 decimals written), ``names``, ``T`` frames at ``fps``; tensorpose's
    own reader agrees with OpenSim's."""
    got = opensim_trc(path)
    T = len(meant)
    assert got["names"] == names and got["frames"] == T and got["rate"] == fps
    assert got["units"] == "m" and got["points"].shape == meant.shape
    np.testing.assert_allclose(got["time"], np.arange(T) / fps, atol=1e-6)
    np.testing.assert_array_equal(np.isnan(got["points"]), np.isnan(meant))
    np.testing.assert_allclose(got["points"], meant, atol=5e-7)  # NaN == NaN here
    ours = read_trc(path)
    assert ours.names == names and ours.fps == fps
    np.testing.assert_array_equal(ours.points, got["points"])
    return got


def test_triangulate_one_person(tmp_path):
    out = tmp_path / "tri"
    assert main(["triangulate", str(BUNDLED), "--calib", str(CALIB), "--out", str(out)]) == 0
    npz = np.load(out / f"{BUNDLED.name}_3d.npz")
    meant = to_axes(npz["points"], str(npz["axes"]))  # the NPZ's world points in the TRC axes
    got = check_same(out / f"{BUNDLED.name}_3d.trc", meant, list(npz["marker_names"]), 60.0)
    assert np.isnan(got["points"]).any() and len(got["points"]) == 100  # gaps in the trial


def test_triangulate_people_rows_ending_in_gaps(tmp_path):
    out = tmp_path / "two"
    assert main(["triangulate", str(TWO), "--calib", str(TWO / "Calib.qca.txt"), "--fps", "60",
                 "--people", "auto", "--out", str(out)]) == 0  # fmt: skip
    trcs = sorted(out.glob("*_p*_3d.trc"))
    assert len(trcs) >= 2
    ends_missing = 0
    for trc in trcs:  # every person found
        npz = np.load(trc.with_suffix(".npz"))
        meant = to_axes(npz["points"], str(npz["axes"]))
        got = check_same(trc, meant, list(npz["marker_names"]), 60.0)
        ends_missing += int(np.isnan(got["points"][:, -1]).any(-1).sum())
    assert ends_missing > 0  # rows whose last marker is missing: OpenSim read them


def test_gaps_at_row_ends_and_frames_without_markers(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 4, 3))
    x[0] = np.nan  # the first frame without any marker
    x[1:4, -1] = np.nan  # the last marker missing: rows ending in missing values
    x[5, 0] = np.nan  # the first marker missing
    x[6, 1:] = np.nan  # every marker but the first
    x[7, 2, 1] = np.nan  # one coordinate
    x[-1] = np.nan  # the last frame without any marker
    names = ["Nose", "LHip", "RKnee", "RHeel"]
    path = write_trc(tmp_path / "gaps.trc", torch.from_numpy(x), names, fps=30.0)
    assert "\t\n" not in path.read_text() and not path.read_text().endswith("\t")
    check_same(path, x, names, 30.0)
    all_missing = np.full((3, 2, 3), np.nan)  # a file with no marker at all
    check_same(write_trc(tmp_path / "none.trc", all_missing, names[:2], fps=25.0),
               all_missing, names[:2], 25.0)  # fmt: skip


def test_read_trc_reads_what_opensim_writes(tmp_path):
    x = np.random.default_rng(1).normal(size=(5, 3, 3))
    x[1, -1] = x[2] = np.nan
    names = ["Hip", "RHip", "LHip"]
    table = opensim.TimeSeriesTableVec3(str(write_trc(tmp_path / "a.trc", x, names, fps=50.0)))
    opensim.TRCFileAdapter().write(table, str(tmp_path / "b.trc"))  # rows end in a tab
    assert "nan\t\n" in (tmp_path / "b.trc").read_text()
    back = read_trc(tmp_path / "b.trc")
    assert back.names == names and back.fps == 50.0
    np.testing.assert_allclose(back.points, x, atol=5e-7)  # NaN at the same places


def test_lift(tmp_path):
    out = tmp_path / "lift"
    cam = BUNDLED / "cam01_json"
    assert main(["lift", str(cam), "--calib", str(CALIB), "--camera", "cam_01", "--fps", "60",
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    npz = np.load(out / f"{cam.name}_3d.npz")
    meant = camera_to_opensim(torch.from_numpy(npz["joints"]).double()).numpy()  # Y up
    check_same(out / f"{cam.name}.trc", meant, LIFT_MARKERS, 60.0)
    assert list(npz["marker_names"]) == LIFT_MARKERS
