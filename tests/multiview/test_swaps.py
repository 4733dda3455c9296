"""Left and right made consistent across cameras (issue 31, item 3): swaps injected into the
bundled OpenPose tracks at known frames and cameras are all found and none is invented (none at
all without an injection); the batched decision equals a naive loop over frames and cameras;
``--write-2d`` gives the detections back as they were before the injection; bad options are one
line, exit 2."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from tensorpose.apps.triangulate import summary, triangulate_folder
from tensorpose.cli import main
from tensorpose.io.openpose import bundled_tracks, write_openpose
from tensorpose.io.tracks import read_detections
from tensorpose.layouts import flip_index
from tensorpose.multiview.association import _detections
from tensorpose.multiview.dlt import reprojection_errors
from tensorpose.multiview.people import triangulate_cameras_one
from tensorpose.multiview.recording import pack_keypoints, read_cameras
from tensorpose.multiview.swaps import MARGIN_PX, MIN_JOINTS, RATIO, find_swaps
from tensorpose.multiview.triangulate import triangulate_points

BUNDLED = bundled_tracks()[0].parent
CALIB = BUNDLED / "Calib.qca.txt"
FLIP = flip_index("BODY_25B")
# (camera, frames): runs in every camera, one camera at a time (two of four cameras swapped in
# the same frame are two against two: the mirrored pair is a candidate of its own, nothing
# decides; left out)
INJECT = [(0, range(5, 12)), (1, range(20, 30)), (1, range(60, 63)), (3, range(64, 66)),
          (3, range(80, 86)), (2, range(40, 44)), (0, range(95, 100))]  # fmt: skip


@pytest.fixture(scope="module")
def bundled():
    cams = read_cameras(BUNDLED, CALIB)
    tri, _, _ = triangulate_cameras_one(cams, fix_swaps=True)
    return cams, tri


def _inject(cams, tri, inject=INJECT):
    """``cams`` with the subject's detection swapped at ``inject``; the mask ``(T, C)``."""
    out = copy.copy(cams)
    out.detections = [list(d) for d in cams.detections]
    mask = np.zeros(tri.person.shape, bool)
    for c, frames in inject:
        for t in frames:  # the injection (test set-up)
            q = tri.person[t, c]
            d = out.detections[c][t].copy()
            d[q] = d[q][FLIP]
            out.detections[c][t] = d
            mask[t, c] = True
    return out, mask


def test_no_swap_is_invented_on_the_bundled_tracks(bundled):
    cams, tri = bundled
    assert tri.swapped.shape == (100, 4) and not tri.swapped.any()
    plain, _, _ = triangulate_cameras_one(cams, fix_swaps=False)
    for key in ("points", "valid", "person", "used"):  # the same result as without the test
        np.testing.assert_array_equal(getattr(tri, key), getattr(plain, key))


def test_every_injected_swap_is_found_and_none_invented(bundled):
    cams, tri = bundled
    swapped, mask = _inject(cams, tri)
    fixed, _, _ = triangulate_cameras_one(swapped, fix_swaps=True)
    np.testing.assert_array_equal(fixed.swapped, mask)
    np.testing.assert_array_equal(fixed.person, tri.person)  # each joined again
    # the 3D is what it was before the injection
    np.testing.assert_array_equal(fixed.valid, tri.valid)
    assert np.nanmax(np.abs(fixed.points - tri.points)) < 1e-9
    kept, _, _ = triangulate_cameras_one(swapped, fix_swaps=False)
    assert not kept.swapped.any() and (kept.person != tri.person).any()  # as labelled: lost


def _naive_find_swaps(xy, seen, conf, cal, flip, max_error_px=15.0):
    """One frame and camera at a time: triangulate from the other cameras
    (``triangulate_points``), project, median over the paired joints both labellings see."""
    T, J, C = seen.shape
    paired = [j for j in range(J) if flip[j] != j]
    swap = torch.zeros(T, C, dtype=torch.bool)
    plain = torch.full((T, C), float("nan"), dtype=torch.float64)
    swapped = plain.clone()
    for t in range(T):
        for c in range(C):
            w = torch.where(seen[t], conf[t], 0.0)  # (J, C): confidence-weighted DLT
            w[:, c] = 0
            px = torch.where(seen[t, ..., None], xy[t], float("nan"))
            tri = triangulate_points(px, w, cal.K, cal.dist, cal.R, cal.t, max_error_px)
            a, b = [], []
            for j in paired:
                if not (seen[t, j, c] and seen[t, flip[j], c] and tri.valid[j]):
                    continue
                err = reprojection_errors(tri.points[j], xy[t, [j, flip[j]]][:, c],
                                          cal.K[[c, c]], cal.dist[[c, c]], cal.R[[c, c]],
                                          cal.t[[c, c]])  # fmt: skip
                a.append(float(err[0]))
                b.append(float(err[1]))
            if len(a) < MIN_JOINTS:
                continue
            ma, mb = float(torch.tensor(a).median()), float(torch.tensor(b).median())
            plain[t, c], swapped[t, c] = ma, mb
            swap[t, c] = mb <= RATIO * ma and mb + MARGIN_PX <= ma
    return swap, plain, swapped


def test_batched_decision_equals_the_naive_loop(bundled):
    cams, tri = bundled
    swapped_cams, mask = _inject(cams, tri)
    cal = cams.calibration.to(dtype=torch.float64)
    frames = slice(0, 64)  # the injected runs of cameras 0, 1 and 2
    packed = [k[frames] for k in pack_keypoints(swapped_cams)]
    xy, seen, fd, _ = _detections(packed, cal.K, cal.dist, cal.R, cal.t, 0.3)
    q = torch.from_numpy(tri.person[frames]).clamp_min(0)
    T = q.shape[0]
    g = [torch.stack([x[torch.arange(T), q[:, c]] for c, x in enumerate(a)], -2)
         for a in (xy, fd)]  # fmt: skip
    g_seen = torch.stack([s[torch.arange(T), q[:, c]] for c, s in enumerate(seen)], -1)
    conf = torch.stack([k[torch.arange(T), q[:, c], :, 2] for c, k in enumerate(packed)], -1)
    flip = torch.tensor(FLIP)
    got = find_swaps(g[1], g_seen, g[0], cal.K, cal.dist, cal.R, cal.t, flip)
    ref = _naive_find_swaps(g[0], g_seen, conf, cal, FLIP)
    assert torch.equal(got[0], ref[0])
    for a, b in zip(got[1:], ref[1:], strict=True):
        # the same DLT and projection; the eigensolver converges per batch: 1e-5 px apart
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-6, atol=1e-4)
    assert got[0].any() and not got[0][~torch.from_numpy(mask[frames])].any()


def test_write_2d_gives_the_detections_back(bundled, tmp_path, capsys):
    cams, tri = bundled
    swapped, mask = _inject(cams, tri, INJECT[:2])
    src = tmp_path / "trial"
    for c, folder in enumerate(cams.folders):  # the injected detections as OpenPose folders
        P = max(len(d) for d in swapped.detections[c])
        kp = torch.zeros(len(swapped.detections[c]), P, 25, 3, dtype=torch.float64)
        for t, d in enumerate(swapped.detections[c]):
            kp[t, : len(d)] = torch.from_numpy(d)
        names = [f"{folder.name}_{t:06d}_keypoints.json" for t in range(cams.frames)]
        write_openpose(kp, src / folder.name, names, "BODY_25B")
    r = triangulate_folder(src, CALIB, tmp_path / "out", fps=60, plot=False, write_2d=True)
    assert r["swaps"] == {n: int(m) for n, m in zip(cams.names, mask.sum(0), strict=True)}
    z = np.load(tmp_path / "out" / "trial_3d.npz")
    np.testing.assert_array_equal(z["swapped"], mask)
    for c, folder in enumerate(cams.folders):
        back = read_detections(tmp_path / "out" / "trial_2d" / folder.name).frames
        for t in range(cams.frames):  # the subject's detection as before the injection
            q = tri.person[t, c]
            if q >= 0:
                np.testing.assert_allclose(back[t][q], cams.detections[c][t][q], atol=1e-6)
    line = [x for x in summary(r) if "left/right" in x]  # the summary line
    assert len(line) == 1 and "cam_01 7, cam_02 10, cam_03 0, cam_04 0" in line[0]


@pytest.mark.parametrize("extra, what", [(["--left-right", "both"], "--left-right must be"),
                                         (["--left-right", "keep", "--write-2d"],
                                          "--write-2d writes")])  # fmt: skip
def test_bad_options_are_one_line(tmp_path, capsys, extra, what):
    argv = ["triangulate", str(BUNDLED), "--calib", str(CALIB), "--out", str(tmp_path / "o"),
            *extra]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and what in err[0]
    assert not (tmp_path / "o").exists()


def test_flip_index_exchanges_every_left_right_pair():
    from tensorpose.layouts import LAYOUTS

    for layout, names in LAYOUTS.items():
        f = flip_index(layout)
        assert sorted(f) == list(range(len(names))) and [f[i] for i in f] == list(range(len(f)))
        for i, j in enumerate(f):  # naive: by name
            side, _, rest = names[i].partition("_")
            other = {"l": "r", "r": "l"}.get(side)
            want = f"{other}_{rest}" if other and f"{other}_{rest}" in names else names[i]
            assert names[j] == want, (layout, names[i])


def test_write_2d_in_chunks_and_with_people(bundled, tmp_path):
    """A chunk at a time writes the same files as one pass; with ``--people`` every person's
    swaps are written."""
    cams, tri = bundled
    swapped, mask = _inject(cams, tri, INJECT[:3])
    src = tmp_path / "trial"
    for c, folder in enumerate(cams.folders):
        P = max(len(d) for d in swapped.detections[c])
        kp = torch.zeros(len(swapped.detections[c]), P, 25, 3, dtype=torch.float64)
        for t, d in enumerate(swapped.detections[c]):
            kp[t, : len(d)] = torch.from_numpy(d)
        names = [f"{folder.name}_{t:06d}_keypoints.json" for t in range(cams.frames)]
        write_openpose(kp, src / folder.name, names, "BODY_25B")
    whole = triangulate_folder(src, CALIB, tmp_path / "a", fps=60, plot=False, write_2d=True)
    part = triangulate_folder(src, CALIB, tmp_path / "b", fps=60, plot=False, write_2d=True,
                              chunk_frames=33)  # fmt: skip
    assert whole["swaps"] == part["swaps"] and sum(whole["swaps"].values()) == mask.sum()
    people = triangulate_folder(src, CALIB, tmp_path / "c", fps=60, plot=False, write_2d=True,
                                people="auto")  # fmt: skip
    assert sum(sum(p["swaps"].values()) for p in people["people"]) == mask.sum()
    for folder in cams.folders:
        a = sorted((tmp_path / "a" / "trial_2d" / folder.name).iterdir())
        for other in ("b", "c"):
            b = sorted((tmp_path / other / "trial_2d" / folder.name).iterdir())
            assert [x.name for x in a] == [x.name for x in b]
            assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a, b, strict=True))
