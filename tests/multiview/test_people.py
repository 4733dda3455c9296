"""Several people across cameras: the association against its naive loop, the linking over
time, and on synthetic_two_people (the balancing trial with a second person composited into
every view; tests/data, 40 frames) both people in every frame, no identity switch and the
balancing person's 3D equal to the single-person run on the bundled trial."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.apps.triangulate import output_names, triangulate_folder
from tensorpose.io.motion import read_trc
from tensorpose.io.openpose import bundled_tracks
from tensorpose.multiview.association import candidates, select_people, triangulate_everyone
from tensorpose.multiview.people import check_people, link_people, triangulate_cameras_people
from tensorpose.multiview.recording import pack_keypoints, read_cameras, triangulate_cameras

TWO = Path(__file__).resolve().parents[1] / "data" / "synthetic_two_people"
BUNDLED = bundled_tracks()[0].parent
FRAMES = 40


@pytest.fixture(scope="module")
def two():
    cams = read_cameras(TWO, TWO / "Calib.qca.txt")
    return cams, triangulate_cameras_people(cams)


def _synthetic(cams, tri) -> np.ndarray:
    """``(T, C)`` per camera whether the person's detection is the composited one (all its
    confidences 0 or exactly 1), -1 where the person has none."""
    out = []
    for c, k in enumerate(pack_keypoints(cams)):  # the four cameras
        q = tri.person[:, c]
        conf = k[np.arange(len(q)), np.clip(q, 0, None), :, 2].numpy()
        syn = ((conf == 1) | (conf == 0)).all(-1) & (conf == 1).any(-1)
        out.append(np.where(q >= 0, syn.astype(int), -1))
    return np.stack(out, -1)


def test_both_people_in_every_frame_without_identity_switches(two):
    cams, people = two
    assert cams.frames == FRAMES and len(people) >= 2
    kinds = [_synthetic(cams, p) for p in people]
    composited = [k for k, s in enumerate(kinds) if (s == 1).sum(-1).min() >= 2]
    balancing = [k for k, s in enumerate(kinds)  # (the bystander: two cameras)
                 if (s == 0).sum(-1).min() >= 3 and (s != 1).all()]  # fmt: skip
    assert len(composited) == 1 and len(balancing) == 1
    # Found (two cameras or more) in every frame, each detection always the same person.
    assert (kinds[composited[0]] == 1).all()  # all four cameras, every frame
    assert (kinds[balancing[0]] != 1).all() and ((kinds[balancing[0]] == 0).sum(-1) >= 3).all()
    for p in people[:2]:  # the two best seen are the two people
        assert ((p.person >= 0).sum(-1) >= 2).all() and p.valid.any(-1).all()


def test_balancing_person_equals_the_single_person_run(two):
    cams, people = two
    bal = next(p for p in people if ((_synthetic(cams, p) == 0).sum(-1) >= 3).all())
    single_cams = read_cameras(BUNDLED, BUNDLED / "Calib.qca.txt")
    single_cams.detections = [d[:FRAMES] for d in single_cams.detections]
    single = triangulate_cameras(single_cams)
    # In cam01 frames 0 and 1 the composited input lacks the balancing person: compare those
    # with the single-person run on the bundled detections without it.
    np.testing.assert_array_equal(bal.valid[2:], single.valid[2:])
    assert np.nanmax(np.abs(bal.points[2:] - single.points[2:])) <= 1e-9
    lacking = copy.copy(single_cams)
    lacking.detections = [list(d) for d in single_cams.detections]
    for t in (0, 1):
        lacking.detections[0][t] = single_cams.detections[0][t][1:]
    single3 = triangulate_cameras(lacking)
    np.testing.assert_array_equal(bal.valid, single3.valid)
    assert np.nanmax(np.abs(bal.points - single3.points)) <= 1e-9


def _naive_candidates(pairs, costs, supports, seen, association_px, min_common):
    """The best candidate per frame, one frame, reference and camera at a time."""
    C, T = len(seen), seen[0].shape[0]
    cost = {}
    for (a, b), c, s in zip(pairs, costs, supports, strict=True):
        cost[a, b], cost[b, a] = (c, s), (c.mT, s.mT)
    person = torch.full((T, C), -1, dtype=torch.long)
    score = torch.full((T,), float("-inf"), dtype=torch.float64)
    for t in range(T):
        for a in range(C):
            for p in range(seen[a].shape[1]):
                if int(seen[a][t, p].sum()) < min_common:
                    continue
                choice, support, costs_, joined = [-1] * C, int(seen[a][t, p].sum()), [], 0
                choice[a] = p
                for b in range(C):
                    if b == a or seen[b].shape[1] == 0:
                        continue
                    cb, sb = cost[a, b]
                    q = int(torch.argmin(cb[t, p]))
                    if float(cb[t, p, q]) < association_px:
                        choice[b], joined = q, joined + 1
                        support += int(sb[t, p, q])
                        costs_.append(float(cb[t, p, q]))
                if joined == 0:
                    continue
                e = sum(costs_) / len(costs_)
                s = support - e / (1 + e)
                if s > score[t]:
                    score[t], person[t] = s, torch.tensor(choice)
    return person, score


def _random_problem(seed: int, slots=(3, 2, 0, 4), T=6, J=5):
    g = torch.Generator().manual_seed(seed)
    C = len(slots)
    pairs = [(a, b) for a in range(C) for b in range(a + 1, C)]
    costs, supports = [], []
    for a, b in pairs:
        c = torch.rand(T, slots[a], slots[b], generator=g, dtype=torch.float64) * 40
        c[torch.rand(c.shape, generator=g) < 0.2] = float("inf")
        costs.append(c)
        supports.append(torch.randint(0, J + 1, c.shape, generator=g))
    seen = [torch.rand(T, n, J, generator=g) < 0.8 for n in slots]
    return pairs, costs, supports, seen


@pytest.mark.parametrize("seed", range(4))
def test_candidates_and_selection_equal_the_naive_loops(seed):
    pairs, costs, supports, seen = _random_problem(seed)
    person, score = candidates(pairs, costs, supports, seen, 20.0, 3)
    ref_person, ref_score = _naive_candidates(pairs, costs, supports, seen, 20.0, 3)
    torch.testing.assert_close(score, ref_score)
    assert torch.equal(person[torch.isfinite(score)], ref_person[torch.isfinite(ref_score)])
    # Selection: the naive rule again on the detections not yet taken, round after round.
    people, scores = select_people(pairs, costs, supports, seen, 20.0, 3)
    taken = [torch.zeros(s.shape[:2], dtype=torch.bool) for s in seen]
    for m in range(people.shape[0]):
        left = [c.masked_fill(taken[a][..., None] | taken[b][:, None], float("inf"))
                for (a, b), c in zip(pairs, costs, strict=True)]  # fmt: skip
        free = [s & ~k[..., None] for s, k in zip(seen, taken, strict=True)]
        p, s = _naive_candidates(pairs, left, supports, free, 20.0, 3)
        torch.testing.assert_close(scores[m], s)
        assert torch.equal(people[m][torch.isfinite(s)], p[torch.isfinite(s)])
        for t in range(p.shape[0]):
            for c in range(len(seen)):
                if p[t, c] >= 0:
                    taken[c][t, p[t, c]] = True
    # Disjoint: no detection belongs to two people of a frame.
    for c in range(len(seen)):
        q = people[..., c]
        for t in range(q.shape[1]):
            used = q[:, t][q[:, t] >= 0]
            assert len(used) == len(set(used.tolist()))


def test_everyone_matches_the_single_person_op_with_one_person():
    cams = read_cameras(BUNDLED, BUNDLED / "Calib.qca.txt")
    k = [x[:10] for x in pack_keypoints(cams)]
    cal = cams.calibration.to(dtype=torch.float64)
    from tensorpose.multiview.association import triangulate_people

    one = triangulate_people(k, cal.K, cal.dist, cal.R, cal.t)
    every = triangulate_everyone(k, cal.K, cal.dist, cal.R, cal.t)
    assert torch.equal(every.person[0], one.person)
    torch.testing.assert_close(every.points[0], one.points, equal_nan=True, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="max_people"):
        triangulate_everyone(k, cal.K, cal.dist, cal.R, cal.t, max_people=0)


def test_link_people_keeps_identities_through_gaps_and_swapped_slots():
    T = 60
    a = np.stack([np.linspace(0, 1.0, T), np.zeros(T), np.ones(T)], -1)  # walks along X
    b = np.stack([np.full(T, 3.0), np.linspace(0, -0.5, T), np.ones(T)], -1)
    centre = np.stack([a, b]).copy()
    centre[:, 1::2] = centre[::-1, 1::2]  # the slots swap every other frame
    centre[0, 20:30] = np.nan  # a short occlusion of whoever is in slot 0
    centre[1, 20:30] = b[20:30]
    track = link_people(centre, max_gap=15)
    ident = np.where(np.isfinite(centre).all(-1), track, -1)
    for truth in (a, b):
        hit = np.isclose(centre, truth).all(-1)  # (M, T)
        assert len(set(ident[hit].tolist())) == 1
    # A gap longer than max_gap starts a new identity.
    assert link_people(centre, max_gap=5).max() == 2


def test_people_outputs_and_errors(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"^--people 5: found only 3 people"):
        triangulate_folder(TWO, TWO / "Calib.qca.txt", out, fps=60, people=5)
    assert not out.exists()  # nothing written
    for bad in ("x", 0, 33, "2.5", True):
        with pytest.raises(ValueError, match="--people must be auto or a number"):
            check_people(bad)
    assert check_people("2") == 2 and check_people("auto") == "auto"
    r = triangulate_folder(TWO, TWO / "Calib.qca.txt", out, fps=60, people="2")
    assert sorted(Path(p).name for p in r["outputs"].values()) == sorted(
        output_names("synthetic_two_people", 2)
    )
    single_keys = {"points", "errors", "mean_error", "used", "valid", "person", "names",
                   "cameras", "folders", "fps", "units", "marker_names", "axes", "trc_axes",
                   "filter", "swapped"}  # fmt: skip
    for k in (1, 2):
        npz = np.load(out / f"synthetic_two_people_p{k}_3d.npz")
        assert set(npz.files) == single_keys and npz["points"].shape == (FRAMES, 25, 3)
        trc = read_trc(out / f"synthetic_two_people_p{k}_3d.trc")
        np.testing.assert_allclose(trc.points, npz["points"][..., [1, 2, 0]], atol=5e-7)
    assert [p["frames_found"] for p in r["people"]] == [FRAMES, FRAMES]
    png = (out / "synthetic_two_people_3d_tracks.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    auto = triangulate_folder(TWO, TWO / "Calib.qca.txt", out, fps=60, people="auto",
                              overwrite=True, plot=False)  # fmt: skip
    assert len(auto["people"]) == 3  # the two people and a bystander seen by cam01 and cam02
    assert not (out / "synthetic_two_people_3d_tracks.png").exists()  # a stale output removed


@pytest.mark.parametrize("method", ["none", "butterworth", "kalman", "rts"])
def test_filter_points_batched_people_equal_one_call_each(method):
    """``filter_points`` on every person at once (``per_person``) gives, bit for bit, the
    points, filled samples and jitter figures of one call per person (each joint's coordinate
    is a series of its own)."""
    from tensorpose.multiview.motion3d import Filter3D, filter_points

    rng = np.random.default_rng(0)
    points = np.cumsum(rng.normal(0, 0.01, (3, 90, 5, 3)), 1)
    points[rng.random((3, 90, 5)) < 0.2] = np.nan
    points[1, 20:60] = np.nan  # a long gap: left unfilled
    f = Filter3D(method, max_gap=4)
    batched, filled, figures = filter_points(points, f, 60.0, per_person=True)
    for p in range(len(points)):  # the per-person loop the command ran before
        one, fill_one, fig_one = filter_points(points[p], f, 60.0)
        np.testing.assert_array_equal(batched[p], one)
        np.testing.assert_array_equal(filled[p], fill_one)
        assert figures[p] == fig_one
