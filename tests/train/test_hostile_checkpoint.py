"""Hostile checkpoints: a real checkpoint of a tiny model, a few hundred seeded malformed variants
(truncations, flipped bytes inside and outside the tensor data, zip members deleted or replaced,
wrong-typed or missing entries, files that are not checkpoints at all). Each one must either load
intact (a change that does not matter, e.g. in zip padding) or raise ``CheckpointError`` naming
the file: never another exception, never a hang, never a write. Seconds on 2 CPU cores."""

from __future__ import annotations

import io
import os
import pickle
import random
import re
import signal
import struct
import warnings
import zipfile
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tensorpose.train.checkpoint import (
    RESUME_KEYS,
    CheckpointError,
    load_checkpoint,
    load_weights,
    save_checkpoint,
)
from tensorpose.train.rng import rng_state, set_rng_state

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "SIGALRM") or not hasattr(os, "mkfifo"), reason="needs POSIX"
)
SEED = 1234
N_TRUNCATED, N_FLIPS = 40, 60  # truncations; flips inside and (as many) outside tensor data
TIME_LIMIT_S = 10  # per load: far above the ~10 ms a load takes, far below a hang


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def training_objects():
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.9**s)
    return model, opt, sched


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """``(file bytes, expected payload)``: the expected payload is built from the objects that
    were saved, not read back from the file."""
    model, opt, sched = training_objects()
    model.body(torch.randn(6, 4)).square().mean().backward()
    opt.step()
    sched.step()
    expected = {
        "format": 2,
        "model": {k: v.clone() for k, v in model.state_dict().items()},
        "config": {"task": "tiny", "model": {"channels": 8}, "train": {"lr": 0.01}},
        "extra": {"mean": torch.arange(3.0)},
        "epoch": 1,
        "step": 1,
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "scaler": None,
        "rng": rng_state(torch.Generator().manual_seed(5)),
        "history": [{"epoch": 1, "train_loss": 0.5, "val_loss": 0.25}],
        "best": {"metric": "val_loss", "mode": "min", "value": 0.25, "epoch": 1},
        "first_loss": 0.75,
    }
    keywords = {
        k: v for k, v in expected.items() if k not in ("format", "model", "config", "extra")
    }
    folder = tmp_path_factory.mktemp("original")
    path = save_checkpoint(
        folder / "checkpoint.pt", model, expected["config"], expected["extra"], **keywords
    )
    return path.read_bytes(), expected


def same(a, b) -> bool:
    """Deep equality: types, dict key order, tensor dtypes and exact values."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        )
    if isinstance(a, dict):
        return type(b) is type(a) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(b) is type(a) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


def intact(loaded: dict, expected: dict) -> bool:
    """Every saved entry read back unchanged, with the checksums that were verified."""
    return (
        set(loaded) == {*expected, "checksummed", "checksum"}
        and all(same(loaded[k], v) for k, v in expected.items())
        and loaded["checksummed"] is True
        and set(loaded["checksum"]) == {"algorithm", "model", "state"}
    )


def resume_like_the_trainer(payload: dict) -> None:
    """What a resume does with a loaded payload; must not raise for anything that loaded."""
    model, opt, sched = training_objects()
    load_weights(model, payload["model"])
    opt.load_state_dict(payload["optimizer"])
    sched.load_state_dict(payload["scheduler"])
    start_epoch, step = payload["epoch"], payload["step"]
    assert start_epoch + 1 > start_epoch and step >= 0
    history, best = list(payload.get("history", [])), dict(payload.get("best", {}))
    assert all(isinstance(row, dict) for row in history)
    if best:
        assert (0.1 < best["value"]) in (True, False) and best["mode"] in ("min", "max")
    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()  # noqa: NPY002
    try:
        set_rng_state(payload["rng"], torch.Generator())
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])  # noqa: NPY002
        torch.set_rng_state(saved[2])


# ---------------------------------------------------------------------- variants
def storage_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges of the tensor storages (``archive/data/N``, stored uncompressed)."""
    spans = []
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            if re.search(r"/data/\d+$", info.filename):
                name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
                start = info.header_offset + 30 + name_len + extra_len
                spans.append((start, start + info.file_size))
    return spans


def rezip(data: bytes, changes: dict[str, bytes | None]) -> bytes:
    """The zip rebuilt member by member, with ``changes`` (new content, or None to drop)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            new = changes.get(info.filename, src.read(info))
            if new is not None:
                dst.writestr(info.filename, new)
    return out.getvalue()


class Drop:
    def __repr__(self) -> str:
        return "DROP"


DROP = Drop()
WRONG = [None, "x", 1, -1, 1.5, True, [], {}, [1], {"a": 1}, torch.zeros(2)]


def nested_changes(expected: dict) -> list[tuple[tuple, object]]:
    first = next(iter(expected["model"]))
    return [
        (("model", first), "x"),
        (("model", first), torch.zeros(1)),  # a tensor, wrong shape
        (("optimizer", "state"), []),
        (("optimizer", "param_groups"), {}),
        (("optimizer", "param_groups", 0), "x"),
        (("optimizer", "param_groups", 0, "params"), ["a"]),
        (("optimizer", "param_groups", 0, "lr"), DROP),
        (("scheduler", "last_epoch"), "x"),
        (("scheduler", "base_lrs"), ["x"]),
        (("rng", "python"), [3]),
        (("rng", "python", 1), torch.zeros(5, dtype=torch.int64)),
        (("rng", "python", 0), 2),
        (("rng", "numpy"), DROP),
        (("rng", "numpy", "key"), torch.full((624,), -1, dtype=torch.int64)),
        (("rng", "numpy", "has_gauss"), 7),
        (("rng", "torch"), torch.zeros(5056)),
        (("rng", "cuda"), "x"),
        (("rng", "sampler"), [1]),
        (("history", 0), 5),
        (("best", "metric"), 3),
        (("best", "epoch"), -2),
        (("best", "value"), None),
        (("checksum", "algorithm"), "md5"),
        (("checksum", "state"), "0" * 64),
        (("checksummed",), 1),
    ]


def entry_variants(expected: dict, data: bytes, rnd: random.Random):
    """Payloads with one entry missing or of the wrong type, with the checksum kept (as a
    damaged file would have) or removed (a file written without one)."""
    saved = torch.load(io.BytesIO(data), weights_only=True)
    changes = [((key,), DROP) for key in saved]
    changes += [((key,), value) for key in saved for value in rnd.sample(WRONG, 2)]
    changes += nested_changes(expected)
    for path, value in changes:
        for keep_checksum in (True, False):
            payload = pickle.loads(pickle.dumps(saved))
            target = payload
            for p in path[:-1]:
                target = target[p]
            if value is DROP:
                del target[path[-1]]
            else:
                target[path[-1]] = value
            if not keep_checksum:
                payload.pop("checksum", None)
                payload.pop("checksummed", None)
            buffer = io.BytesIO()
            torch.save(payload, buffer)
            yield "entry", f"{path}={value!r:.20} checksum={keep_checksum}", buffer.getvalue()


def variants(data: bytes, expected: dict):
    """``(category, description, bytes or a builder of a special path)``, seeded."""
    rnd = random.Random(SEED)
    n = len(data)
    for at in sorted(rnd.sample(range(1, n), N_TRUNCATED)):
        yield "truncated", f"at {at}", data[:at]
    spans = storage_spans(data)
    inside = [i for a, b in spans for i in range(a, b)]
    covered = set(inside)
    outside = [i for i in range(n) if i not in covered]
    for kind, offsets in (("flip in tensor data", inside), ("flip outside tensor data", outside)):
        for at in rnd.sample(offsets, N_FLIPS):
            bad = bytearray(data)
            bad[at] ^= rnd.randrange(1, 256)
            yield kind, f"byte {at}", bytes(bad)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = z.namelist()
    yield "zip members", "rebuilt unchanged", rezip(data, {})
    for victim in names:
        yield "zip members", f"without {victim}", rezip(data, {victim: None})
        yield "zip members", f"{victim} replaced by noise", rezip(data, {victim: rnd.randbytes(64)})
    for victim in rnd.sample(names, 8):
        yield "zip members", f"{victim} emptied", rezip(data, {victim: b""})
    pickled, other = names[0], names[len(names) // 2]
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        yield "zip members", f"{pickled} replaced by {other}", rezip(data, {pickled: z.read(other)})
    yield from entry_variants(expected, data, rnd)
    legacy = io.BytesIO()
    torch.save(torch.load(io.BytesIO(data), weights_only=True), legacy,
               _use_new_zipfile_serialization=False)  # fmt: skip
    yield "not a checkpoint", "legacy (non-zip) torch format, intact", legacy.getvalue()
    yield "not a checkpoint", "legacy torch format, truncated", legacy.getvalue()[:5000]
    yield "not a checkpoint", "empty file", b""
    yield "not a checkpoint", "random bytes", rnd.randbytes(4096)
    yield "not a checkpoint", "text", b"epoch: 3\nmodel: resnet\n"
    yield "not a checkpoint", "json", b'{"format": 2, "model": {}}'
    yield "not a checkpoint", "a zip of something else", rezip(data, dict.fromkeys(names[1:]))
    yield "not a checkpoint", "plain pickle of a list", pickle.dumps([1, 2, 3])
    yield "not a checkpoint", "a directory", lambda p: p.mkdir()
    yield "not a checkpoint", "a fifo (reading would block)", lambda p: os.mkfifo(p)
    yield "not a checkpoint", "a symlink to a directory", lambda p: p.symlink_to(p.parent)


# ---------------------------------------------------------------------- the run
@contextmanager
def time_limit(seconds: int):
    def fire(*_):
        raise TimeoutError(f"load took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def snapshot(folder: Path) -> dict:
    return {p.name: (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_hostile_checkpoints_load_intact_or_fail_clearly(tmp_path, original):
    data, expected = original
    outcomes: Counter = Counter()
    failures: list[str] = []
    total = 0
    for i, (category, what, content) in enumerate(variants(data, expected)):
        total += 1
        folder = tmp_path / f"v{i}"
        folder.mkdir()
        path = folder / "checkpoint.pt"
        if callable(content):
            content(path)
        else:
            path.write_bytes(content)
        before = snapshot(folder)
        outcome = None
        try:
            with time_limit(TIME_LIMIT_S), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's notes on odd pickle protocols
                payload = load_checkpoint(path, require=RESUME_KEYS)
        except CheckpointError as e:
            message = str(e)
            if not message.startswith(f"{path}: ") or "\n" in message:
                failures.append(f"{category}, {what}: message {message!r}")
            elif category == "entry" and "checksum=False" in what:
                # without a checksum the validation itself must name the entry
                outcome = "CheckpointError (entry named)"
                key = what[2 : what.index("'", 2)]
                if key != "format" and f"entry '{key}'" not in message:
                    failures.append(f"{category}, {what}: entry not named in {message!r}")
            else:
                outcome = "CheckpointError"
        except Exception as e:
            failures.append(f"{category}, {what}: {type(e).__name__}: {e}")
        else:
            if category == "entry":
                try:  # unverified but well-formed: a resume uses it or says it does not fit
                    resume_like_the_trainer(payload)
                    outcome = "loaded, usable"
                except ValueError as e:  # CheckpointError from load_weights, torch's group check
                    outcome = "loaded, does not fit the model"
                    if "\n" in str(e):
                        failures.append(f"{category}, {what}: unclear error {e!r}")
                except Exception as e:
                    failures.append(f"{category}, {what}: loaded but resume fails: {e!r}")
            elif intact(payload, expected):
                outcome = "loaded intact"
            else:
                failures.append(f"{category}, {what}: loaded with different content")
        if snapshot(folder) != before:
            failures.append(f"{category}, {what}: the folder changed")
        if outcome:
            outcomes[category, outcome] += 1
    print(f"\n{total} hostile checkpoint variants (seed {SEED}):")
    for (category, outcome), count in sorted(outcomes.items()):
        print(f"  {category:26s} {outcome:30s} {count:4d}")
    assert not failures, f"{len(failures)} of {total} variants:\n" + "\n".join(failures[:20])
    assert total >= 300
    # every flip inside the tensor data is caught (the checksums), none loads
    assert outcomes["flip in tensor data", "CheckpointError"] == N_FLIPS
    # the pristine file and a zip rebuilt around the same members load intact
    assert outcomes["zip members", "loaded intact"] >= 1


def test_the_original_loads_intact(tmp_path, original):
    data, expected = original
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(data)
    payload = load_checkpoint(path, require=RESUME_KEYS)
    assert intact(payload, expected)
    resume_like_the_trainer(payload)
