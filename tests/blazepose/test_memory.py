"""tensorpose.blazepose.memory: freed blocks stay in the process and are reused without page
faults."""

import platform
import subprocess
import sys

import pytest

SCRIPT = r"""
import resource, torch
from tensorpose.blazepose.memory import keep_freed_memory

def faults_per_call(n=4, warm=8):
    for _ in range(warm):  # (the heap grows by a few blocks before they are reused)
        torch.empty(10 << 20).fill_(1.0)  # 40 MiB: glibc maps such a block anew each time
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        torch.empty(10 << 20).fill_(1.0)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / n

before = faults_per_call()
limit = keep_freed_memory()
after = faults_per_call()
print(before, limit, after, keep_freed_memory())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_keep_freed_memory_stops_the_page_faults_of_repeated_large_blocks():
    """Before: every 40 MiB tensor is a fresh mapping, each 4 KiB page faulted in (zeroed by
    the kernel) when first written; after: the freed block is reused, (almost) no fault."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         check=True)  # fmt: skip
    before, limit, after, again = (float(v) for v in out.stdout.split())
    assert before > 1000  # (40 MiB in 4 KiB pages: 10240, fewer with transparent huge pages)
    assert limit >= 32 << 20 and again == limit  # applied once
    assert after < before / 20


def test_only_the_predict_command_keeps_freed_memory(monkeypatch):
    """The allocator policy is the ``predict`` command's (BlazePose on a CPU), set before the
    networks load; ``BlazePose.load`` itself leaves the process's malloc alone
    (tests/test_errors.py)."""
    import tensorpose.apps.predict as app
    import tensorpose.blazepose.memory as memory
    from tensorpose.blazepose.pipeline import BlazePose

    calls = []
    monkeypatch.setattr(memory, "keep_freed_memory", lambda *a: calls.append("keep") or 0)
    load = classmethod(lambda cls, d, variant="full": calls.append("load"))
    monkeypatch.setattr(BlazePose, "load", load)
    monkeypatch.setattr(app, "predict", lambda *a, **k: "result")
    assert app.predict_command("x.jpg", None, model="blazepose", device="cpu")[0] == "result"
    assert calls == ["keep", "load"]
