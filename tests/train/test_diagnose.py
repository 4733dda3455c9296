"""Input-pipeline diagnosis: the verdict on synthetic stage timings (pure function, every kind
and its fix), and a smoke run on the bundled COCO subset."""

import pytest
import torch

from tensorpose.augment.crops import AugmentConfig
from tensorpose.io.coco import bundled_coco, load_coco_keypoints
from tensorpose.ops.heatmap import gaussian_heatmaps
from tensorpose.skeleton import get_skeleton
from tensorpose.train.diagnose import STAGES, VERDICTS, diagnose, profile_pipeline

MS = 1e-3


@pytest.mark.parametrize(
    ("stages", "workers", "kind", "bottleneck", "fix"),
    [
        ({"read": 40 * MS, "decode": 5 * MS, "augment_cpu": 5 * MS}, 0, "io-bound", "read",
         "cache_images"),
        ({"read": 1 * MS, "decode": 60 * MS, "augment_cpu": 20 * MS}, 1, "decode-bound", "decode",
         "nvJPEG"),
        ({"read": 1 * MS, "decode": 10 * MS, "augment_cpu": 50 * MS}, 2, "augmentation-bound",
         "augment_cpu", "raise workers from 2 to 8"),
        ({"read": 1 * MS, "decode": 10 * MS, "augment_device": 30 * MS}, 4, "augmentation-bound",
         "augment_device", "data.backend=cpu"),
        ({"decode": 10 * MS, "augment_cpu": 10 * MS, "transfer": 40 * MS}, 4, "transfer-bound",
         "transfer", "pin_memory"),
        ({"decode": 10 * MS, "augment_cpu": 10 * MS, "h2d": 40 * MS}, 4, "transfer-bound", "h2d",
         "pin_memory"),
    ],
)  # fmt: skip
def test_verdict_names_the_slowest_stage(stages, workers, kind, bottleneck, fix):
    v = diagnose(stages, workers, model_step=10 * MS, cpu_count=8, device_type="cuda")
    assert (v.kind, v.bottleneck) == (kind, bottleneck)
    assert v.message.startswith(kind) and fix in v.message
    assert v.data_share >= 0.2


def test_device_bound_when_workers_keep_up():
    stages = {"read": 2 * MS, "decode": 30 * MS, "augment_cpu": 28 * MS, "transfer": 1 * MS}
    # 60 ms of worker stages on 4 workers: 16 ms/batch, hidden behind a 100 ms model step
    v = diagnose(stages, 4, model_step=100 * MS, cpu_count=8)
    assert v.kind == "device-bound" and v.bottleneck == "model"
    assert v.data_share == 0 and v.step_s == pytest.approx(0.1)
    # the same stages in the main process (no workers) are 38% of the step: decode-bound
    v = diagnose(stages, 0, model_step=100 * MS, cpu_count=8)
    assert v.kind == "decode-bound" and v.data_share == pytest.approx(61 / 161)
    # main-process stages never overlap: 30 ms of targets is 23% of a 130 ms step
    v = diagnose({"targets": 30 * MS}, 4, model_step=100 * MS)
    assert v.kind == "augmentation-bound" and v.bottleneck == "targets"
    # without a model step the pipeline's slowest stage is named; all workers busy: no advice
    v = diagnose({"decode": 5 * MS, "augment_cpu": 9 * MS}, 2, cpu_count=2)
    assert v.kind == "augmentation-bound" and "already 2 of 2" in v.message
    assert "no model step given" in v.message
    # measured loaders: more workers were slower, so they are not the advice
    v = diagnose({"decode": 30 * MS}, 1, cpu_count=4, measured={0: 0.03, 1: 0.05, 2: 0.06})
    assert "measured slower" in v.message and "raise workers" not in v.message
    v = diagnose({"augment_cpu": 3 * MS, "transfer": 13 * MS}, 1, measured={0: 0.004, 1: 0.016})
    assert v.kind == "transfer-bound" and "pin_memory" not in v.message  # a CPU device
    assert "0 workers build a batch in 4.0 ms" in v.message
    assert set(VERDICTS) == {"io-bound", "decode-bound", "augmentation-bound",
                             "transfer-bound", "device-bound"}  # fmt: skip


def test_verdict_rejects_bad_timings():
    with pytest.raises(ValueError, match="unknown"):
        diagnose({"gpu": 1.0}, 1)
    with pytest.raises(ValueError, match=">= 0"):
        diagnose({"read": -1.0}, 1)
    with pytest.raises(ValueError, match="workers"):
        diagnose({"read": 1.0}, -1)


def test_profile_the_bundled_coco_pipeline():
    coco = load_coco_keypoints(bundled_coco(), warn=False)
    cfg = AugmentConfig(output_size=(64, 48))
    sk = get_skeleton("coco17")

    def targets(b):
        return gaussian_heatmaps(b["keypoints"], b["visibility"], (16, 12), 2.0, 4.0)

    prof = profile_pipeline(coco.records, cfg, sk, batch_size=4, workers=(0, 1), batches=2,
                            sample=8, targets=targets, model_step=0.05)  # fmt: skip
    assert set(prof.stages) == set(STAGES)
    for k in ("read", "decode", "augment_cpu", "targets"):
        assert prof.stages[k] > 0
    assert prof.stages["h2d"] == 0 and prof.stages["augment_device"] == 0
    assert [r["workers"] for r in prof.loader] == [0, 1]
    assert all(r["samples_per_s"] > 0 and r["transfer_s"] >= 0 for r in prof.loader)
    assert prof.verdict.kind in VERDICTS
    text = prof.table()
    assert "verdict" in text and "decode" in text and "DataLoader workers  1" in text
    dev = profile_pipeline(coco.records[:4], cfg, sk, batch_size=2, workers=(0,), batches=1,
                           sample=2, backend="device", device=torch.device("cpu"))  # fmt: skip
    assert dev.stages["augment_device"] > 0 and dev.stages["collate"] > 0
    assert dev.stages["augment_cpu"] == 0
    with pytest.raises(ValueError, match="backend"):
        profile_pipeline(coco.records, cfg, sk, backend="gpu")


def test_profile_a_heatmap_config_and_time_a_model_step():
    from pathlib import Path

    from tensorpose.config import load_config
    from tensorpose.models.heads import heatmap_pose_net
    from tensorpose.train.diagnose import model_step_time, profile_config

    path = Path(__file__).resolve().parents[2] / "configs" / "heatmap_coco.yaml"
    cfg = load_config(path, ["train.batch_size=2", "data.input_size=[64,64]", "train.device=cpu"])
    model = heatmap_pose_net(17, 10, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    step = model_step_time(model, 2, (64, 64), repeats=1)
    assert step > 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    prof = profile_config(cfg, workers=(0,), batches=1, sample=4, model_step=step)
    assert prof.batch_size == 2 and prof.backend == "cpu" and prof.workers == cfg.data.workers
    assert prof.stages["targets"] > 0 and prof.verdict.kind in VERDICTS
    assert "workers 1 not measured" in " ".join(prof.notes)
    assert cfg.data.cache_images and prof.stages["decode"] == 0 and prof.stages["read"] == 0
    assert "first epoch only" in " ".join(prof.notes)
    with pytest.raises(ValueError, match="heatmap or deeppose"):
        profile_config(load_config(None))
