"""Validation of checkpoint entries: the type and value checks that
:func:`~tensorpose.train.checkpoint.load_checkpoint` runs on every entry it finds (types, RNG
state sizes, the ``best`` record), and the entries a caller requires."""

from __future__ import annotations

import random
import re
from typing import Any

import torch


class _Invalid(Exception):
    """A failed check: ``entry KEY MESSAGE`` (or just ``MESSAGE`` when ``key`` is None)."""

    def __init__(self, key: str | None, message: str, kind: type[Exception] = TypeError) -> None:
        super().__init__(message if key is None else f"entry {key} {message}")
        self.kind = kind


def _show(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return f"a tensor {v.dtype} {tuple(v.shape)}"
    text = repr(v)
    return f"{type(v).__name__} {text[:40] + '...' if len(text) > 40 else text}"


def _need(ok: bool, key: str, expected: str, value: Any, kind: type[Exception] = TypeError) -> None:
    if not ok:
        raise _Invalid(key, f"must be {expected}, got {_show(value)}", kind)


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_real(v: Any) -> bool:
    return type(v) in (int, float)


def _str_dict(key: str, v: Any) -> None:
    _need(isinstance(v, dict), key, "a dict", v)
    bad = [k for k in v if not isinstance(k, str)]
    _need(not bad, key, "a dict with string keys", bad[:1])


def _count(key: str, v: Any) -> None:
    _need(_is_int(v), key, "an int >= 0", v)
    _need(v >= 0, key, "an int >= 0", v, ValueError)


def _check_model(key: str, v: Any) -> None:
    _need(isinstance(v, dict), key, "a state dict {name: tensor}", v)
    for name, t in v.items():
        _need(isinstance(name, str), key, "a state dict with string names", name)
        _need(isinstance(t, torch.Tensor), f"{key}[{name!r}]", "a tensor", t)


def _check_optimizer(key: str, v: Any) -> None:
    _need(isinstance(v, dict), key, "an optimizer state dict", v)
    for part, kind in (("state", dict), ("param_groups", list)):
        _need(part in v, key, f"an optimizer state dict with {part!r}", sorted(map(str, v)))
        _need(isinstance(v[part], kind), f"{key}[{part!r}]", f"a {kind.__name__}", v[part])
    for i, per_param in v["state"].items():
        _need(_is_int(i), f"{key}['state']", "a dict with int keys", i)
        _str_dict(f"{key}['state'][{i}]", per_param)
    for i, group in enumerate(v["param_groups"]):
        where = f"{key}['param_groups'][{i}]"
        _str_dict(where, group)
        for part in ("params", "lr"):
            _need(part in group, where, f"a parameter group with {part!r}", sorted(group))
        params = group["params"]
        _need(isinstance(params, list) and all(_is_int(p) for p in params),
              f"{where}['params']", "a list of ints", params)  # fmt: skip
        lr = group["lr"]
        _need(_is_real(lr) or isinstance(lr, torch.Tensor), f"{where}['lr']", "a number", lr)


def _check_scheduler(key: str, v: Any) -> None:
    _str_dict(key, v)
    _need("last_epoch" in v, key, "a scheduler state dict with 'last_epoch'", sorted(v))
    _need(_is_int(v["last_epoch"]), f"{key}['last_epoch']", "an int", v["last_epoch"])
    lrs = v.get("base_lrs", [])
    _need(isinstance(lrs, list) and all(_is_real(x) for x in lrs),
          f"{key}['base_lrs']", "a list of numbers", lrs)  # fmt: skip


def _word_tensor(key: str, t: Any, n: int, dtype: torch.dtype, high: int) -> None:
    _need(isinstance(t, torch.Tensor) and t.dtype == dtype and t.shape == (n,),
          key, f"a {dtype} tensor of shape ({n},)", t)  # fmt: skip
    _need(
        bool(((t >= 0) & (t < high)).all()),
        key,
        f"a tensor of values in [0, {high})",
        t,
        ValueError,
    )


def _check_rng(key: str, v: Any) -> None:
    _str_dict(key, v)
    for part in ("python", "numpy", "torch", "cuda"):
        _need(part in v, key, f"a dict with {part!r}", sorted(v))
    py = v["python"]
    where = f"{key}['python']"
    _need(isinstance(py, (list, tuple)) and len(py) == 3, where, "[version, state, gauss]", py)
    version = random.Random.VERSION
    _need(_is_int(py[0]) and py[0] == version, f"{where}[0]", f"version {version}", py[0])
    _word_tensor(f"{where}[1]", py[1], 625, torch.int64, 2**32)
    _need(
        int(py[1][-1]) <= 624, f"{where}[1]", "a state whose position is <= 624", py[1], ValueError
    )
    _need(py[2] is None or _is_real(py[2]), f"{where}[2]", "a float or None", py[2])
    n = v["numpy"]
    where = f"{key}['numpy']"
    _str_dict(where, n)
    for part, test, expected in (
        ("bit_generator", lambda x: isinstance(x, str) and x == "MT19937", "'MT19937'"),
        ("pos", lambda x: _is_int(x) and 0 <= x <= 624, "an int in [0, 624]"),
        ("has_gauss", lambda x: _is_int(x) and x in (0, 1), "0 or 1"),
        ("gauss", _is_real, "a float"),
    ):
        _need(part in n, where, f"a dict with {part!r}", sorted(n))
        _need(test(n[part]), f"{where}[{part!r}]", expected, n[part])
    _need("key" in n, where, "a dict with 'key'", sorted(n))
    _word_tensor(f"{where}['key']", n["key"], 624, torch.int64, 2**32)
    cpu = torch.get_rng_state().numel()
    _need(isinstance(v["torch"], torch.Tensor) and v["torch"].dtype == torch.uint8
          and v["torch"].shape == (cpu,), f"{key}['torch']", f"a uint8 tensor of shape ({cpu},)",
          v["torch"])  # fmt: skip
    for part in ("cuda", "sampler"):
        states = v.get(part)
        if part == "sampler":
            if states is None:
                continue
            states = [states]
        _need(isinstance(states, (list, tuple)) and all(
            isinstance(t, torch.Tensor) and t.dtype == torch.uint8 and t.dim() == 1
            for t in states), f"{key}[{part!r}]", "uint8 generator states", v[part])  # fmt: skip


def _check_best(key: str, v: Any) -> None:
    _str_dict(key, v)
    if not v:
        return
    for part, test, expected in (
        ("metric", lambda x: isinstance(x, str), "a string"),
        ("mode", lambda x: isinstance(x, str) and x in ("min", "max"), "'min' or 'max'"),
        ("value", _is_real, "a number"),
        ("epoch", lambda x: _is_int(x) and x >= 0, "an int >= 0"),
    ):
        _need(part in v, key, f"a record with {part!r} (or empty)", sorted(v))
        _need(test(v[part]), f"{key}[{part!r}]", expected, v[part])


def _check_history(key: str, v: Any) -> None:
    _need(isinstance(v, list), key, "a list of per-epoch dicts", v)
    for i, row in enumerate(v):
        _str_dict(f"{key}[{i}]", row)


def _check_checksum(key: str, v: Any) -> None:
    _str_dict(key, v)
    algorithm = v.get("algorithm")
    _need(isinstance(algorithm, str) and algorithm == "sha256", f"{key}['algorithm']", "'sha256'",
          algorithm)  # fmt: skip
    for part in ("model", "state"):
        d = v.get(part)
        _need(isinstance(d, str) and re.fullmatch(r"[0-9a-f]{64}", d) is not None,
              f"{key}[{part!r}]", "a SHA-256 hex digest", d)  # fmt: skip


_CHECKS = {
    "model": _check_model,
    "config": _str_dict,
    "extra": _str_dict,
    "epoch": _count,
    "step": _count,
    "optimizer": _check_optimizer,
    "scheduler": _check_scheduler,
    "scaler": lambda k, v: v is None or _str_dict(k, v),
    "rng": _check_rng,
    "history": _check_history,
    "best": _check_best,
    "first_loss": lambda k, v: _need(v is None or _is_real(v), k, "a number or None", v),
    "checksum": _check_checksum,
    "checksummed": lambda k, v: _need(v is True, k, "True", v),
}


def _check_entries(payload: dict, require: tuple[str, ...]) -> None:
    missing = [k for k in require if k not in payload]
    if missing:
        raise _Invalid(
            repr(missing[0]), f"is missing (needed here: {', '.join(require)})", ValueError
        )
    for key, check in _CHECKS.items():
        if key in payload:
            check(repr(key), payload[key])
