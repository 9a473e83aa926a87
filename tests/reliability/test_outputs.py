"""Lose nothing: what a command writes, and what it must never touch.

Every test runs the real command line as a subprocess (the ``cli`` fixture, or ``Popen`` where
the test has to send a signal or read a FIFO) in a temporary directory. The policy under test
is ``neuron_sim.outputs``'s docstring: an input is never an output; ``--out DIR`` is new or
empty and nothing in it is replaced; symlinks are written through, FIFOs in place; new files
get the umask; errors name the user's path; Ctrl-C ends a run within a second of CPU time with exit code
130 and no partial file. Each case was seen failing on main before (issue 11).
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from real_cli import REPO, environment, mpiexec, needs_mpiexec
EXAMPLES = REPO / "examples"
UNSOUND_EXAMPLE = "delete_permute_real_all_reduce.hlo"  # DeletePermute on real groups
DELETE_PERMUTE = "aws_neuron_delete_permute"

# out0 = p + p: with p = [1, 2, 3, 4] on the one device, out0 = [[2, 4, 6, 8]] (shaped [D, 4]).
DOUBLE = """HloModule double

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %sum = f32[4]{0} add(%p, %p)
}
"""
DOUBLED = np.array([[2, 4, 6, 8]], np.float32)

# A 64 MiB output (4096 x 4096 f32): writing it takes long enough to be interrupted midway.
BIG = """HloModule big

ENTRY %main () -> f32[4096,4096] {
  %c = f32[] constant(1.5)
  ROOT %b = f32[4096,4096]{1,0} broadcast(%c), dimensions={}
}
"""

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def start(*args: str, cwd: Path, env: dict[str, str] | None = None,
          **kwargs) -> subprocess.Popen:
    """The real command line, started (not waited for); ``env`` adds to the environment."""
    return subprocess.Popen([sys.executable, "-m", "neuron_sim.cli", *args], cwd=cwd,
                            env=environment(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: file contents, symlink targets, ``<dir>``/``<fifo>``."""
    entries: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            entries[key] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            entries[key] = "<dir>"
        elif stat.S_ISFIFO(path.stat().st_mode):
            entries[key] = "<fifo>"
        else:
            entries[key] = path.read_bytes()
    return entries


def error_line(stderr: str) -> str:
    """The one error sentence (and nothing else) the command printed."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neuron-sim: error: "), stderr
    assert "Traceback" not in stderr and "Errno" not in stderr
    return lines[0]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A directory holding the double module, its inputs and the unsound example."""
    (tmp_path / "double.hlo").write_text(DOUBLE)
    np.savez(tmp_path / "in.npz", arg0=np.array([1, 2, 3, 4], np.float32))
    shutil.copy(EXAMPLES / UNSOUND_EXAMPLE, tmp_path / "m.hlo")
    return tmp_path


# --------------------------------------------------------------------------------------------
# An output that is one of the inputs.


@pytest.mark.parametrize("argv, named", [
    (["run", "double.hlo", "--inputs", "in.npz", "-o", "double.hlo"], "double.hlo"),
    (["run", "double.hlo", "--inputs", "in.npz", "-o", "./double.hlo"], "./double.hlo"),
    (["run", "double.hlo", "--inputs", "in.npz", "-o", "in.npz"], "in.npz"),
    (["run", "double.hlo", "--inputs", "in.npz", "-o", "link.hlo"], "link.hlo"),
    (["run", "double.hlo", "--inputs", "in.npz", "-o", "hard.npz"], "hard.npz"),
    (["opt", "m.hlo", "--passes", DELETE_PERMUTE, "-o", "m.hlo"], "m.hlo"),
    (["opt", "m.hlo", "--passes", DELETE_PERMUTE, "-o", "link.hlo"], "link.hlo"),
], ids=["run-module", "run-dot-slash", "run-inputs", "run-symlink", "run-hard-link",
        "opt-module", "opt-symlink"])
def test_output_onto_an_input_is_refused_and_nothing_written(cli, work, argv, named):
    os.symlink("double.hlo" if argv[0] == "run" else "m.hlo", work / "link.hlo")
    os.link(work / "in.npz", work / "hard.npz")
    before = snapshot(work)
    code, out, err = cli(*argv, cwd=work)
    assert code == 2
    line = error_line(err)
    assert f"-o {named}: is the input" in line
    assert snapshot(work) == before


@needs_mpiexec
def test_a_per_rank_output_onto_an_input_is_refused_on_every_rank(work):
    """``-o x.npz --output-per-rank`` has rank 1 write x.rank1.npz, here the inputs file."""
    (work / "double2.hlo").write_text(DOUBLE.replace("HloModule double",
                                                     "HloModule double, num_partitions=2"))
    os.rename(work / "in.npz", work / "x.rank1.npz")
    before = snapshot(work)
    done = mpiexec(2, "run", "double2.hlo", "--backend", "mpi", "--inputs", "x.rank1.npz",
                   "-o", "x.npz", "--output-per-rank", cwd=work)
    assert done.returncode == 2
    assert "--output-per-rank x.rank1.npz: is the input x.rank1.npz" in error_line(done.stderr)
    assert snapshot(work) == before


@pytest.mark.parametrize("layout", ["pair", "passes"])
def test_verify_out_onto_the_directory_of_its_module_is_refused(cli, work, layout):
    """``verify DIR/before.hlo ... --out DIR`` replaced the user's module with the minimized
    one; now it names the input and writes nothing."""
    case = work / "case"
    case.mkdir()
    shutil.copy(work / "m.hlo", case / "before.hlo")
    shutil.copy(work / "m.hlo", case / "after.hlo")
    argv = ["verify", "case/before.hlo", "case/after.hlo"] if layout == "pair" else \
        ["verify", "case/before.hlo", "--passes", DELETE_PERMUTE]
    before = snapshot(work)
    code, out, err = cli(*argv, "--out", "case", cwd=work)
    assert code == 2
    assert "--out case: holds case/before.hlo, an input of this command" in error_line(err)
    assert snapshot(work) == before


# --------------------------------------------------------------------------------------------
# --out DIR: new or empty, nothing replaced.


@pytest.mark.parametrize("make, message", [
    (lambda cex: (cex.mkdir(), (cex / "report.json").write_text("the user's notes\n")),
     "--out cex: is not empty"),
    (lambda cex: cex.write_text("not a directory\n"), "--out cex: is a file, not a directory"),
], ids=["non-empty-directory", "regular-file"])
def test_out_onto_what_the_user_has_is_one_sentence_and_nothing_written(cli, work, make,
                                                                        message):
    """A non-empty directory, or a file (that was a raw ``[Errno 17]``)."""
    make(work / "cex")
    before = snapshot(work)
    code, out, err = cli("verify", "m.hlo", "--passes", DELETE_PERMUTE, "--out", "cex",
                         cwd=work)
    assert code == 2
    assert message in error_line(err)
    assert snapshot(work) == before


def test_out_into_an_empty_directory_writes_the_counterexample(cli, work):
    (work / "cex").mkdir()
    code, out, err = cli("verify", "m.hlo", "--passes", DELETE_PERMUTE, "--out", "cex",
                         cwd=work)
    assert code == 1, err  # UNSOUND: DeletePermute deletes an all-reduce over real groups
    assert sorted(p.name for p in (work / "cex").iterdir()) == \
        ["after.hlo", "before.hlo", "inputs.npz", "report.json", "reproduce.sh"]


# --------------------------------------------------------------------------------------------
# What is at the output path: a symlink, a FIFO, a file with its own mode.


def test_a_symlink_output_is_written_through(cli, work):
    (work / "results").mkdir()
    (work / "results" / "out.npz").write_bytes(b"yesterday's results")
    os.symlink("results/out.npz", work / "out.npz")
    code, out, err = cli("run", "double.hlo", "--inputs", "in.npz", "-o", "out.npz", cwd=work)
    assert code == 0, err
    assert (work / "out.npz").is_symlink()
    assert os.readlink(work / "out.npz") == "results/out.npz"
    with np.load(work / "results" / "out.npz") as data:
        np.testing.assert_array_equal(data["out0"], DOUBLED)
    assert sorted(os.listdir(work / "results")) == ["out.npz"]  # no temporary file left


def test_a_fifo_output_is_written_in_place_not_replaced(work):
    fifo = work / "out.fifo"
    os.mkfifo(fifo)
    process = start("run", "double.hlo", "--inputs", "in.npz", "-o", "out.fifo", cwd=work)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    reader.join(timeout=60)
    out, err = process.communicate(timeout=60)
    assert not reader.is_alive(), "the command never opened the FIFO for writing"
    assert process.returncode == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with np.load(io.BytesIO(received[0])) as data:
        np.testing.assert_array_equal(data["out0"], DOUBLED)
    assert sorted(os.listdir(work)) == ["double.hlo", "in.npz", "m.hlo", "out.fifo"]


@pytest.mark.parametrize("umask, mode, script_mode", [
    (0o022, 0o644, 0o755), (0o077, 0o600, 0o700)], ids=["umask-022", "umask-077"])
def test_new_outputs_get_the_users_umask(work, umask, mode, script_mode):
    """A new file is created with 0666 & ~umask (mkstemp gave every output 0600); the script
    of a counterexample with 0777 & ~umask."""
    def with_umask() -> None:
        os.umask(umask)

    run = start("run", "double.hlo", "--inputs", "in.npz", "-o", "out.npz", cwd=work,
                preexec_fn=with_umask)
    verify = start("verify", "m.hlo", "--passes", DELETE_PERMUTE, "--out", "cex", cwd=work,
                   preexec_fn=with_umask)
    assert run.wait(timeout=120) == 0 and verify.wait(timeout=120) == 1
    run.communicate(), verify.communicate()
    assert stat.S_IMODE(os.stat(work / "out.npz").st_mode) == mode
    assert stat.S_IMODE(os.stat(work / "cex" / "report.json").st_mode) == mode
    assert stat.S_IMODE(os.stat(work / "cex" / "reproduce.sh").st_mode) == script_mode


def test_a_replaced_output_keeps_its_mode(cli, work):
    (work / "out.hlo").write_text("old\n")
    os.chmod(work / "out.hlo", 0o640)
    code, out, err = cli("opt", "m.hlo", "--passes", DELETE_PERMUTE, "-o", "out.hlo", cwd=work)
    assert code == 0, err
    assert stat.S_IMODE(os.stat(work / "out.hlo").st_mode) == 0o640
    assert (work / "out.hlo").read_text().startswith("HloModule")


# --------------------------------------------------------------------------------------------
# Errors name the user's path.


def test_a_failed_write_names_the_output_not_a_temporary_file(work):
    """A file-size limit (RLIMIT_FSIZE) makes the write itself fail (EFBIG) after the output
    path was accepted: the sentence names out.npz and the directory keeps nothing of it."""
    import resource

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    (work / "big.hlo").write_text(BIG)
    before = snapshot(work)
    process = start("run", "big.hlo", "-o", "out.npz", cwd=work, preexec_fn=small_files)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 2
    line = error_line(err)
    assert line == "neuron-sim: error: out.npz: cannot be written: file too large"
    assert snapshot(work) == before


def test_an_output_in_a_missing_directory_is_refused_before_running(cli, work):
    code, out, err = cli("run", "double.hlo", "--inputs", "in.npz", "-o", "no/such/out.npz",
                         cwd=work)
    assert code == 2
    assert error_line(err) == "neuron-sim: error: -o no/such/out.npz: its directory does not exist"


# --------------------------------------------------------------------------------------------
# Ctrl-C.


def cpu_seconds(process: subprocess.Popen) -> float:
    """The CPU time ``process`` has used (Linux: /proc/PID/stat, utime + stime)."""
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def interrupt_when_busy(process: subprocess.Popen, cpu: float) -> float:
    """Send SIGINT once ``process`` has used ``cpu`` CPU seconds — past Python's start-up and
    the imports (under a second), into the command's own work, however loaded the machine;
    return the CPU seconds it used from the signal to its end (see ``reap``)."""
    deadline = time.monotonic() + 300
    while cpu_seconds(process) < cpu:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.01)
    return interrupt(process)


def interrupt(process: subprocess.Popen) -> float:
    """Send SIGINT; the CPU seconds the process used from the signal to its end."""
    before = cpu_seconds(process)
    process.send_signal(signal.SIGINT)
    return reap(process) - before


def reap(process: subprocess.Popen, wall: float = 30.0) -> float:
    """Wait for ``process`` (at most ``wall`` seconds: a process that ignores the signal and
    sleeps is caught here) and return the CPU seconds it used in all. CPU time, not wall time,
    is what the callers bound: a process that goes on computing after SIGINT spends it, one that
    stops does not, and a machine busy with other tests stretches only the wall clock."""
    deadline = time.monotonic() + wall
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        assert time.monotonic() < deadline, f"the process did not end within {wall} s"
        time.sleep(0.005)


ENDLESS = """HloModule endless

%cond (s: s32[]) -> pred[] {
  %s = s32[] parameter(0)
  ROOT %t = pred[] constant(true)
}

%body (b: s32[]) -> s32[] {
  %b = s32[] parameter(0)
  %one = s32[] constant(1)
  ROOT %n = s32[] add(%b, %one)
}

ENTRY %main () -> s32[] {
  %z = s32[] constant(0)
  ROOT %w = s32[] while(%z), condition=%cond, body=%body
}
"""


@needs_proc
@pytest.mark.parametrize("argv", [
    ["prove", "--pools", "--no-replay"],
    ["run", "endless.hlo", "--timeout", "inf", "-o", "out.npz"],
    ["verify", "endless.hlo", "endless.hlo", "--timeout", "600", "--out", "cex"],
], ids=["prove-pools", "run", "verify"])
def test_ctrl_c_ends_a_command_within_a_second(work, argv):
    """prove --pools: z3 cancelled its running check on SIGINT and swallowed the signal, so
    the table of pool theorems ran on to the end (about 13 s) and exited 1 as if nothing had
    happened. run and verify on an endless loop: the interpreter's Python loop."""
    (work / "endless.hlo").write_text(ENDLESS)
    before = snapshot(work)
    process = start(*argv, cwd=work)
    spent = interrupt_when_busy(process, 2.0)
    out, err = process.communicate()
    assert process.returncode == 130, err
    assert spent < 1.0
    assert err.strip().splitlines() == ["neuron-sim: interrupted"]
    assert snapshot(work) == before


def interrupt_mid_write(work: Path) -> tuple[subprocess.Popen, float] | None:
    """Start ``run big.hlo -o out.npz``; once its temporary file exists, stop the process
    (SIGSTOP), and if the write is still under way, send SIGINT and let it go on (SIGCONT).
    Returns the process and the CPU seconds it used from SIGINT to its end, or None if the write ended before
    it could be caught (a loaded machine: the caller tries again)."""
    def writing() -> bool:
        return any(name.endswith(".tmp") for name in os.listdir(work))

    process = start("run", "big.hlo", "-o", "out.npz", cwd=work)
    deadline = time.monotonic() + 120
    while not writing():
        if process.poll() is not None:
            return None
        assert time.monotonic() < deadline, "the run never started writing"
        time.sleep(0.001)
    process.send_signal(signal.SIGSTOP)
    if not writing():
        process.send_signal(signal.SIGCONT)
        process.communicate(timeout=60)
        return None
    before = cpu_seconds(process)
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGCONT)
    return process, reap(process) - before


def test_ctrl_c_while_writing_leaves_the_old_output_and_no_partial_file(work):
    """SIGINT while the 64 MiB output is being written (its temporary file exists): exit 130
    within a CPU second, out.npz still holds what it held, no temporary file is left."""
    (work / "big.hlo").write_text(BIG)
    for _ in range(5):
        (work / "out.npz").write_bytes(b"the previous results")
        caught = interrupt_mid_write(work)
        if caught is not None:
            break
    else:
        pytest.fail("the write always ended before SIGSTOP could catch it")
    process, spent = caught
    out, err = process.communicate()
    assert process.returncode == 130, err
    assert spent < 1.0
    assert (work / "out.npz").read_bytes() == b"the previous results"
    assert sorted(os.listdir(work)) == ["big.hlo", "double.hlo", "in.npz", "m.hlo", "out.npz"]


# --------------------------------------------------------------------------------------------
# Every command writes nothing but what the user named.


COMMANDS = {
    "check": (["check", "m.hlo"], set()),
    "run": (["run", "double.hlo", "--inputs", "in.npz"], set()),
    "run -o": (["run", "double.hlo", "--inputs", "in.npz", "-o", "out.npz"], {"out.npz"}),
    "opt": (["opt", "m.hlo", "--passes", DELETE_PERMUTE], set()),
    "opt -o": (["opt", "m.hlo", "--passes", DELETE_PERMUTE, "-o", "out.hlo"], {"out.hlo"}),
    "verify": (["verify", "m.hlo", "--passes", DELETE_PERMUTE], set()),
    "verify --out": (["verify", "m.hlo", "--passes", DELETE_PERMUTE, "--out", "cex"],
                     {"cex", "cex/before.hlo", "cex/after.hlo", "cex/inputs.npz",
                      "cex/report.json", "cex/reproduce.sh"}),
    "prove": (["prove", "fold.hlo"], set()),
    "passes": (["passes"], set()),
    "demo": (["demo"], set()),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_writes_only_the_files_named(work, name):
    """The directory (also HOME and TMPDIR, both inside it: caches and leftover temporary
    files count) holds, after the command, what it held before plus the named outputs."""
    argv, named = COMMANDS[name]
    shutil.copy(EXAMPLES / "ar_ds_single_group_sorted.hlo", work / "fold.hlo")
    (work / "home").mkdir()
    (work / "tmp").mkdir()
    before = snapshot(work)
    env = {"HOME": str(work / "home"), "TMPDIR": str(work / "tmp")}
    process = start(*argv, cwd=work, env=env)
    out, err = process.communicate(timeout=300)
    assert process.returncode in (0, 1), err
    after = snapshot(work)
    assert set(after) - set(before) == named
    assert {key: after[key] for key in before} == before


# ``python -m neuron_sim.cli ARGV`` (runpy is what -m uses) whose import of one module (argv[1])
# is held: the process says so in a file (argv[2]) and then sleeps in short steps, so that a
# signal sent once the file exists lands during that import however fast the imports are.
HOLDING_AN_IMPORT = """
import importlib.abc, os, runpy, sys, time
held, marker = sys.argv.pop(1), sys.argv.pop(1)

class Hold(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == held:
            sys.meta_path.remove(self)
            with open(marker + ".tmp", "w") as file:
                file.write(name)
            os.replace(marker + ".tmp", marker)
            end = time.monotonic() + 120
            while time.monotonic() < end:
                time.sleep(0.005)
        return None

sys.meta_path.insert(0, Hold())
runpy.run_module("neuron_sim.cli", run_name="__main__", alter_sys=True)
"""


@needs_proc
@pytest.mark.parametrize("held, argv", [
    ("neuron_sim.commands", ["verify", "endless.hlo", "endless.hlo", "--out", "cex"]),
    ("neuron_sim.verify.api", ["verify", "endless.hlo", "endless.hlo", "--out", "cex"]),
    ("neuron_sim.interpreter.evaluator", ["run", "endless.hlo", "-o", "out.npz"]),
], ids=["the command line's own", "verify's modules", "run's modules"])
def test_ctrl_c_while_the_commands_are_imported_is_the_one_line_and_130(work, tmp_path_factory,
                                                                         held, argv):
    """SIGINT while the command line imports its own modules, or the modules of the command
    it was given (imported only once the command is known): not an import traceback but the
    command's interrupted line and exit code 130, at once, and nothing written. The import is
    held (HOLDING_AN_IMPORT), so the signal lands in it however fast the imports are and
    however loaded the machine."""
    (work / "endless.hlo").write_text(ENDLESS)
    before = snapshot(work)
    marker = tmp_path_factory.mktemp("held") / "importing"
    process = subprocess.Popen([sys.executable, "-c", HOLDING_AN_IMPORT, held, str(marker),
                                *argv], cwd=work, env=environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.005)
    assert marker.read_text() == held
    spent = interrupt(process)
    out, err = process.communicate()
    assert process.returncode == 130, err
    assert spent < 1.0
    assert err.strip().splitlines() == ["neuron-sim: interrupted"]
    assert snapshot(work) == before
