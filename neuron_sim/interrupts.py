"""Ctrl-C ends the process within a second, with exit code 130 and no partial output file.

Python turns SIGINT into ``KeyboardInterrupt`` only between bytecodes, so a long native call
(a z3 check, one big numpy operation) keeps it waiting. z3 is worse: during a check it installs
its own SIGINT handler, which cancels that one check (it answers ``unknown``, "interrupted from
keyboard") and swallows the signal, so a loop of checks — ``prove --pools`` — ran to the end
as if nothing had happened. ``watch_interrupts`` turns z3's handler off and starts a watcher
thread that Python's own handler wakes (``signal.set_wakeup_fd``): it interrupts z3's running
check, so the main thread gets its ``KeyboardInterrupt`` at once and unwinds; should the main
thread still be held in native code after ``grace`` seconds, the watcher removes the temporary
files of writes in progress (outputs are written atomically, so no output is half written)
and ends the process with exit code 130.

Only the command line installs it (a process it owns): a library user keeps Python's and z3's
usual Ctrl-C behaviour.

``hard_deadline`` is the same guarantee for a time limit: the interpreter checks its deadline
between instructions, which cannot stop one instruction that alone runs past the limit (a big
convolution is one einsum); past the limit plus a grace, a watcher thread removes the temporary
files of writes in progress and ends the process with the command's sentence and exit code 1.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import signal
import sys
import threading
from typing import Iterator

from neuron_sim.commands import EXIT_INTERRUPTED, EXIT_PROBLEM
from neuron_sim.outputs import discard_pending_writes

DEFAULT_GRACE = 0.6
DEADLINE_GRACE = 1.0

_watching = False
_owned = False


def own_process() -> None:
    """Say that this process is the command's own (the command line's, or a harness that expects
    it to end): only then may ``hard_deadline`` end it."""
    global _owned
    _owned = True


def watch_interrupts(*, grace: float = DEFAULT_GRACE) -> None:
    """Make SIGINT end this process within ``grace`` seconds (plus the unwinding), even while
    native code runs. Call it once, from the main thread, in a process the caller owns."""
    global _watching
    if _watching or threading.current_thread() is not threading.main_thread():
        return
    own_process()
    _quiet_z3()
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read_end, grace), name="interrupt watcher",
                     daemon=True).start()
    _watching = True


def _quiet_z3() -> None:
    """z3 leaves SIGINT to Python (the watcher interrupts its checks instead) — now if it is
    loaded, else as soon as something imports it: z3 costs a tenth of a second to import, and
    most commands never use it."""
    if "z3" in sys.modules:
        _set_z3_quiet(sys.modules["z3"])
    elif not any(isinstance(finder, _Z3Loaded) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Z3Loaded())


def _set_z3_quiet(module: object) -> None:
    set_param = getattr(module, "set_param", None)
    if set_param is not None:
        set_param("ctrl_c", False)


class _Z3Loaded:
    """An import hook that runs ``_set_z3_quiet`` right after the ``z3`` package is loaded
    (it finds nothing itself: the real finders load z3, this one wraps their loader). A meta
    path finder needs only ``find_spec``; it does not subclass ``importlib.abc.MetaPathFinder``,
    whose import (importlib.resources, tempfile, shutil) every command would pay for."""

    def find_spec(self, name: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name != "z3":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: object) -> None:
            original(module)
            _set_z3_quiet(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _interrupt_z3() -> None:
    module = sys.modules.get("z3.z3")
    context = getattr(module, "_main_ctx", None)
    if context is not None:
        context.interrupt()


def _watch(read_end: int, grace: float) -> None:
    while True:
        received = os.read(read_end, 64)
        if not received:
            return
        if signal.SIGINT in received:
            break
    _interrupt_z3()
    threading.Event().wait(grace)  # the main thread ends the process meanwhile, normally
    discard_pending_writes()
    os.write(2, b"neuron-sim: interrupted\n")
    os._exit(EXIT_INTERRUPTED)


@contextlib.contextmanager
def hard_deadline(seconds: float | None, message: str, *,
                  grace: float = DEADLINE_GRACE) -> Iterator[None]:
    """End the process with ``message`` on stderr and exit code 1 if the block is still running
    ``seconds + grace`` seconds after it began (None or an infinite limit: no deadline). Only in
    a process that ``own_process`` claimed: a library user or an in-process test is never ended,
    and keeps the interpreter's own deadline between instructions."""
    if seconds is None or seconds == float("inf") or not _owned:
        yield
        return
    finished = threading.Event()

    def expire() -> None:
        if finished.wait(seconds + grace):
            return
        discard_pending_writes()
        os.write(2, f"neuron-sim: error: {message}\n".encode())
        os._exit(EXIT_PROBLEM)

    threading.Thread(target=expire, name="deadline watcher", daemon=True).start()
    try:
        yield
    finally:
        finished.set()
