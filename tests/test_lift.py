"""``tensorpose lift``: recordings' 2D keypoints -> 3D files, against independent references
(np.interp bridging, a hand-built mirrored input, VideoPose3D called directly, TRC read back).
A tiny untrained lifter saved through the normal checkpoint path keeps it to seconds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.apps.lift import lift
from tensorpose.cli import main
from tensorpose.config import config_to_dict, load_config
from tensorpose.inference import evaluate, load_model
from tensorpose.io.motion import read_trc
from tensorpose.io.openpose import bundled_tracks
from tensorpose.io.tracks import read_tracks
from tensorpose.layouts import COCO17_INDEX, to_h36m17
from tensorpose.ops.camera import camera_to_opensim, normalize_screen
from tensorpose.ops.gaps import bridge_missing
from tensorpose.skeleton import get_skeleton
from tensorpose.tasks.lifting import LiftingTask
from tensorpose.train.checkpoint import save_checkpoint

VP3D = Path(__file__).resolve().parent / "data" / "videopose3d" / "vp3d_checkpoint_s0.bin"
CAM01, CAM02 = bundled_tracks()[:2]  # cam02: two people, every joint seen
SIZE = (1088, 1920)  # the bundled cameras (Calib.qca.txt: 1088 x 1920 portrait)
H36M = get_skeleton("h36m17")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    cfg = load_config(None, ["model.channels=16", "model.receptive_field=9", "data.fps=10",
                             "data.val_cameras=1"])  # fmt: skip
    torch.manual_seed(0)
    model = LiftingTask.build_model(cfg)
    for m in model.modules():  # non-trivial BatchNorm statistics
        if isinstance(m, torch.nn.BatchNorm1d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    path = tmp_path_factory.mktemp("ck") / "tiny.pt"
    save_checkpoint(path, model, config_to_dict(cfg))
    return path


def _naive_bridge(xy: np.ndarray, missing: np.ndarray) -> np.ndarray:
    out = xy.copy()
    t = np.arange(len(xy))
    for j in range(xy.shape[1]):  # the obvious loop: per joint and coordinate, np.interp
        ok = ~missing[:, j]
        for d in range(xy.shape[2]):
            out[:, j, d] = np.interp(t, t[ok], xy[ok, j, d])  # holds the ends
    return out


def _model_reference(ckpt: Path, kp_h36m: torch.Tensor, size, min_conf=0.3) -> torch.Tensor:
    """Convert-free reference: mask, np.interp bridge, normalise, model.predict, root."""
    _, model, _, _ = load_model(ckpt, "cpu")
    kp = kp_h36m.numpy()
    missing = ~(np.isfinite(kp[..., :2]).all(-1) & (kp[..., 2] >= min_conf))
    xy = _naive_bridge(np.nan_to_num(kp[..., :2]), missing)
    x = normalize_screen(torch.from_numpy(xy), *size).float()
    with torch.no_grad():
        j = model.predict(x[None])[0]
    return j - j[:, :1]


def _track(folder: Path, person: int | None = None) -> torch.Tensor:
    raw = read_tracks(folder, min_confidence=0.0).raw
    counts = [int(np.isfinite(raw[:, p, :, 0].numpy()).sum()) for p in range(raw.shape[1])]
    p = person if person is not None else int(np.argmax(counts))  # most found keypoints
    return raw[:, p]


def test_bridge_missing_equals_np_interp():
    g = torch.Generator().manual_seed(0)
    xy = torch.randn(40, 6, 2, generator=g, dtype=torch.float64)
    missing = torch.rand(40, 6, generator=g) < 0.4
    missing[:5, 0] = True  # leading gap
    missing[-7:, 1] = True  # trailing gap
    missing[:, 2] = False
    missing[torch.arange(40) != 20, 3] = True  # one observation
    ref = _naive_bridge(xy.numpy(), missing.numpy())
    got = bridge_missing(xy.masked_fill(missing[..., None], float("nan")), missing)
    np.testing.assert_allclose(got.numpy(), ref, rtol=0, atol=1e-12)
    missing[:, 4] = True
    with pytest.raises(ValueError, match="joint.* 4 missing .* every frame"):
        bridge_missing(xy, missing)


LIFT_MARKERS = ["Hip", "RHip", "RKnee", "RAnkle", "LHip", "LKnee", "LAnkle", "Spine", "Neck",
                "Nose", "Head", "LShoulder", "LElbow", "LWrist", "RShoulder", "RElbow",
                "RWrist"]  # fmt: skip
"""lift's TRC marker names of the h36m17 joints: Pose2Sim's (HALPE_26's) for the same body points,
as triangulate names them (``tests/test_triangulate_outputs.py``)."""


def test_lift_openpose_folder(ckpt, tmp_path, capsys):
    out = tmp_path / "o"
    rc = main(["lift", str(CAM01), "--checkpoint", str(ckpt), "--size", "1088x1920",
               "--fps", "60", "--out", str(out), "--quiet"])  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    name = CAM01.name
    for f in (f"{name}_3d.npz", f"{name}.trc", f"{name}.csv", f"{name}_skeletons.png"):
        assert (out / f).stat().st_size > 0
    assert not list(tmp_path.glob(".*tmp"))  # temporary folder gone
    z = np.load(out / f"{name}_3d.npz")
    assert z["joints"].shape == (100, 17, 3) and z["missing"].shape == (100, 17)
    assert list(z["names"]) == list(H36M.names) and float(z["fps"]) == 60.0
    # bridged counts = a naive count on the converted track
    kp = to_h36m17(_track(CAM01), "BODY_25B").numpy()
    naive = 0
    for t in range(kp.shape[0]):
        for j in range(17):
            naive += not (np.isfinite(kp[t, j, :2]).all() and kp[t, j, 2] >= 0.3)
    assert naive > 0 and f"bridged {naive} joint-frames" in text
    assert int(z["missing"].sum()) == naive
    # the numbers: the model on np.interp-bridged input, placed with the root trajectory
    ref = _model_reference(ckpt, torch.from_numpy(kp), SIZE)
    np.testing.assert_allclose(z["joints_root_relative"], ref.numpy(), atol=1e-5)
    np.testing.assert_allclose(z["root_raw"], _naive_root(ref, kp, z["missing"]), atol=1e-4)
    np.testing.assert_allclose(z["joints"], z["joints_root_relative"] + z["root"][:, None],
                               atol=1e-5)  # fmt: skip
    assert "x right, y down, z forward" in str(z["axes"])
    # the TRC reads back with the same numbers (Y-up: x, -y, -z), and the CSV too
    trc = read_trc(out / f"{name}.trc")
    assert trc.names == LIFT_MARKERS and trc.fps == 60.0  # triangulate's names (Pose2Sim's)
    assert list(z["marker_names"]) == LIFT_MARKERS
    assert "Z towards the camera (the camera at the origin)" in trc.comment
    up = camera_to_opensim(torch.from_numpy(z["joints"]).double()).numpy()
    np.testing.assert_allclose(trc.points, up, atol=2e-6)
    np.testing.assert_allclose(trc.time, np.arange(100) / 60, atol=1e-6)
    csv = np.loadtxt(out / f"{name}.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(csv[:, 2:].reshape(100, 17, 3), up, atol=2e-6)
    # --root-relative: the joints as predicted, no trajectory in the files
    rc = main(["lift", str(CAM01), "--checkpoint", str(ckpt), "--size", "1088x1920", "--fps",
               "60", "--out", str(tmp_path / "rel"), "--quiet", "--root-relative"])  # fmt: skip
    rel = np.load(tmp_path / "rel" / f"{name}_3d.npz")
    assert rc == 0 and "root" not in rel.files and "axes" not in rel.files
    np.testing.assert_allclose(rel["joints"], ref.numpy(), atol=1e-5)
    assert "root-relative" in read_trc(tmp_path / "rel" / f"{name}.trc").comment


def _naive_root(joints: torch.Tensor, kp: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Per frame: the least-squares translation onto the rays of the detected joints
    (every joint where fewer than two were detected), rays with the default camera."""
    from tensorpose.lifting.inference import normalize_input
    from tests.ops.test_camera import _naive_fit_to_rays

    px = _naive_bridge(np.nan_to_num(kp[..., :2]), missing)
    rays = normalize_input(torch.from_numpy(px), "intrinsics", SIZE).numpy()
    w = (~missing).astype(np.float64)
    w[(w > 0).sum(1) < 2] = 1.0
    return _naive_fit_to_rays(joints.double().numpy(), rays, w)[1]


def _write_npz(path: Path, kp: np.ndarray, **extra) -> Path:
    np.savez(path, keypoints=kp, **extra)
    return path


def test_coco_results_equal_npz_of_the_same_person(ckpt, tmp_path):
    raw = read_tracks(CAM02, min_confidence=0.0).raw[:30, :2]  # two people, 30 frames
    coco = raw[:, :, COCO17_INDEX["BODY_25B"]].numpy()
    results = []
    for t in range(coco.shape[0]):
        for p in (1, 0):  # listed in the other order: linking sorts it out
            k = np.nan_to_num(coco[t, p]).reshape(-1).tolist()
            results.append({"image_id": 1000 + t, "category_id": 1, "keypoints": k,
                            "score": 0.9})  # fmt: skip
    (tmp_path / "res.json").write_text(json.dumps(results))
    a = lift(tmp_path / "res.json", ckpt, tmp_path / "a", size=SIZE, progress=False)
    assert a["kind"] == "coco" and a["layout"] == "COCO_17" and a["frames"] == 30
    za = np.load(tmp_path / "a" / "res_3d.npz")
    # the chosen person is one of the two, each lifted from an npz of its COCO keypoints
    ref_rows = np.stack([np.nan_to_num(coco[:, p]) for p in range(2)])
    zj = []
    for p in range(2):
        _write_npz(tmp_path / f"p{p}.npz", ref_rows[p], width=SIZE[0], height=SIZE[1])
        lift(tmp_path / f"p{p}.npz", ckpt, tmp_path / f"n{p}", layout="COCO_17", progress=False)
        zj.append(np.load(tmp_path / f"n{p}" / f"p{p}_3d.npz")["joints_root_relative"])
    assert any(np.allclose(za["joints_root_relative"], z, atol=1e-6) for z in zj)


def test_npz_input_uses_stored_size_and_fps(ckpt, tmp_path):
    kp = to_h36m17(_track(CAM01), "BODY_25B")[:25]
    src = _write_npz(tmp_path / "walk.npz", kp.numpy(), fps=np.float64(50), width=SIZE[0],
                     height=SIZE[1])  # fmt: skip
    r = lift(src, ckpt, tmp_path / "w", layout="H36M_17", progress=False)
    assert r["fps"] == 50 and r["size"] == SIZE
    z = np.load(tmp_path / "w" / "walk_3d.npz")
    ref = _model_reference(ckpt, kp, SIZE).numpy()
    np.testing.assert_allclose(z["joints_root_relative"], ref, atol=1e-5)
    # (T, K, 2) input: all found
    src2 = _write_npz(tmp_path / "xy.npz", np.nan_to_num(kp[..., :2].numpy()), width=SIZE[0],
                      height=SIZE[1])  # fmt: skip
    r2 = lift(src2, ckpt, tmp_path / "x", layout="H36M_17", progress=False)
    assert r2["bridged_joints"] == 0 and r2["fps"] == 30.0


def test_person_selection(ckpt, tmp_path, capsys):
    base = ["--checkpoint", str(ckpt), "--size", "1088x1920", "--quiet"]
    assert main(["lift", str(CAM02), *base, "--person", "1", "--out", str(tmp_path / "p1")]) == 0
    z1 = np.load(tmp_path / "p1" / f"{CAM02.name}_3d.npz")
    kp1 = to_h36m17(_track(CAM02, 1), "BODY_25B")
    ref1 = _model_reference(ckpt, kp1, SIZE).numpy()
    np.testing.assert_allclose(z1["joints_root_relative"], ref1, atol=1e-5)
    capsys.readouterr()
    assert main(["lift", str(CAM02), *base, "--person", "7", "--out", str(tmp_path / "p7")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "2 track(s)" in err and "--person 7" in err
    assert not (tmp_path / "p7").exists()
    # cam01's second person never shows its right shoulder: one line naming the joint
    _one_line_error(capsys, ["lift", str(CAM01), *base, "--person", "1", "--out",
                             str(tmp_path / "c1")], "r_shoulder", "every frame")  # fmt: skip


def test_flip_equals_naive_flip_average(ckpt, tmp_path):
    kp = to_h36m17(_track(CAM01), "BODY_25B")[:40]
    kp = torch.cat([torch.nan_to_num(kp[..., :2]), torch.ones_like(kp[..., 2:])], -1)
    src = _write_npz(tmp_path / "f.npz", kp.numpy(), width=SIZE[0], height=SIZE[1])
    lift(src, ckpt, tmp_path / "f", layout="H36M_17", flip=True, progress=False)
    got = np.load(tmp_path / "f" / "f_3d.npz")["joints_root_relative"]
    # naive: mirror by hand (swap l_/r_ names, negate normalised x), predict, mirror back
    names = list(H36M.names)
    swap = [names.index("l_" + n[2:] if n.startswith("r_") else "r_" + n[2:])
            if n[:2] in ("l_", "r_") else i for i, n in enumerate(names)]  # fmt: skip
    _, model, _, _ = load_model(ckpt, "cpu")
    x = normalize_screen(kp[..., :2], *SIZE).float()
    xm = x[:, swap].clone()
    xm[..., 0] *= -1
    with torch.no_grad():
        plain = model.predict(x[None])[0]
        mirrored = model.predict(xm[None])[0][:, swap]
    mirrored[..., 0] *= -1
    ref = (plain + mirrored) / 2
    ref = ref - ref[:, :1]
    np.testing.assert_allclose(got, ref.numpy(), atol=1e-5)
    assert not np.allclose(got, (plain - plain[:, :1]).numpy(), atol=1e-4)


def test_video_overlay_mp4(ckpt, tmp_path):
    cv2 = pytest.importorskip("cv2")
    W, H, T = 96, 64, 12
    vid = tmp_path / "rec.mp4"
    w = cv2.VideoWriter(str(vid), cv2.VideoWriter_fourcc(*"mp4v"), 10, (W, H))
    for t in range(T):
        w.write(np.full((H, W, 3), 20 * t % 255, np.uint8))
    w.release()
    kp = to_h36m17(_track(CAM01), "BODY_25B")[:T].numpy()
    kp[..., 0] *= W / SIZE[0]
    kp[..., 1] *= H / SIZE[1]
    src = _write_npz(tmp_path / "rec.npz", kp)
    r = lift(src, ckpt, tmp_path / "v", layout="H36M_17", size=(W, H), video=vid, fps=10,
             progress=False)  # fmt: skip
    mp4 = tmp_path / "v" / "rec.mp4"
    assert str(mp4) in r["files"]
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    reader = imageio_ffmpeg.read_frames(str(mp4))
    assert next(reader)["codec"] == "h264"  # browsers play it
    reader.close()
    cap = cv2.VideoCapture(str(mp4))
    n = 0
    while True:
        ok, img = cap.read()
        if not ok:
            break
        assert img.shape == (H, W + H, 3)
        n += 1
    cap.release()
    assert n == T


def test_video_a_codec_padding_apart_is_drawn_on(ckpt, tmp_path, capsys):
    """A video 8 px narrower than the calibrated image (an encoder's 16-pixel blocks: 1080 vs
    1088) is drawn on as is, with a one-line notice; 16 px apart is another image: refused."""
    cv2 = pytest.importorskip("cv2")
    W, H, T = 96, 64, 6
    kp = to_h36m17(_track(CAM01), "BODY_25B")[:T].numpy()
    kp[..., 0] *= W / SIZE[0]
    kp[..., 1] *= H / SIZE[1]
    src = _write_npz(tmp_path / "rec.npz", kp)
    for dw, ok in ((8, True), (16, False)):
        vid = tmp_path / f"rec{dw}.mp4"
        w = cv2.VideoWriter(str(vid), cv2.VideoWriter_fourcc(*"mp4v"), 10, (W - dw, H))
        for _ in range(T):
            w.write(np.zeros((H, W - dw, 3), np.uint8))
        w.release()
        args = ["lift", str(src), "--checkpoint", str(ckpt), "--layout", "H36M_17", "--size",
                f"{W}x{H}", "--video", str(vid), "--fps", "10", "--quiet", "--out",
                str(tmp_path / f"o{dw}")]  # fmt: skip
        assert main(args) == (0 if ok else 2)
        err = capsys.readouterr().err
        lines = [x for x in err.splitlines() if f"is {W - dw}x{H} but the image size" in x]
        assert len(lines) == 1 and str(vid) in lines[0]
        assert (tmp_path / f"o{dw}" / "rec.mp4").exists() == ok


def test_videopose3d_checkpoint_equals_direct_call(tmp_path):
    from tensorpose.lifting.videopose3d import load_videopose3d, videopose3d_normalize

    kp = to_h36m17(_track(CAM01), "BODY_25B")[:50]
    kp = torch.cat([torch.nan_to_num(kp[..., :2]), torch.ones_like(kp[..., 2:])], -1)
    src = _write_npz(tmp_path / "v.npz", kp.numpy(), width=SIZE[0], height=SIZE[1])
    for flip in (False, True):
        out = tmp_path / f"o{flip}"
        r = lift(src, VP3D, out, layout="H36M_17", flip=flip, progress=False)
        assert r["model"].startswith("videopose3d")
        got = np.load(out / "v_3d.npz")["joints_root_relative"]
        model = load_videopose3d(VP3D)
        x = videopose3d_normalize(kp[..., :2], *SIZE).float()
        idx = H36M.flip_index if flip else None
        with torch.no_grad():
            ref = model.predict(x[None], idx, idx)[0]
        np.testing.assert_allclose(got, (ref - ref[:, :1]).numpy(), atol=1e-6)


def _one_line_error(capsys, argv, *needles):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, err
    return err


def test_bad_inputs_exit_2_one_line_nothing_written(ckpt, tmp_path, capsys):
    base = ["--checkpoint", str(ckpt), "--quiet"]
    out = tmp_path / "out"
    o = ["--out", str(out)]
    k25 = _write_npz(tmp_path / "k25.npz", np.ones((5, 25, 3)), width=100, height=100)
    _one_line_error(capsys, ["lift", str(k25), *base, *o, "--layout", "COCO_17"], "17", "25")
    _one_line_error(capsys, ["lift", str(CAM01), *base, *o, "--layout", "COCO_18"], "18", "25")
    _one_line_error(capsys, ["lift", str(CAM01), *base, *o], "--size")  # no image size
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    _one_line_error(capsys, ["lift", str(empty), *base, *o, "--size", "10x10"], "empty.json")
    gone = np.ones((6, 17, 3))
    gone[:, 3] = np.nan  # r_ankle never seen
    g = _write_npz(tmp_path / "gone.npz", gone, width=100, height=100)
    _one_line_error(capsys, ["lift", str(g), *base, *o, "--layout", "H36M_17"], "r_ankle")
    bad_video = tmp_path / "x.mp4"
    bad_video.write_bytes(b"not a video at all")
    ok = _write_npz(tmp_path / "ok.npz", np.ones((6, 17, 3)), width=100, height=100)
    argv = ["lift", str(ok), *base, *o, "--layout", "H36M_17"]
    _one_line_error(capsys, [*argv, "--video", str(bad_video)], "cannot be decoded")
    vp3d = ["lift", str(ok), "--checkpoint", str(VP3D), "--vp3d-joints", "coco17", "--quiet",
            *o, "--layout", "COCO_17", "--reproject"]  # fmt: skip
    _one_line_error(capsys, vp3d, "--reproject", "coco17")  # input joints != output joints
    assert not out.exists()
    _one_line_error(capsys, ["lift", str(ok), "--checkpoint", str(tmp_path / "nope.pt"), *o],
                    "nope.pt")  # fmt: skip
    assert main(argv) == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    _one_line_error(capsys, argv, "--overwrite")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert main([*argv, "--overwrite"]) == 0


def test_eval_flip(ckpt, capsys):
    plain = evaluate(ckpt, "cpu")
    flipped = evaluate(ckpt, "cpu", return_predictions=True, flip=True)
    assert flipped["flip"] and flipped["frames"] == plain["frames"]
    assert flipped["mpjpe_mm"] != plain["mpjpe_mm"]
    # naive: average of the plain prediction and the hand-mirrored one, on the first clip
    _, model, _, _ = load_model(ckpt, "cpu")
    data = flipped["data"]
    kp = data.clip_arrays(0)["keypoints"]
    names = list(H36M.names)
    swap = [names.index("l_" + n[2:] if n.startswith("r_") else "r_" + n[2:])
            if n[:2] in ("l_", "r_") else i for i, n in enumerate(names)]  # fmt: skip
    xm = kp[:, swap] * torch.tensor([-1.0, 1.0])
    with torch.no_grad():
        a = model.predict(kp[None])[0]
        b = model.predict(xm[None])[0][:, swap] * torch.tensor([-1.0, 1.0, 1.0])
    torch.testing.assert_close(flipped["predictions"][0]["pred"], (a + b) / 2)
    assert main(["eval", str(ckpt), "--flip", "--json", "--device", "cpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mpjpe_mm"] == pytest.approx(flipped["mpjpe_mm"], rel=1e-6)


def test_compare_with_reference_naive():
    from tensorpose.layouts import LAYOUTS
    from tensorpose.metrics.pose3d import LIMB_JOINTS, compare_with_reference
    from tensorpose.ops.rotations import axis_angle_to_matrix

    g = torch.Generator().manual_seed(1)
    pred = torch.randn(8, 17, 3, generator=g, dtype=torch.float64) * 0.3
    R = axis_angle_to_matrix(torch.tensor([0.3, -1.0, 0.2], dtype=torch.float64))
    t = torch.tensor([0.1, 0.2, 4.0], dtype=torch.float64)
    names25 = LAYOUTS["BODY_25B"]
    world = torch.full((8, 25, 3), float("nan"), dtype=torch.float64)
    noise = torch.randn(8, 17, 3, generator=g, dtype=torch.float64) * 0.02
    for j, n in enumerate(H36M.names):  # the reference in the world frame, BODY_25B order
        if n in names25:
            world[:, names25.index(n)] = (pred[:, j] + noise[:, j] - t) @ R
    world[3, names25.index("l_knee")] = float("nan")  # frame 3 left out
    r = compare_with_reference(pred, H36M.names, world, names25, R, t)
    assert r["frames"] == 7
    # naive: loop over frames and joints, mid-hip root-relative
    total = 0.0
    for f in [0, 1, 2, 4, 5, 6, 7]:
        a = {n: pred[f, H36M.names.index(n)] + noise[f, H36M.names.index(n)] for n in LIMB_JOINTS}
        p = {n: pred[f, H36M.names.index(n)] for n in LIMB_JOINTS}
        ra, rp = (a["l_hip"] + a["r_hip"]) / 2, (p["l_hip"] + p["r_hip"]) / 2
        total += sum(float(((p[n] - rp) - (a[n] - ra)).norm()) for n in LIMB_JOINTS) / 12
    assert r["mpjpe_mm"] == pytest.approx(1000 * total / 7, rel=1e-9)
    assert 0 < r["p_mpjpe_mm"] <= r["mpjpe_mm"]


def test_calib_camera_gives_size_and_undistorted_intrinsics(ckpt, tmp_path):
    cv2 = pytest.importorskip("cv2")
    from tensorpose.io.calibration import load_calibration
    from tensorpose.lifting.inference import normalize_input

    calib = CAM01.parent / "Calib.qca.txt"
    kp = to_h36m17(_track(CAM01), "BODY_25B")[:20]
    src = _write_npz(tmp_path / "c.npz", kp.numpy())
    a = lift(src, ckpt, tmp_path / "a", layout="H36M_17", calib=calib, camera="cam_01",
             progress=False)  # fmt: skip
    assert a["size"] == SIZE
    lift(src, ckpt, tmp_path / "b", layout="H36M_17", size=SIZE, progress=False)
    rel = "joints_root_relative"  # the trajectory differs: K from the calibration vs default
    np.testing.assert_array_equal(np.load(tmp_path / "a" / "c_3d.npz")[rel],
                                  np.load(tmp_path / "b" / "c_3d.npz")[rel])  # fmt: skip
    with pytest.raises(ValueError, match="cam_01"):
        lift(src, ckpt, tmp_path / "x", layout="H36M_17", calib=calib, camera="nope")
    # intrinsics normalisation with a calibration = cv2.undistortPoints
    cal = load_calibration(calib)
    px = torch.nan_to_num(kp[..., :2])
    got = normalize_input(px, "intrinsics", SIZE, cal.K[0], dist=cal.dist[0])
    ref = cv2.undistortPoints(px.reshape(-1, 1, 2).numpy(), cal.K[0].numpy(), cal.dist[0].numpy())
    np.testing.assert_allclose(got.reshape(-1, 2).numpy(), ref.reshape(-1, 2), atol=1e-6)


def test_reproject_slides_detected_joints_onto_their_rays(ckpt, tmp_path):
    from tensorpose.io.calibration import load_calibration
    from tensorpose.lifting.inference import normalize_input

    calib = CAM01.parent / "Calib.qca.txt"
    kp = to_h36m17(_track(CAM01), "BODY_25B")[:30]
    src = _write_npz(tmp_path / "r.npz", kp.numpy())
    r = lift(src, ckpt, tmp_path / "r", layout="H36M_17", calib=calib, camera="cam_01",
             reproject=True, progress=False)  # fmt: skip
    assert r["reproject"]
    got = np.load(tmp_path / "r" / "r_3d.npz")
    plain = _model_reference(ckpt, kp, SIZE).double().numpy()
    # naive: per frame, the translation by least squares over the detected joints, each
    # detected joint moved onto its (undistorted) ray at its depth, then made root-relative
    missing = got["missing"]
    px = _naive_bridge(np.nan_to_num(kp[..., :2].numpy()), missing)
    cal = load_calibration(calib)
    rays = normalize_input(torch.from_numpy(px), "intrinsics", SIZE, cal.K[0], cal.dist[0])
    from tests.ops.test_camera import _naive_fit_to_rays

    placed, _ = _naive_fit_to_rays(plain, rays.numpy(), (~missing).astype(np.float64))
    ref = placed - placed[:, :1]
    np.testing.assert_allclose(got["joints_root_relative"], ref, atol=2e-5)
    assert not np.allclose(got["joints_root_relative"], plain, atol=1e-3)


def test_the_bundled_lifter_is_the_default():
    """``lift`` without ``--checkpoint`` loads the shipped lifter, never another model file
    shipped beside it (the BlazePose networks)."""
    from tensorpose.lifting.inference import bundled_lifters, load_lifter

    assert [p.name for p in bundled_lifters()] == ["lifter_wild.pt"]
    lifter = load_lifter(None)
    assert lifter.kind == "tensorpose" and lifter.path.name == "lifter_wild.pt"
