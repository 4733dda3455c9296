"""``tensorpose kinematics`` with OpenSim (skipped without ``pip install 'tensorpose[opensim]'``).

Known answer: a TRC whose markers are the unscaled model's own markers (BODY_25B marker set):
30 frames in the model's default pose, then 10 frames posed at known joint
angles (hips, knees, ankles, shoulders, elbows, the pelvis' heading). Three quarters of the
frames hold each scaling marker pair at its length on the model, so the 50 % trimmed mean is
that length and scaling must give factors of 1; inverse kinematics must then recover the
angles the frames were made from (in the default pose the arms hang at -90 deg adduction,
where arm flexion and rotation are the same axis: those two are checked on the posed frames).
OpenSim's IK solver stops with markers up to about 1 mm off: each angle within 1.5 deg, 0.5 deg
on average. Then the outputs' all-or-nothing
commit: refused without ``--overwrite``, an interrupt inside OpenSim's IK leaves the old
outputs as they were.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensorpose.apps.kinematics import kinematics_files, output_names
from tensorpose.biomech import SETUPS
from tensorpose.biomech.setups import MODEL_FILE
from tensorpose.cli import main
from tensorpose.errors import InputError
from tensorpose.io.motion import write_trc
from tensorpose.io.storage import read_storage

opensim = pytest.importorskip("opensim")
opensim.Logger.setLevelString("Error")

FPS, STILL, MOVING = 30.0, 30, 10
T = STILL + MOVING
MOVES = {  # coordinate -> (mean, amplitude) degrees, one sine period over the trial
    "hip_flexion_r": (15, 20), "hip_flexion_l": (10, -15), "knee_angle_r": (30, 25),
    "knee_angle_l": (20, 15), "ankle_angle_r": (5, 10), "ankle_angle_l": (-5, 8),
    "arm_flex_r": (20, 25), "arm_flex_l": (10, -20), "elbow_flex_r": (60, 30),
    "elbow_flex_l": (40, 20), "arm_add_r": (-30, 10), "arm_add_l": (-25, -10),
    "pelvis_rotation": (-30, 20),
}  # fmt: skip


def truth() -> dict[str, np.ndarray]:
    """Coordinate -> degrees ``(MOVING,)`` of the posed frames: one sine period."""
    phase = 2 * math.pi * np.arange(MOVING) / MOVING
    return {c: m + a * np.sin(phase) for c, (m, a) in MOVES.items()}


def model_markers_trc(path) -> dict[str, np.ndarray]:
    """Write the model's BODY_25B markers over the :func:`truth` poses to ``path``; return the
    coordinates (degrees) of the poses as assembled (the model's constraints may move them)."""
    model = opensim.Model(str(MODEL_FILE))
    model.set_MarkerSet(opensim.MarkerSet(str(SETUPS["body25b"].markers_file)))
    state = model.initSystem()
    coords, markers = model.getCoordinateSet(), model.getMarkerSet()
    names = [markers.get(i).getName() for i in range(markers.getSize())]
    angles = truth()
    points = np.zeros((T, len(names), 3))
    posed = {c: np.zeros(T) for c in angles}
    for t in range(T):
        for c, v in angles.items():
            value = v[t - STILL] if t >= STILL else coords.get(c).getDefaultValue()
            coords.get(c).setValue(state, value if t < STILL else math.radians(value), False)
        model.assemble(state)
        model.realizePosition(state)
        for c in angles:
            posed[c][t] = math.degrees(coords.get(c).getValue(state))
        for j, n in enumerate(names):
            points[t, j] = markers.get(n).getLocationInGround(state).to_numpy()
    write_trc(path, points, names, FPS, units="m")
    return posed


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("kin")
    trc = d / "known.trc"
    posed = model_markers_trc(trc)
    r = kinematics_files([trc], d / "out", mass=70.0)
    return trc, d / "out", r, posed


def test_known_angles_recovered(run):
    _, out, r, posed = run
    (p,) = r["people"]
    assert p["setup"] == "body25b" and p["standing_frames"] == T
    for body, xyz in p["scales"].items():  # the TRC's segments are the model's
        np.testing.assert_allclose(xyz, 1.0, atol=1e-4, err_msg=body)
    mot = read_storage(out / "known.mot")
    assert mot.in_degrees and len(mot.data) == T
    for c, want in posed.items():
        frames = slice(STILL, T) if c.startswith(("arm_flex", "arm_rot")) else slice(0, T)
        err = np.abs(mot.column(c) - want)[frames]
        assert err.max() < 1.5 and err.mean() < 0.5, f"{c}: {err.max():.2f} deg off"
    errors = read_storage(out / "known_ik_marker_errors.sto")
    assert errors.column("marker_error_RMS").max() < 1e-3  # metres: OpenSim's solver stops there
    assert sorted(q.name for q in out.iterdir()) == sorted(output_names("known"))


def test_refused_without_overwrite_and_interrupt_keeps_old(run, monkeypatch):
    trc, out, *_ = run
    before = {q.name: q.read_bytes() for q in out.iterdir()}
    with pytest.raises(InputError, match="--overwrite"):
        kinematics_files([trc], out)
    import tensorpose.apps.kinematics as app

    def interrupted(setup, model, trc, mot, start, end):
        mot.write_text("half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(app, "inverse_kinematics", interrupted)
    with pytest.raises(KeyboardInterrupt):
        kinematics_files([trc], out, overwrite=True)
    assert {q.name: q.read_bytes() for q in out.iterdir()} == before


def test_cli_one_line_errors(run, tmp_path, capsys):
    trc, *_ = run
    text = trc.read_text()
    mm = tmp_path / "mm.trc"
    mm.write_text(text.replace("\tm\t", "\tmm\t", 1))
    few = tmp_path / "few.trc"
    lines = text.splitlines(keepends=True)
    few.write_text("".join(lines[:5]))  # header only: a TRC without frames is refused by its reader
    cases = [
        ([str(mm)], f"{mm}: units are 'mm'"),
        ([str(trc), "--height", "175"], "--height must be"),
        ([str(trc), "--mass", "-1"], "--mass must be"),
        ([str(tmp_path / "none.trc")], "none.trc"),
    ]
    for args, want in cases:
        assert main(["kinematics", *args, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and want in err[0], err
    assert not (tmp_path / "o").exists()
