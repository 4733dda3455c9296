"""io.calibration: the bundled Qualisys file against Pose2Sim's own conversion of it, TOML round
trips, and errors that name the file and the camera/key."""

from __future__ import annotations

import re

import cv2
import numpy as np
import pytest
import torch

from tensorpose.io.calibration import (
    Calibration,
    CalibrationError,
    load_calibration,
    read_qca,
    read_toml,
    write_toml,
)
from tensorpose.io.openpose import bundled_tracks

QCA = bundled_tracks()[0].parent / "Calib.qca.txt"

# Pose2Sim's conversion of this same Qualisys file, as published in its demo session
# (perfanalytics/pose2sim, Pose2Sim/S00_Demo_Session/S00_Calibration/Calib_qualisys.toml), in
# Pose2Sim's own TOML layout (trailing commas and all). Two of the four cameras.
POSE2SIM_TOML = """\
[cam_01]
name = "cam_01"
size = [ 1088.0, 1920.0,]
matrix = [ [ 1681.244873046875, 0.0, 532.97369384375,], [ 0.0, 1681.075439453125, \
948.137390140625,], [ 0.0, 0.0, 1.0,],]
distortions = [ -0.000721609375, 0.002187234375, 9.5e-06, 1.078125e-05,]
rotation = [ 1.6882754799999993, 1.0483220499999997, -0.41955852000000016,]
translation = [ 0.3211048899999996, 0.9563320600000009, 2.8907130499999996,]
fisheye = false

[cam_03]
name = "cam_03"
size = [ 1088.0, 1920.0,]
matrix = [ [ 1681.598388671875, 0.0, 513.20837403125,], [ 0.0, 1681.509887703125, \
955.005126953125,], [ 0.0, 0.0, 1.0,],]
distortions = [ -0.000729765625, 0.00215034375, -8.46875e-06, -8.078125e-06,]
rotation = [ 0.8109654899999995, -2.1972129299999996, 1.3760277799999996,]
translation = [ -0.7934803899999995, 0.32283594000000126, 4.353514870000001,]
fisheye = false

[metadata]
adjusted = false
error = 0.0
"""


@pytest.fixture(scope="module")
def qca() -> Calibration:
    return load_calibration(QCA)


def test_bundled_qca_equals_pose2sims_conversion(qca, tmp_path):
    assert qca.names == ["cam_01", "cam_02", "cam_03", "cam_04"]
    path = tmp_path / "Calib_qualisys.toml"
    path.write_text(POSE2SIM_TOML)
    ref = read_toml(path)
    assert ref.names == ["cam_01", "cam_03"]
    ours = qca.select(ref.names)
    np.testing.assert_allclose(ours.K.numpy(), ref.K.numpy(), rtol=0, atol=1e-9)
    np.testing.assert_allclose(ours.dist.numpy(), ref.dist.numpy(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(ours.t.numpy(), ref.t.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.R.numpy(), ref.R.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.size.numpy(), ref.size.numpy())
    for c in range(2):  # OpenCV's Rodrigues of our rotation matrices gives their vectors
        rvec, _ = cv2.Rodrigues(ours.R[c].numpy())
        np.testing.assert_allclose(rvec.ravel(), ref.rvec[c].numpy(), atol=1e-12)
    assert ref.metadata == {"adjusted": False, "error": 0.0}


def test_qca_geometry_from_the_file(qca):
    text = QCA.read_text()
    xs = [float(v) for v in re.findall(r' x="([-0-9.e]+)"', text)]
    ys = [float(v) for v in re.findall(r' y="([-0-9.e]+)"', text)]
    zs = [float(v) for v in re.findall(r' z="([-0-9.e]+)"', text)]
    # The transform's x, y, z is the camera position in mm: our centres -R^T t, in metres.
    np.testing.assert_allclose(qca.centers.numpy(), np.c_[xs, ys, zs] / 1000, atol=1e-12)
    np.testing.assert_allclose((qca.R @ qca.R.mT).numpy(), np.eye(3)[None].repeat(4, 0), atol=1e-9)
    np.testing.assert_allclose(torch.linalg.det(qca.R).numpy(), 1.0, atol=1e-9)
    # Every camera (mounted ~1.7-2.1 m high) looks down towards the capture area around the
    # world origin: the optical axis points down and the origin projects inside the image.
    assert (qca.R[:, 2, 2] < 0).all()
    origin_cam = qca.t  # R @ 0 + t
    uv = (qca.K @ origin_cam.unsqueeze(-1)).squeeze(-1)
    uv = uv[:, :2] / uv[:, 2:]
    assert (origin_cam[:, 2] > 0).all()
    assert ((uv > 0) & (uv < qca.size)).all()
    # fx = focalLengthU / 64 and cx = centerPointU / 64 - fov_video left (= 0 here).
    assert float(qca.K[0, 0, 0]) == pytest.approx(107599.671875 / 64)
    assert float(qca.K[0, 1, 2]) == pytest.approx(60680.792969 / 64)
    assert qca.size[0].tolist() == [1088.0, 1920.0]  # fov_video 0..1087 x 0..1919


def test_qca_binning_window_and_resolution(tmp_path):
    text = QCA.read_text()
    # Crop window and a 540p video on the first camera.
    text2 = text.replace(
        '<fov_video bottom="1919" left="0" right="1087" top="0"/>',
        '<fov_video bottom="1819" left="40" right="1047" top="100"/>',
        1,
    ).replace('serial="cam_01"', 'serial="cam_01" video_resolution="540p"', 1)
    path = tmp_path / "crop.qca.txt"
    path.write_text(text2)
    cal = read_qca(path)
    base = read_qca(QCA)
    s = 540 / 1080
    assert cal.size[0].tolist() == [(1047 - 40 + 1) * s, (1819 - 100 + 1) * s]
    assert float(cal.K[0, 0, 0]) == pytest.approx(float(base.K[0, 0, 0]) * s)
    assert float(cal.K[0, 0, 2]) == pytest.approx((float(base.K[0, 0, 2]) - 40) * s)
    assert float(cal.K[0, 1, 2]) == pytest.approx((float(base.K[0, 1, 2]) - 100) * s)
    torch.testing.assert_close(cal.K[1:], base.K[1:])
    binned = read_qca(QCA, binning_factor=2)
    torch.testing.assert_close(binned.K[:, :2, :2], base.K[:, :2, :2] / 2)
    torch.testing.assert_close(binned.size, base.size / 2)
    torch.testing.assert_close(binned.R, base.R)


def test_qca_keeps_video_cameras_in_natural_order(tmp_path):
    text = QCA.read_text().replace('serial="cam_01"', 'serial="cam_10"')
    text = text.replace('model="none" point-count="999999999" serial="cam_02"',
                        'model="Oqus 7+" point-count="999999999" serial="cam_02"')  # fmt: skip
    path = tmp_path / "mixed.qca.txt"
    path.write_text(text)
    assert read_qca(path).names == ["cam_03", "cam_04", "cam_10"]


def test_toml_round_trip_bundled(qca, tmp_path):
    path = write_toml(qca, tmp_path / "calib.toml")
    back = load_calibration(path)
    assert back.names == qca.names
    for key in ("K", "dist", "t", "size"):  # floats are written exactly
        assert torch.equal(getattr(back, key), getattr(qca, key)), key
    np.testing.assert_allclose(back.R.numpy(), qca.R.numpy(), rtol=0, atol=1e-15)
    assert back.metadata == {"adjusted": False, "error": 0.0}
    # Rodrigues vectors read back from the file equal the written ones to the last bits.
    np.testing.assert_allclose(back.rvec.numpy(), qca.rvec.numpy(), rtol=0, atol=1e-15)


def test_toml_round_trip_names_k3_metadata(tmp_path):
    g = torch.Generator().manual_seed(0)
    C = 3
    rvec = torch.randn(C, 3, generator=g, dtype=torch.float64)
    rvec[2] = torch.tensor([0.0, 3.1415926, 0.0])  # near pi
    from tensorpose.ops.rotations import axis_angle_to_matrix

    cal = Calibration(
        names=['cam "left"', "Kamera ü 2", "back\\door"],
        K=torch.tensor([[900.0, 0.1, 640.5], [0.0, 905.25, 360.0], [0.0, 0.0, 1.0]]).double()
        .expand(C, 3, 3).clone(),
        dist=torch.randn(C, 5, generator=g, dtype=torch.float64) * 0.1,
        R=axis_angle_to_matrix(rvec),
        t=torch.randn(C, 3, generator=g, dtype=torch.float64),
        size=torch.tensor([[1280.0, 720.0]] * C, dtype=torch.float64),
        metadata={"adjusted": True, "error": 0.25, "note": "lab 2"},
    )  # fmt: skip
    back = read_toml(write_toml(cal, tmp_path / "c.toml"))
    assert back.names == cal.names
    assert back.metadata == cal.metadata
    for key in ("K", "dist", "t", "size"):
        assert torch.equal(getattr(back, key), getattr(cal, key)), key
    np.testing.assert_allclose(back.R.numpy(), cal.R.numpy(), rtol=0, atol=1e-12)


def test_calibration_select_to_and_checks(qca):
    sub = qca.select(["cam_04", "cam_02"])
    assert sub.names == ["cam_04", "cam_02"]
    assert torch.equal(sub.K[0], qca.K[3]) and torch.equal(sub.t[1], qca.t[1])
    with pytest.raises(KeyError, match="cam_09"):
        qca.select(["cam_09"])
    assert qca.to(torch.float32).K.dtype == torch.float32
    with pytest.raises(ValueError, match=r"Calibration.dist must have shape \(4, 5\)"):
        Calibration(qca.names, qca.K, qca.dist[:, :4], qca.R, qca.t, qca.size)
    with pytest.raises(ValueError, match="unique"):
        Calibration(["a", "a", "b", "c"], qca.K, qca.dist, qca.R, qca.t, qca.size)


# ----------------------------------------------------------------------------- errors
def _qca_with(tmp_path, old: str, new: str):
    text = QCA.read_text()
    assert old in text
    path = tmp_path / "bad.qca.txt"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ('focalLengthU="107599.671875"', "", r"camera 'cam_01': <intrinsic> has no 'focalLengthU'"),
        ('r11="0.5536380477336265"', 'r11="abc"', r"camera 'cam_01': <transform> r11='abc' is not"),
        (
            'r11="0.5536380477336265"',
            'r11="0.9"',
            r"camera 'cam_01': <transform> .* not a rotation",
        ),
        ('<fov_video bottom="1919" left="0" right="1087" top="0"/>', "", "has no <fov_video>"),
        ("</cameras>", "</camera>", r"malformed XML at line \d+"),
        ('serial="cam_02"', 'serial="cam_01"', "duplicate camera serials"),
    ],
)
def test_qca_errors_name_file_camera_and_key(tmp_path, old, new, match):
    path = _qca_with(tmp_path, old, new)
    with pytest.raises(CalibrationError, match=match) as e:
        load_calibration(path)
    assert str(path) in str(e.value)


def _toml_with(tmp_path, old: str, new: str):
    assert old in POSE2SIM_TOML
    path = tmp_path / "bad.toml"
    path.write_text(POSE2SIM_TOML.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ("translation = [ 0.32", "transl = [ 0.32", r"\[cam_01\] is missing \['translation'\]"),
        ("rotation = [ 1.688", "rotation = [ 9, 1.688", r"\[cam_01\] rotation: expected 3 numbers"),
        ("[ 0.0, 0.0, 1.0,],]", "[ 0.0, 0.0,],]", r"\[cam_01\] matrix: expected 3 x 3 numbers"),
        ("size = [ 1088.0,", 'size = [ "w",', r"\[cam_01\] size: expected 2 numbers"),
        ("distortions = [ -0.000721609375,", "distortions = [", r"\[cam_01\] distortions"),
        ("fisheye = false", "fisheye = true", r"\[cam_01\] fisheye = true: .* not supported"),
        ('name = "cam_01"', 'name = "cam_01\nx', r"malformed TOML: .*line 2"),
        ('name = "cam_03"', 'name = "cam_01"', "duplicate camera names"),
        ("1681.244873046875, 0.0", "-1.0, 0.0", r"\[cam_01\] matrix: focal lengths"),
    ],
)
def test_toml_errors_name_file_table_and_key(tmp_path, old, new, match):
    path = _toml_with(tmp_path, old, new)
    with pytest.raises(CalibrationError, match=match) as e:
        load_calibration(path)
    assert str(path) in str(e.value)


def test_load_calibration_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.toml"):
        load_calibration(tmp_path / "nope.toml")
    other = tmp_path / "calib.yml"
    other.write_text("x: 1\n")
    with pytest.raises(CalibrationError, match="unknown calibration format"):
        load_calibration(other)
    empty = tmp_path / "empty.toml"
    empty.write_text("[metadata]\nadjusted = false\n")
    with pytest.raises(CalibrationError, match="no camera table"):
        load_calibration(empty)
    with pytest.raises(ValueError, match="binning_factor"):
        read_qca(QCA, binning_factor=0)
    cal = load_calibration(QCA)
    cal.names[0] = "metadata"
    with pytest.raises(ValueError, match="collides"):
        write_toml(cal, tmp_path / "x.toml")
