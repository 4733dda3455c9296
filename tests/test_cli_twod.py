"""The 2D commands end to end: ``predict`` (image folder with the bundled COCO boxes, a CenterNet
checkpoint on a synthetic video, a CenterNet detector for a heatmap model), ``export`` (ONNX
checked against PyTorch), ``profile-data`` (CPU smoke) and bad inputs (one line, exit 2), on
tiny checkpoints trained for one step."""

import json
import shutil

import cv2
import numpy as np
import pytest

from tensorpose.cli import main
from tensorpose.config import load_config
from tensorpose.io.coco import bundled_coco
from tensorpose.io.tracks import read_tracks
from tensorpose.train.trainer import train

FILES = ("000000000790.jpg", "000000214753.jpg", "000000442450.jpg")
COMMON = ["train.device=cpu", "train.tensorboard=false", "train.epochs=1", "train.max_steps=1"]
TINY = {
    "heatmap": ["model.depth=10", "model.width=8", "data.input_size=[64, 64]", "data.people=2",
                "train.batch_size=2"],
    "centernet": ["model.depth=10", "model.width=8", "data.input_size=[64, 64]",
                  "data.max_images=1",
                  "train.batch_size=1", "data.workers=0"],
    "lift": ["model.channels=8", "model.receptive_field=9", "data.fps=10",
             "data.train_cameras=1", "data.val_cameras=1", "train.batch_size=16"],
}  # fmt: skip


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    out = {}
    for name, tiny in TINY.items():
        train(load_config(None, [f"task={name}", *tiny, *COMMON]), root / name, progress=False)
        out[name] = root / name / "checkpoint.pt"
    return out


@pytest.fixture
def images(tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    for f in FILES:
        shutil.copy(bundled_coco().parent / "images" / f, d / f)
    return d


def _error_line(capsys, code, args):
    assert main(args) == code
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"tensorpose {args[0]}: error:")
    return err


def test_predict_folder_with_coco_boxes(checkpoints, images, tmp_path, capsys):
    pycocotools = pytest.importorskip("pycocotools.coco")
    out = tmp_path / "out"
    args = ["predict", str(images), "--checkpoint", str(checkpoints["heatmap"]), "--boxes",
            str(bundled_coco()), "--out", str(out), "--device", "cpu", "--quiet",
            "--min-score", "0"]  # fmt: skip
    assert main(args) == 0
    assert "3 frames" in capsys.readouterr().out
    # every positive-size, non-crowd GT box of the three images gives one result
    gt = json.loads(bundled_coco().read_text())
    ids = {im["id"] for im in gt["images"] if im["file_name"] in FILES}
    boxes = [a for a in gt["annotations"] if a["image_id"] in ids and min(a["bbox"][2:]) > 0]
    coco = pycocotools.COCO(str(bundled_coco()))
    res = coco.loadRes(str(out / "results.json"))
    assert len(res.getAnnIds()) == len(boxes)
    assert sorted({a["image_id"] for a in res.anns.values()}) == sorted(ids)
    assert (
        len(list((out / "openpose").iterdir())) == 3 and len(list((out / "drawn").iterdir())) == 3
    )
    tracks = read_tracks(out / "openpose")  # what smooth and lift read
    assert tracks.keypoints.shape[0] == 3 and tracks.layout == "COCO_18"
    # an existing output folder is refused without --overwrite, replaced with it
    assert "--overwrite" in _error_line(capsys, 2, args)
    assert main([*args, "--overwrite"]) == 0


def test_predict_video_with_centernet_and_as_detector(checkpoints, images, tmp_path, capsys):
    video = tmp_path / "clip.mp4"
    frame = cv2.resize(cv2.imread(str(images / FILES[0])), (160, 120))
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 10, (160, 120))
    for t in range(10):
        w.write(np.roll(frame, 2 * t, axis=1))
    w.release()
    out = tmp_path / "video_out"
    args = ["predict", str(video), "--checkpoint", str(checkpoints["centernet"]), "--out",
            str(out), "--device", "cpu", "--quiet", "--batch-size", "4"]  # fmt: skip
    assert main([*args, "--max-people", "3"]) == 2  # CenterNet keeps its own top_k
    err = capsys.readouterr().err
    assert "--max-people" in err and "centernet" in err and not out.exists()
    assert main(args) == 0
    assert "10 frames" in capsys.readouterr().out
    assert len(list((out / "openpose").iterdir())) == 10
    cap = cv2.VideoCapture(str(out / "clip.mp4"))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 10
    cap.release()
    json.loads((out / "results.json").read_text())  # complete JSON
    # the CenterNet checkpoint as person detector of a top-down model
    args = ["predict", str(images), "--checkpoint", str(checkpoints["heatmap"]), "--detector",
            str(checkpoints["centernet"]), "--out", str(tmp_path / "det"), "--quiet",
            "--box-threshold", "0"]  # fmt: skip
    assert main(args) == 0


def test_export_onnx_checks_against_pytorch(checkpoints, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    out = tmp_path / "hm.onnx"
    assert main(["export", str(checkpoints["heatmap"]), "--with-decoding", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    error = float(text.split("max abs error ")[1].split()[0])
    assert out.is_file() and error <= 1e-4 and "dynamic batch" in text
    err = _error_line(
        capsys, 2, ["export", str(checkpoints["lift"]), "--out", str(out), "--overwrite"]
    )
    assert "lift" in err and "checkpoint.pt" in err


def test_profile_data_cpu_smoke(capsys):
    recipe = bundled_coco().parents[3] / "configs" / "heatmap_coco.yaml"
    args = ["profile-data", str(recipe), "data.people=4", "train.batch_size=2", "train.device=cpu",
            "data.workers=0", "--workers", "0", "--batches", "1", "--sample", "4",
            "--no-model-step"]  # fmt: skip
    assert main(args) == 0
    text = capsys.readouterr().out
    for stage in ("read", "decode", "augment_cpu", "transfer", "h2d", "verdict"):
        assert stage in text
    err = _error_line(capsys, 2, ["profile-data", str(recipe.parent / "lift_cmu.yaml")])
    assert "heatmap or deeppose" in err


def test_bad_inputs_are_one_line_and_exit_2(checkpoints, images, tmp_path, capsys):
    hm, cn = str(checkpoints["heatmap"]), str(checkpoints["centernet"])
    err = _error_line(capsys, 2, ["predict", str(images), "--checkpoint",
                                  str(checkpoints["lift"]), "--quiet"])  # fmt: skip
    assert "checkpoint.pt" in err and "'lift'" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ["predict", str(empty), "--checkpoint", cn, "--out", str(tmp_path / "o1"), "--quiet"]
    assert "empty" in _error_line(capsys, 2, args)
    (images / "000000999999.jpg").write_bytes(b"\xff\xd8\xff truncated")
    err = _error_line(capsys, 2, ["predict", str(images), "--checkpoint", cn, "--out",
                                  str(tmp_path / "o2"), "--quiet"])  # fmt: skip
    assert "000000999999.jpg" in err and not (tmp_path / "o2" / "results.json").exists()
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"image_id": 5, "bbox": [1, 2, 30, 40], "score": 1.0}]))
    err = _error_line(capsys, 2, ["predict", str(images / FILES[0]), "--checkpoint", hm,
                                  "--boxes", str(other), "--out", str(tmp_path / "o3"),
                                  "--quiet"])  # fmt: skip
    assert "other.json" in err
    video = tmp_path / "cut.mp4"
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 10, (32, 32))
    for _ in range(10):
        w.write(np.zeros((32, 32, 3), np.uint8))
    w.release()
    video.write_bytes(video.read_bytes()[: video.stat().st_size // 2])
    err = _error_line(capsys, 2, ["predict", str(video), "--checkpoint", cn, "--out",
                                  str(tmp_path / "o4"), "--quiet"])  # fmt: skip
    assert "cut.mp4" in err
    err = _error_line(capsys, 2, ["predict", str(images), "--checkpoint", hm, "--out",
                                  str(tmp_path / "o5"), "--quiet"])  # fmt: skip
    assert "needs person boxes" in err
