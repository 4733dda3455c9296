"""Ctrl-C and SIGTERM during training: the current step finishes, a resumable mid-epoch
checkpoint is written and :class:`Interrupted` says how to resume (exit 130 for SIGINT, 143
for SIGTERM). A second signal while the checkpoint is being written stops at once.

Under DDP every rank must stop after the same step (a rank that stops alone leaves the others
waiting in a collective): the ranks agree at the log steps, where they already exchange the
loss, by taking the largest pending signal over all ranks (:meth:`SignalCatcher.agreed`). A
signal is then acted on at the next log step, ``train.log_every`` steps at most.

Tests send the signal at a fixed step through the environment variable
:data:`SIGNAL_AFTER_STEP_ENV` (``INT:3`` or ``TERM:3``: after optimiser step 3 the process
signals itself; ``INT:3@1``: only the process of rank 1 does), so the interrupted step is the
same on every machine.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

__all__ = ["SIGNAL_AFTER_STEP_ENV", "Interrupted", "SignalCatcher"]

SIGNAL_AFTER_STEP_ENV = "TENSORPOSE_SIGNAL_AFTER_STEP"
"""Test hook: ``INT:k`` / ``TERM:k`` sends that signal to this process after step ``k``;
``INT:k@r`` only in the process of rank ``r``."""


class Interrupted(Exception):
    """Training stopped by a signal after a checkpoint was written; the message says how to
    resume. ``exit_code`` is 128 + the signal number (130 SIGINT, 143 SIGTERM)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + int(signum)


class SignalCatcher:
    """While active (a context manager, main thread only), SIGINT and SIGTERM set
    :attr:`signum` instead of raising; the loop checks it after each step (a Python attribute:
    no device synchronisation). A second signal restores the default behaviour."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, object] = {}
        hook = os.environ.get(SIGNAL_AFTER_STEP_ENV, "")
        name, _, when = hook.partition(":")
        step, _, rank = when.partition("@")
        mine = not rank or int(rank) == int(os.environ.get("RANK", "0"))
        self._hook = (getattr(signal, f"SIG{name}"), int(step)) if hook and mine else None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # second signal: give up waiting for the step
            self.__exit__()
            signal.raise_signal(signum)
            return
        self.signum = signum

    def __enter__(self) -> SignalCatcher:
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old = {}

    def after_step(self, step: int) -> None:
        """The test hook (see :data:`SIGNAL_AFTER_STEP_ENV`)."""
        if self._hook is not None and step == self._hook[1]:
            os.kill(os.getpid(), self._hook[0])

    def agreed(self, world: int, sync: bool, device) -> int | None:
        """The signal to stop on after this step, the same on every rank: in one process the
        pending one; under DDP (``world > 1``) none except at ``sync`` steps (the log steps,
        reached by all ranks together), where it is the largest pending over the ranks."""
        if world == 1:
            return self.signum
        if not sync:
            return None
        from .distributed import reduce_max

        return reduce_max(self.signum or 0, world, device) or None
