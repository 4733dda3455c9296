"""`tensorpose predict --model blazepose`: no checkpoint, BLAZEPOSE_33 OpenPose JSON."""

import json
import shutil
from pathlib import Path

from tensorpose.cli import main

IMAGE = sorted(
    (Path(__file__).resolve().parents[1] / "tensorpose/assets/coco/images").glob("*.jpg")
)[0]


def test_predict_blazepose_writes_33_landmarks(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(IMAGE, folder / IMAGE.name)
    rc = main(["predict", str(folder), "--model", "blazepose", "--out", str(tmp_path / "out"),
               "--quiet"])  # fmt: skip
    out = capsys.readouterr().out
    assert "blazepose" in out
    files = list((tmp_path / "out/openpose").glob("*_keypoints.json"))
    assert len(files) == 1
    people = json.loads(files[0].read_text())["people"]
    if rc == 0:
        assert people and len(people[0]["pose_keypoints_2d"]) == 99
    else:
        assert rc == 1 and "1 of 1 frames without a person" in out


def test_predict_blazepose_refuses_a_checkpoint(tmp_path, capsys):
    rc = main(["predict", str(IMAGE), "--model", "blazepose", "--checkpoint", "x.pt",
               "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--checkpoint" in err
    assert main(["predict", str(IMAGE), "--out", str(tmp_path / "o")]) == 2
