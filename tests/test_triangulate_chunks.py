"""``triangulate`` a chunk of frames at a time gives the result of one pass over all frames.

References, computed here on all frames at once: the ops (``triangulate_people``,
``triangulate_everyone``), the linking over time in one go (``link_people``) and the layout
detection on every person at once (``detect_layout``).

Tolerance: the discrete results (which detections, cameras and joints are used, which are
valid, the identities) are compared exactly. The float64 points and errors may differ in the
last bits between batch sizes (vectorised loops split their rows differently; measured on the
bundled trial with chunks of 1 to 99 frames: 8e-16 m and 3.6e-13 px at most, 1.4e-12 relative on
a 0.25 px error), so they are compared to 1e-12 relative or 1e-9 absolute (a nanometre, a
nanopixel).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.apps.triangulate import triangulate_folder
from tensorpose.io.openpose import bundled_tracks, read_openpose_frames
from tensorpose.layouts import detect_layout, join_evidence, layout_from_evidence
from tensorpose.multiview.association import triangulate_everyone, triangulate_people
from tensorpose.multiview.people import (
    PeopleLinker,
    centres,
    link_people,
    split_tracks,
    triangulate_cameras_people,
)
from tensorpose.multiview.recording import (
    open_recording,
    pack_keypoints,
    read_cameras,
    triangulate_cameras,
)

BUNDLED = bundled_tracks()[0].parent
TWO = Path(__file__).parent / "data" / "synthetic_two_people"
KEYS = ("points", "errors", "mean_error", "used", "valid", "person")


def _same(a: dict, b: dict) -> None:
    for k in KEYS:  # the result arrays
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype and x.shape == y.shape, k
        if x.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=k)
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-9, equal_nan=True, err_msg=k)
        else:
            np.testing.assert_array_equal(x, y, err_msg=k)


def _one_pass_single(cams) -> dict:
    """The op on every frame at once (what ``triangulate`` did before chunks)."""
    cal = cams.calibration.to(dtype=torch.float64)
    r = triangulate_people(pack_keypoints(cams), cal.K, cal.dist, cal.R, cal.t)
    r = r.numpy().arrays()
    r["points"] = np.where(r["valid"][..., None], r["points"], np.nan)
    return r


def test_single_person_chunks_equal_one_pass():
    cams = read_cameras(BUNDLED, BUNDLED / "Calib.qca.txt")
    ref = _one_pass_single(cams)
    for chunk in (13, 64):  # a short last chunk, and two uneven ones
        rec = open_recording(BUNDLED, BUNDLED / "Calib.qca.txt")
        tri = triangulate_cameras(rec, chunk_frames=chunk)  # the files read a chunk at a time
        _same(vars(tri), ref)
        assert rec.layout == cams.layout == "BODY_25B"
    assert tri.valid.mean() > 0.95  # not a comparison of two empty results


def test_people_chunks_equal_one_pass():
    cams = read_cameras(TWO, TWO / "Calib.qca.txt")
    cal = cams.calibration.to(dtype=torch.float64)
    r = triangulate_everyone(pack_keypoints(cams), cal.K, cal.dist, cal.R, cal.t)
    r = r.numpy().arrays()
    r["points"] = np.where(r["valid"][..., None], r["points"], np.nan)
    tracks = split_tracks(r, link_people(centres(r["points"], r["valid"])))
    order = sorted(range(len(tracks)), key=lambda k: -int(tracks[k]["valid"].sum()))
    ref = [tracks[k] for k in order if tracks[k]["valid"].any(-1).sum() >= 0.1 * cams.frames]
    assert len(ref) >= 2
    for chunk in (7, 40):  # boundaries inside the recording, and one chunk
        got = triangulate_cameras_people(open_recording(TWO, TWO / "Calib.qca.txt"),
                                         chunk_frames=chunk)  # fmt: skip
        assert len(got) == len(ref)
        for g, want in zip(got, ref, strict=True):  # a handful of people
            _same(vars(g), want)


def test_linker_carries_identities_across_chunk_boundaries():
    rng = np.random.default_rng(0)
    T = 120
    a = np.stack([np.linspace(0, 2.0, T), np.zeros(T), np.ones(T)], -1)
    b = np.stack([np.full(T, 3.0), np.linspace(0, -1.0, T), np.ones(T)], -1)
    c = np.stack([np.full(T, -2.0), np.full(T, 1.0), np.ones(T)], -1)
    centre = np.stack([a, b, c]) + rng.normal(0, 0.005, (3, T, 3))
    centre[:, 1::2] = centre[::-1, 1::2]  # slots swap every other frame
    centre[0, 30:45] = np.nan  # an occlusion across the boundary at 40
    centre[2, 70:] = np.nan  # someone leaves for good
    centre[1, 95:110] = np.nan
    ref = link_people(centre, max_gap=20)
    assert ref.max() >= 2  # three identities at least
    for cuts in ([40], [1, 2, 3, 40, 41, 100], list(range(0, T, 9))[1:]):
        linker = PeopleLinker(max_gap=20)
        pieces = np.split(np.arange(T), cuts)
        got = np.concatenate([linker.link(centre[:, p]) for p in pieces], 1)
        np.testing.assert_array_equal(got, ref)


def test_layout_evidence_joined_over_pieces_equals_detect_layout():
    frames = [f for d in bundled_tracks() for f in read_openpose_frames(d)[0]]
    everyone = np.concatenate(frames)
    from tensorpose.layouts import layout_evidence

    for data in (everyone, everyone[:, [1, 0, *range(2, 25)]]):  # BODY_25B, and scrambled
        whole = detect_layout(data)
        pieces = [layout_evidence(p) for p in np.array_split(data, 7)]
        assert layout_from_evidence(join_evidence(pieces)) == whole  # reason text included


def test_nobody_in_the_first_chunks_and_bad_chunk_size(tmp_path):
    copy = tmp_path / "trial"
    shutil.copytree(BUNDLED, copy)
    for cam in sorted(copy.glob("cam*_json")):  # 30 frames, nobody in the first 12
        for f in sorted(cam.glob("*.json"))[30:]:
            f.unlink()
        for f in sorted(cam.glob("*.json"))[:12]:
            f.write_text('{"version": 1.3, "people": []}')
    ref = _one_pass_single(read_cameras(copy, copy / "Calib.qca.txt"))
    assert not ref["valid"][:12].any() and ref["valid"][12:].mean() > 0.9
    _same(vars(triangulate_cameras(open_recording(copy, copy / "Calib.qca.txt"),
                                   chunk_frames=8)), ref)  # fmt: skip
    with pytest.raises(ValueError, match=r"^--chunk-frames must be a frame count >= 1, got 0"):
        triangulate_folder(copy, copy / "Calib.qca.txt", tmp_path / "out", fps=60,
                           chunk_frames=0)  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_camera_agreement_in_chunks_equals_one_pass():
    """The per-camera agreement check reads the detections a chunk at a time: the same figures
    as on every frame at once (``read_cameras``)."""
    from tensorpose.multiview.recording import camera_agreement

    calib = BUNDLED / "Calib.qca.txt"
    tri = triangulate_cameras(open_recording(BUNDLED, calib), chunk_frames=1000)
    whole = camera_agreement(read_cameras(BUNDLED, calib), [tri], chunk_frames=1000)
    parts = camera_agreement(open_recording(BUNDLED, calib), [tri], chunk_frames=7)
    assert [a["camera"] for a in parts] == [a["camera"] for a in whole]
    for a, b in zip(parts, whole, strict=True):
        assert a["used"] == b["used"]
        assert a["median_px"] == pytest.approx(b["median_px"], rel=1e-12)


@pytest.mark.parametrize("people", [None, "auto"])
@pytest.mark.parametrize("chunk", [1000, 7])
def test_agreement_gathered_while_triangulating_equals_camera_agreement(people, chunk):
    """The agreement the triangulation gathers from the detections it already read
    (``agreement=CameraAgreement``, no second read) equals :func:`camera_agreement` on its
    result, exactly; with ``people``, over the people kept."""
    from tensorpose.multiview.recording import CameraAgreement, camera_agreement

    root = BUNDLED if people is None else TWO
    calib = root / "Calib.qca.txt"
    cams = open_recording(root, calib)
    tally = CameraAgreement(cams, 0.3)
    if people is None:
        tris = [triangulate_cameras(cams, chunk_frames=chunk, agreement=tally)]
    else:
        tris = triangulate_cameras_people(cams, chunk_frames=chunk, agreement=tally)
    gathered = tally.result(tris)
    for a in gathered:  # with people, also the fit to every person (not kept included)
        assert ("median_everyone_px" in a) == (people is not None)
        a.pop("median_everyone_px", None)
    assert gathered == camera_agreement(read_cameras(root, calib), tris)
