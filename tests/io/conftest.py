"""Shared pieces of the hostile-input tests (tests/io/test_hostile_*.py): seeded mutations of
text files and a runner that checks each reader call's outcome."""

from __future__ import annotations

import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

HOSTILE_NUMBERS = [
    "nan", "NaN", "inf", "-inf", "Infinity", "1e308", "-1e308", "1e999", "1e-320", "0", "-0",
    "-1", "-12345.5", "3.5", "1e12", "9" * 400, "0x1F", "1_000", "", "--1", "1e", ".",
]  # fmt: skip
"""Replacements for a number token: non-finite, huge, tiny, negative, non-integral, junk."""

JUNK = [b"\x00", b"\xff\xfe", b"\xc3", b"\r", b"\x85", b"{", b"}", b"[", b"]", b'"', b",", b"\\"]


def mutate_bytes(rng: np.random.Generator, data: bytes) -> tuple[str, bytes]:
    """One generic corruption of a file's bytes: ``(label, new bytes)``."""
    kind = rng.integers(7)
    lines = data.split(b"\n")
    if kind == 0:  # truncate
        cut = int(rng.integers(0, len(data) + 1))
        return f"truncate at byte {cut}", data[:cut]
    if kind == 1:  # flip bytes
        out = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(len(out)))
            out[i] ^= int(rng.integers(1, 256))
        return "flip bytes", bytes(out)
    if kind == 2:  # delete a line
        i = int(rng.integers(len(lines)))
        return f"delete line {i + 1}", b"\n".join(lines[:i] + lines[i + 1 :])
    if kind == 3:  # duplicate a line
        i = int(rng.integers(len(lines)))
        return f"duplicate line {i + 1}", b"\n".join(lines[: i + 1] + lines[i:])
    if kind == 4:  # swap two lines
        i, j = (int(v) for v in rng.integers(len(lines), size=2))
        lines[i], lines[j] = lines[j], lines[i]
        return f"swap lines {i + 1} and {j + 1}", b"\n".join(lines)
    if kind == 5:  # insert junk bytes
        i = int(rng.integers(len(data) + 1))
        junk = JUNK[int(rng.integers(len(JUNK)))]
        return f"insert {junk!r} at {i}", data[:i] + junk + data[i:]
    # replace a number token by a hostile one
    text = data.decode("utf-8")
    toks = text.replace("\n", " \n ").split(" ")
    nums = [k for k, t in enumerate(toks) if _is_number(t.strip(",[]{}:"))]
    k = nums[int(rng.integers(len(nums)))]
    new = HOSTILE_NUMBERS[int(rng.integers(len(HOSTILE_NUMBERS)))]
    old = toks[k].strip(",[]{}:")
    toks[k] = toks[k].replace(old, new, 1)
    return f"number {old!r} -> {new!r}", " ".join(toks).replace(" \n ", "\n").encode()


def _is_number(t: str) -> bool:
    try:
        float(t)
    except ValueError:
        return False
    return True


def _snapshot(root: Path) -> dict:
    """Every path under ``root`` with its size and modification time."""
    return {
        p: (p.is_dir(), p.stat().st_size if p.is_file() else 0, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


class HostileRunner:
    """Runs reader calls on hostile inputs; each must load (and pass ``check``) or raise
    ``error`` with a message naming the input. Counts outcomes; collects failures."""

    def __init__(self, reader: str, error: type[Exception], max_seconds: float = 10.0) -> None:
        self.reader, self.error, self.max_seconds = reader, error, max_seconds
        self.counts: Counter = Counter()
        self.failures: list[str] = []

    def __call__(
        self,
        label: str,
        root: Path,
        call: Callable[[], object],
        name: str,
        check: Callable[[object], None] = lambda r: None,
        expect: str | None = None,
    ) -> str:
        """Run ``call()`` with the files under ``root`` as input; ``name`` must appear in an
        error's message; ``expect`` (``"error"`` or ``"accepted"``) when the outcome is known.
        Returns the outcome: ``"error"``, ``"accepted"`` or ``"FAILED"``."""
        before = _snapshot(root)
        t0 = time.perf_counter()
        outcome = "FAILED"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # readers summarise bad records
            warnings.simplefilter("error", RuntimeWarning)  # numeric trouble is a failure
            try:
                result = call()
            except self.error as e:
                if name in str(e):
                    outcome = "error"
                else:
                    self.failures.append(f"{label}: message does not name {name!r}: {e}")
            except Exception as e:
                self.failures.append(f"{label}: {type(e).__name__}: {str(e)[:300]}")
            else:
                try:
                    check(result)
                    outcome = "accepted"
                except Exception as e:
                    self.failures.append(f"{label}: accepted but wrong: {e!r}"[:400])
        elapsed = time.perf_counter() - t0
        if elapsed > self.max_seconds:
            self.failures.append(f"{label}: took {elapsed:.1f} s")
        if _snapshot(root) != before:
            self.failures.append(f"{label}: the reader changed files under {root}")
        if expect is not None and outcome != expect and outcome != "FAILED":
            self.failures.append(f"{label}: expected {expect}, got {outcome}")
        self.counts[outcome] += 1
        return outcome

    def finish(self, min_errors: int = 1, min_accepted: int = 1) -> None:
        """Print the counts and fail with the first failures, if any."""
        n = sum(self.counts.values())
        print(
            f"\nhostile {self.reader}: {n} cases: {self.counts['error']} clear errors, "
            f"{self.counts['accepted']} accepted, {self.counts['FAILED']} failed"
        )
        assert not self.failures, f"{len(self.failures)} failures:\n" + "\n".join(
            self.failures[:15]
        )
        # the generator must exercise both outcomes, or it tests nothing
        assert self.counts["error"] >= min_errors and self.counts["accepted"] >= min_accepted


class Hostile:
    """What the hostile tests share: ``runner(reader, error_type)``, ``mutate(rng, bytes)``,
    ``numbers`` (hostile number tokens)."""

    runner = HostileRunner
    mutate = staticmethod(mutate_bytes)
    numbers = HOSTILE_NUMBERS


@pytest.fixture
def hostile() -> type[Hostile]:
    return Hostile
