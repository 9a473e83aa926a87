"""Ending a command's own process once its work is done, without tearing the interpreter down.

A command has nothing left to do once it has written its results, yet Python's normal exit then
destroys every module and object the process made: for numpy and the modules a ``run`` imports
that is 20-60 ms, a tenth of a one-op ``neuron-sim run``. ``end(code)`` does what a normal exit
does that anyone can observe, in the order Python does it — the threading module's shutdown
(non-daemon threads joined, the executors' exit callbacks), the ``atexit`` functions (a worker
process closed, temporary directories removed, logging flushed), stdout and stderr flushed —
and then ends the process with ``code`` at once. What it skips is the teardown nobody sees:
modules emptied, objects freed.

A process in which something registered an exit hook at the C level exits normally instead:
mpi4py finalizes MPI from the interpreter's own finalization, which ``mpiexec`` waits for. So
does one where the interpreter lacks the two hooks used here (other Pythons than CPython).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

# Modules that finalize something native when the interpreter is torn down (Py_AtExit).
_NATIVE_FINALIZERS = ("mpi4py.MPI",)


def end(code: int | None) -> NoReturn:
    """End this process with exit status ``code`` (None: 0; module docstring)."""
    code = 0 if code is None else int(code)
    shutdown = getattr(threading, "_shutdown", None)
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exit_functions is None or \
            any(name in sys.modules for name in _NATIVE_FINALIZERS):
        sys.exit(code)
    shutdown()
    run_exit_functions()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more reaches it
            pass
    os._exit(code)


__all__ = ["end"]
