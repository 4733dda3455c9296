"""Recipe takes: globs, kinds, true frame rates, resampling (against a per-frame np.interp
loop), windows balanced over kinds, held-out takes never trained on."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.data.mocap import load_bvh_sequences
from tensorpose.data.synth import SyntheticLiftingBatches
from tensorpose.data.takes import expand_entries, joint_weights, kind_of, resample, true_fps
from tensorpose.ops.kinematics import bone_lengths
from tensorpose.skeleton import get_skeleton
from tensorpose.tasks.lifting import kind_weights

ROOT = Path(__file__).resolve().parents[2]
DAZ = ROOT / "tests" / "data" / "mocap_extra" / "cmu_daz" / "martial_04_excerpt_30fps.bvh"
DM = ROOT / "tests" / "data" / "mocap_extra" / "deepmimic" / "motions" / "09_02.txt"


def test_resample_matches_a_per_coordinate_interp_loop():
    g = torch.Generator().manual_seed(0)
    pos = torch.randn(50, 3, 3, generator=g, dtype=torch.float64)
    times = np.cumsum(np.r_[0.0, 0.01 + 0.02 * np.random.default_rng(0).random(49)])
    out = resample(pos, times, 30.0)
    t = np.arange(len(out)) / 30.0
    assert t[-1] <= times[-1] < t[-1] + 1 / 30
    for j in range(3):  # the naive twin: one np.interp per joint coordinate
        for c in range(3):
            np.testing.assert_allclose(out[:, j, c], np.interp(t, times, pos[:, j, c]), atol=1e-12)


def test_integer_ratio_keeps_every_kth_frame_and_a_wrong_header_is_overridden(tmp_path):
    (seq,), _ = load_bvh_sequences(["131_03"], fps=30)
    (full,), _ = load_bvh_sequences(["131_03"], fps=120)
    torch.testing.assert_close(seq.positions, full.positions[::4])
    # a 120 fps header whose take is really 60 fps (as the CMU salsa files): half the frames
    (slow,), _ = load_bvh_sequences(["131_03"], fps=30, frame_rates=["131_0[3]=60"])
    torch.testing.assert_close(slow.positions, full.positions[::2])
    assert true_fps("a/salsa/01.bvh", ["*/salsa/*=60"], 120.0) == 60.0
    assert true_fps("a/indian/01.bvh", ["*/salsa/*=60"], 120.0) == 120.0


def test_globs_kinds_and_exclusion(tmp_path):
    for folder in ("salsa", "martial"):
        (tmp_path / folder).mkdir()
        for k in range(2):
            shutil.copy(DAZ, tmp_path / folder / f"0{k}.bvh")
    kinds = ["salsa=*/salsa/*", "fight=*/martial/*"]
    takes = expand_entries([f"{tmp_path}/*/*.bvh", "131_01"], kinds)
    got = [(Path(t.path).parent.name, t.kind) for t in takes[:4]]
    assert got == [("martial", "fight")] * 2 + [("salsa", "salsa")] * 2
    assert takes[4].kind == "other" and kind_of("131_01", ["walk=131_*"]) == "walk"
    seqs, _ = load_bvh_sequences(
        [f"{tmp_path}/*/*.bvh", str(DM)], kinds=kinds, exclude=[f"{tmp_path}/salsa/01.bvh"]
    )
    assert [s.name for s in seqs] == ["martial/00", "martial/01", "salsa/00", "motions/09_02"]
    assert seqs[-1].kind == "other" and seqs[-1].positions.shape[1:] == (17, 3)
    with pytest.raises(FileNotFoundError, match="no file matches"):
        expand_entries([f"{tmp_path}/nothing/*.bvh"])
    with pytest.raises(ValueError, match="data.kinds: expected 'kind=glob'"):
        kind_of("x", ["salsa"])


def test_windows_are_balanced_over_kinds():
    kinds = ["walk=131_0[12]", "hop=131_03", "jump=*09_02*"]
    seqs, sk = load_bvh_sequences(["131_01", "131_02", "131_03", str(DM)], kinds=kinds)
    w = kind_weights(seqs)
    # naive twin: each kind's frames share 1/3 of the mass
    for s, wi in zip(seqs, w, strict=True):
        same = sum(len(o.positions) for o in seqs if o.kind == s.kind)
        assert wi == pytest.approx(len(s.positions) / same / 3)
    g = torch.Generator().manual_seed(0)
    b = SyntheticLiftingBatches([s.positions for s in seqs], sk, 6000, 1, g, weights=w)
    g2 = torch.Generator().manual_seed(0)
    seq_of = b.seq_of[torch.multinomial(b.frame_weights, 6000, True, generator=g2)]
    kinds = np.array([seqs[i].kind for i in seq_of.tolist()])
    for k in ("walk", "hop", "jump"):
        assert abs((kinds == k).mean() - 1 / 3) < 0.03


def test_training_on_held_out_takes_only_is_an_error():
    with pytest.raises(ValueError, match=r"every take of \['131_03'\] is held out"):
        load_bvh_sequences(["131_03"], exclude=["131_03"])


def test_kind_shares_weight_the_kinds():
    kinds = ["walk=131_0[12]", "hop=131_03", "jump=*09_02*"]
    seqs, _ = load_bvh_sequences(["131_01", "131_02", "131_03", str(DM)], kinds=kinds)
    w = kind_weights(seqs, ["walk=2"])
    mass = {k: sum(wi for s, wi in zip(seqs, w, strict=True) if s.kind == k)
            for k in ("walk", "hop", "jump")}  # fmt: skip
    assert mass == pytest.approx({"walk": 0.5, "hop": 0.25, "jump": 0.25})
    for bad in (["run=2"], ["walk=0"], ["walk"], ["walk=x"]):
        with pytest.raises(ValueError, match="data.kind_shares"):
            kind_weights(seqs, bad)


def test_ignored_joints_per_take():
    names = get_skeleton("h36m17").names
    takes = ["131_01", "x/cmu_deepmimic/a.txt", "x/salsa/01.bvh"]
    rules = ["*/cmu_deepmimic/*=neck head", "*/salsa/*=thorax", "*=l_wrist"]
    w = joint_weights(takes, rules, names)
    for i, take in enumerate(takes):  # naive twin: the first matching rule's joints are 0
        ignored = {"131_01": {"l_wrist"}, "x/cmu_deepmimic/a.txt": {"neck", "head"},
                   "x/salsa/01.bvh": {"thorax"}}[take]  # fmt: skip
        assert w[i].tolist() == [0.0 if n in ignored else 1.0 for n in names]
    assert bool((joint_weights(takes, [], names) == 1).all())
    with pytest.raises(ValueError, match=r"data.ignore_joints: unknown joints \['nose'\]"):
        joint_weights(takes, ["*=nose head"], names)
    with pytest.raises(ValueError, match="data.ignore_joints: expected"):
        joint_weights(takes, ["head"], names)


def test_recipe_options_ignore_joints_and_proportions_reach_the_batches():
    from tensorpose.config import ConfigError, load_config
    from tensorpose.ops.poseaug_bones import retarget_lengths
    from tensorpose.tasks import build_task

    over = ["model.channels=16", "model.receptive_field=9", "data.fps=10", "train.batch_size=64",
            "train.device=cpu", "data.val_cameras=1", "data.augment=kinematic",
            "data.steps_per_epoch=2", f"data.train=[131_01, {DM}]", "data.val=[131_03]",
            "data.kinds=[walk=131_*, jump=*09_02*]", "data.proportions=walk",
            "data.ignore_joints=[*09_02*=neck head]"]  # fmt: skip
    task = build_task(load_config(None, over))
    task.setup(torch.device("cpu"))
    tb = task.train_batches
    sk = task.skeleton
    seqs, _ = load_bvh_sequences(["131_01", str(DM)], fps=10)
    own = [bone_lengths(s.positions, sk).mean(0) for s in seqs]
    template = bone_lengths(seqs[0].positions, sk).mean(0)
    torch.testing.assert_close(tb.bone_lengths[0], template)  # the walk take keeps its own
    torch.testing.assert_close(tb.bone_lengths[1], retarget_lengths(own[1], template, sk))
    assert tb.joint_weights[0].tolist() == [1.0] * 17
    assert tb.joint_weights[1].tolist() == [0.0 if n in ("neck", "head") else 1.0 for n in sk.names]
    kind_size = build_task(load_config(None, [*over, "data.proportions_height=kind"]))
    kind_size.setup(torch.device("cpu"))
    torch.testing.assert_close(kind_size.train_batches.bone_lengths, template.expand(2, -1))
    batch = task.prepare(next(iter(tb)))
    assert batch["weight"].shape == (64, 1, 17)
    res = task(batch)  # the loss counts only the weighted joints
    naive = task.loss({"joints": res["pred"]}, batch["target"], batch["weight"])["mpjpe_mm"]
    err = (res["pred"].detach() - batch["target"]).norm(dim=-1)[:, 0]  # (B, J)
    keep = batch["weight"][:, 0] > 0
    assert float(naive) == pytest.approx(1000 * float(err[keep].mean()), rel=1e-5)
    with pytest.raises(ValueError, match="data.proportions: no training take of kind 'run'"):
        bad = build_task(load_config(None, [*over, "data.proportions=run"]))
        bad.setup(torch.device("cpu"))
    with pytest.raises(ConfigError, match="need data.augment: kinematic"):
        load_config(None, [o for o in over if "augment" not in o])
