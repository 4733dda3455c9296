"""The chain ``smooth`` -> ``lift`` / ``triangulate`` on every camera of the bundled balancing
trial and on synthetic_two_people (tests/data, 40 frames), through the library (in-process).

References: the raw (unsmoothed) folders read the same way. A smoothed track is the raw track
it came from: present in the frames where the raw one has a joint kept by the confidence
threshold, no more and no fewer, and no track split or merged; the layout is the raw one's; the
person ``lift`` chooses is the raw choice; the 3D from the smoothed 2D lies within centimetres
of the 3D from the raw 2D.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.apps.lift import lift
from tensorpose.apps.smooth import smooth_folder
from tensorpose.apps.triangulate import triangulate_folder
from tensorpose.config import config_to_dict, load_config
from tensorpose.io.openpose import bundled_tracks, write_openpose
from tensorpose.io.tracks import read_person, read_tracks
from tensorpose.smoothing import FilterSettings
from tensorpose.tasks.lifting import LiftingTask
from tensorpose.train.checkpoint import save_checkpoint

BUNDLED = bundled_tracks()[0].parent
TWO = Path(__file__).parent / "data" / "synthetic_two_people"
SIZE = (1088, 1920)


@pytest.fixture(scope="module")
def smoothed(tmp_path_factory):
    root = tmp_path_factory.mktemp("chain")
    out = {}
    for name, src in (("bundled", BUNDLED), ("two", TWO)):  # the two trials
        settings = FilterSettings(method="rts", fps=60.0)
        smooth_folder(src, root / name, settings, joint=None)
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    cfg = load_config(None, ["model.channels=16", "model.receptive_field=9", "data.fps=10",
                             "data.val_cameras=1"])  # fmt: skip
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ck") / "tiny.pt"
    save_checkpoint(path, LiftingTask.build_model(cfg), config_to_dict(cfg))
    return path


@pytest.mark.parametrize("trial", ["bundled", "two"])
def test_tracks_and_layout_survive_smoothing(smoothed, trial):
    src = BUNDLED if trial == "bundled" else TWO
    for cam in sorted(src.glob("cam*_json")):  # four cameras
        raw = read_tracks(cam, min_confidence=0.3)
        sm = read_tracks(smoothed[trial] / cam.name, min_confidence=0.3)
        assert sm.layout == raw.layout == "BODY_25B", cam.name
        kept = torch.isfinite(raw.keypoints[..., 0]).any(-1)  # (T, P) raw joints >= 0.3
        present = torch.isfinite(sm.raw[..., 0]).any(-1)
        assert sm.num_tracks == int(kept.any(0).sum()), cam.name
        assert torch.equal(present, kept[:, kept.any(0)]), cam.name  # no split, no merge


def test_layout_recorded_or_detected_is_the_same(tmp_path, smoothed):
    """Without the recorded layout (files of another writer), cam04's smoothed joints alone
    do not tell BODY_25B from BODY_25: the recorded layout is what keeps the answer."""
    sm = read_tracks(smoothed["bundled"] / "cam04_json")
    write_openpose(sm.raw, tmp_path / "plain", [f.name for f in sm.files])
    assert read_tracks(tmp_path / "plain").layout_reason != sm.layout_reason
    assert "recorded" in sm.layout_reason
    first = json.loads(sorted((smoothed["bundled"] / "cam04_json").glob("*.json"))[0].read_text())
    assert first["keypoint_layout"] == "BODY_25B" and first["people"][0]["person_id"] == [0]


@pytest.mark.parametrize("trial", ["bundled", "two"])
def test_smooth_then_lift_every_camera(smoothed, ckpt, tmp_path, trial):
    src = BUNDLED if trial == "bundled" else TWO
    for cam in sorted(src.glob("cam*_json")):  # four cameras
        r = lift(smoothed[trial] / cam.name, ckpt, tmp_path / trial / cam.name, size=SIZE,
                 fps=60.0, progress=False)  # fmt: skip
        raw = read_person(cam)
        assert r["person"] == raw.person, cam.name  # the same person as without smoothing
        assert r["layout"] == "BODY_25B"
        z = np.load(tmp_path / trial / cam.name / f"{cam.name}_3d.npz")
        assert np.isfinite(z["joints"]).all() and len(z["joints"]) == raw.keypoints.shape[0]


def test_lift_chooses_the_best_covered_person(tmp_path):
    """A bystander seen in more joint-frames but never with the joints the lifter needs loses
    to the person seen whole (cam01: the bystander never shows its right shoulder)."""
    tracks = read_tracks(BUNDLED / "cam01_json", min_confidence=0.0)
    raw = tracks.raw.clone()
    raw[:50, 0] = float("nan")  # the participant only in the last 50 frames
    write_openpose(raw, tmp_path / "cut", [f.name for f in tracks.files], "BODY_25B",
                   identities=True)  # fmt: skip
    seen = torch.isfinite(raw[..., 0])
    assert seen[:, 1].sum() > seen[:, 0].sum()  # the bystander has more found keypoints
    assert read_person(tmp_path / "cut").person == 0


@pytest.mark.parametrize("trial", ["bundled", "two"])
def test_smooth_then_triangulate(smoothed, tmp_path, trial):
    src = BUNDLED if trial == "bundled" else TWO
    shutil.copy(src / "Calib.qca.txt", tmp_path / "Calib.qca.txt")
    people = None if trial == "bundled" else "auto"
    raw = triangulate_folder(src, src / "Calib.qca.txt", tmp_path / "raw", fps=60,
                             plot=False, people=people)  # fmt: skip
    sm = triangulate_folder(smoothed[trial], tmp_path / "Calib.qca.txt", tmp_path / "sm",
                            fps=60, plot=False, people=people)  # fmt: skip
    assert sm["layout"] == raw["layout"] == "BODY_25B"
    pairs = (
        [("_3d.npz", "_3d.npz")]
        if people is None
        else [("_p1_3d.npz", "_p1_3d.npz"), ("_p2_3d.npz", "_p2_3d.npz")]
    )
    for a, b in pairs:  # one or two people
        za = np.load(next(p for p in raw["outputs"].values() if str(p).endswith(a)))
        zb = np.load(next(p for p in sm["outputs"].values() if str(p).endswith(b)))
        both = za["valid"] & zb["valid"]
        assert both.mean() > 0.75
        d = np.linalg.norm(za["points"][both] - zb["points"][both], axis=-1)
        assert np.median(d) < 0.02  # metres: the same person, slightly smoothed
    if people is not None:
        assert len(sm["people"]) == len(raw["people"]) >= 2
        assert all(p["frames_found"] == 40 for p in sm["people"][:2])
