"""tensorpose.io.atomic against independent evidence: bytes on disk, os.stat, symlink targets,
and a SIGKILL at every write step of a commit (a child process that kills itself)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tensorpose.io import atomic
from tensorpose.io.atomic import (
    LOCK_NAME,
    FolderInUseError,
    FolderLock,
    OutputFolder,
    check_outside_inputs,
    recover_staging,
)

ATOMIC_PY = Path(atomic.__file__)
NAMES = ["a.npz", "b.trc", "drawn", "gone.json", "fresh.json"]
OLD = {
    "a.npz": b"old a" * 100,
    "b.trc": b"old b",
    "drawn/000.png": b"old frame 0",
    "drawn/001.png": b"old frame 1",
    "gone.json": b'{"old": true}',
}
NEW = {
    "a.npz": b"new a" * 300,
    "b.trc": b"new b\n",
    "drawn/000.png": b"new frame 0",
    "drawn/001.png": b"new frame 1",
    "drawn/002.png": b"new frame 2",
    "fresh.json": b'{"new": true}',
}
KEEP = {"keep.txt": b"not an output", "notes/n.txt": b"the user's notes"}


def quiet(_msg: str) -> None:
    pass


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), lock file excluded; a symlink or a
    non-file entry is reported by a marker, so it can never pass for a file."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if rel == LOCK_NAME:
            continue
        if p.is_symlink():
            out[rel] = b"<symlink " + os.readlink(p).encode() + b">"
        elif p.is_file():
            out[rel] = p.read_bytes()
        elif not p.is_dir():
            out[rel] = b"<special>"
    return out


def staging_left(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if p.name.startswith(".tensorpose-")]


# ---------------------------------------------------------------- inputs vs outputs


@pytest.mark.parametrize(
    "case", ["same", "out inside input", "out contains input", "dotdot", "symlink", "root"]
)
def test_an_output_may_not_be_contain_or_lie_inside_an_input(tmp_path, case):
    data = tmp_path / "data"
    write_tree(data, {"clip/x.json": b"input", "y.json": b"input y"})
    (tmp_path / "link").symlink_to(data / "clip")
    out, inp = {
        "same": (data / "clip", data / "clip"),
        "out inside input": (data / "clip" / "out", data / "clip"),
        "out contains input": (data, data / "clip" / "x.json"),
        "dotdot": (tmp_path / "elsewhere" / ".." / "data" / "clip" / "sub", data / "clip"),
        "symlink": (data / "clip" / "out", tmp_path / "link"),  # inside, via a link
        "root": (Path("/"), data / "y.json"),
    }[case]
    before = tree(tmp_path)
    with pytest.raises(ValueError, match="--out .* the input"):
        OutputFolder(out, ["a.npz"], inputs=[None, inp], overwrite=True, say=quiet)
    with pytest.raises(ValueError, match="--video-out"):
        check_outside_inputs(out, [inp], flag="--video-out")
    assert tree(tmp_path) == before  # nothing created, nothing removed
    assert not (tmp_path / "elsewhere").exists()
    # a sibling folder is fine
    check_outside_inputs(tmp_path / "out", [data / "clip", data / "y.json"])


def test_the_output_folder_may_not_be_a_file(tmp_path):
    f = tmp_path / "out"
    f.write_bytes(b"a file")
    with pytest.raises(ValueError, match="not a folder"):
        OutputFolder(f, ["a.npz"], overwrite=True, say=quiet)
    assert f.read_bytes() == b"a file"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "/abs", LOCK_NAME, ".tensorpose-x"])
def test_an_output_name_is_one_plain_name(tmp_path, name):
    with pytest.raises(ValueError, match="output name"):
        OutputFolder(tmp_path / "out", [name], overwrite=True, say=quiet)
    assert not (tmp_path / "out").exists()


def test_a_failed_command_leaves_no_new_folder(tmp_path):
    """Nothing written on error: the output folder the command made goes again; a folder
    that was there stays."""
    for out in (tmp_path / "new", tmp_path):
        with pytest.raises(RuntimeError), OutputFolder(out, ["a.npz"], say=quiet) as o:
            o.path("a.npz").write_bytes(b"half")
            raise RuntimeError("the input was bad")
        assert not (out / "a.npz").exists()
    assert not (tmp_path / "new").exists() and tmp_path.is_dir()


# ---------------------------------------------------------------- overwrite


def test_overwrite_replaces_exactly_the_named_outputs(tmp_path):
    out = tmp_path / "out"
    write_tree(out, OLD | KEEP)
    keep_stat = {rel: os.stat(out / rel) for rel in KEEP}
    with OutputFolder(out, NAMES, overwrite=True, say=quiet) as o:
        staged = o.path("a.npz").parent
        write_tree(staged, NEW)
        assert tree(out) == OLD | KEEP | {  # nothing visible before the commit
            f"{staged.name}/{rel}": data for rel, data in NEW.items()
        }
        committed = o.commit()
    assert tree(out) == NEW | KEEP  # drawn/ swapped whole, gone.json removed
    assert committed == [out / n for n in NAMES if n != "gone.json"]
    for rel, st in keep_stat.items():  # untouched: same inode, same mtime
        now = os.stat(out / rel)
        assert (now.st_ino, now.st_mtime_ns, now.st_size) == (st.st_ino, st.st_mtime_ns, st.st_size)
    assert staging_left(out) == [] and not (out / LOCK_NAME).exists()


@pytest.mark.parametrize("planted", ["file", "folder", "dangling symlink"])
def test_without_overwrite_an_existing_output_is_refused_before_anything(tmp_path, planted):
    out = tmp_path / "out"
    write_tree(out, KEEP)
    if planted == "file":
        (out / "b.trc").write_bytes(b"mine")
    elif planted == "folder":
        write_tree(out, {"drawn/x.png": b"mine"})
    else:
        (out / "b.trc").symlink_to(tmp_path / "nowhere")
    before = tree(out)
    mtime = os.stat(out).st_mtime_ns
    with pytest.raises(ValueError, match="exists: pass --overwrite"):
        OutputFolder(out, NAMES, overwrite=False, say=quiet)
    assert tree(out) == before and os.stat(out).st_mtime_ns == mtime
    assert not (tmp_path / "nowhere").exists()


def test_a_fresh_folder_without_overwrite(tmp_path):
    out = tmp_path / "new" / "out"
    with OutputFolder(out, NAMES, overwrite=False, say=quiet) as o:
        write_tree(o.path("a.npz").parent, {"a.npz": b"A", "drawn/0.png": b"P"})
        o.commit()
    assert tree(out) == {"a.npz": b"A", "drawn/0.png": b"P"}


def test_leaving_without_commit_keeps_the_old_outputs(tmp_path):
    out = tmp_path / "out"
    write_tree(out, OLD | KEEP)
    with pytest.raises(RuntimeError, match="boom"):
        with OutputFolder(out, NAMES, overwrite=True, say=quiet) as o:
            write_tree(o.path("a.npz").parent, NEW)
            raise RuntimeError("boom")
    assert tree(out) == OLD | KEEP
    assert staging_left(out) == [] and not (out / LOCK_NAME).exists()


# ---------------------------------------------------------------- symlinks at output names


def test_a_symlink_at_an_output_name_is_replaced_not_followed(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim"
    write_tree(victim, {"secret.txt": b"do not touch", "dir/inner.png": b"inner"})
    out.mkdir()
    (out / "a.npz").symlink_to(victim / "secret.txt")
    (out / "drawn").symlink_to(victim / "dir")  # a symlink to a folder, at a folder output
    (out / "gone.json").symlink_to(victim / "secret.txt")  # at an output not written
    with OutputFolder(out, NAMES, overwrite=True, say=quiet) as o:
        write_tree(o.path("a.npz").parent, NEW)
        o.commit()
    assert tree(victim) == {"secret.txt": b"do not touch", "dir/inner.png": b"inner"}
    assert tree(out) == NEW
    assert not (out / "a.npz").is_symlink() and not (out / "drawn").is_symlink()


# ---------------------------------------------------------------- locks


HOLDER = r"""
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec); spec.loader.exec_module(atomic)
lock = atomic.FolderLock(sys.argv[2]).acquire()
print("held", flush=True)
time.sleep(30)
"""


def test_a_second_command_gets_a_one_line_error_naming_the_folder(tmp_path):
    out = tmp_path / "out"
    write_tree(out, OLD)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(ATOMIC_PY), str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderInUseError) as e:
            with OutputFolder(out, NAMES, overwrite=True, say=quiet):
                pytest.fail("entered a folder another process holds")
        msg = str(e.value)
        assert "\n" not in msg and str(out) in msg and f"process {holder.pid}" in msg
        assert tree(out) == OLD and staging_left(out) == []
        assert (out / LOCK_NAME).read_text().split()[0] == str(holder.pid)  # not taken
    finally:
        holder.kill()
        holder.wait()
    # the holder is dead now (SIGKILL: its lock stays): the lock is taken over
    said = []
    with OutputFolder(out, NAMES, overwrite=True, say=said.append) as o:
        assert (out / LOCK_NAME).read_text().split()[0] == str(os.getpid())
        write_tree(o.path("a.npz").parent, NEW)
        o.commit()
    assert tree(out) == NEW and not (out / LOCK_NAME).exists()
    assert any(f"stale lock of process {holder.pid}" in m for m in said)


def test_a_lock_on_another_host_is_not_taken(tmp_path):
    (tmp_path / LOCK_NAME).write_text(f"1 not-{socket.gethostname()}\n")
    with pytest.raises(FolderInUseError, match="on not-"):
        FolderLock(tmp_path, say=quiet).acquire()
    assert (tmp_path / LOCK_NAME).read_text().startswith("1 not-")


def test_two_takers_of_one_stale_lock_never_both_hold_it(tmp_path, monkeypatch):
    """B reads a dead process's lock; before B acts, A takes it over: B must not hold it too."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_NAME).write_text(f"{dead.pid} {socket.gethostname()}\n")
    a, b = FolderLock(tmp_path, say=quiet), FolderLock(tmp_path, say=quiet)
    alive, raced = atomic._alive, []

    def racing_alive(pid: int) -> bool:
        if not raced:  # B has read the stale lock: A comes in now
            raced.append(True)
            try:
                a.acquire()
            except FolderInUseError:
                pass
        return alive(pid)

    monkeypatch.setattr(atomic, "_alive", racing_alive)
    try:
        b.acquire()
    except FolderInUseError:
        pass
    assert raced and [a.held, b.held].count(True) == 1
    holder = a if a.held else b
    assert (tmp_path / LOCK_NAME).read_text().split()[0] == str(os.getpid())
    holder.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_symlink_at_the_lock_name_is_not_followed(tmp_path):
    target = tmp_path / "target.txt"
    target.write_bytes(b"precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).symlink_to(target)
    lock = FolderLock(out, say=quiet).acquire()
    assert target.read_bytes() == b"precious" and not (out / LOCK_NAME).is_symlink()
    lock.release()
    assert target.read_bytes() == b"precious"


# ---------------------------------------------------------------- SIGKILL at every step

CHILD = r"""
import importlib.util, json, os, signal, sys
spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec); spec.loader.exec_module(atomic)
out, k, names, new = sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
steps = [0]

def step(f):
    def g(*a, **kw):
        steps[0] += 1
        if steps[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
        return f(*a, **kw)
    return g

def patch():
    for name in ("replace", "rename", "unlink", "rmdir", "link"):  # every change of a name
        setattr(os, name, step(getattr(os, name)))

if sys.argv[6] == "enter":  # count the recovery at the start too
    patch()
with atomic.OutputFolder(out, names, overwrite=True, say=lambda m: None) as o:
    for rel, text in new.items():
        p = o.staging / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode("latin-1"))
    if sys.argv[6] == "commit":
        patch()
    o.commit()
print("done", steps[0], flush=True)
"""


def run_child(
    out: Path, k: int, names=NAMES, new=NEW, count_from: str = "commit"
) -> subprocess.CompletedProcess:
    """Commit ``new`` into ``out`` in a child process that SIGKILLs itself at its ``k``-th
    rename/unlink/rmdir/link, counted from the commit or from entering the OutputFolder."""
    new = {r: d.decode("latin-1") for r, d in new.items()}
    args = [json.dumps(names), json.dumps(new), count_from]
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(ATOMIC_PY), str(out), str(k), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_sigkill_at_every_step_of_a_commit_leaves_old_or_new_never_a_mix(tmp_path):
    outcomes = []
    for k in range(1, 100):
        out = tmp_path / f"k{k}"
        write_tree(out, OLD | KEEP)
        proc = run_child(out, k)
        if proc.returncode == 0:
            assert proc.stdout.startswith("done") and tree(out) == NEW | KEEP
            assert staging_left(out) == []
            break
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        seen = tree(out)
        visible = {r: d for r, d in seen.items() if not r.startswith(".tensorpose-")}
        if visible not in (OLD | KEEP, NEW | KEEP):
            # a mix is visible only while a staging folder with a complete journal remains
            # (rolled forward at the next start); recover_staging is checked below
            assert staging_left(out), f"kill at step {k}: a mix and nothing to roll forward"
        # the next start: recovery (under the lock, as OutputFolder does)
        lock = FolderLock(out, say=quiet).acquire()
        recover_staging(out)
        lock.release()
        after = tree(out)
        assert after in (OLD | KEEP, NEW | KEEP), f"kill at step {k}: {sorted(after)}"
        assert staging_left(out) == []
        outcomes.append("new" if after == NEW | KEEP else "old")
        # and the next command works normally from there
        with OutputFolder(out, NAMES, overwrite=True, say=quiet) as o:
            write_tree(o.staging, {"b.trc": b"third"})
            o.commit()
        assert tree(out) == {"b.trc": b"third"} | KEEP
    else:
        pytest.fail("the commit never completed")
    # the harness reached both sides of the commit point, and every step in between
    assert outcomes[0] == "old" and outcomes[-1] == "new" and len(outcomes) >= 8
    assert outcomes == sorted(outcomes, key=lambda s: s == "new")  # old ... old new ... new


def test_a_sigkill_during_recovery_is_recovered_too(tmp_path):
    """Kill the commit after its journal and first move, then kill the roll-forward at every
    step: each following start still ends with exactly the new outputs."""
    recovered_first = []
    for j in range(1, 60):
        out = tmp_path / f"j{j}"
        write_tree(out, OLD | KEEP)
        assert run_child(out, 3).returncode == -signal.SIGKILL  # journal in, one output moved
        assert staging_left(out)
        # the next command recovers on entering, then commits a.npz = b"x"
        proc = run_child(out, j, names=["a.npz"], new={"a.npz": b"x"}, count_from="enter")
        if proc.returncode == 0:
            assert tree(out) == NEW | KEEP | {"a.npz": b"x"}
            break
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        lock = FolderLock(out, say=quiet).acquire()
        recover_staging(out)
        lock.release()
        after = tree(out)
        assert after in (NEW | KEEP, NEW | KEEP | {"a.npz": b"x"}), f"kill at step {j}"
        assert staging_left(out) == []
        recovered_first.append(after == NEW | KEEP)
    else:
        pytest.fail("recovery never completed")
    assert sum(recovered_first) >= 4  # kills inside the roll-forward itself were exercised


def test_a_killed_commit_is_not_overwritten_without_overwrite(tmp_path):
    """A commit killed after its journal is rolled forward at the next start: its outputs then
    exist, so a command without --overwrite must refuse instead of replacing them."""
    out = tmp_path / "out"
    out.mkdir()
    assert run_child(out, 2).returncode == -signal.SIGKILL  # journal in, nothing moved
    assert tree(out).keys() <= {r for r in tree(out) if r.startswith(".tensorpose-")}
    o = OutputFolder(out, ["a.npz"], overwrite=False, say=quiet)  # nothing visible yet
    with pytest.raises(ValueError, match="exists: pass --overwrite"):
        with o:
            pytest.fail("entered")
    assert tree(out) == NEW and not (out / LOCK_NAME).exists()


# ---------------------------------------------------------------- SIGINT / SIGTERM

SLOW = r"""
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec); spec.loader.exec_module(atomic)
with atomic.OutputFolder(sys.argv[2], ["a.npz", "drawn"], overwrite=True) as o:
    o.path("a.npz").write_bytes(b"half")
    (o.staging / "drawn").mkdir()
    print("writing", flush=True)
    time.sleep(20)  # a slow write
    o.commit()
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_before_the_commit_leaves_the_old_outputs(tmp_path, sig):
    out = tmp_path / "out"
    write_tree(out, OLD | KEEP)
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW, str(ATOMIC_PY), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "writing"
    t0 = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=10)
    assert time.monotonic() - t0 < 5 and proc.returncode != 0
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err
        assert staging_left(out) == [] and not (out / LOCK_NAME).exists()
    assert {r: d for r, d in tree(out).items() if not r.startswith(".tensorpose-")} == OLD | KEEP
    with OutputFolder(out, NAMES, overwrite=True, say=quiet) as o:  # the next start cleans up
        assert [p for p in staging_left(out) if p != o.staging.name] == []
    assert tree(out) == OLD | KEEP and staging_left(out) == []


@pytest.mark.parametrize("threads", [1, 2])
def test_an_interrupt_during_the_commit_waits_for_it(tmp_path, monkeypatch, threads):
    """A SIGINT in the middle of the commit: the commit completes, then KeyboardInterrupt. With
    a second thread (torch, a video reader) the kernel may hand the signal to that thread, so
    blocking it in the main thread alone does not defer Python's handler."""
    out = tmp_path / "out"
    write_tree(out, OLD | KEEP)
    replace = os.replace
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait, daemon=True)
    if threads == 2:
        helper.start()

    def replace_and_interrupt(src, dst):
        replace(src, dst)
        os.kill(os.getpid(), signal.SIGINT)  # arrives in the middle of the commit

    with pytest.raises(KeyboardInterrupt):
        with OutputFolder(out, NAMES, overwrite=True, say=quiet) as o:
            write_tree(o.staging, NEW)
            monkeypatch.setattr(os, "replace", replace_and_interrupt)
            o.commit()
    monkeypatch.undo()
    stop.set()
    assert tree(out) == NEW | KEEP and staging_left(out) == []
    assert not (out / LOCK_NAME).exists()
