"""``triangulate --people auto --kinematics`` on tests/data/synthetic_two_people (40 frames):
the balancing man is scaled and gets joint angles in ``<out>/kinematics/``; the composited
second person, seated in every frame, and a bystander seen without a right shoulder are each
skipped with one line (OpenSim needed: skipped without ``pip install 'tensorpose[opensim]'``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorpose.apps.kinematics import output_names
from tensorpose.cli import main
from tensorpose.io.storage import read_storage

pytest.importorskip("opensim")

TWO = Path(__file__).resolve().parents[1] / "data" / "synthetic_two_people"


def test_people_chain_skips_who_cannot_be_scaled(tmp_path, capsys):
    out = tmp_path / "tri"
    argv = ["triangulate", str(TWO), "--calib", str(TWO / "Calib.qca.txt"), "--people", "auto",
            "--fps", "60", "--out", str(out), "--kinematics", "--mass", "80"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    kin = out / "kinematics"
    stem = "synthetic_two_people_p1_3d"
    assert sorted(p.name for p in kin.iterdir()) == sorted(output_names(stem))
    assert f"{stem}.trc: body25b setup" in text and "mass 80 kg" in text
    skipped = [ln for ln in text.splitlines() if ln.strip().startswith("skipped:")]
    assert len(skipped) == 2
    assert "p2_3d.trc: the person never stands upright enough" in skipped[0]
    assert "p3_3d.trc: too few markers" in skipped[1] and "RShoulder missing" in skipped[1]
    mot = read_storage(kin / f"{stem}.mot")
    assert len(mot.data) == 40 and mot.in_degrees
