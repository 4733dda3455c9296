from __future__ import annotations

import errno
import io
import os
import pickle
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import tensorpose.train.checkpoint as ckpt
import tensorpose.train.checksum as checksum
from tensorpose.config import config_to_dict, load_config
from tensorpose.inference import load_model
from tensorpose.tasks import build_model
from tensorpose.train.atomic_save import clean_temp_files
from tensorpose.train.checkpoint import (
    EVAL_KEYS,
    RESUME_KEYS,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
)
from tensorpose.train.checksum import weights_checksum
from tensorpose.train.rng import rng_state


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
    # A hand-edited config no longer matches the stored checksum: the file is reported corrupt.
    payload = torch.load(path, weights_only=True)
    payload["config"]["model"]["channels"] = 16
    torch.save(payload, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match=r"edited\.pt: config and training state do not"):
        load_model(tmp_path / "edited.pt")
    # Without checksums (unverified), weights that do not fit the stored config are named.
    del payload["checksum"], payload["checksummed"]
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


# ---------------------------------------------------------------------- a full training state
class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        return self.body(x)


def tiny_state(seed: int = 0):
    """A model, optimiser and scheduler after one real step, and the keyword state the trainer
    passes to save_checkpoint."""
    torch.manual_seed(seed)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.9**s)
    model(torch.randn(6, 4)).square().mean().backward()
    opt.step()
    sched.step()
    state = dict(
        epoch=1, step=1, optimizer=opt.state_dict(), scheduler=sched.state_dict(), scaler=None,
        rng=rng_state(torch.Generator().manual_seed(seed)), history=[{"epoch": 1, "loss": 0.5}],
        best={"metric": "val_loss", "mode": "min", "value": 0.25, "epoch": 1}, first_loss=0.75,
    )  # fmt: skip
    return model, state


def save_tiny(path: Path, seed: int = 0) -> tuple[Path, nn.Module]:
    model, state = tiny_state(seed)
    return save_checkpoint(
        path, model, {"task": "tiny"}, {"mean": torch.arange(3.0)}, **state
    ), model


def storage_spans(data: bytes) -> dict[str, tuple[int, int]]:
    """Byte ranges of the tensor storages (``archive/data/N`` members, stored uncompressed) in
    a torch zip file, from the zip local headers."""
    spans = {}
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            if re.search(r"/data/\d+$", info.filename):
                assert info.compress_type == zipfile.ZIP_STORED
                name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
                start = info.header_offset + 30 + name_len + extra_len
                spans[info.filename] = (start, start + info.file_size)
    return spans


def differs(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return not (type(a) is type(b) and a.dtype == b.dtype and torch.equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) != list(b) or any(differs(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is not type(b) or len(a) != len(b) or any(map(differs, a, b))
    return type(a) is not type(b) or a != b


# ---------------------------------------------------------------------- checksums
def test_a_flipped_byte_in_any_tensor_is_caught(tmp_path):
    path, model = save_tiny(tmp_path / "ckpt.pt")
    data = path.read_bytes()
    pristine = torch.load(path, weights_only=True)
    spans = storage_spans(data)
    assert len(spans) >= 20  # weights, optimiser moments, RNG states, extra
    w = model.state_dict()["body.0.weight"].numpy().tobytes()  # the spans are the raw data
    assert any(data[a:b] == w for a, b in spans.values())
    for member, (a, b) in spans.items():
        bad = bytearray(data)
        bad[(a + b) // 2] ^= 0x01  # one bit, in the middle of the storage
        target = tmp_path / "flipped.pt"
        target.write_bytes(bytes(bad))
        raw = torch.load(target, weights_only=True)  # torch alone reads it without complaint
        changed = [k for k in pristine if differs(pristine[k], raw[k])]
        assert len(changed) == 1, member
        expected = (
            "weights do not match their checksum: the file is corrupt"
            if changed == ["model"]
            else r"config and training state do not match their checksum|entry 'rng'"
        )
        with pytest.raises(CheckpointError, match=rf"^{re.escape(str(target))}: ({expected})"):
            load_checkpoint(target)


def test_weights_checksum_is_canonical_and_sensitive(monkeypatch):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 7, generator=g)
    state = {"a.weight": x, "a.bias": torch.arange(7), "n": torch.tensor(3)}
    ref = weights_checksum(state)
    assert re.fullmatch(r"[0-9a-f]{64}", ref)
    assert weights_checksum(dict(reversed(state.items()))) == ref  # insertion order
    t = x.t().contiguous().t()  # same values, other memory layout
    assert not t.is_contiguous() and weights_checksum({**state, "a.weight": t}) == ref
    assert weights_checksum({**state, "a.weight": x.clone().requires_grad_()}) == ref
    changed = [
        {**state, "a.weight": x.reshape(7, 5)},  # same bytes, other shape
        {**state, "a.weight": x.view(torch.int32)},  # same bytes, other dtype
        {"a.w": x, "a.bias": state["a.bias"], "n": state["n"]},  # other name
        {k: v for k, v in state.items() if k != "n"},  # one entry fewer
    ]
    for i in torch.randperm(35, generator=g)[:8].tolist():  # single bits anywhere
        bits = x.clone().view(torch.int32).view(-1)
        bits[i] ^= 1 << (i % 32)
        changed.append({**state, "a.weight": bits.view(torch.float32).view(5, 7)})
    digests = [weights_checksum(s) for s in changed]
    assert ref not in digests and len(set(digests)) == len(digests)
    with pytest.raises(TypeError, match=r"state\['a'\] must be a tensor"):
        weights_checksum({"a": [1.0]})
    # On a big-endian machine the little-endian bytes are hashed: byte-swapped data here.
    monkeypatch.setattr(checksum, "_BIG_ENDIAN", True)
    for v in (x, torch.complex(x, -x), torch.arange(7, dtype=torch.int16)):
        swapped = torch.from_numpy(v.numpy().byteswap())
        monkeypatch.setattr(checksum, "_BIG_ENDIAN", False)
        expected = weights_checksum({"v": swapped})
        monkeypatch.setattr(checksum, "_BIG_ENDIAN", True)
        assert weights_checksum({"v": v}) == expected
    u = torch.arange(9, dtype=torch.uint8)
    on_big = weights_checksum({"u": u})
    monkeypatch.setattr(checksum, "_BIG_ENDIAN", False)
    assert weights_checksum({"u": u}) == on_big  # single bytes: nothing to swap


def test_stored_checksum_and_files_without_one(tmp_path):
    path, model = save_tiny(tmp_path / "ckpt.pt")
    raw = torch.load(path, weights_only=True)
    assert raw["checksum"]["model"] == weights_checksum(model.state_dict())
    assert raw["checksummed"] is True
    # A file without checksums (and a weights-only format 1 file) loads, unverified.
    del raw["checksum"], raw["checksummed"]
    torch.save(raw, tmp_path / "plain.pt")
    loaded = load_checkpoint(tmp_path / "plain.pt", require=RESUME_KEYS)
    assert not differs(loaded, raw)
    old = {"format": 1, "model": model.state_dict(), "config": {"task": "tiny"}, "extra": {}}
    torch.save(old, tmp_path / "old.pt")
    assert not differs(load_checkpoint(tmp_path / "old.pt")["model"], model.state_dict())


def test_device_state_round_trips(tmp_path, device):
    model = Tiny().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randn(6, 4, device=device)).square().mean().backward()
    opt.step()
    path = save_checkpoint(tmp_path / "c.pt", model, {}, epoch=1, optimizer=opt.state_dict())
    payload = load_checkpoint(path)  # verified on the CPU: the digests ignore the device
    assert payload["checksum"]["model"] == weights_checksum(model.state_dict())
    fresh = Tiny().to(device)
    ckpt.load_weights(fresh, payload["model"])
    for k, v in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[k], v)
    opt2 = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    opt2.load_state_dict(payload["optimizer"])
    assert torch.equal(
        opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"]
    )


# ---------------------------------------------------------------------- disk full
def enospc(*_, **__):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize(
    "point", ["disk_usage", "mkstemp", "first_write", "partial_write", "fsync", "replace"]
)
def test_disk_full_keeps_the_previous_checkpoint(tmp_path, monkeypatch, point):
    folder = tmp_path / "run"
    path, _ = save_tiny(folder / "checkpoint.pt", seed=0)
    before = path.read_bytes()
    size = len(save_tiny(tmp_path / "probe" / "checkpoint.pt", seed=1)[0].read_bytes())
    fds = []
    real_mkstemp, real_write = tempfile.mkstemp, os.write

    def recording_mkstemp(*a, **k):
        fd, name = real_mkstemp(*a, **k)
        fds.append(fd)
        return fd, name

    written = []

    def failing_write(fd, data):
        if fd not in fds:
            return real_write(fd, data)
        room = size // 2 - sum(written) if point == "partial_write" else 0
        if room <= 0:
            enospc()
        written.append(real_write(fd, data[:room]))  # about half lands on disk, then it is full
        return written[-1]

    monkeypatch.setattr(tempfile, "mkstemp", recording_mkstemp)
    if point == "disk_usage":
        full = SimpleNamespace(total=10**9, used=10**9 - 100, free=100)
        monkeypatch.setattr(shutil, "disk_usage", lambda folder: full)
    elif point == "mkstemp":
        monkeypatch.setattr(tempfile, "mkstemp", enospc)
    elif point in ("first_write", "partial_write"):
        monkeypatch.setattr(os, "write", failing_write)
    elif point == "fsync":
        monkeypatch.setattr(os, "fsync", lambda fd: enospc() if fd in fds else None)
    else:
        monkeypatch.setattr(os, "replace", enospc)
    with pytest.raises(OSError) as info:
        save_tiny(path, seed=1)
    monkeypatch.undo()
    message = str(info.value)
    assert info.value.errno == errno.ENOSPC and "\n" not in message
    assert f"no space to save checkpoint.pt in {folder}: needs {size} bytes" in message
    assert message.endswith("the previous checkpoint.pt is unchanged")
    assert path.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint.pt"]
    assert load_checkpoint(path, require=RESUME_KEYS)["epoch"] == 1
    if point in ("first_write", "partial_write", "fsync"):
        assert fds  # the failure happened while the temporary file existed
    assert (sum(written) >= size // 4) == (point == "partial_write")


@pytest.mark.parametrize("failure", ["eio_write", "eio_fsync", "interrupt_write"])
def test_other_failures_propagate_and_clean_up(tmp_path, monkeypatch, failure):
    path, _ = save_tiny(tmp_path / "checkpoint.pt")
    before = path.read_bytes()

    def eio(*_):
        raise OSError(errno.EIO, "Input/output error")

    def interrupt(*_):
        raise KeyboardInterrupt

    if failure == "eio_fsync":
        monkeypatch.setattr(os, "fsync", eio)
    else:  # inside torch's zip writer: the error itself comes out, not a RuntimeError
        monkeypatch.setattr(os, "write", eio if failure == "eio_write" else interrupt)
    with pytest.raises(KeyboardInterrupt if failure == "interrupt_write" else OSError) as info:
        save_tiny(path, seed=1)
    monkeypatch.undo()
    if failure != "interrupt_write":
        assert info.value.errno == errno.EIO
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


# ---------------------------------------------------------------------- temporary files
def test_clean_temp_files(tmp_path, monkeypatch):
    names = []
    real = tempfile.mkstemp

    def recording(*a, **k):
        fd, name = real(*a, **k)
        names.append(Path(name).name)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", recording)
    save_tiny(tmp_path / "best.pt")
    monkeypatch.undo()
    assert len(names) == 1 and names[0].startswith(".best.pt.") and names[0].endswith(".tmp")
    stale = [names[0], ".checkpoint.pt.a1b2_c3d.tmp", ".interrupted.pt.zzzzzzzz.tmp"]
    keep = ["checkpoint.pt", "notes.tmp", ".checkpoint.pt.abc.tmp", "checkpoint.pt.abcdefgh.tmp"]
    for n in stale + keep:
        (tmp_path / n).write_bytes(b"x")
    (tmp_path / ".dir.pt.abcdefgh.tmp").mkdir()  # a folder of that name is not ours
    fresh = tmp_path / ".young.pt.abcdefgh.tmp"
    fresh.write_bytes(b"x")
    old = time.time() - 3600
    for n in stale:
        os.utime(tmp_path / n, (old, old))
    assert clean_temp_files(tmp_path, min_age_s=60) == sorted(tmp_path / n for n in stale)
    assert fresh.exists()
    assert clean_temp_files(tmp_path) == [fresh]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([*keep, "best.pt", ".dir.pt.abcdefgh.tmp"])
    assert clean_temp_files(tmp_path / "missing") == []
    with pytest.raises(ValueError, match="folder .*best.pt' is not a directory"):
        clean_temp_files(tmp_path / "best.pt")


CHILD = r"""
import os, sys, time, torch
import tensorpose.train.checkpoint as ckpt
path = sys.argv[1]
ckpt.save_checkpoint(path, torch.nn.Linear(64, 64), {"good": 1})
real_write = os.write
def stalling_write(fd, data):  # half of the temporary file, then hang: the parent kills us
    if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
        real_write(fd, data[: len(data) // 2])
        print("writing", flush=True)
        time.sleep(60)
    return real_write(fd, data)
os.write = stalling_write
ckpt.save_checkpoint(path, torch.nn.Linear(64, 64), {"good": 2})
"""


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_sigkill_mid_write_leaves_a_temp_file_that_clean_temp_files_removes(tmp_path):
    path = tmp_path / "checkpoint.pt"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                            env=env, text=True)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "writing"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
        proc.stdout.close()
    assert load_checkpoint(path)["config"] == {"good": 1}  # the previous file, verified
    orphans = [p for p in tmp_path.iterdir() if p != path]
    assert len(orphans) == 1 and orphans[0].stat().st_size > 0
    assert clean_temp_files(tmp_path) == orphans
    assert list(tmp_path.iterdir()) == [path]


# ---------------------------------------------------------------------- entry validation
def mutate(payload: dict, key: str, value) -> dict:
    out = pickle.loads(pickle.dumps(payload))
    *parents, last = key
    target = out
    for p in parents:
        target = target[p]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return out


DELETE = object()
PG = r"entry 'optimizer'\['param_groups'\]\[0\]"
BAD_ENTRIES = [  # (path into the payload, new value, what the message names)
    (("model",), DELETE, "entry 'model' is missing"),
    (("config",), DELETE, "entry 'config' is missing"),
    (("rng",), DELETE, "entry 'rng' is missing"),
    (("optimizer",), DELETE, "entry 'optimizer' is missing"),
    (("epoch",), DELETE, "entry 'epoch' is missing"),
    (("model",), [1, 2], "entry 'model' must be a state dict"),
    (("model", "body.0.weight"), [1.0], r"entry 'model'\['body.0.weight'\] must be a tensor"),
    (("config",), ["task"], "entry 'config' must be a dict, got list"),
    (("config",), {1: "x"}, "entry 'config' must be a dict with string keys"),
    (("epoch",), "3", "entry 'epoch' must be an int >= 0, got str '3'"),
    (("epoch",), 3.0, "entry 'epoch' must be an int"),
    (("epoch",), True, "entry 'epoch' must be an int"),
    (("step",), -1, "entry 'step' must be an int >= 0, got int -1"),
    (("optimizer",), [], "entry 'optimizer' must be an optimizer state dict"),
    (("optimizer", "state"), [], r"entry 'optimizer'\['state'\] must be a dict"),
    (("optimizer", "param_groups", 0, "params"), "x", PG + r"\['params'\] must be a list of ints"),
    (("optimizer", "param_groups", 0, "lr"), DELETE, PG + " must be a parameter group with 'lr'"),
    (("scheduler",), {}, "entry 'scheduler' must be a scheduler state dict"),
    (("scaler",), "x", "entry 'scaler' must be a dict"),
    (("rng",), {"python": 1}, "entry 'rng' must be a dict with 'numpy'"),
    (("rng", "python"), [3, 1], r"entry 'rng'\['python'\] must be \[version, state, gauss\]"),
    (
        ("rng", "numpy", "key"),
        torch.zeros(3, dtype=torch.int64),
        r"entry 'rng'\['numpy'\]\['key'\] must be a torch.int64 tensor of shape \(624,\)",
    ),
    (("rng", "numpy", "pos"), 999, r"entry 'rng'\['numpy'\]\['pos'\] must be an int in \[0, 624\]"),
    (
        ("rng", "torch"),
        torch.zeros(10, dtype=torch.uint8),
        r"entry 'rng'\['torch'\] must be a uint8 tensor",
    ),
    (("rng", "cuda"), [torch.zeros(2)], r"entry 'rng'\['cuda'\] must be uint8 generator states"),
    (("history",), [1], r"entry 'history'\[0\] must be a dict"),
    (("best",), {"metric": "x"}, "entry 'best' must be a record with 'mode'"),
    (("best", "value"), "low", r"entry 'best'\['value'\] must be a number"),
    (("best", "mode"), "lowest", r"entry 'best'\['mode'\] must be 'min' or 'max'"),
    (("first_loss",), "x", "entry 'first_loss' must be a number or None"),
    (("checksum",), "abc", "entry 'checksum' must be a dict"),
    (("checksum",), DELETE, "the checksum entry is missing from a checksummed file: the file is"),
    (("checksummed",), 1, "entry 'checksummed' must be True, got int 1"),
    (("checksum", "model"), "abc", r"entry 'checksum'\['model'\] must be a SHA-256 hex digest"),
]


@pytest.mark.parametrize("keep_checksum", [False, True])
def test_bad_entries_name_the_file_and_the_entry(tmp_path, keep_checksum):
    path, _ = save_tiny(tmp_path / "ckpt.pt")
    pristine = torch.load(path, weights_only=True)
    if not keep_checksum:
        del pristine["checksum"], pristine["checksummed"]
    target = tmp_path / "bad.pt"
    for key, value, message in BAD_ENTRIES:
        if key[0].startswith("checksum") and not keep_checksum:
            continue
        torch.save(mutate(pristine, key, value), target)
        with pytest.raises(CheckpointError, match=rf"^{re.escape(str(target))}: {message}"):
            load_checkpoint(target, require=RESUME_KEYS)
    # What is required depends on the caller; present entries are checked regardless.
    torch.save(mutate(pristine, ("rng",), DELETE), target)
    if not keep_checksum:
        assert "rng" not in load_checkpoint(target)  # EVAL_KEYS by default
    with pytest.raises(CheckpointError, match="entry 'rng' is missing"):
        load_checkpoint(target, require=RESUME_KEYS)
    torch.save(mutate(pristine, ("config",), DELETE), target)
    with pytest.raises(CheckpointError, match="entry 'config' is missing"):
        load_checkpoint(target)
    assert EVAL_KEYS == ("model", "config")
    torch.save(mutate(pristine, ("epoch",), "x"), target)
    with pytest.raises(CheckpointError, match="entry 'epoch' must be an int"):
        load_checkpoint(target, require=("model",))
    with pytest.raises(TypeError, match="require must be a tuple"):
        load_checkpoint(path, require="model")


def test_save_refuses_what_could_not_be_loaded(tmp_path):
    model, state = tiny_state()
    cases = [  # (keyword changes, error type, message)
        ({"epoch": "3"}, TypeError, "save_checkpoint: entry 'epoch' must be an int >= 0"),
        ({"epoch": -1}, ValueError, "save_checkpoint: entry 'epoch' must be an int >= 0"),
        ({"best": {"metric": "loss"}}, TypeError, "entry 'best' must be a record with 'mode'"),
        ({"first_loss": np.float64(0.5)}, TypeError, "entry 'first_loss' must be a number"),
        ({"history": [{"loss": np.float32(1)}]}, TypeError,
         r"history\[0\]\['loss'\]: a numpy.float32 cannot be stored"),
        ({"checksum": {}}, TypeError, "'checksum' is written by save_checkpoint itself"),
        ({"checksummed": 0}, TypeError, "'checksummed' is written by save_checkpoint itself"),
        ({"format": 3}, TypeError, "'format' is written by save_checkpoint itself"),
    ]  # fmt: skip
    for change, kind, message in cases:
        with pytest.raises(kind, match=message):
            save_checkpoint(tmp_path / "c.pt", model, {"task": "tiny"}, **{**state, **change})
    with pytest.raises(TypeError, match=r"extra\['pose'\]: a numpy.ndarray cannot be stored"):
        save_checkpoint(tmp_path / "c.pt", model, {}, {"pose": np.zeros(3)})
    with pytest.raises(TypeError, match="entry 'config' must be a dict"):
        save_checkpoint(tmp_path / "c.pt", model, None)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_best_record_round_trips(tmp_path):
    path, _ = save_tiny(tmp_path / "best.pt")
    payload = load_checkpoint(path)
    assert payload["best"] == {"metric": "val_loss", "mode": "min", "value": 0.25, "epoch": 1}
    assert payload["best"]["epoch"] == payload["epoch"]  # this best.pt holds the best weights


# ---------------------------------------------------------------------- hostile files
class Armed:
    """Unpickled unsafely, creates the marker file."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran')",))


def test_a_pickle_that_runs_code_is_refused(tmp_path):
    marker = tmp_path / "MARKER"
    payload = {"format": 2, "model": {}, "config": {}, "extra": {"x": Armed(marker)}}
    files = {"zip.pt": tmp_path / "zip.pt", "legacy.pt": tmp_path / "legacy.pt"}
    torch.save(payload, files["zip.pt"])
    torch.save(payload, files["legacy.pt"], _use_new_zipfile_serialization=False)
    files["pickle.pt"] = tmp_path / "pickle.pt"
    files["pickle.pt"].write_bytes(pickle.dumps(payload, protocol=2))
    # The files are armed: unsafe loading runs the code.
    torch.load(files["zip.pt"], weights_only=False)
    assert marker.read_text() == "ran"
    marker.unlink()
    for name, f in files.items():
        with pytest.raises(CheckpointError, match=rf"{name}: not a readable .*refused") as info:
            load_checkpoint(f)
        assert "GLOBAL builtins.exec" in str(info.value) or "GLOBAL exec" in str(info.value)
        assert "allowlist" not in str(info.value)  # no advice to weaken the check
        assert not marker.exists()


def test_paths_that_are_not_files(tmp_path):
    (tmp_path / "dir.pt").mkdir()
    with pytest.raises(CheckpointError, match=r"dir\.pt: is a directory, not a checkpoint file"):
        load_checkpoint(tmp_path / "dir.pt")
    os.mkfifo(tmp_path / "fifo.pt")  # reading it would block forever
    with pytest.raises(CheckpointError, match=r"fifo\.pt: is not a regular file"):
        load_checkpoint(tmp_path / "fifo.pt")
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        load_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "empty.pt").touch()
    with pytest.raises(CheckpointError, match=r"empty\.pt: the file is empty, not a checkpoint"):
        load_checkpoint(tmp_path / "empty.pt")
