"""io.openpose on the bundled real tracks and on small hand-made folders, and the smooth CLI."""

import json
import sys

import numpy as np
import pytest
import torch

from tensorpose.cli import main
from tensorpose.io.openpose import (
    COCO17_INDEX,
    LAYOUTS,
    OpenPoseError,
    bundled_tracks,
    link_tracks,
    openpose_folders,
    read_openpose_frames,
    write_openpose,
)
from tensorpose.io.tracks import read_tracks
from tensorpose.skeleton import coco17


def person(xy, conf=0.9):
    """Flat OpenPose keypoints from ``xy (K, 2)`` (NaN -> not detected: 0, 0, 0)."""
    xy = np.asarray(xy, dtype=float)
    c = np.where(np.isnan(xy[:, 0]), 0.0, conf)
    return np.column_stack([np.nan_to_num(xy), c]).ravel().tolist()


def write_frames(folder, frames, name="f{:04d}.json"):
    """``frames``: per frame a list of flat keypoint lists."""
    folder.mkdir(parents=True, exist_ok=True)
    for t, people in enumerate(frames):
        doc = {
            "version": 1.3,
            "people": [{"person_id": [-1], "pose_keypoints_2d": p} for p in people],
        }
        (folder / name.format(t)).write_text(json.dumps(doc))
    return folder


def body(center, K=18, spread=40.0):
    """A K-keypoint 'person' around ``center``."""
    angles = np.linspace(0, 2 * np.pi, K, endpoint=False)
    return np.asarray(center) + spread * np.column_stack([np.cos(angles), np.sin(angles)])


# ----------------------------------------------------------------------------- bundled data
def test_bundled_tracks():
    folders = bundled_tracks()
    assert [f.name for f in folders] == ["cam01_json", "cam02_json", "cam03_json", "cam04_json"]
    tracks_per_camera = []
    for folder in folders:
        tr = read_tracks(folder)
        assert tr.layout == "BODY_25B" and tr.num_frames == 100 and len(tr.files) == 100
        assert tr.keypoints.shape == (100, tr.num_tracks, 25, 3)
        assert tr.keypoints.dtype == torch.float64
        assert tr.to_coco17().shape == (100, tr.num_tracks, 17, 3)
        kp = tr.keypoints
        # the main subject (track 0) is in every frame; present joints are confident, in-image
        assert (~torch.isnan(kp[:, 0, :, 2])).any(-1).all()
        ok = ~torch.isnan(kp[..., 2])
        assert (kp[..., 2][ok] >= 0.3).all()
        assert (kp[..., 0][ok] >= 0).all() and (kp[..., 1][ok] >= 0).all()
        tracks_per_camera.append(tr.num_tracks)
    assert tracks_per_camera == [3, 2, 1, 1]  # bystanders in cam01/cam02


def test_low_confidence_joints_become_missing():
    folder = bundled_tracks()[2]
    tr = read_tracks(folder)
    raw = json.loads(tr.files[0].read_text())["people"][0]["pose_keypoints_2d"]
    raw = np.asarray(raw).reshape(-1, 3)
    low = (raw[:, 2] > 0) & (raw[:, 2] < 0.3)
    assert low.any()  # the detector is unsure of some joints in this frame
    kp0 = tr.keypoints[0, 0]
    assert torch.isnan(kp0[torch.from_numpy(low)]).all()
    np.testing.assert_allclose(
        kp0[torch.from_numpy(raw[:, 2] >= 0.3)].numpy(), raw[raw[:, 2] >= 0.3]
    )
    assert torch.equal(tr.low_confidence[0, 0], torch.from_numpy(low))
    kept = read_tracks(folder, min_confidence=0.0)
    np.testing.assert_allclose(kept.keypoints[0, 0, torch.from_numpy(low)].numpy(), raw[low])
    # and the filters see them as missing: the smoothed value there is a prediction
    assert int(tr.low_confidence.sum()) > 100


# ----------------------------------------------------------------------------- linking
def test_link_tracks_follows_people_not_file_order():
    T, K = 12, 18
    a = [body((100 + 3 * t, 200)) for t in range(T)]
    b = [body((400 - 2 * t, 220)) for t in range(T)]
    frames = []
    for t in range(T):
        people = [person(a[t]), person(b[t])]
        if t % 2:
            people.reverse()  # OpenPose's order changes from frame to frame
        if t == 5:
            people = [person(b[t])]  # a missed for one frame
        frames.append(people)
    # a newcomer far away in the last two frames
    frames[-2].append(person(body((800, 600))))
    frames[-1].insert(0, person(body((802, 601))))
    arrays = [np.asarray(p, dtype=float).reshape(len(p), K, 3) for p in frames]
    out = link_tracks(arrays)
    assert out.shape == (T, 3, K, 3)
    torch.testing.assert_close(out[:, 0, 0, 0][~torch.isnan(out[:, 0, 0, 0])],
                               torch.tensor([a[t][0, 0] for t in range(T) if t != 5]))  # fmt: skip
    assert torch.isnan(out[5, 0]).all()
    torch.testing.assert_close(out[:, 1, 0, 0], torch.tensor([b[t][0, 0] for t in range(T)]))
    assert torch.isnan(out[:-2, 2]).all() and not torch.isnan(out[-2:, 2]).any()


def test_greedy_fallback_without_scipy(monkeypatch):
    T, K = 8, 18
    frames = [
        np.stack([np.column_stack([body(c), np.ones(K)]) for c in ((100 + t, 100), (500, 90 + t))])[
            :: (1 if t % 3 else -1)
        ]
        for t in range(T)
    ]
    with_scipy = link_tracks(frames)
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)  # import fails -> greedy
    torch.testing.assert_close(link_tracks(frames), with_scipy, equal_nan=True)


def test_link_gate():
    K = 18
    frames = [
        np.column_stack([body((100, 100), K), np.ones(K)])[None],
        np.column_stack([body((150, 100), K), np.ones(K)])[None],  # 50 px jump
    ]
    assert link_tracks(frames).shape[1] == 1  # within half the box diagonal (~56 px)
    assert link_tracks(frames, max_distance=30.0).shape[1] == 2
    with pytest.raises(ValueError, match="max_distance"):
        link_tracks(frames, max_distance=0.0)


# ----------------------------------------------------------------------------- layouts
def test_layouts_and_coco17_mapping():
    assert {"BODY_25", "BODY_25B", "COCO_18"} <= set(LAYOUTS)
    coco = list(coco17().names)
    for layout, idx in COCO17_INDEX.items():
        assert [LAYOUTS[layout][i] for i in idx] == coco
    assert COCO17_INDEX["BODY_25B"] == list(range(17))


def reorder_as_body25(kp):
    """BODY_25B ``(K=25, 3)`` rows re-ordered as BODY_25, its neck and mid-hip made as OpenPose
    makes them (mean of the shoulders / hips)."""
    b, a = LAYOUTS["BODY_25B"], LAYOUTS["BODY_25"]
    rows = []
    for name in a:  # test reference: a loop over joints
        if name in ("neck", "mid_hip"):
            pair = ("l_shoulder", "r_shoulder") if name == "neck" else ("l_hip", "r_hip")
            p, q = kp[b.index(pair[0])], kp[b.index(pair[1])]
            rows.append([(p[0] + q[0]) / 2, (p[1] + q[1]) / 2, min(p[2], q[2])])
        else:
            rows.append(list(kp[b.index(name)]))
    return np.asarray(rows)


def test_layout_detection(tmp_path):
    src = sorted(bundled_tracks()[1].glob("*.json"))[:5]
    docs = [json.loads(f.read_text())["people"] for f in src]
    people = [[np.asarray(p["pose_keypoints_2d"]).reshape(25, 3) for p in d] for d in docs]
    write_frames(tmp_path / "b25b", [[p.ravel().tolist() for p in d] for d in people])
    write_frames(
        tmp_path / "b25", [[reorder_as_body25(p).ravel().tolist() for p in d] for d in people]
    )
    tr = read_tracks(tmp_path / "b25b")
    assert tr.layout == "BODY_25B" and "fits BODY_25B" in tr.layout_reason
    tr = read_tracks(tmp_path / "b25")
    assert tr.layout == "BODY_25" and "fits BODY_25" in tr.layout_reason
    assert read_openpose_frames(tmp_path / "b25")[2] == "BODY_25"
    given = read_tracks(tmp_path / "b25", layout="BODY_25B")  # explicit wins
    assert given.layout == "BODY_25B" and given.layout_reason == "BODY_25B as given"
    # the joints of the reordered folder land where their names say
    torch.testing.assert_close(
        tr.keypoints[..., LAYOUTS["BODY_25"].index("l_knee"), :],
        read_tracks(tmp_path / "b25b").keypoints[..., 13, :],
        equal_nan=True,
    )
    write_frames(tmp_path / "c18", [[person(body((50, 50), 18))]])
    assert read_openpose_frames(tmp_path / "c18")[2] == "COCO_18"
    with pytest.raises(OpenPoseError, match="25 keypoints, expected 18"):
        read_openpose_frames(tmp_path / "b25", layout="COCO_18")
    with pytest.raises(ValueError, match="layout"):
        read_openpose_frames(tmp_path / "b25", layout="MPI_15")
    write_frames(tmp_path / "k20", [[person(body((50, 50), 20))]])
    with pytest.raises(OpenPoseError, match=r"f0000\.json: 20 keypoints match no known layout"):
        read_openpose_frames(tmp_path / "k20")


def test_tracks_to_h36m17():
    from tensorpose.layouts import to_h36m17

    tr = read_tracks(bundled_tracks()[2])
    h = tr.to_h36m17()
    assert h.shape == (100, tr.num_tracks, 17, 3)
    torch.testing.assert_close(h, to_h36m17(tr.keypoints, "BODY_25B"), equal_nan=True)


# ----------------------------------------------------------------------------- bad input
def test_empty_and_missing_folder(tmp_path):
    with pytest.raises(OpenPoseError, match=r"no OpenPose \.json files"):
        read_tracks(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_tracks(tmp_path / "nope")
    (tmp_path / "a.json").write_text("{}")
    with pytest.raises(OpenPoseError, match=r"a\.json: is a file, expected a folder"):
        read_tracks(tmp_path / "a.json")


def test_non_files_named_like_frames_are_skipped(tmp_path):
    folder = write_frames(tmp_path / "cam", [[person(body((50 + t, 50)))] for t in range(3)])
    (folder / "f0003.json").mkdir()  # a subfolder named like a frame
    (folder / "f0001.json").unlink()
    (folder / "f0001.json").mkdir()  # a frame replaced by a folder
    tr = read_tracks(folder)
    assert [f.name for f in tr.files] == ["f0000.json", "f0002.json"]
    only_dirs = tmp_path / "dirs"
    (only_dirs / "f0000.json").mkdir(parents=True)
    with pytest.raises(OpenPoseError, match=r"dirs: no OpenPose \.json files"):
        read_tracks(only_dirs)


def test_openpose_folders(tmp_path):
    assert openpose_folders(bundled_tracks()[0]) == [bundled_tracks()[0]]
    assert openpose_folders(bundled_tracks()[0].parent) == bundled_tracks()
    with pytest.raises(FileNotFoundError):
        openpose_folders(tmp_path / "nope")
    with pytest.raises(OpenPoseError, match="no OpenPose .json files in it or in its subfolders"):
        openpose_folders(tmp_path)
    (tmp_path / "x.json").mkdir()  # a folder named like a frame is not a frame
    with pytest.raises(OpenPoseError, match="no OpenPose .json files"):
        openpose_folders(tmp_path)
    f = bundled_tracks()[0] / "cam01.0000.json"
    with pytest.raises(OpenPoseError, match="is a file"):
        openpose_folders(f)


def test_malformed_json_names_the_file(tmp_path):
    folder = write_frames(tmp_path / "cam", [[person(body((50, 50)))]] * 3)
    (folder / "f0001.json").write_text('{"version": 1.3, "people": [')
    with pytest.raises(OpenPoseError, match=r"f0001\.json.*malformed JSON.*line 1"):
        read_tracks(folder)
    (folder / "f0001.json").write_text('{"version": 1.3}')
    with pytest.raises(OpenPoseError, match=r"f0001\.json.*people"):
        read_tracks(folder)
    (folder / "f0001.json").write_text('{"people": [{"pose_keypoints_2d": [1, 2]}]}')
    with pytest.raises(OpenPoseError, match=r"f0001\.json.*multiple of 3"):
        read_tracks(folder)
    bad = {
        "NaN": "a non-finite value",
        '"1"': "'1', not a number",
        "true": "True, not a number",
        "1e12": "beyond 1e\\+07",
        "[1]": "\\[1\\], not a number",
    }
    for value, message in bad.items():
        doc = '{"people": [{"pose_keypoints_2d": [VALUE, 2, 0.5]}]}'
        (folder / "f0001.json").write_text(doc.replace("VALUE", value))
        with pytest.raises(OpenPoseError, match=rf"f0001\.json: people\[0\].*{message}"):
            read_tracks(folder)
    (folder / "f0001.json").write_text("[" * 10000 + "]" * 10000)
    with pytest.raises(OpenPoseError, match=r"f0001\.json: malformed JSON: nested too deeply"):
        read_tracks(folder)


def test_different_joint_counts(tmp_path):
    folder = write_frames(
        tmp_path / "cam", [[person(body((50, 50), 25))], [person(body((50, 50), 18))]]
    )
    with pytest.raises(OpenPoseError, match=r"f0001\.json.*18 keypoints, expected 25"):
        read_tracks(folder)


def test_frames_without_people_and_empty_detections(tmp_path):
    K = 18
    ghost = body((300, 300), K)
    ghost[:] = np.nan  # a 'person' whose joints were all undetected (0, 0, 0)
    frames = [[person(body((50 + t, 50)))] if t != 2 else [] for t in range(5)]
    frames[4].append(person(ghost))
    tr = read_tracks(write_frames(tmp_path / "cam", frames))
    assert tr.people_per_frame == [1, 1, 0, 1, 1] and tr.ignored_people == 1
    assert tr.num_tracks == 1  # the empty detection makes no track
    assert torch.isnan(tr.keypoints[2]).all()
    from tensorpose.ops.filters import kalman_smoother

    xy = kalman_smoother(tr.keypoints[..., :2].permute(1, 2, 0, 3))
    assert not torch.isnan(xy[0]).any()  # frame 2 predicted
    with pytest.raises(OpenPoseError, match="no person"):
        read_tracks(write_frames(tmp_path / "none", [[], []]))
    assert read_tracks(tmp_path / "none", layout="COCO_18").keypoints.shape == (2, 0, 18, 3)


def test_empty_detections_never_become_tracks(tmp_path):
    # OpenPose lists people it found nothing of (all confidences 0), at other places each
    # frame; unlinked, each would be a new track (T x ghosts tracks: gigabytes in the filters).
    T, K, ghosts = 60, 25, 4
    rng = np.random.default_rng(0)
    frames = []
    for t in range(T):
        people = [person(body((100 + t, 100), K))]
        for _ in range(ghosts):
            g = np.column_stack([rng.uniform(0, 900, (K, 2)), np.zeros(K)])
            people.append(g.ravel().tolist())
        frames.append(people)
    tr = read_tracks(write_frames(tmp_path / "cam", frames), layout="BODY_25")
    assert tr.num_tracks == 1 and tr.ignored_people == T * ghosts
    assert tr.people_per_frame == [1] * T
    arrays = [np.asarray(p, float).reshape(len(p), K, 3) for p in frames]
    assert link_tracks(arrays).shape == (T, 1, K, 3)  # link_tracks alone ignores them too


def test_points_at_origin_are_missing(tmp_path):
    K = 18
    a = [body((200 + 2 * t, 200)) for t in range(6)]
    frames = []
    for t in range(6):
        kp = np.asarray(person(a[t]), float).reshape(K, 3)
        kp[:4, :2] = 0.0  # OpenPose's "not found" written with a nonzero confidence
        frames.append([kp.ravel().tolist()])
    tr = read_tracks(write_frames(tmp_path / "cam", frames))
    assert tr.num_tracks == 1
    assert torch.isnan(tr.keypoints[:, 0, :4]).all() and torch.isnan(tr.raw[:, 0, :4]).all()
    assert not torch.isnan(tr.keypoints[:, 0, 4:]).any()
    assert not tr.low_confidence[:, 0, :4].any()
    # a person found only at (0, 0) is an empty detection
    frames[3].append([0.0, 0.0, 0.7] * K)
    tr = read_tracks(write_frames(tmp_path / "cam2", frames))
    assert tr.num_tracks == 1 and tr.ignored_people == 1


def test_natural_frame_order(tmp_path):
    frames = [[person(body((10 * t, 0)))] for t in range(12)]
    folder = write_frames(tmp_path / "cam", frames, name="video_{}_keypoints.json")
    tr = read_tracks(folder)
    assert [f.name for f in tr.files][:3] == [f"video_{i}_keypoints.json" for i in range(3)]
    assert (tr.keypoints[:, 0, 0, 0].diff() > 0).all()


def test_write_read_round_trip(tmp_path):
    tr = read_tracks(bundled_tracks()[1])
    write_openpose(tr.keypoints, tmp_path / "out", [f.name for f in tr.files])
    back = read_tracks(tmp_path / "out")
    assert back.keypoints.shape == tr.keypoints.shape
    torch.testing.assert_close(back.keypoints, tr.keypoints, atol=1e-4, rtol=0, equal_nan=True)
    with pytest.raises(ValueError, match="names"):
        write_openpose(tr.keypoints, tmp_path / "x", ["a.json"])


# ----------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("method", ["kalman", "rts", "one-euro"])
def test_cli_smooth(tmp_path, capsys, method):
    plot = pytest.importorskip("matplotlib") is not None
    src = bundled_tracks()[3]
    out = tmp_path / method
    args = ["smooth", str(src), "--method", method, "--out", str(out), "--fps", "60"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "jitter" in text and "lag" in text and "confidence < 0.3" in text
    files = sorted(out.glob("*.json"))
    assert len(files) == 100 and files[0].name == "cam04.0000.json"
    raw, smoothed = read_tracks(src), read_tracks(out, min_confidence=0.0)
    assert smoothed.keypoints.shape == raw.keypoints.shape
    # confident joints keep their confidence; coordinates move by a few pixels (One-Euro lags
    # ~2 frames at these settings)
    ok = ~torch.isnan(raw.keypoints[..., 2])
    torch.testing.assert_close(smoothed.keypoints[..., 2][ok], raw.keypoints[..., 2][ok])
    shift = (smoothed.keypoints[..., :2] - raw.keypoints[..., :2])[ok].abs()
    assert shift.median() < (10.0 if method == "one-euro" else 3.0)
    if plot:
        pngs = list(out.glob("*.png"))
        assert len(pngs) == 1 and pngs[0].stat().st_size > 10_000


def test_cli_smooth_errors(tmp_path, capsys):
    assert main(["smooth", str(tmp_path)]) == 2
    assert "no OpenPose .json files" in capsys.readouterr().err
    args = ["smooth", str(bundled_tracks()[3]), "--out", str(tmp_path / "o"), "--no-plot"]
    assert main([*args, "--measurement-noise", "0"]) == 2
    assert "--measurement-noise" in capsys.readouterr().err
    assert main([*args, "--method", "one-euro", "--fps", "-1"]) == 2
    assert "fps" in capsys.readouterr().err


def test_progress_bar_only_for_long_folders_when_asked(tmp_path, capsys):
    """``progress=True`` shows a reading bar (stderr) for folders of >= 300 files only."""
    tracks = read_tracks(bundled_tracks()[0])
    raw = tracks.raw.nan_to_num(0.0)
    long = raw.repeat(3, 1, 1, 1)  # 300 frames
    write_openpose(long, tmp_path / "long", [f"f{t:04d}.json" for t in range(300)])
    write_openpose(raw, tmp_path / "short", [f"f{t:04d}.json" for t in range(len(raw))])
    capsys.readouterr()
    a = read_tracks(tmp_path / "long", progress=True)
    assert "reading long" in capsys.readouterr().err
    b = read_tracks(tmp_path / "long")
    read_tracks(tmp_path / "short", progress=True)
    assert capsys.readouterr().err == ""
    assert torch.equal(a.raw.nan_to_num(-1.0), b.raw.nan_to_num(-1.0))
