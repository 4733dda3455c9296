from __future__ import annotations

import pytest
import torch

from tensorpose.config import config_to_dict, load_config
from tensorpose.inference import load_model
from tensorpose.tasks import build_model
from tensorpose.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def small_config(*extra):
    return load_config(None, ["model.channels=8", "model.receptive_field=9", *extra])


def test_save_is_atomic_and_loads_with_weights_only(tmp_path):
    cfg = small_config()
    model = build_model(cfg)
    path = save_checkpoint(
        tmp_path / "ckpt.pt", model, config_to_dict(cfg), {"mean_pose": torch.zeros(17, 3)}
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]  # no temp file left
    payload = load_checkpoint(path)
    assert payload["config"]["model"]["channels"] == 8
    task, rebuilt, cfg2, extra = load_model(path, "cpu")
    assert task.model is rebuilt and not rebuilt.training
    assert cfg2 == cfg and extra["mean_pose"].shape == (17, 3)
    for k, v in model.state_dict().items():
        torch.testing.assert_close(rebuilt.state_dict()[k], v)


def test_failed_save_leaves_previous_checkpoint(tmp_path, monkeypatch):
    cfg = small_config()
    path = save_checkpoint(tmp_path / "ckpt.pt", build_model(cfg), config_to_dict(cfg))
    before = path.read_bytes()

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint(path, build_model(cfg), config_to_dict(cfg))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


def test_checkpoint_from_another_model_config_is_rejected(tmp_path):
    cfg = small_config()
    path = save_checkpoint(tmp_path / "ckpt.pt", build_model(cfg), config_to_dict(cfg))
    other = config_to_dict(small_config("model.channels=16", "model.head=direct"))["model"]
    with pytest.raises(CheckpointError, match=r"another model config: channels: checkpoint has 8"):
        load_model(path, model_config=other)
    # Weights that do not fit the stored config (e.g. a hand-edited config) are named too.
    payload = torch.load(path, weights_only=True)
    payload["config"]["model"]["channels"] = 16
    torch.save(payload, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match="weights do not fit model config"):
        load_model(tmp_path / "edited.pt")


def test_not_a_checkpoint(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"not a pickle")
    with pytest.raises(CheckpointError, match="not a readable tensorpose checkpoint"):
        load_checkpoint(tmp_path / "junk.pt")
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a tensorpose checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt")
