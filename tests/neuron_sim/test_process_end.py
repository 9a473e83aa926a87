"""``neuron_sim.process_end.end``: a process ended with it keeps everything a normal exit gives
that anyone can observe. Each test runs a fresh Python that registers an ``atexit`` function,
starts a non-daemon thread still working, leaves text in stdout's buffer (no newline, a pipe:
block-buffered), and ends with ``end(code)``; what it must see afterwards is what Python's own
exit guarantees: the exit status, the buffered text, the thread's work and the atexit
function's, in that order (threads are joined before atexit functions run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import atexit, sys, threading, time
sys.path.insert(0, {repo!r})
{prelude}
from neuron_sim.process_end import end
log = open({log!r}, "w")
def at_exit():
    log.write("atexit\n"); log.close()
atexit.register(at_exit)
def work():
    time.sleep(0.3); log.write("thread\n"); log.flush()
threading.Thread(target=work).start()
sys.stdout.write("partial line")
end({code})
sys.stdout.write(" never")
"""


def _run(tmp_path: Path, code: int, prelude: str = "") -> tuple[subprocess.CompletedProcess, str]:
    log = tmp_path / "log.txt"
    script = SCRIPT.format(repo=str(REPO), log=str(log), code=code, prelude=prelude)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    return done, log.read_text()


@pytest.mark.parametrize("code", [0, 2, 3])
def test_the_status_the_buffered_output_the_threads_and_atexit_survive(tmp_path, code):
    done, log = _run(tmp_path, code)
    assert done.returncode == code
    assert done.stdout == "partial line"
    assert done.stderr == ""
    assert log == "thread\natexit\n"


def test_a_process_with_mpi_loaded_exits_the_normal_way(tmp_path):
    """mpi4py finalizes MPI in the interpreter's own teardown: with it loaded (a stand-in
    module here), ``end`` leaves through ``sys.exit``, which gives the same observable end."""
    done, log = _run(tmp_path, 4, prelude="import types; sys.modules['mpi4py.MPI'] = "
                                          "types.ModuleType('mpi4py.MPI')")
    assert done.returncode == 4
    assert done.stdout == "partial line"
    assert log == "thread\natexit\n"
