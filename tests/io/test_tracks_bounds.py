"""Hangs and memory: tracks from spurious detections, hostile .npz keypoints, forged image
headers. The memory tests run a child python under an address-space limit."""

import json
import os
import struct
import subprocess
import sys
import textwrap
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.io import openpose
from tensorpose.io.openpose import MAX_GAP, link_detections
from tensorpose.io.tracks import read_detections
from tensorpose.io.video import ImageReadError, image_header_size, read_image

ROOT = Path(__file__).resolve().parents[2]
K = 25


def spurious_frames(T, seed=0):
    """Per frame ``(2, K, 3)``: a person walking slowly and a one-keypoint detection at a random
    place (a detector's false positive)."""
    rng = np.random.default_rng(seed)
    angles = np.linspace(0, 2 * np.pi, K, endpoint=False)
    ring = 60.0 * np.column_stack([np.cos(angles), np.sin(angles)])
    t = np.arange(T)
    out = np.zeros((T, 2, K, 3))
    out[:, 0, :, :2] = np.column_stack([500 + 200 * np.sin(t / 300), 400 + 0 * t])[:, None] + ring
    out[:, 0, :, 2] = 0.9
    joint = rng.integers(0, K, T)
    out[t, 1, joint, :2] = rng.uniform(0, 1000, (T, 2))
    out[t, 1, joint, 2] = 0.5
    return out


def run_limited(code, limit_gib, timeout):
    """Run ``code`` in a child python limited to ``limit_gib`` of address space."""
    prelude = f"""
        import resource, sys
        sys.path.insert(0, {str(ROOT)!r})
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        lim = int({limit_gib} * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    """
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    src = textwrap.dedent(prelude) + textwrap.dedent(code)
    try:
        p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                           timeout=timeout, env=env)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"not done in {timeout} s")
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


# ----------------------------------------------------------------------------- tracks
def test_100k_frames_with_a_spurious_detection_each_under_1_5_gib():
    out = run_limited(
        """
        import torch
        torch.set_num_threads(1)
        from test_tracks_bounds import spurious_frames
        from tensorpose.io.openpose import link_detections
        frames = spurious_frames(100_000)
        r = link_detections(list(frames))
        print(tuple(r.keypoints.shape), r.dropped_detections)
        """,
        limit_gib=1.5,
        timeout=90,
    )
    assert out.split() == ["(100000,", "1,", "25,", "3)", "100000"]


def test_read_tracks_folder_with_spurious_detections_under_1_5_gib(tmp_path):
    frames = spurious_frames(2000, seed=1)
    folder = tmp_path / "json"
    folder.mkdir()
    for t, f in enumerate(frames):
        people = [{"pose_keypoints_2d": p.ravel().round(3).tolist()} for p in f]
        (folder / f"{t:05d}.json").write_text(json.dumps({"people": people}))
    out = run_limited(
        f"""
        from tensorpose.io.tracks import read_person, read_tracks
        tr = read_tracks({str(folder)!r}, layout="BODY_25B")
        print(tr.num_tracks, tr.dropped_detections, read_person({str(folder)!r}).track_frames)
        """,
        limit_gib=1.5,
        timeout=60,
    )
    assert out.split() == ["1", "2000", "[2000]"]


def test_small_detections_extend_tracks_but_start_none():
    body = spurious_frames(3)[:, :1]  # (3, 1, K, 3): one person
    two_points = np.zeros((1, K, 3))
    two_points[0, :2] = [[900, 900, 0.8], [905, 905, 0.8]]
    partial = body[2].copy()
    partial[0, 2:, 2] = 0.0  # the same person, two keypoints found: still matched
    frames = [np.concatenate([body[0], two_points]), body[1], np.concatenate([partial])]
    r = link_detections(frames)
    assert r.keypoints.shape == (3, 1, K, 3) and r.dropped_detections == 1
    assert torch.equal(r.keypoints[2, 0], torch.from_numpy(partial[0]))
    everyone = link_detections(frames, min_keypoints=1)
    assert everyone.keypoints.shape[1] == 2 and everyone.dropped_detections == 0


def test_tracks_unseen_longer_than_the_gap_retire():
    person = spurious_frames(1)[0, :1]
    empty = np.zeros((0, K, 3))
    for gap, tracks in ((MAX_GAP, 1), (MAX_GAP + 1, 2)):
        frames = [person] + [empty] * gap + [person]
        r = link_detections(frames)
        assert r.keypoints.shape[1] == tracks and r.retired_tracks == tracks - 1
    assert (
        link_detections([person] + [empty] * 500 + [person], max_gap=None).keypoints.shape[1] == 1
    )


def test_too_many_tracks_names_the_limit(monkeypatch):
    monkeypatch.setattr(openpose, "MAX_TRACKS_BYTES", 1 << 20)
    rng = np.random.default_rng(0)
    frames = [np.concatenate([rng.uniform(0, 1e4, (3, K, 2)), np.ones((3, K, 1))], -1)] * 2
    frames = [f + 5000 * t for t, f in enumerate(frames * 40)]  # new people every frame
    with pytest.raises(ValueError, match=r"240 tracks over 80 frames .* over the 1 MiB limit"):
        link_detections(frames)


# ----------------------------------------------------------------------------- npz
def forged_npz(path, shape, descr="<f8", payload=b"\0" * 64):
    """An .npz whose ``keypoints`` header claims ``shape`` over a few bytes of data."""
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("keypoints.npy", buf.getvalue() + payload)
    return path


def test_npz_header_over_the_limit_is_refused_before_decompressing(tmp_path):
    bomb = forged_npz(tmp_path / "bomb.npz", (30_000_000, 10, 3))  # 6.7 GiB of float64
    with pytest.raises(ValueError, match=r"bomb.npz: array 'keypoints' of shape .* 6\.7 GiB, "
                       r"over the 2 GiB limit"):  # fmt: skip
        read_detections(bomb)


@pytest.mark.parametrize(
    ("dtype", "word"), [(np.complex128, "complex"), (np.bool_, "boolean"), (object, "object")]
)
def test_npz_keypoints_that_are_not_real_numbers(tmp_path, dtype, word):
    path = tmp_path / f"{word}.npz"
    kp = np.ones((4, 17, 3), dtype=dtype)
    np.savez(path, keypoints=kp)
    with pytest.raises(ValueError, match=rf"{word}.npz: array 'keypoints' holds {word} values"):
        read_detections(path)


def test_npz_fifo_and_device_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.npz"
    os.mkfifo(fifo)
    (tmp_path / "zero.npz").symlink_to("/dev/zero")
    out = run_limited(
        f"""
        from tensorpose.io.tracks import read_detections
        for name in ("fifo.npz", "zero.npz"):
            try:
                read_detections({str(tmp_path)!r} + "/" + name)
            except ValueError as e:
                print(e)
        """,
        limit_gib=4,
        timeout=30,
    )
    lines = out.splitlines()
    assert len(lines) == 2 and all("not a regular file" in line for line in lines), out


def test_npz_still_reads_real_keypoints(tmp_path):
    kp = np.random.default_rng(0).uniform(0, 500, (6, 17, 2)).astype(np.float32)
    np.savez_compressed(tmp_path / "a.npz", keypoints=kp, fps=np.float64(25), width=640,
                        height=480)  # fmt: skip
    det = read_detections(tmp_path / "a.npz", layout="COCO_17")
    assert det.fps == 25 and det.size == (640, 480) and len(det.frames) == 6
    np.testing.assert_array_equal(np.stack(det.frames)[:, 0, :, :2], kp.astype(np.float64))


# ----------------------------------------------------------------------------- images
def forged_png(width, height):
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    idat = b"IDAT" + zlib.compress(b"\0" * 64)
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk
            + struct.pack(">I", zlib.crc32(chunk)) + struct.pack(">I", len(idat) - 4) + idat
            + struct.pack(">I", zlib.crc32(idat)) + b"\0\0\0\0IEND\xaeB`\x82")  # fmt: skip


def forged_jpeg(width, height):
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3)
    sof += b"\x01\x11\x00\x02\x11\x00\x03\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


@pytest.mark.parametrize(("name", "make"), [("big.png", forged_png), ("big.jpg", forged_jpeg)])
def test_image_with_a_forged_huge_header_is_refused_before_decoding(tmp_path, name, make):
    path = tmp_path / name
    path.write_bytes(make(30000, 30000))
    assert image_header_size(path.read_bytes()) == (30000, 30000)
    with pytest.raises(ImageReadError, match=rf"{name}: its header says 30000x30000 pixels, "
                       r"over the 100 megapixel limit"):  # fmt: skip
        read_image(path)


def test_header_size_matches_the_decoded_size_of_the_bundled_images():
    images = sorted((ROOT / "tensorpose" / "assets").rglob("*.jpg"))[:5]
    assert images
    for p in images:
        img = read_image(p)
        assert image_header_size(p.read_bytes()) == (img.shape[1], img.shape[0])
