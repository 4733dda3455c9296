"""The calibration check with several people: a camera that never sees the people kept (they
are out of its view) but whose detections fit the people triangulated and not kept is not
blamed; a camera whose detections fit no one (swapped calibration) still is. On
synthetic_two_people (tests/data) with the composited person removed from cam03 and cam04."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tensorpose.errors import InputError
from tensorpose.multiview.people import triangulate_cameras_people
from tensorpose.multiview.recording import CameraAgreement, check_agreement, read_cameras

TWO = Path(__file__).resolve().parents[1] / "data" / "synthetic_two_people"


def _without_composited(dst: Path, cams=("cam03_json", "cam04_json")) -> Path:
    """synthetic_two_people with the composited person (confidences all 0 or 1) removed from
    ``cams``: only cam01 and cam02 see that person."""
    shutil.copytree(TWO, dst)
    for cam in cams:
        for f in (dst / cam).glob("*.json"):  # every frame of the two cameras
            d = json.loads(f.read_text())
            d["people"] = [p for p in d["people"]
                           if not set(p["pose_keypoints_2d"][2::3]) <= {0, 1}]  # fmt: skip
            f.write_text(json.dumps(d))
    return dst


def _keep_only(cams, tally, who):
    tris = triangulate_cameras_people(cams, agreement=tally)
    k = next(i for i, t in enumerate(tris) if who(t))
    tally.keep = [tally.keep[k]]
    return tally.result([tris[k]])


def test_people_kept_out_of_a_cameras_view_do_not_blame_its_calibration(tmp_path):
    root = _without_composited(tmp_path / "rec")
    cams = read_cameras(root, root / "Calib.qca.txt")
    tally = CameraAgreement(cams, 0.3)
    unseen = lambda t: (t.person[:, 2:] < 0).all() and t.valid.any(-1).mean() > 0.5  # noqa: E731
    agreement = _keep_only(cams, tally, unseen)  # only the person cam03, cam04 never see
    far = {a["camera"]: a for a in agreement if a["median_px"] is None or a["median_px"] > 30}
    assert len(far) == 2  # what blamed cam03 and cam04's calibration before
    checked = check_agreement(agreement, root, 15.0, root / "Calib.qca.txt")
    for a in checked:
        assert a["sees_only_others"] == (a["camera"] in far)
        if a["sees_only_others"]:
            assert a["median_everyone_px"] <= 30
    # both people kept: every camera fits someone, nobody is out of view
    tally = CameraAgreement(cams, 0.3)
    tris = triangulate_cameras_people(cams, agreement=tally)
    both = check_agreement(tally.result(tris), root, 15.0, root / "Calib.qca.txt")
    assert not any(a["sees_only_others"] for a in both)


def test_swapped_cameras_are_still_blamed_with_people(tmp_path):
    root = tmp_path / "rec"
    shutil.copytree(TWO, root)
    cal = root / "Calib.qca.txt"
    text = cal.read_text()
    cal.write_text(
        text.replace("cam_03", "TMP").replace("cam_04", "cam_03").replace("TMP", "cam_04")
    )  # cam03 and cam04 swapped
    cams = read_cameras(root, cal)
    tally = CameraAgreement(cams, 0.3)
    tris = triangulate_cameras_people(cams, agreement=tally)
    with pytest.raises(InputError, match="cam_03, cam_04 never agree with the other cameras"):
        check_agreement(tally.result(tris), root, 15.0, cal)
