"""predict on images, folders and videos: top-down crop geometry against the documented window
rule, COCO results accepted by pycocotools, OpenPose JSON read back by read_tracks, drawn
outputs, and bad inputs (one ValueError naming the file, no partial outputs left)."""

import json
import shutil

import cv2
import numpy as np
import pytest
import torch
from torch import nn

from tensorpose.apps.predict import predict
from tensorpose.centernet.model import build_model as centernet_model
from tensorpose.io.coco import bundled_coco, load_coco_keypoints, load_detections
from tensorpose.io.openpose import COCO17_INDEX, read_openpose_frames
from tensorpose.io.tracks import read_tracks
from tensorpose.io.video import image_ids_from_names, iter_frames
from tensorpose.layouts import COCO_LINKS, to_coco18
from tensorpose.models.deeppose import deeppose
from tensorpose.models.heads import heatmap_pose_net
from tensorpose.pose2d import PoseModel

FILES = ("000000000790.jpg", "000000214753.jpg", "000000442450.jpg")
GT = json.loads(bundled_coco().read_text())


@pytest.fixture
def images(tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    for f in FILES:
        shutil.copy(bundled_coco().parent / "images" / f, d / f)
    return d


def _gt_boxes(files=FILES):
    ids = {im["id"]: im["file_name"] for im in GT["images"] if im["file_name"] in files}
    anns = [a for a in GT["annotations"] if a["image_id"] in ids and not a.get("iscrowd")]
    return sorted(anns, key=lambda a: a["image_id"]), ids  # frames come in file-name order


class PeakModel(nn.Module):
    """A 'heatmap model' whose every map peaks at map pixel (6, 8) with height 0.9: the decoded
    joint is crop pixel (24, 32) whatever the crop shows."""

    def __init__(self) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))
        y, x = torch.meshgrid(torch.arange(16.0), torch.arange(12.0), indexing="ij")
        self.register_buffer("hm", 0.9 * torch.exp(-((x - 6) ** 2 + (y - 8) ** 2) / 2))

    def forward(self, x):
        return self.hm.expand(x.shape[0], 17, 16, 12) + 0 * self.anchor


def test_topdown_geometry_results_and_openpose_round_trip(images, tmp_path):
    out = tmp_path / "out"
    pose = PoseModel(PeakModel(), "heatmap", (64, 48), decode="argmax")
    res = predict(images, pose, out, boxes=bundled_coco(), box_threshold=0, min_score=0,
                  progress=False)  # fmt: skip
    anns, ids = _gt_boxes()
    assert res.frames == 3 and res.people == len(anns)
    assert sorted(res.image_ids) == sorted(ids)
    results = json.loads((out / "results.json").read_text())
    assert len(results) == len(anns)
    # the documented window rule, independently: box -> aspect 48/64 -> x1.25; the crop's
    # centre (23.5, 31.5) is the box centre, one crop pixel is window_w / 48 image pixels
    for a, r in zip(anns, results, strict=True):
        x, y, w, h = a["bbox"]
        ww = max(w, h * 0.75) * 1.25
        exp = np.array([x + w / 2 + 0.5 * ww / 48, y + h / 2 + 0.5 * ww / 48])
        kp = np.array(r["keypoints"]).reshape(17, 3)
        assert r["image_id"] == a["image_id"]
        assert np.allclose(kp[:, :2], exp, atol=0.01)
        assert np.allclose(kp[:, 2], 0.9, atol=1e-4) and np.isclose(r["score"], 0.9, atol=1e-4)
    # pycocotools takes the results
    from pycocotools.coco import COCO

    gt = COCO(str(bundled_coco()))
    dt = gt.loadRes(str(out / "results.json"))
    assert len(dt.getAnnIds()) == len(anns)
    # OpenPose: one file per image, COCO_18 read back as such, same keypoints as the results
    files = sorted(p.name for p in (out / "openpose").iterdir())
    assert files == sorted(f"{f[:-4]}_000000000000_keypoints.json" for f in FILES)
    frames, paths, layout = read_openpose_frames(out / "openpose")
    assert layout == "COCO_18"
    tracks = read_tracks(out / "openpose", min_confidence=0.0)
    assert tracks.layout == "COCO_18" and tracks.num_frames == 3
    for f, path in zip(frames, paths, strict=True):
        iid = int(path.name.split("_")[0])
        mine = np.array([r["keypoints"] for r in results if r["image_id"] == iid])
        back = f[:, COCO17_INDEX["COCO_18"]].reshape(len(f), 51)
        assert np.allclose(back, mine, atol=1e-3)
        neck = f[:, 1]  # COCO_18's neck: mid-shoulders
        assert np.allclose(neck[:, :2], (mine[:, 15:17] + mine[:, 18:20]) / 2, atol=1e-3)
    drawn = sorted(p.name for p in (out / "drawn").iterdir())
    assert drawn == sorted(FILES)
    assert cv2.imread(str(out / "drawn" / FILES[0])).shape == (422, 640, 3)
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_video_with_centernet(tmp_path):
    path = tmp_path / "clip.mp4"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (96, 64))
    for t in range(10):
        frame = np.full((64, 96, 3), 40, np.uint8)
        cv2.rectangle(frame, (10 + 5 * t, 12), (30 + 5 * t, 58), (200, 180, 160), -1)
        w.write(frame)
    w.release()
    torch.manual_seed(0)
    net = PoseModel(centernet_model(17, 10, 8).eval(), "centernet", (64, 64), top_k=4)
    out = tmp_path / "out"
    res = predict(path, net, out, batch_size=4, min_score=0, progress=False)
    assert res.frames == 10 and res.image_ids == list(range(10))
    results = json.loads((out / "results.json").read_text())
    assert {r["image_id"] for r in results} <= set(range(10)) and len(results) == res.people
    names = sorted(p.name for p in (out / "openpose").iterdir())
    assert names == [f"clip_{t:012d}_keypoints.json" for t in range(10)]
    cap = cv2.VideoCapture(str(out / "clip.mp4"))
    n = 0
    while cap.read()[0]:
        n += 1
    assert n == 10 and int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)) == 96
    cap.release()


def test_deeppose_with_a_detections_list_and_a_detector(images, tmp_path):
    anns, _ = _gt_boxes()
    dets = [{"image_id": a["image_id"], "bbox": a["bbox"], "score": 0.8, "category_id": 1}
            for a in anns] + [{"image_id": 790, "bbox": [0, 0, 50, 50], "score": 0.9,
                               "category_id": 2}]  # fmt: skip
    (tmp_path / "dets.json").write_text(json.dumps(dets))
    torch.manual_seed(0)
    pose = PoseModel(deeppose(17, "resnet10", width=8).eval(), "deeppose", (64, 64))
    res = predict(images, pose, tmp_path / "a", boxes=tmp_path / "dets.json", draw=False,
                  openpose=False, progress=False)  # fmt: skip
    results = json.loads((tmp_path / "a" / "results.json").read_text())
    assert res.people == len(results) == len(anns)  # the other category is ignored
    assert all(np.isclose(r["score"], 0.8) for r in results)  # box score x keypoint score 1
    # frames without boxes: no people, but their OpenPose files are written
    (tmp_path / "one.json").write_text(json.dumps([d for d in dets if d["image_id"] == 790]))
    res = predict(images, pose, tmp_path / "c", boxes=tmp_path / "one.json", progress=False)
    results = json.loads((tmp_path / "c" / "results.json").read_text())
    assert {r["image_id"] for r in results} == {790} and res.frames == 3
    assert len(list((tmp_path / "c" / "openpose").iterdir())) == 3
    det = PoseModel(centernet_model(17, 10, 8).eval(), "centernet", (64, 64), top_k=3)
    res = predict(images / FILES[0], pose, tmp_path / "b", detector=det, box_threshold=0,
                  progress=False)  # fmt: skip
    assert res.frames == 1 and 0 < res.people <= 3


def test_bad_inputs_name_the_file_and_leave_nothing(images, tmp_path):
    pose = PoseModel(PeakModel(), "heatmap", (64, 48))
    out = tmp_path / "out"
    predict(images, pose, out, boxes=bundled_coco(), progress=False)
    before = (out / "results.json").read_text()
    (images / "000000999999.jpg").write_bytes(b"\xff\xd8\xff truncated")
    with pytest.raises(ValueError, match="000000999999.jpg"):
        predict(images, pose, out, boxes=bundled_coco(), progress=False, overwrite=True)
    # the complete outputs of the earlier run are untouched, no partial output is left
    assert (out / "results.json").read_text() == before
    assert sorted(p.name for p in out.iterdir()) == ["drawn", "openpose", "results.json"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="empty"):
        predict(empty, pose, out, boxes=bundled_coco(), progress=False, overwrite=True)
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"image_id": 5, "bbox": [1, 2, 30, 40], "score": 1.0}]))
    with pytest.raises(ValueError, match="other.json"):
        predict(images / FILES[0], pose, out, boxes=other, progress=False, overwrite=True)
    (tmp_path / "broken.json").write_text('[{"image_id": 790, "bbox": [1, 2]}]')
    with pytest.raises(ValueError, match="broken.json.*entry 0"):
        predict(
            images / FILES[0],
            pose,
            out,
            boxes=tmp_path / "broken.json",
            progress=False,
            overwrite=True,
        )
    video = tmp_path / "cut.mp4"
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 10, (32, 32))
    for _ in range(10):
        w.write(np.zeros((32, 32, 3), np.uint8))
    w.release()
    video.write_bytes(video.read_bytes()[: video.stat().st_size // 2])
    net = PoseModel(centernet_model(17, 10, 8).eval(), "centernet", (64, 64))
    with pytest.raises(ValueError, match="cut.mp4"):
        predict(video, net, out, progress=False, overwrite=True)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="notes.txt"):
        predict(tmp_path / "notes.txt", net, out, progress=False, overwrite=True)
    with pytest.raises(FileNotFoundError, match="missing"):
        predict(tmp_path / "missing.jpg", net, out, progress=False, overwrite=True)
    with pytest.raises(ValueError, match="needs person boxes"):
        predict(images, pose, out, progress=False, overwrite=True)
    with pytest.raises(ValueError, match="finds people itself"):
        predict(images, net, out, boxes=bundled_coco(), progress=False, overwrite=True)
    with pytest.raises(ValueError, match="kind"):
        PoseModel(PeakModel(), "bottomup", (64, 48))
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_frame_batches_and_ids(images):
    batches = list(iter_frames(images, batch_size=2))
    assert [len(b.images) for b in batches] == [2, 1]
    assert [i for b in batches for i in b.image_ids] == [790, 214753, 442450]
    assert image_ids_from_names(["a7.jpg", "b12.png"]) == [7, 12]
    assert image_ids_from_names(["x.jpg", "y3.jpg"]) == [0, 1]
    assert image_ids_from_names(["1.jpg", "01.png"]) == [0, 1]
    dets, names = load_detections(bundled_coco())
    assert names["000000000790.jpg"] == 790 and dets[790].shape == (4, 5)


def test_coco18_conversion_and_links():
    kp = np.random.default_rng(0).uniform(0, 100, (2, 17, 3))
    out = to_coco18(kp)
    assert out.shape == (2, 18, 3)
    assert np.allclose(out[:, COCO17_INDEX["COCO_18"]], kp)
    assert np.allclose(out[:, 1, :2], (kp[:, 5, :2] + kp[:, 6, :2]) / 2)
    assert np.allclose(out[:, 1, 2], np.minimum(kp[:, 5, 2], kp[:, 6, 2]))
    links = load_coco_keypoints(bundled_coco(), warn=False).links
    assert sorted(COCO_LINKS) == sorted(links)
    with pytest.raises(ValueError, match="17, 3"):
        to_coco18(np.zeros((18, 3)))


def test_heatmap_model_end_to_end(images, tmp_path):
    torch.manual_seed(0)
    pose = PoseModel(heatmap_pose_net(17, 10, 8).eval(), "heatmap", (64, 48))
    res = predict(images, pose, tmp_path / "out", boxes=bundled_coco(), box_threshold=0,
                  progress=False)  # fmt: skip
    assert res.people == len(_gt_boxes()[0]) and res.frames_per_s > 0


def test_crop_boxes_is_the_opencv_crop_predict_used():
    """``ops.roi.crop_boxes`` (predict's crop) equals the per-person OpenCV warp of the
    training window (``box_to_center_scale`` + ``crop_matrix`` + ``cv2.warpAffine``)."""
    from tensorpose.ops.affine import box_to_center_scale, crop_matrix
    from tensorpose.ops.roi import crop_boxes

    g = np.random.default_rng(0)
    frames = g.integers(0, 256, (2, 90, 120, 3), dtype=np.uint8)
    frames = cv2.GaussianBlur(frames.reshape(180, 120, 3), (7, 7), 3).reshape(2, 90, 120, 3)
    xywh = np.array([[10, 5, 40, 60], [50, 20, 30, 30], [0, 0, 120, 90]], np.float32)
    frame = np.array([0, 1, 1])
    rois = torch.tensor(np.c_[frame, xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], dtype=torch.float32)
    crops, M = crop_boxes(torch.from_numpy(frames), rois, (64, 48), 1.25)
    center, scale = box_to_center_scale(torch.from_numpy(xywh), 48 / 64, 1.25)
    ref_m = crop_matrix(center, scale, (64, 48))
    assert torch.allclose(M, ref_m, atol=1e-4)
    for p in range(3):  # the reference: one OpenCV warp per person
        ref = cv2.warpAffine(frames[frame[p]], ref_m[p].double().numpy(), (48, 64),
                             flags=cv2.INTER_LINEAR, borderValue=0)  # fmt: skip
        got = crops[p].permute(1, 2, 0).numpy()
        inner = (slice(2, -2), slice(2, -2))  # borders: OpenCV and grid_sample pad differently
        assert np.abs(got[inner] - ref[inner].astype(np.float32)).max() <= 1.5
