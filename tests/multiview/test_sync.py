"""``tensorpose sync`` and ``triangulate --sync`` on the bundled balancing trial (OpenPose
BODY_25B, 4 cameras, 100 frames at 60 fps) with cameras made to start at other instants.

The shifted copy keeps frames ``5:`` of cam01 and cam03, ``12:`` of cam02 and ``0:`` of cam04
(renumbered from 0): cam02 started 7 frames after cam01 (delay +7), cam04 5 frames before
(delay -5); to start together cam01 and cam03 drop 7 frames, cam02 none, cam04 12.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.cli import main
from tensorpose.io.openpose import bundled_tracks
from tensorpose.multiview.sync import frames_to_drop, lagged_pearson

TRACKS = bundled_tracks()[0].parent
STARTS = {"cam01_json": 5, "cam02_json": 12, "cam03_json": 5, "cam04_json": 0}
SHIFT = {"cam01_json": 0, "cam02_json": 7, "cam03_json": 0, "cam04_json": -5}


def copy_trial(dst: Path, starts: dict[str, int]) -> Path:
    """Each camera folder without its first ``starts[folder]`` frames, renumbered from 0."""
    for folder in sorted(TRACKS.glob("cam*_json")):  # four cameras
        (dst / folder.name).mkdir(parents=True)
        for i, f in enumerate(sorted(folder.glob("*.json"))[starts.get(folder.name, 0) :]):
            shutil.copy(f, dst / folder.name / f"{folder.name[:5]}.{i:04d}.json")
    shutil.copy(TRACKS / "Calib.qca.txt", dst)
    return dst


def error(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_lagged_pearson_equals_a_loop_over_lags():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(3, 40, generator=g), torch.randn(3, 33, generator=g)
    mx, my = torch.rand(3, 40, generator=g) > 0.2, torch.rand(3, 33, generator=g) > 0.2
    y[1] = x[1, 4:37] + 0.1 * torch.randn(33, generator=g)  # y[s] shows x[s + 4]
    lags, r = lagged_pearson(x, mx, y, my, 12)
    for b in range(3):  # the naive reference: one np.corrcoef per lag
        for i, d in enumerate(lags.tolist()):
            t = np.arange(40)
            ok = (t - d >= 0) & (t - d < 33)
            t = t[ok]
            both = mx[b, t].numpy() & my[b, t - d].numpy()
            if both.sum() < 3:
                assert np.isnan(r[b, i].item())
                continue
            want = np.corrcoef(x[b, t[both]].numpy(), y[b, (t - d)[both]].numpy())[0, 1]
            assert r[b, i].item() == pytest.approx(want, abs=1e-9)
    assert lags[r[1].argmax()] == 4  # y started 4 frames after x: delay +4


def test_frames_to_drop_sign_convention():
    # a camera with delay +7 started 7 frames later: the others drop 7 frames, it drops none
    assert frames_to_drop([0, 7, 0, -5]) == [7, 0, 7, 12]


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    """``sync --calib`` of the original trial and of the shifted copy."""
    root = tmp_path_factory.mktemp("sync")
    original, shifted = copy_trial(root / "orig", {}), copy_trial(root / "shifted", STARTS)
    out = {}
    for name, trial in (("orig", original), ("shifted", shifted)):
        argv = ["sync", str(trial), "--calib", str(trial / "Calib.qca.txt"), "--fps", "60",
                "--out", str(root / f"sync_{name}")]  # fmt: skip
        assert main(argv) == 0
        out[name] = json.loads((root / f"sync_{name}" / "sync.json").read_text())
    return root, out


def test_sync_finds_the_shifts(synced):
    _, out = synced
    orig, shifted = out["orig"], out["shifted"]
    assert shifted["reference"] == "cam01_json"
    # cam02 and cam04 start with cam01 in the bundled trial; cam03 lags about two frames
    # (its detections agree best with the others' 3D points there)
    assert orig["delays"]["cam02_json"] == orig["delays"]["cam04_json"] == 0
    assert {n: shifted["delays"][n] - orig["delays"][n] for n in SHIFT} == SHIFT
    assert shifted["offsets"]["cam02_json"] == 0
    assert shifted["offsets"]["cam04_json"] - shifted["offsets"]["cam01_json"] == 5
    assert min(shifted["offsets"].values()) == 0
    for n, whole in shifted["offsets"].items():  # the sub-frame values round to the offsets
        assert abs(shifted["fractional"][n] - whole) <= 0.5


def triangulate(trial: Path, out: Path, sync: Path | None = None) -> np.ndarray:
    argv = ["triangulate", str(trial), "--calib", str(trial / "Calib.qca.txt"), "--fps", "60",
            "--out", str(out)]  # fmt: skip
    if sync is not None:
        argv += ["--sync", str(sync)]
    assert main(argv) == 0
    with np.load(out / f"{trial.name}_3d.npz") as f:
        return f["points"]


def median_mm(a: np.ndarray, b: np.ndarray) -> float:
    d = np.linalg.norm(a - b, axis=-1)
    return float(np.nanmedian(d) * 1000)


def test_triangulate_with_sync_equals_the_unshifted_trial(synced):
    root, out = synced
    original, shifted = root / "orig", root / "shifted"
    plain = triangulate(original, root / "tri_plain")
    # the shifts themselves: the common frames 12..99 of the original
    exact = {n: 12 - s for n, s in STARTS.items()}
    (root / "exact.json").write_text(json.dumps({"reference": "cam01_json", "offsets": exact}))
    points = triangulate(shifted, root / "tri_exact", root / "exact.json")
    assert points.shape[0] == 88
    assert median_mm(points, plain[12:]) < 1.0
    # what sync found, on the shifted copy and on the original: the same frames, the same 3D
    found = triangulate(shifted, root / "tri_found", root / "sync_shifted" / "sync.json")
    ref = triangulate(original, root / "tri_orig", root / "sync_orig" / "sync.json")
    # cam04 drops as many frames from the original as from the copy beyond the 12 it has more
    assert out["shifted"]["offsets"]["cam04_json"] - out["orig"]["offsets"]["cam04_json"] == 12
    assert len(found) == len(ref) - 12
    assert median_mm(found, ref[12:]) < 1.0


def test_bad_sync_inputs_are_one_line(tmp_path, capsys):
    one = tmp_path / "one"
    (one / "cam01_json").mkdir(parents=True)
    for f in sorted((TRACKS / "cam01_json").glob("*.json"))[:10]:
        shutil.copy(f, one / "cam01_json")
    err = error(capsys, ["sync", str(one), "--out", str(tmp_path / "o1"), "--fps", "60"])
    assert "two camera folders" in err
    trial = copy_trial(tmp_path / "t", {})
    base = ["triangulate", str(trial), "--calib", str(trial / "Calib.qca.txt"), "--fps", "60",
            "--out", str(tmp_path / "o2"), "--sync"]  # fmt: skip
    names = {"cam01_json": 0, "cam02_json": 0, "cam03_json": 0, "cam04_json": 0}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"offsets": {**names, "cam09_json": 3}}))
    err = error(capsys, [*base, str(bad)])
    assert str(bad) in err and "cam09_json" in err
    bad.write_text(json.dumps({"offsets": {**names, "cam02_json": 100}}))
    err = error(capsys, [*base, str(bad)])
    assert str(bad) in err and "cam02_json (100 of 100 frames)" in err
    bad.write_text(json.dumps({"offsets": {**names, "cam02_json": -1}}))
    assert str(bad) in error(capsys, [*base, str(bad)])
    assert "no such" in error(capsys, [*base, str(tmp_path / "missing.json")])
    assert not (tmp_path / "o2").exists() or not any((tmp_path / "o2").iterdir())
