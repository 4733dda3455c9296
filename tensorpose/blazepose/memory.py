"""The process's allocator policy for batched CPU inference: freed memory is kept for reuse.

glibc's ``malloc`` serves a request larger than ``M_MMAP_THRESHOLD`` (128 KiB at first, raised
as such blocks are freed, to at most 32 MiB) from a fresh ``mmap`` that it unmaps when the
block is freed, and hands the top of its heap back to the system once more than
``M_TRIM_THRESHOLD`` is free there. A network's activations are freed and requested again on
every call: their memory then goes back to the system and comes again, and the kernel zeroes
every 4 KiB page of it anew on first touch. BlazePose in image mode, 8 frames a batch on one
thread: 1,000-2,600 such page faults a frame (a batch of 8 landmark crops holds an 8 x 64 x 128
x 128 float32 activation, 33.5 MB). :func:`keep_freed_memory` raises both
thresholds so that freed blocks of up to 64 MiB stay in the heap and the next call reuses
them: image mode then faults some 200 pages a frame. The price is memory the process keeps
instead of returning it: up to 128 MiB free at the top of its heap, and, before freed blocks
are reused, a few more of the largest ones (glibc places each 64-byte-aligned block anew until
enough free space has gathered: 40 MiB tensors settle after five, some 200 MB).

It sets a process-wide allocator option, so nothing calls it on import or on loading a model:
only a program that runs such inference calls it explicitly (``tensorpose predict`` with
BlazePose on a CPU, :func:`tensorpose.apps.predict.predict_command`). Elsewhere than glibc
(macOS, musl) it does nothing. This module imports no torch.
"""

from __future__ import annotations

import ctypes
import platform

__all__ = ["KEEP_LIMIT", "keep_freed_memory"]

KEEP_LIMIT = 1 << 26
"""Blocks up to this size (64 MiB) come from the heap and stay there once freed; twice as much
free memory may stay at the heap's top."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
_applied: list[int] = []


def keep_freed_memory(limit: int = KEEP_LIMIT) -> int:
    """Keep freed blocks of up to ``limit`` bytes in the heap (glibc only, once per process).

    Returns the limit in force: ``limit``, or 32 MiB where glibc refuses more, or 0 where the C
    library is not glibc or refuses both.
    """
    if _applied:
        return _applied[0]
    done = 0
    if platform.libc_ver()[0] == "glibc":
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            mallopt = None
        if mallopt is not None:
            for value in (limit, min(limit, 32 << 20)):  # glibc before 2.35 takes <= 32 MiB
                if mallopt(_M_MMAP_THRESHOLD, value) == 1:
                    mallopt(_M_TRIM_THRESHOLD, 2 * value)
                    done = value
                    break
    _applied.append(done)
    return done
