"""The CPU thread policy of every command that computes (``train``, ``predict``, ``lift``,
``triangulate``, ``eval``, ``eval-wild``, ``smooth``, ``export``, ``demo``).

- **Waiting threads sleep.** :func:`prepare_environment` (run by the ``tensorpose`` command
  before it loads torch; importing the package changes no environment) sets
  ``OMP_WAIT_POLICY=PASSIVE`` unless the environment already sets it:
  torch's OpenMP threads that wait at the end of a parallel region yield their core instead of
  spinning on it. On a machine where another process competes for the cores, spinning threads
  hold a core the late thread needs, and every parallel region then waits for a time slice:
  measured: 10x slower training steps with one competing process (docs/threads.md). The wait
  policy changes no number: work is split among the threads exactly as before.
- **How many threads.** ``--threads N`` on every command that computes (``train`` and
  ``demo``: ``train.threads``); without it, :func:`default_threads`: half the CPUs this process
  may run on, at least one, so that a command leaves room for the rest of a shared machine
  (a browser, a call, another run). ``train.threads=0`` means the same default.
- **Same numbers.** CPU results depend on the thread count (reductions are split per thread),
  not on the load or the wait policy: the same config, seed and thread count give bit-identical
  runs. ``tensorpose demo`` pins ``train.threads=2`` so that its numbers are the same on every
  machine.

This module imports no torch at module level.
"""

from __future__ import annotations

import os

from .errors import InputError

__all__ = ["WAIT_POLICY", "available_cpus", "default_threads", "max_threads",
           "prepare_environment", "set_threads"]  # fmt: skip

WAIT_POLICY = "PASSIVE"
"""``OMP_WAIT_POLICY`` set before torch is imported, unless the environment sets one."""


def prepare_environment() -> None:
    """Set ``OMP_WAIT_POLICY`` (:data:`WAIT_POLICY`) unless it is set; it counts only when
    done before torch (and with it the OpenMP runtime) is loaded. :func:`tensorpose.cli.main`
    calls it before a command runs; importing tensorpose does not (it would change the whole
    process's environment), so a library user who wants the policy calls
    ``tensorpose.threads.prepare_environment()`` before importing torch."""
    os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_threads() -> int:
    """Half the available CPUs, at least one."""
    return max(1, available_cpus() // 2)


def max_threads() -> int:
    """The most threads a command takes: four per available CPU, at least 8. More only
    oversubscribe the cores (and tens of thousands exhaust the process's thread limit)."""
    return max(8, 4 * available_cpus())


def set_threads(threads: int | None, what: str = "--threads") -> int:
    """Give torch ``threads`` intra-op CPU threads (``None`` or 0: :func:`default_threads`);
    returns the count used. A negative count, or one above :func:`max_threads`, raises
    :class:`~tensorpose.errors.InputError` naming ``what``."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 0):  # fmt: skip
        raise InputError(f"{what} must be a non-negative integer, got {threads!r}")
    if threads is not None and threads > max_threads():
        raise InputError(f"{what} must be at most {max_threads()} (four per CPU this process "
                         f"may use: {available_cpus()}), got {threads}")  # fmt: skip
    n = threads or default_threads()
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
