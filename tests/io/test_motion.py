"""io.export: TRC and CSV writers against the formats' own rules (OpenSim's TRCFileAdapter
reads tab-separated fields, drops a row's last field when it is empty, and checks the header
keys and X1..Zn labels; tests/io/test_trc_opensim.py loads the files with OpenSim itself), and
the TRC round trip through read_trc."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
import torch

from tensorpose.io.motion import TRCError, read_trc, write_csv, write_trc

NAMES = ["nose", "l_hip", "r_knee"]


def points(T=5, seed=0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(T, len(NAMES), 3))
    x[1, 2] = np.nan  # a missing marker
    x[3, :] = np.nan  # a frame without markers
    return x


def test_trc_layout_follows_the_format(tmp_path):
    x = points()
    path = write_trc(tmp_path / "run_3d.trc", torch.from_numpy(x), NAMES, fps=60.0,
                     axes="X/Y/Z: world frame of Calib.qca.txt, Z up")  # fmt: skip
    lines = path.read_text().split("\n")
    first = lines[0].split("\t")
    assert first[:4] == ["PathFileType", "4", "(X/Y/Z)", "run_3d.trc"]
    assert first[4] == "X/Y/Z: world frame of Calib.qca.txt, Z up"
    keys = lines[1].split("\t")
    assert keys == ["DataRate", "CameraRate", "NumFrames", "NumMarkers", "Units",
                    "OrigDataRate", "OrigDataStartFrame", "OrigNumFrames"]  # fmt: skip
    values = dict(zip(keys, lines[2].split("\t"), strict=True))
    assert float(values["DataRate"]) == 60 and float(values["CameraRate"]) == 60
    assert int(values["NumFrames"]) == 5 and int(values["NumMarkers"]) == 3
    assert values["Units"] == "m" and int(values["OrigNumFrames"]) == 5
    labels = [v for v in lines[3].split("\t") if v]  # OpenSim drops the empty labels
    assert labels == ["Frame#", "Time", *NAMES]
    assert lines[3].split("\t")[2:6] == ["nose", "", "", "l_hip"]  # name + 2 empty columns
    assert [v for v in lines[4].split("\t") if v] == [f"{a}{i}" for i in range(1, 4) for a in "XYZ"]
    assert lines[4].startswith("\t\tX1")
    assert lines[5] == ""  # the blank line before the data
    rows = [r.split("\t") for r in lines[6:] if r]
    assert len(rows) == 5 and all(len(r) == 2 + 3 * 3 for r in rows)
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4, 5]
    np.testing.assert_allclose([float(r[1]) for r in rows], np.arange(5) / 60, atol=1e-6)
    assert rows[1][2 + 6 : 2 + 9] == ["nan"] * 3  # missing marker, last of its row: nan
    assert all(v == "nan" for v in rows[3][2:])  # no empty field anywhere
    assert all(v for r in rows for v in r)
    np.testing.assert_allclose([float(v) for v in rows[0][2:]], x[0].ravel(), atol=5e-7)


def test_trc_round_trip(tmp_path):
    x = points(T=40, seed=1)
    path = write_trc(tmp_path / "a.trc", x, NAMES, fps=30, units="mm", axes="x right")
    trc = read_trc(path)
    assert trc.names == NAMES and trc.fps == 30 and trc.camera_rate == 30
    assert trc.units == "mm" and trc.comment == "x right"
    np.testing.assert_array_equal(np.isnan(trc.points), np.isnan(x))
    np.testing.assert_allclose(trc.points, x, atol=5e-7)
    np.testing.assert_array_equal(trc.frames, np.arange(1, 41))
    np.testing.assert_allclose(trc.time, np.arange(40) / 30, atol=1e-6)
    assert trc.header["NumMarkers"] == "3"


def test_csv_layout(tmp_path):
    x = points()
    path = write_csv(tmp_path / "a.csv", x, NAMES, fps=50)
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][:5] == ["frame", "time_s", "nose_x_m", "nose_y_m", "nose_z_m"]
    assert len(rows[0]) == 2 + 9 and len(rows) == 6
    assert rows[2][2 + 6 :] == ["", "", ""]
    got = np.array([[float(v) if v else math.nan for v in r[2:]] for r in rows[1:]])
    np.testing.assert_allclose(got.reshape(x.shape), x, atol=5e-7)
    assert float(rows[3][1]) == pytest.approx(2 / 50)


def naive_rows(x: np.ndarray, fps: float, sep: str, first: int, missing: str,
               decimals: int = 6) -> list[str]:  # fmt: skip
    """The data rows, each value formatted on its own (``missing`` for NaN)."""
    return [sep.join([str(t + first), f"{t / fps:.{decimals}f}"]
                     + [missing if math.isnan(v) else f"{v:.{decimals}f}" for v in row.ravel()])
            for t, row in enumerate(x)]  # fmt: skip


@pytest.mark.parametrize("block", [1, 3, 1000])
def test_rows_equal_value_by_value_formatting(tmp_path, monkeypatch, block):
    import tensorpose.io.motion as motion

    monkeypatch.setattr(motion, "ROWS_PER_BLOCK", block)
    x = points(T=7, seed=2) * 10.0 ** np.arange(-8, 7, 5)[:, None]  # tiny to large values
    x[0, 0] = [-0.0, -1e-9, 5e-7]  # rounding to -0.000000 and 0.000001
    x[2, 1, 0] = -np.nan
    lines = write_trc(tmp_path / "a.trc", x, NAMES, fps=29.97, decimals=4).read_text()
    assert lines.split("\n")[6:-1] == naive_rows(x, 29.97, "\t", 1, "nan", 4)
    lines = write_csv(tmp_path / "a.csv", x, NAMES, fps=25).read_text()
    assert lines.split("\n")[1:-1] == naive_rows(x, 25, ",", 0, "")
    assert write_trc(tmp_path / "e.trc", x[:0], NAMES, fps=30).read_text().count("\n") == 6


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"points": np.zeros((4, 3))}, r"points must have shape \(T, J, 3\)"),
        ({"names": ["a", "b"]}, "names must hold J=3"),
        ({"names": ["a b", "c", "d"]}, "without whitespace"),
        ({"names": ["a", "a", "b"]}, "unique"),
        ({"fps": 0}, "fps must be a positive number"),
        ({"points": np.full((2, 3, 3), np.inf)}, "infinite"),
        ({"axes": "a\tb"}, "axes must be one line"),
        ({"units": "m m"}, "units"),
    ],
)
def test_write_trc_bad_inputs(tmp_path, kwargs, match):
    args = {"points": points(), "names": NAMES, "fps": 30.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        write_trc(tmp_path / "x.trc", **args)


def test_read_trc_errors_name_file_and_line(tmp_path):
    good = write_trc(tmp_path / "g.trc", points(), NAMES, fps=30).read_text().split("\n")

    def broken(i: int, line: str):
        lines = list(good)
        lines[i] = line
        p = tmp_path / f"broken_{i}_{len(line)}.trc"
        p.write_text("\n".join(lines))
        return p

    cases = [
        (broken(0, "Path\t4"), ":1: expected 'PathFileType'"),
        (broken(1, "DataRate\tCameraRate"), ":2: expected the keys"),
        (broken(3, "Frame#\tTime\tnose"), ":4: expected Frame#, Time and 3 marker names"),
        (broken(7, "2\t0.03\t1"), ":8: 3 fields, expected 11"),
        (broken(7, "2\t0.03" + "\tx" * 9), ":8: bad number"),
    ]
    for path, match in cases:  # each malformed file
        with pytest.raises(TRCError, match=match) as e:
            read_trc(path)
        assert str(path) in str(e.value)
    short = tmp_path / "s.trc"
    short.write_text("\n".join(good[:8]) + "\n")
    with pytest.raises(TRCError, match="NumFrames is 5 but the file has 2 data rows"):
        read_trc(short)


def test_npz_deflates_what_compresses(tmp_path):
    import zipfile

    from tensorpose.io.motion import write_npz

    rng = np.random.default_rng(3)
    mostly_nan = np.full((300, 25, 4), np.nan)
    mostly_nan[::7, :, 1] = rng.normal(size=(43, 25))
    arrays = {"points": rng.normal(size=(300, 25, 3)), "errors": mostly_nan,
              "valid": rng.random((300, 25)) < 0.9, "names": np.array(["a", "bb"]),
              "fps": np.float64(60), "units": "m", "empty": np.zeros((0, 3))}  # fmt: skip
    for compressed in (True, False):
        path = write_npz(tmp_path / f"{compressed}.npz", arrays, compressed=compressed)
        with np.load(path, allow_pickle=False) as z:
            assert sorted(z.files) == sorted(arrays)
            for k, v in arrays.items():  # every array back, bit for bit
                a = np.asarray(v)
                assert z[k].dtype == a.dtype and z[k].tobytes() == a.tobytes()
        kinds = {i.filename: i.compress_type for i in zipfile.ZipFile(path).infolist()}
        if compressed:  # random float64 is stored, NaN runs and booleans are deflated
            assert kinds["points.npy"] == zipfile.ZIP_STORED
            assert kinds["errors.npy"] == kinds["valid.npy"] == zipfile.ZIP_DEFLATED
        else:
            assert set(kinds.values()) == {zipfile.ZIP_STORED}
    with pytest.raises(ValueError, match="objects"):
        write_npz(tmp_path / "o.npz", {"x": np.array([{}], dtype=object)})
