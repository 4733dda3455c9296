"""Hostile calibration files: each is the bundled Qualisys file (or its Pose2Sim .toml
conversion) with one edit, generated in tmp_path. Every one must be refused with a ValueError
naming the file (and the camera and key) and the reason, and the commands that read a
calibration (``tensorpose triangulate``, ``tensorpose lift --calib``) exit 2 with one line and
write nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from tensorpose.cli import main
from tensorpose.io.calibration import (
    MAX_CALIBRATION_BYTES,
    Calibration,
    CalibrationError,
    load_calibration,
    write_toml,
)
from tensorpose.io.openpose import bundled_tracks

TRACKS = bundled_tracks()[0].parent
QCA = TRACKS / "Calib.qca.txt"
F_U = 'focalLengthU="107599.671875"'  # camera cam_01's attributes, as in the bundled file
F_UV = 'focalLengthU="107599.671875" focalLengthV="107588.828125"'
ROW1 = 'r11="0.5536380477336265" r12="0.8046719867383512" r13="0.2144479094331626"'
ROW1_NEG = 'r11="-0.5536380477336265" r12="-0.8046719867383512" r13="-0.2144479094331626"'
BOMB = (
    '<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(2, 10)).replace(
        "&lol1;", "&lol;"
    )
    + "]>\n"
)


def _edit(text: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _transforms(text: str) -> list[str]:
    return re.findall(r"<transform [^>]*/>", text)


def bad_qca(tmp_path: Path, edits: list[tuple[str, str]], name: str = "bad.qca.txt") -> Path:
    path = tmp_path / name
    path.write_text(_edit(QCA.read_text(), edits))
    return path


def toml_text(tmp_path: Path) -> str:
    """The bundled calibration in Pose2Sim's layout (as :func:`write_toml` writes it)."""
    return write_toml(load_calibration(QCA), tmp_path / "good.toml").read_text()


def bad_toml(tmp_path: Path, edits: list[tuple[str, str]], name: str = "bad.toml") -> Path:
    path = tmp_path / name
    path.write_text(_edit(toml_text(tmp_path), edits))
    return path


def _duplicate_qca(tmp_path: Path) -> Path:
    t = _transforms(QCA.read_text())
    return bad_qca(tmp_path, [(t[1], t[0])])


def _duplicate_toml(tmp_path: Path) -> Path:
    text = toml_text(tmp_path)
    rot = re.findall(r"^rotation = .*$", text, re.M)
    tr = re.findall(r"^translation = .*$", text, re.M)
    path = tmp_path / "bad.toml"
    path.write_text(_edit(text, [(rot[1], rot[0]), (tr[1], tr[0])]))
    return path


QCA_CASES = {  # id: (edits, the message after the file name)
    "focal 0": ([(F_U, 'focalLengthU="0"')], r"camera 'cam_01': <intrinsic> focalLengthU, "
              r"focalLengthV: focal lengths fx = 0, fy = 1681.08 px must be in 0\.001\.\.1e\+07"),
    "focal negative": ([(F_U, 'focalLengthU="-107599.671875"')], r"fx = -1681.24"),
    "focal 1e-300": ([(F_U, 'focalLengthU="1e-300"')], r"fx = 1\.5625e-302"),
    "focal absurd": ([(F_U, 'focalLengthU="1e300"')], r"fx = 1\.5625e\+298"),
    "focal 0, third camera": ([('focalLengthU="107622.296875"', 'focalLengthU="0"')],
                              r"camera 'cam_03': <intrinsic> focalLengthU"),
    "aspect ratio 0": ([(F_UV, F_U + ' pixelAspectRatio="0"')],
                       r"camera 'cam_01': <intrinsic> pixelAspectRatio=0 must be > 0"),
    "principal point far": ([('centerPointU="34110.316406"', 'centerPointU="1e9"')],
                            r"centerPointU, centerPointV: principal point \(1\.5625e\+07, "
                            r"948.137\) px is more than one image size"),
    "k1 1e12": ([('radialDistortion1="-0.046183"', 'radialDistortion1="6.4e13"')],
                r"<intrinsic> radialDistortion1: distortion k1 = 1e\+12 is not finite within "
                r"\|k\| <= 1000"),
    "p2 absurd": ([('tangentalDistortion2="0.00069"', 'tangentalDistortion2="-1e6"')],
                  r"<intrinsic> tangentalDistortion2: distortion p2 = -15625 "),
    "R not orthonormal": ([('r11="0.5536380477336265"', 'r11="0.9"')],
                          r"<transform> r11\.\.r33: not a rotation \(det "),
    "R a reflection": ([(ROW1, ROW1_NEG)], r"<transform> r11\.\.r33: not a rotation \(det -1,"),
    "position nan": ([('x="1460.2323709212087"', 'x="nan"')],
                     r"<transform> x='nan' is not finite"),
    "position absurd": ([('x="1460.2323709212087"', 'x="1e300"')],
                        r"<transform> x, y, z: translation .* m is not finite within 1e\+06 m"),
    "image absurd": ([('<fov_video bottom="1919" left="0" right="1087"',
                       '<fov_video bottom="1919" left="0" right="100000"')],
                     r"<fov_video>: image size 100001 x 1920 px must be in 1\.\.100000"),
    "video_resolution huge": ([('serial="cam_01"', 'serial="cam_01" video_resolution="9' * 1
                                + '0' * 5000 + 'p"')], r"video_resolution='9000"),
    "doctype bomb": ([("?>\n", "?>\n" + BOMB), ('source="', 'source="&lol9;')],
                     "XML with a <!DOCTYPE> or <!ENTITY> declaration: entity declarations are "
                     "not accepted"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(QCA_CASES))
def test_hostile_qca(tmp_path, case):
    edits, match = QCA_CASES[case]
    path = bad_qca(tmp_path, edits)
    with pytest.raises(CalibrationError) as e:
        load_calibration(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg, msg
    assert re.search(match, msg), msg
    assert len(msg) < 400, msg


def test_qca_duplicated_camera(tmp_path):
    path = _duplicate_qca(tmp_path)
    with pytest.raises(CalibrationError) as e:
        load_calibration(path)
    assert str(e.value) == (
        f"{path}: camera 'cam_02': <transform> x, y, z: the same pose as camera 'cam_01' "
        "(centres 0 mm apart, same rotation): a triangulation with both is degenerate"
    )


def test_doctype_in_another_encoding_is_refused(tmp_path):
    """A UTF-16 file hides '<!DOCTYPE' from a byte search; expat still stops at it."""
    text = _edit(QCA.read_text(), [("encoding='ASCII'", "encoding='UTF-16'"), ("?>\n", "?>\n"
                                    + BOMB), ('source="', 'source="&lol9;')])  # fmt: skip
    path = tmp_path / "utf16.qca.txt"
    path.write_bytes(text.encode("utf-16"))
    assert b"<!DOCTYPE" not in path.read_bytes()
    with pytest.raises(CalibrationError, match="entity declarations are not accepted") as e:
        load_calibration(path)
    assert str(path) in str(e.value)


def _deep(tmp_path):
    return toml_text(tmp_path) + "deep = " + "[" * 5000 + "]" * 5000 + "\n"


BIG_INT = "1" + "0" * 400
TOML_CASES = {  # id: (edits, the message after the file name)
    "size 0 x 0": ([("size = [1088.0, 1920.0]", "size = [0, 0]")],
                   r"\[cam_01\] size: image size 0 x 0 px must be in 1\.\.100000"),
    "size negative": ([("size = [1088.0, 1920.0]", "size = [-1088.0, 1920.0]")],
                      r"\[cam_01\] size: image size -1088 x 1920"),
    "size absurd": ([("size = [1088.0, 1920.0]", "size = [1088.0, 100001]")],
                    r"\[cam_01\] size: image size 1088 x 100001"),
    "focal 0": ([("matrix = [[1681.244873046875,", "matrix = [[0.0,")],
                r"\[cam_01\] matrix: focal lengths fx = 0, fy = 1681.08 px must be in"),
    "focal 1e-300": ([("matrix = [[1681.244873046875,", "matrix = [[1e-300,")],
                     r"\[cam_01\] matrix: focal lengths fx = 1e-300"),
    "K non-finite": ([("matrix = [[1681.244873046875,", "matrix = [[nan,")],
                     r"\[cam_01\] matrix: expected 3 x 3 numbers, got nan"),
    "K singular": ([("[0.0, 0.0, 1.0]]", "[0.0, 0.0, 0.0]]")],
                   r"\[cam_01\] matrix: .* is not an intrinsic matrix \[\[fx, s, cx\], "
                   r"\[0, fy, cy\], \[0, 0, 1\]\] \(singular or projective\)"),
    "skew absurd": ([("matrix = [[1681.244873046875, 0.0,", "matrix = [[1681.244873046875, 1e9,")],
                    r"\[cam_01\] matrix: skew 1e\+09 is larger than the focal length"),
    "principal point far": ([("532.97369384375]", "-1089.0]")],
                            r"\[cam_01\] matrix: principal point \(-1089, 948.137\) px is more "
                            r"than one image size \(1088 x 1920\) outside the image"),
    "k1 1e12": ([("distortions = [-0.000721609375,", "distortions = [1e12,")],
                r"\[cam_01\] distortions \(k1\): distortion k1 = 1e\+12 is not finite within"),
    "rotation inf": ([("rotation = [1.68827548,", "rotation = [inf,")],
                     r"\[cam_01\] rotation: expected 3 numbers, got inf"),
    "translation absurd": ([("translation = [0.3211048899999996,", "translation = [1e300,")],
                           r"\[cam_01\] translation: translation \[1e\+300, .* m is not finite"),
    "integer 10**400": ([("translation = [0.3211048899999996,", f"translation = [{BIG_INT},")],
                        r"\[cam_01\] translation: expected 3 numbers, got an integer of about "
                        r"401 digits, too large"),
    "integer 10**400 size": ([("size = [1088.0, 1920.0]", f"size = [{BIG_INT}, 1]")],
                             r"\[cam_01\] size: expected 2 numbers, got an integer of about 401"),
    "integer 5000 digits": ([("size = [1088.0, 1920.0]", f"size = [{'9' * 5000}, 1]")],
                            r"malformed TOML: Exceeds the limit \(4300 digits\)"),
    "deep nesting": ([("[metadata]\n", "[metadata]\ndeep = " + "[" * 5000 + "]" * 5000 + "\n")],
                     r"malformed TOML: arrays or tables nested too deeply"),
    "deep inline tables": ([("[metadata]\n", "[metadata]\ndeep = " + "{a = " * 3000 + "1"
                             + "}" * 3000 + "\n")], r"nested too deeply"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(TOML_CASES))
def test_hostile_toml(tmp_path, case):
    edits, match = TOML_CASES[case]
    path = bad_toml(tmp_path, edits)
    with pytest.raises(CalibrationError) as e:
        load_calibration(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg, msg
    assert re.search(match, msg), msg
    assert len(msg) < 400, msg


def test_toml_duplicated_camera(tmp_path):
    path = _duplicate_toml(tmp_path)
    with pytest.raises(CalibrationError, match=r"\[cam_02\] translation: the same pose as camera "
                       r"'cam_01' \(centres 0 mm apart, same rotation\)") as e:  # fmt: skip
        load_calibration(path)
    assert str(e.value).startswith(f"{path}: ")


def _not_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Paths that are no calibration file: ``(path, reason)``."""
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    fifo = tmp_path / "fifo.qca.txt"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.toml"
    zero.symlink_to("/dev/zero")
    big = tmp_path / "big.qca.txt"
    with open(big, "wb") as f:
        f.truncate(MAX_CALIBRATION_BYTES + 1)  # sparse: nothing is written
    return {
        "folder": (folder, "is a folder, expected a calibration file"),
        "fifo": (fifo, r"not a regular file \(a pipe, socket or device\)"),
        "/dev/zero": (zero, r"not a regular file \(a pipe, socket or device\)"),
        "over 16 MiB": (big, "over the 16 MiB limit for a calibration file"),
    }


def test_non_regular_and_huge_files_are_refused(tmp_path):
    from tensorpose.io.calibration import read_qca, read_toml

    for _, (path, why) in _not_files(tmp_path).items():
        for load in (load_calibration, read_qca, read_toml):  # the readers refuse them too
            with pytest.raises(CalibrationError, match=why) as e:
                load(path)
            assert str(e.value).startswith(f"{path}: ")


def test_every_calibration_is_checked(tmp_path):
    """The checks run on any Calibration built (not only by the readers), and on copies."""
    cal = load_calibration(QCA)
    assert cal.select(["cam_04", "cam_01"]).to(torch.float32).names == ["cam_04", "cam_01"]
    parts = {k: getattr(cal, k).clone() for k in ("K", "dist", "R", "t", "size")}
    bad_t = parts["t"].clone()
    bad_t[2, 1] = float("inf")
    with pytest.raises(ValueError, match=r"^Calibration: camera 'cam_03': t: translation "):
        Calibration(cal.names, parts["K"], parts["dist"], parts["R"], bad_t, parts["size"])
    bad_R = parts["R"].clone()
    bad_R[1] = -bad_R[1]
    with pytest.raises(ValueError, match=r"camera 'cam_02': R: not a rotation \(det -1,"):
        Calibration(cal.names, parts["K"], parts["dist"], bad_R, parts["t"], parts["size"],
                    source=Path("x.toml"))  # fmt: skip
    both = torch.stack([parts["R"][0], parts["R"][0]])
    step = torch.tensor([1e-4, 0.0, 0.0], dtype=torch.float64)
    t = torch.stack([parts["t"][0], parts["t"][0] + step])  # 0.1 mm apart
    with pytest.raises(ValueError, match=r"camera 'b': t: the same pose as camera 'a' \(centres "
                       r"0\.1 mm apart"):  # fmt: skip
        Calibration(["a", "b"], parts["K"][:2], parts["dist"][:2], both, t, parts["size"][:2])
    t[1] += 20 * step  # 2.1 mm apart: two distinct cameras
    Calibration(["a", "b"], parts["K"][:2], parts["dist"][:2], both, t, parts["size"][:2])
    with pytest.raises(ValueError, match=r"^Calibration: no camera"):
        Calibration([], parts["K"][:0], parts["dist"][:0], both[:0], t[:0], parts["size"][:0])


def test_bounds_accept_their_edges(tmp_path):
    """Values at the bounds load (the checks refuse nonsense, not unusual cameras)."""
    path = bad_toml(tmp_path, [
        ("size = [1088.0, 1920.0]", "size = [1.0, 100000]"),
        ("matrix = [[1681.244873046875, 0.0, 532.97369384375]",
         "matrix = [[0.001, 0.0, -1.0]"),
        ("distortions = [-0.000721609375,", "distortions = [-1000.0,"),
    ], name="edges.toml")  # fmt: skip
    cal = load_calibration(path)
    assert cal.K[0, 0, 0] == 0.001 and cal.dist[0, 0] == -1000.0


# --------------------------------------------------------------------------- the commands
def _one_line(capsys, code: int, *names: object) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in names:
        assert str(n) in lines[0], (n, lines[0])
    return lines[0]


def _command_cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """One hostile file per family: ``(path, a part of the reason)``."""
    sub = tmp_path / "files"
    sub.mkdir()
    edits, _ = QCA_CASES["focal 0"]
    fifo, _ = _not_files(sub)["fifo"]
    return {
        "nonsense value": (bad_qca(sub, edits, "focal.qca.txt"), "focal lengths fx = 0"),
        "degenerate cameras": (_duplicate_toml(sub), "the same pose as camera 'cam_01'"),
        "entity bomb": (bad_qca(sub, QCA_CASES["doctype bomb"][0], "bomb.qca.txt"),
                        "entity declarations are not accepted"),
        "integer overflow": (bad_toml(sub, TOML_CASES["integer 10**400"][0], "int.toml"),
                             "integer of about 401 digits"),
        "deep nesting": (bad_toml(sub, TOML_CASES["deep nesting"][0], "deep.toml"),
                         "nested too deeply"),
        "not a file": (fifo, "not a regular file"),
    }  # fmt: skip


def test_triangulate_refuses_hostile_calibrations(tmp_path, capsys):
    for family, (path, why) in _command_cases(tmp_path).items():
        out = tmp_path / f"out_{family.replace(' ', '_')}"
        code = main(["triangulate", str(TRACKS), "--calib", str(path), "--out", str(out)])
        line = _one_line(capsys, code, path, why)
        assert line.startswith("tensorpose triangulate: error: "), line
        assert not out.exists(), family


def test_lift_refuses_hostile_calibrations(tmp_path, capsys):
    cases = _command_cases(tmp_path)
    for family in ("nonsense value", "entity bomb", "not a file"):
        path, why = cases[family]
        out = tmp_path / "out_lift"
        code = main(["lift", str(TRACKS / "cam01_json"), "--calib", str(path), "--camera",
                     "cam_01", "--out", str(out)])  # fmt: skip
        line = _one_line(capsys, code, path, why)
        assert line.startswith("tensorpose lift: error: "), line
        assert not out.exists(), family
