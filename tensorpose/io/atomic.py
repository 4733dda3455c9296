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

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

try:
    from ..errors import InputError
except ImportError:  # loaded by its file name, outside the package (tests/io/test_atomic.py)
    InputError = ValueError

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


class FolderInUseError(InputError):
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
                if self._check_stale(me):
                    self.held = True
                    return self
                continue
            with os.fdopen(fd, "w") as f:
                f.write(me)
            self.held = True
            return self
        raise FolderInUseError(f"{self.path}: could not take the folder's lock")

    def _in_use(self, pid: int | None, host: str) -> FolderInUseError:
        return FolderInUseError(
            f"folder {self.path.parent} is in use by process {pid if pid is not None else '?'} "
            f"on {host} (lock file {self.path}); wait for it to finish, or remove the lock file "
            "if that process is gone"
        )

    def _check_stale(self, me: str) -> bool:
        """Raise FolderInUseError if the lock's process runs; else take the lock over in place
        (True), or False when the lock went away (try again). The decision is made holding an
        ``flock`` of the lock file, so two processes never both take over one stale lock."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            return False
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            self.path.unlink()  # a symlink planted at the lock's name: removed, not followed
            return False
        with os.fdopen(fd, "r+") as f:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process is taking it over right now
                raise self._in_use(None, socket.gethostname()) from None
            try:
                st = os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if (st.st_dev, st.st_ino) != (os.fstat(fd).st_dev, os.fstat(fd).st_ino):
                return False  # released and created anew meanwhile
            text = f.read().split()
            pid = int(text[0]) if text and text[0].isdigit() else None
            host = text[1] if len(text) > 1 else socket.gethostname()
            if pid is not None and (host != socket.gethostname() or _alive(pid)):
                raise self._in_use(pid, host)
            if not text and time.time() - st.st_mtime < 10:  # being created: content follows
                raise self._in_use(None, host)
            self.say(
                f"folder {self.path.parent}: taking over the stale lock of process "
                f"{pid if pid is not None else '?'} (no longer running)"
            )
            f.seek(0)
            f.truncate()
            f.write(me)
            f.flush()
        return True

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
            raise InputError(
                f"{flag} {out} {how} the input {given}: the input would be overwritten or "
                "removed; choose another output"
            )


def check_output_file(out: str | os.PathLike, overwrite: bool, flag: str = "--out") -> Path:
    """A single output file named by the user: never anything but a file.

    A name ending in a path separator, an existing folder, device, FIFO or socket is refused;
    an existing file (or a symlink, followed never) only with ``overwrite``. The parent folder
    need not exist yet.

    Raises:
        InputError: naming ``flag``, the path and what it is.
    """
    text = os.fspath(out)
    path = Path(text)
    if text.endswith((os.sep, "/")) or path.name in ("", ".", ".."):
        raise InputError(f"{flag} {text}: names a folder; give the output file's name")
    if path.is_symlink() or path.exists():
        st = path.lstat()
        import stat

        kind = (
            "a folder" if stat.S_ISDIR(st.st_mode)
            else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a FIFO" if stat.S_ISFIFO(st.st_mode)
            else "a socket" if stat.S_ISSOCK(st.st_mode)
            else None
        )  # fmt: skip
        if kind is not None:
            raise InputError(f"{flag} {text}: is {kind}, not a file; give the output file's name")
        if not overwrite:
            raise InputError(f"{flag} {text}: exists; pass --overwrite to replace it")
    return path


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
    """SIGINT and SIGTERM wait until the block ends (main thread only). Python's handlers are
    swapped for a recorder (blocking the signals in this thread alone is not enough: with other
    threads running, the kernel hands the signal to one of them and Python's handler still runs
    here); the signals received are handed to the old handlers on leaving."""

    def __enter__(self) -> None:
        self.old: dict[int, object] = {}
        self.got: list[int] = []
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self.old[s] = signal.signal(s, lambda n, _f: self.got.append(n))

    def __exit__(self, *exc: object) -> None:
        for s, old in self.old.items():
            signal.signal(s, old if old is not None else signal.SIG_DFL)
        for n in dict.fromkeys(self.got):
            old = self.old[n]
            if callable(old):
                old(n, None)
            elif old in (signal.SIG_DFL, None):
                signal.raise_signal(n)


FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""Write errors that are the disk's or the user's limits (full disk, quota, ``ulimit -f``):
named with the output folder."""


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
        owned_suffixes: the suffixes of the files the command writes inside its folder
            outputs; with ``overwrite`` such a folder holding any other file is refused.
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
        owned_suffixes: Sequence[str] = (),
        say: Callable[[str], None] = print,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.names = list(names)
        self.say = say
        for n in self.names:
            if (
                not n
                or Path(n).name != n
                or n in (".", "..", LOCK_NAME, JOURNAL, JOURNAL + ".tmp", OLD)
                or n.startswith((STAGING_PREFIX, LOCK_NAME + "."))
            ):
                raise ValueError(f"output name must be one file or folder name, got {n!r}")
        check_outside_inputs(self.out_dir, inputs, flag)
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise InputError(f"{flag} {self.out_dir}: exists and is not a folder")
        self.overwrite, self.flag, self.whole_folder = overwrite, flag, whole_folder
        self.owned_suffixes = tuple(s.lower() for s in owned_suffixes)
        self._check_existing()
        self.staging: Path | None = None
        self.lock: FolderLock | None = None
        self.committed: list[Path] = []
        self.created = False  # whether entering made out_dir (left out if it stays empty)

    def _check_existing(self) -> None:
        """Without ``overwrite``, refuse an output that exists (a symlink, even a dangling one,
        counts)."""
        if self.overwrite:
            self._check_folders_hold_ours()
            return
        hits = [p for p in (self.out_dir / n for n in self.names) if p.exists() or p.is_symlink()]
        if self.whole_folder and self.out_dir.is_dir() and not hits:
            ours = (LOCK_NAME, STAGING_PREFIX)
            if any(not p.name.startswith(ours) for p in self.out_dir.iterdir()):
                hits = [self.out_dir]
        if hits:
            raise InputError(
                f"{hits[0]} exists: pass --overwrite to replace the outputs, or choose "
                f"another {self.flag}"
            )

    def _check_folders_hold_ours(self) -> None:
        """With ``overwrite``, an output that is a folder is replaced whole: refuse one that holds
        a file the command does not write (a suffix not in ``owned_suffixes``: the user's own,
        e.g. ``openpose/notes.txt``), so that nothing but the command's outputs is removed."""
        if not self.owned_suffixes:
            return
        for n in self.names:
            folder = self.out_dir / n
            if folder.is_symlink() or not folder.is_dir():
                continue
            for p in folder.rglob("*"):  # the command's earlier outputs (and anything else)
                if not p.is_dir() and p.suffix.lower() not in self.owned_suffixes:
                    raise InputError(
                        f"{p} is not an output of this command, and --overwrite replaces the "
                        f"folder {folder} whole: move the file, or choose another {self.flag}"
                    )

    def __enter__(self) -> OutputFolder:
        self.created = not self.out_dir.exists()  # removed again if nothing gets committed
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # no permission, a path through a file, a read-only or full disk
            raise InputError(
                f"{self.flag} {self.out_dir}: cannot create the folder: {e.strerror or e}"
            ) from e
        self.lock = FolderLock(self.out_dir, self.say).acquire()
        try:
            recover_staging(self.out_dir)
            self._check_existing()  # again: a rolled-forward commit or a command meanwhile
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
                if (self.staging / JOURNAL).is_file():  # committed: complete it, never undo
                    with _DeferSignals():
                        _finish(self.out_dir, self.staging)
                else:
                    shutil.rmtree(self.staging, ignore_errors=True)
                self.staging = None
        finally:
            if self.lock is not None:
                self.lock.release()
            if self.created and not self.committed:
                with contextlib.suppress(OSError):  # only if still empty
                    self.out_dir.rmdir()
        error = exc[1] if len(exc) > 1 else None
        if isinstance(error, OSError) and error.errno in FULL_ERRNOS and not self.committed:
            raise InputError(
                f"{self.flag} {self.out_dir}: {error.strerror or error} while writing the outputs"
                " (the disk is full, over quota or over the file-size limit); nothing was "
                "changed there"
            ) from error
