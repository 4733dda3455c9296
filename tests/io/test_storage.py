"""OpenSim ``.mot`` / ``.sto`` reading (:mod:`tensorpose.io.storage`): the layout OpenSim writes,
read back to the numbers; a malformed file is one error naming the file and the line."""

from __future__ import annotations

import numpy as np
import pytest

from tensorpose.io.storage import StorageError, read_storage

MOT = """Coordinates
version=1
nRows=3
nColumns=3
inDegrees=yes

Units are S.I. units (second, meters, Newtons, ...)

endheader
time\tknee_angle_r\tpelvis_tx
      0.00000000\t     12.50000000\t      0.01000000
      0.01666700\t     13.25000000\t      0.02000000
      0.03333300\t    -14.00000000\t      0.03000000
"""


def test_reads_what_opensim_writes(tmp_path):
    p = tmp_path / "a.mot"
    p.write_text(MOT)
    s = read_storage(p)
    assert s.columns == ["time", "knee_angle_r", "pelvis_tx"] and s.in_degrees
    assert s.title == "Coordinates" and s.header["nRows"] == "3"
    np.testing.assert_array_equal(s.column("knee_angle_r"), [12.5, 13.25, -14.0])
    np.testing.assert_array_equal(s.column("time"), [0.0, 0.016667, 0.033333])


@pytest.mark.parametrize(("text", "where"), [
    (MOT.replace("endheader\n", ""), "no 'endheader'"),
    (MOT.replace("13.25000000", "x"), ":12: bad number"),
    (MOT.replace("\t      0.03000000\n", "\n"), ":13: 2 values, expected 3"),
])  # fmt: skip
def test_malformed_is_one_error_naming_the_line(tmp_path, text, where):
    p = tmp_path / "b.sto"
    p.write_text(text)
    with pytest.raises(StorageError, match=f"b.sto{where}" if where[0] == ":" else where):
        read_storage(p)
