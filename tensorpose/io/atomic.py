"""All-or-nothing outputs: the one helper every command that writes files goes through.

A command names the files and folders it writes into an output folder
(:class:`OutputFolder`), writes them into a staging folder inside it, and commits them at the
end:

- an output may not be, contain, or lie inside an input (checked on the resolved paths, so
  ``..``, symlinks and ``/`` are caught), and the output folder may not be a file;
- without ``overwrite`` an existing output is refused before anything is read or written;
  with it, exactly the named outputs are replaced (an output the command did not write this
  time, e.g. the MP4 of an earlier run with ``--video``, is removed) and nothing else in the
  folder is touched;
- a lock file (``.lock``, the process id and host) keeps a second command out of the folder
  while the first one runs; a lock left by a dead process is taken over;
- the commit writes a journal, then moves each output into place with ``os.replace`` (a
  symlink planted at an output's name is replaced, never followed); SIGINT/SIGTERM wait until
  the commit is done. A staging folder left by a kill is rolled forward at the next start when
  its journal was complete (the new output), else deleted (the old output stays).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

__all__ = [
    "LOCK_NAME",
    "FolderInUseError",
    "FolderLock",
    "OutputFolder",
    "check_outside_inputs",
    "recover_staging",
]

LOCK_NAME = ".lock"
STAGING_PREFIX = ".tensorpose-"
STAGING_SUFFIX = ".staging"
JOURNAL = ".commit.json"
OLD = ".old"


class FolderInUseError(ValueError):
    """Another live process holds the folder's lock; the message names it and the way out."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


class FolderLock:
    """``folder/.lock`` with ``pid host``, created atomically; released by :meth:`release`.

    A lock whose process no longer runs (on this host) is taken over, saying so through
    ``say``; a live one raises :class:`FolderInUseError`.
    """

    def __init__(self, folder: str | os.PathLike, say: Callable[[str], None] = print) -> None:
        self.path = Path(folder) / LOCK_NAME
        self.held = False
        self.say = say

    def acquire(self) -> FolderLock:
        me = f"{os.getpid()} {socket.gethostname()}\n"
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._check_stale()
                continue
            with os.fdopen(fd, "w") as f:
                f.write(me)
            self.held = True
            return self
        raise FolderInUseError(f"{self.path}: could not take the folder's lock")

    def _check_stale(self) -> None:
        try:
            text = self.path.read_text().split()
        except FileNotFoundError:
            return
        pid = int(text[0]) if text and text[0].isdigit() else None
        host = text[1] if len(text) > 1 else socket.gethostname()
        if pid is not None and (host != socket.gethostname() or _alive(pid)):
            raise FolderInUseError(
                f"folder {self.path.parent} is in use by process {pid} on {host} (lock file "
                f"{self.path}); wait for it to finish, or remove the lock file if that process "
                "is gone"
            )
        self.say(
            f"folder {self.path.parent}: taking over the stale lock of process "
            f"{pid if pid is not None else '?'} (no longer running)"
        )
        try:
            self.path.unlink()
        except OSError as e:
            if e.errno != errno.ENOENT:
                raise

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def check_outside_inputs(
    out: str | os.PathLike, inputs: Iterable[str | os.PathLike | None], flag: str = "--out"
) -> None:
    """Refuse an output path that is an input, lies inside one, or contains one.

    Raises:
        ValueError: naming ``flag``, the output and the input.
    """
    o = Path(out).resolve()
    for given in inputs:
        if given is None:
            continue
        i = Path(given).resolve()
        if o == i or i in o.parents or o in i.parents:
            how = "is" if o == i else "is inside" if i in o.parents else "contains"
            raise ValueError(
                f"{flag} {out} {how} the input {given}: the input would be overwritten or "
                "removed; choose another output"
            )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _finish(out_dir: Path, staging: Path) -> None:
    """Roll a committed staging folder forward: every output in place, stale ones removed,
    then the staging folder (with the old outputs) deleted. Idempotent: a kill at any point
    leaves a state from which it completes."""
    journal = json.loads((staging / JOURNAL).read_text())
    old = staging / OLD
    old.mkdir(exist_ok=True)
    for name in journal["names"]:
        src, dst = staging / name, out_dir / name
        if src.exists() or src.is_symlink():
            if (dst.exists() or dst.is_symlink()) and (src.is_dir() or dst.is_dir()):
                os.replace(dst, old / name)  # a folder is swapped whole: no stale files in it
            os.replace(src, dst)
        elif name in journal["stale"] and (dst.exists() or dst.is_symlink()):
            os.replace(dst, old / name)
    shutil.rmtree(staging)


def recover_staging(out_dir: str | os.PathLike) -> list[Path]:
    """Complete or delete the staging folders an interrupted command left in ``out_dir``
    (call with the folder's lock held). Returns the staging folders handled."""
    out_dir = Path(out_dir)
    done = []
    if not out_dir.is_dir():
        return done
    for st in sorted(out_dir.glob(f"{STAGING_PREFIX}*{STAGING_SUFFIX}")):
        if st.is_symlink() or not st.is_dir():
            continue
        if (st / JOURNAL).is_file():
            _finish(out_dir, st)
        else:
            shutil.rmtree(st, ignore_errors=True)
        done.append(st)
    return done


class _DeferSignals:
    """SIGINT and SIGTERM wait until the block ends (main thread only)."""

    def __enter__(self) -> None:
        self.mask = None
        if hasattr(signal, "pthread_sigmask"):
            self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})

    def __exit__(self, *exc: object) -> None:
        if self.mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)


class OutputFolder:
    """The named outputs of one command in ``out_dir``, written all or nothing.

    Usage::

        with OutputFolder(out, ["a.npz", "a.trc"], inputs=[src], overwrite=False) as o:
            write(o.path("a.npz")); write(o.path("a.trc"))
            o.commit()

    Everything is checked in the constructor, before the command reads its inputs, so a bad
    ``--out`` costs nothing; leaving the ``with`` block without :meth:`commit` (an error, an
    interrupt) removes the staging folder and leaves the old outputs as they were.

    Args:
        out_dir: the output folder (created on entry).
        names: every file or folder name the command may write (one path component each).
        inputs: the command's input files and folders (an output may not overlap them).
        overwrite: replace existing outputs (else they are an error).
        flag: the CLI flag that named ``out_dir``, for messages.
        whole_folder: the command owns the folder: without ``overwrite`` a folder that holds
            anything is refused (else only existing outputs are).
    """

    def __init__(
        self,
        out_dir: str | os.PathLike,
        names: Sequence[str],
        *,
        inputs: Iterable[str | os.PathLike | None] = (),
        overwrite: bool = False,
        flag: str = "--out",
        whole_folder: bool = False,
        say: Callable[[str], None] = print,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.names = list(names)
        self.say = say
        for n in self.names:
            if Path(n).name != n or n in (".", "..", LOCK_NAME) or n.startswith(STAGING_PREFIX):
                raise ValueError(f"output name must be one file or folder name, got {n!r}")
        check_outside_inputs(self.out_dir, inputs, flag)
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise ValueError(f"{flag} {self.out_dir}: exists and is not a folder")
        existing = [self.out_dir / n for n in self.names if (self.out_dir / n).exists()]
        if whole_folder and self.out_dir.is_dir() and any(self.out_dir.iterdir()):
            existing = existing or [self.out_dir]
        if existing and not overwrite:
            raise ValueError(
                f"{existing[0]} exists: pass --overwrite to replace the outputs, or choose "
                f"another {flag}"
            )
        self.staging: Path | None = None
        self.lock: FolderLock | None = None
        self.committed: list[Path] = []

    def __enter__(self) -> OutputFolder:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.lock = FolderLock(self.out_dir, self.say).acquire()
        try:
            recover_staging(self.out_dir)
            self.staging = Path(
                tempfile.mkdtemp(prefix=STAGING_PREFIX, suffix=STAGING_SUFFIX, dir=self.out_dir)
            )
        except BaseException:
            self.lock.release()
            raise
        return self

    def path(self, name: str) -> Path:
        """Where to write the output ``name`` (inside the staging folder)."""
        if name not in self.names:
            raise ValueError(f"{name!r} is not one of this command's outputs {self.names}")
        if self.staging is None:
            raise RuntimeError("OutputFolder.path() outside its with block")
        return self.staging / name

    def commit(self) -> list[Path]:
        """Move every output written into place (and remove the named outputs not written
        this time); returns the paths of the outputs written, in ``names`` order."""
        if self.staging is None:
            raise RuntimeError("OutputFolder.commit() outside its with block")
        st = self.staging
        written = [n for n in self.names if (st / n).exists()]
        stale = [n for n in self.names if n not in written]
        with _DeferSignals():
            tmp = st / (JOURNAL + ".tmp")
            tmp.write_text(json.dumps({"names": self.names, "stale": stale}))
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, st / JOURNAL)
            _finish(self.out_dir, st)
        self.staging = None
        self.committed = [self.out_dir / n for n in written]
        return self.committed

    def __exit__(self, *exc: object) -> None:
        try:
            if self.staging is not None:
                shutil.rmtree(self.staging, ignore_errors=True)
                self.staging = None
        finally:
            if self.lock is not None:
                self.lock.release()
