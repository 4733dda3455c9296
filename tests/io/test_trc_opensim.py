"""Every kind of TRC tensorpose writes loads in OpenSim 4.6 with its own reader
(``opensim.TimeSeriesTableVec3``), with the values tensorpose meant: NaN where a marker is
missing, the numbers elsewhere, the marker names, frame count and rate. ``opensim`` is the
optional extra ``tensorpose[opensim]`` (installed by ``scripts/setup.sh``)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from tensorpose.cli import main
from tensorpose.io.motion import read_trc, write_trc
from tensorpose.io.openpose import bundled_tracks

opensim = pytest.importorskip("opensim")

TRACKS = bundled_tracks()[0].parent
CALIB = TRACKS / "Calib.qca.txt"
TWO = Path(__file__).resolve().parents[1] / "data" / "synthetic_two_people"


def opensim_points(path: Path) -> tuple[np.ndarray, list[str], float]:
    """``(T, J, 3)`` (NaN where OpenSim reads a missing marker), the labels and the rate, as
    OpenSim's own reader gives them."""
    table = opensim.TimeSeriesTableVec3(str(path))
    T, J = table.getNumRows(), table.getNumColumns()
    out = np.empty((T, J, 3))
    for t in range(T):  # per row and marker: the reader's own accessors
        row = table.getRowAtIndex(t)
        for j in range(J):
            out[t, j] = [row[j][k] for k in range(3)]
    labels = [table.getColumnLabel(j) for j in range(J)]
    rate = float(table.getTableMetaDataAsString("DataRate"))
    return out, labels, rate


def check_loads(path: Path) -> np.ndarray:
    """The file in OpenSim equals the file in tensorpose's reader (NaN included)."""
    got, labels, rate = opensim_points(path)
    ours = read_trc(path)
    assert labels == ours.names and rate == ours.fps
    assert got.shape == ours.points.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ours.points))
    np.testing.assert_allclose(got, ours.points, atol=1e-12, equal_nan=True)
    return got


def test_gaps_at_a_rows_end_and_empty_frames(tmp_path):
    x = np.random.default_rng(0).normal(size=(6, 4, 3))
    x[1, 3] = np.nan  # the last marker of a row: the case OpenSim refused
    x[2] = np.nan  # every marker missing in a frame
    x[4, 0] = np.nan  # the first marker
    got = check_loads(write_trc(tmp_path / "gaps.trc", x, ["Hip", "RHip", "RKnee", "LKnee"], 30))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    np.testing.assert_allclose(got, x, atol=5e-7, equal_nan=True)


@pytest.mark.parametrize("extra", [[], ["--filter", "butterworth"], ["--drop-rule", "pose2sim"]])
def test_triangulate_one_person(tmp_path, extra):
    out = tmp_path / "tri"
    assert main(["triangulate", str(TRACKS), "--calib", str(CALIB), "--fps", "60",
                 "--out", str(out), *extra]) == 0  # fmt: skip
    (trc,) = out.glob("*.trc")
    got = check_loads(trc)
    assert got.shape[0] == len(list((TRACKS / "cam01_json").glob("*.json")))


def test_triangulate_several_people_with_gaps(tmp_path):
    rec = tmp_path / "two"
    shutil.copytree(TWO, rec)
    out = tmp_path / "people"
    assert main(["triangulate", str(rec), "--calib", str(rec / "Calib.qca.txt"), "--fps", "60",
                 "--people", "auto", "--out", str(out)]) == 0  # fmt: skip
    trcs = sorted(out.glob("*_p*_3d.trc"))
    assert len(trcs) >= 2
    missing = 0
    for trc in trcs:
        got = check_loads(trc)
        missing += int(np.isnan(got).any(-1).sum())
    assert missing > 0  # a person not seen in every frame: rows with missing markers load


def test_lift(tmp_path):
    out = tmp_path / "lift"
    assert main(["lift", str(TRACKS / "cam01_json"), "--calib", str(CALIB), "--camera",
                 "cam_01", "--fps", "60", "--out", str(out), "--quiet"]) == 0  # fmt: skip
    got = check_loads(out / "cam01_json.trc")
    assert not math.isnan(float(got[0, 0, 0]))
    lifted = read_trc(out / "cam01_json.trc").names
    assert main(["triangulate", str(TRACKS), "--calib", str(CALIB), "--fps", "60",
                 "--out", str(tmp_path / "tri")]) == 0  # fmt: skip
    (trc,) = (tmp_path / "tri").glob("*.trc")
    triangulated = read_trc(trc).names
    limbs = [n for n in lifted if n[0] in "LR" and n[1].isupper()]  # RHip, LKnee, ...
    assert len(limbs) == 12 and set(limbs) <= set(triangulated)  # the same names
    assert {"Hip", "Neck", "Head"} <= set(lifted) and "pelvis" not in lifted
