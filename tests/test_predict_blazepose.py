"""`tensorpose predict --model blazepose`: no checkpoint, BLAZEPOSE_33 OpenPose JSON."""

import json
import shutil
from pathlib import Path

import cv2
import pytest

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
    assert rc == 0 and people and len(people[0]["pose_keypoints_2d"]) == 99


def test_predict_blazepose_refuses_a_checkpoint(tmp_path, capsys):
    rc = main(["predict", str(IMAGE), "--model", "blazepose", "--checkpoint", "x.pt",
               "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--checkpoint" in err
    assert main(["predict", str(IMAGE), "--out", str(tmp_path / "o")]) == 2


def _video(path: Path, image: Path, frames: int) -> None:
    """A small video of a bundled picture, moving a few pixels per frame."""
    import cv2
    import numpy as np

    img = cv2.imread(str(image))
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, img.shape[1::-1])
    for t in range(frames):
        w.write(np.roll(img, 2 * t, axis=1))
    w.release()


def test_predict_blazepose_folder_of_videos_gives_openpose_folder_per_camera(tmp_path, capsys):
    """A folder of camera videos: video mode over all cameras at once, openpose/<stem>/ per
    camera (the layout `tensorpose triangulate` reads), an MP4 per camera, one results.json."""
    from tensorpose.multiview.recording import find_camera_folders

    cams = tmp_path / "videos"
    cams.mkdir()
    _video(cams / "cam01.mp4", IMAGE, 5)
    _video(cams / "cam02.mp4", IMAGE, 4)  # a camera that ends early
    rc = main(["predict", str(cams), "--model", "blazepose", "--out", str(tmp_path / "out"),
               "--quiet"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "2 cameras" in out and "video mode: the detector ran on" in out
    folders = find_camera_folders(tmp_path / "out/openpose")
    assert [f.name for f in folders] == ["cam01", "cam02"]
    assert len(list(folders[0].glob("cam01_*_keypoints.json"))) == 5
    assert len(list(folders[1].glob("cam02_*_keypoints.json"))) == 4
    assert (tmp_path / "out/cam01.mp4").is_file() and (tmp_path / "out/cam02.mp4").is_file()
    results = json.loads((tmp_path / "out/results.json").read_text())
    assert {r["video"] for r in results} == {"cam01", "cam02"}
    head = json.loads(next(iter(sorted(folders[0].glob("*.json")))).read_text())
    first = head["people"]
    assert first and first[0]["person_id"] == [0] and len(first[0]["pose_keypoints_2d"]) == 99
    fps = cv2.VideoCapture(str(cams / "cam01.mp4")).get(cv2.CAP_PROP_FPS)
    assert head["fps"] == pytest.approx(fps) and fps > 0  # the video's rate, recorded
    detected = int(out.split("detector ran on ")[1].split()[0])
    assert detected < 9  # tracked from the landmarks, not re-detected every frame


def test_predict_blazepose_video_mode_and_image_mode(tmp_path, capsys):
    video = tmp_path / "clip.mp4"
    _video(video, IMAGE, 4)
    assert main(["predict", str(video), "--model", "blazepose", "--out", str(tmp_path / "v"),
                 "--quiet"]) == 0  # fmt: skip
    assert "video mode" in capsys.readouterr().out
    assert len(list((tmp_path / "v/openpose").glob("clip_*_keypoints.json"))) == 4
    assert main(["predict", str(video), "--model", "blazepose", "--image-mode", "--out",
                 str(tmp_path / "i"), "--quiet"]) == 0  # fmt: skip
    assert "video mode" not in capsys.readouterr().out
    assert len(list((tmp_path / "i/openpose").glob("clip_*_keypoints.json"))) == 4


def test_predict_blazepose_folder_of_videos_and_images_is_one_line(tmp_path, capsys):
    folder = tmp_path / "mixed"
    folder.mkdir()
    _video(folder / "cam01.mp4", IMAGE, 2)
    shutil.copy(IMAGE, folder / IMAGE.name)
    rc = main(["predict", str(folder), "--model", "blazepose", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "both videos and images" in err


def _one_line(rc: int, err: str, *words: str) -> None:
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


def test_predict_blazepose_bad_inputs_are_one_line_and_write_nothing(tmp_path, capsys):
    """A non-video, a truncated video and an image too small for the detector: one line naming
    the file, exit status 2, no output folder."""
    import cv2
    import numpy as np

    fake = tmp_path / "notes.mp4"
    fake.write_text("not a video\n")
    good = tmp_path / "clip.mp4"
    _video(good, IMAGE, 12)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    tiny = tmp_path / "tiny.png"
    cv2.imwrite(str(tiny), cv2.resize(cv2.imread(str(IMAGE)), (48, 32)))
    for path, mode, words in ((fake, [], ["notes.mp4"]), (cut, [], ["cut.mp4", "truncated"]),
                              (cut, ["--image-mode"], ["cut.mp4", "truncated"]),
                              (tiny, [], ["tiny.png", "48x32", "too small"])):  # fmt: skip
        out = tmp_path / f"out_{path.stem}{len(mode)}"
        rc = main(["predict", str(path), "--model", "blazepose", "--out", str(out), "--quiet",
                   *mode])  # fmt: skip
        _one_line(rc, capsys.readouterr().err, *words)
        assert not out.exists()
    small_video = tmp_path / "small.mp4"
    w = cv2.VideoWriter(str(small_video), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (40, 30))
    for _ in range(3):
        w.write(np.full((30, 40, 3), 128, np.uint8))
    w.release()
    rc = main(["predict", str(small_video), "--model", "blazepose", "--out",
               str(tmp_path / "o2"), "--quiet"])  # fmt: skip
    _one_line(rc, capsys.readouterr().err, "small.mp4", "too small")


def test_predict_blazepose_without_a_person_exits_1(tmp_path, capsys):
    """A picture and a video with nobody in them: written, the summary counts the frames
    without a person, exit status 1 (0 needs a person in at least one frame)."""
    import cv2
    import numpy as np

    blank = np.full((240, 320, 3), 127, np.uint8)
    cv2.imwrite(str(tmp_path / "empty.png"), blank)
    rc = main(["predict", str(tmp_path / "empty.png"), "--model", "blazepose", "--out",
               str(tmp_path / "o"), "--quiet"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 1 and "1 of 1 frames without a person" in out, out
    assert (tmp_path / "o/results.json").is_file()
    w = cv2.VideoWriter(str(tmp_path / "empty.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 10.0,
                        (320, 240))  # fmt: skip
    for _ in range(3):
        w.write(blank)
    w.release()
    rc = main(["predict", str(tmp_path / "empty.mp4"), "--model", "blazepose", "--out",
               str(tmp_path / "v"), "--quiet"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 1 and "3 of 3 frames without a person" in out, out


def test_a_folder_of_videos_in_image_mode_says_what_is_wrong(tmp_path, capsys):
    """``predict FOLDER_OF_VIDEOS --image-mode``: one line naming the folder and its videos and
    the two ways that work (not "no image files"), exit 2, nothing written."""
    cams = tmp_path / "cams"
    cams.mkdir()
    for c in (1, 2):
        _video(cams / f"cam0{c}.mp4", IMAGE, 3)
    out = tmp_path / "out"
    rc = main(["predict", str(cams), "--model", "blazepose", "--image-mode", "--out", str(out),
               "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    _one_line(rc, err, str(cams), "holds videos (cam01.mp4, cam02.mp4)", "one video at a time",
              "without --image-mode")  # fmt: skip
    assert "no image files in this folder" not in err and not out.exists()
