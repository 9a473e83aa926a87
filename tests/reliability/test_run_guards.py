"""Never run what is not a program; hang never (issue 11), through the real command line.

Each test runs ``neuron-sim`` as a subprocess (the ``cli`` fixture, or ``mpiexec``) and judges
what the user sees: the exit code, one error sentence on stderr, nothing half-done on stdout,
and — for the guards against hangs and huge allocations — how long the command took.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from real_cli import REPO, mpiexec, needs_mpiexec
CORPUS = REPO / "tests" / "data" / "jax"

# Devices 2 and 3 are in no replica group of the all-reduce: not a program for 4 replicas.
OUTSIDE_EVERY_GROUP = """HloModule outside_every_group, replica_count=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[2] parameter(0)
  ROOT ar = f32[2] all-reduce(p), replica_groups={{0,1}}, to_apply=add
}
"""

# f32[4] per device, no collectives: well formed on any topology.
NEGATE = """HloModule negate

ENTRY main {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
"""

HUGE = """HloModule huge

ENTRY main {
  c = f32[] constant(1)
  b = f32[SIZE,SIZE] broadcast(c), dimensions={}
  ROOT n = f32[SIZE,SIZE] negate(b)
}
"""

HUGE_REDUCED = """HloModule huge

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  s = f32[] add(x, y)
  ROOT m = f32[] maximum(s, x)
}

ENTRY main {
  c = f32[] constant(1)
  b = f32[100000,100000] broadcast(c), dimensions={}
  n = f32[100000,100000] negate(b)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(n, z), dimensions={0,1}, to_apply=add
}
"""

# 10 MB of replicated data (a broadcast of a constant) reduced to a scalar.
SHARED = """HloModule shared

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  c = f32[] constant(1)
  b = f32[2500000] broadcast(c), dimensions={}
  ROOT r = f32[] reduce(b, c), dimensions={0}, to_apply=add
}
"""

FOREVER = """HloModule forever, replica_count=REPLICAS

cond {
  s = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}

body {
  s = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(s, one)
}

ENTRY main {
  zero = s32[] constant(0)
  ROOT w = s32[] while(zero), condition=cond, body=body
}
"""



def forever(replicas: int = 1) -> str:
    return FOREVER.replace("REPLICAS", str(replicas))


# The same loop, ending after 10 iterations.
TEN_ITERATIONS = forever().replace(
    "ROOT t = pred[] constant(true)",
    "ten = s32[] constant(10)\n  ROOT t = pred[] compare(s, ten), direction=LT")


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def one_error_line(stderr: str) -> str:
    """The single ``neuron-sim: error:`` line stderr must consist of."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("neuron-sim: error: "), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    return lines[0]


# --------------------------------------------------------------------------------------------
# Never run what is not a program.


def test_run_refuses_a_module_the_checker_rejects_with_the_checkers_sentence(cli, tmp_path):
    """Before, run printed zeros for devices 2 and 3 and exited 0; `check` rejects the module,
    and run now stops with exit 1 and the same sentence, printing no outputs."""
    hlo = write(tmp_path, "m.hlo", OUTSIDE_EVERY_GROUP)
    code, check_out, _ = cli("check", hlo)
    assert code == 1
    sentence = check_out.splitlines()[0].removeprefix(f"{hlo}: ")
    assert "replica_groups cover 2 replica ids but there are 4 replicas" in sentence
    code, out, err = cli("run", hlo, "--seed", "1")
    assert code == 1 and out == ""
    assert one_error_line(err) == f"neuron-sim: error: {hlo}: {sentence}"


@needs_mpiexec
def test_mpi_run_refuses_the_module_the_same_way_once(tmp_path):
    """On MPI the devices outside every group got uninitialized memory; now every rank stops
    before running, with the local exit code and the message printed once."""
    hlo = write(tmp_path, "m.hlo", OUTSIDE_EVERY_GROUP)
    done = mpiexec(2, "run", hlo, "--backend", "mpi", "--seed", "1")
    assert done.returncode == 1 and done.stdout == ""
    assert "replica_groups cover 2 replica ids but there are 4 replicas" in \
        one_error_line(done.stderr)


def test_a_huge_topology_the_checker_rejects_is_not_simulated(cli, tmp_path):
    """--replicas 1000000 made run simulate the devices after check had rejected them."""
    hlo = write(tmp_path, "m.hlo", OUTSIDE_EVERY_GROUP)
    started = time.monotonic()
    code, out, err = cli("run", hlo, "--seed", "1", "--replicas", "1000000", timeout=60)
    assert time.monotonic() - started < 30
    assert code == 1 and out == ""
    assert "there are 1000000 replicas" in one_error_line(err)


def test_a_huge_topology_over_the_memory_limit_is_refused_with_the_estimate(cli, tmp_path):
    """16,000,000 devices of f32[4] (16 B): the parameter (per device) and the negate live
    together at the negate, then the output is copied out as [D, 4]: 3 x 16 B x 16e6 =
    768,000,000 B = 732 MiB, more than 100 MiB; refused before anything is allocated."""
    hlo = write(tmp_path, "m.hlo", NEGATE)
    started = time.monotonic()
    code, out, err = cli("run", hlo, "--seed", "0", "--replicas", "4000000", "--partitions",
                         "4", "--max-memory", "100M", timeout=60)
    assert time.monotonic() - started < 20
    assert code == 2 and out == ""
    assert one_error_line(err) == (
        f"neuron-sim: error: {hlo}: running it on topology 4000000x4 needs about 732 MiB for "
        "16000000 devices, more than the limit of 100 MiB (--max-memory)")


def test_a_huge_shape_is_refused_with_the_estimate_not_a_memory_error(cli, tmp_path):
    """f32[100000,100000] is 4e10 B; the broadcast and the negate live together and the result
    is copied out: 1.2e11 B = 111.8 GiB, over an 8 GiB limit."""
    hlo = write(tmp_path, "m.hlo", HUGE.replace("SIZE", "100000"))
    code, out, err = cli("run", hlo, "--max-memory", "8G")
    assert code == 2 and out == ""
    assert one_error_line(err) == (
        f"neuron-sim: error: {hlo}: running it on topology 1x1 needs about 112 GiB for 1 device, "
        "more than the limit of 8 GiB (--max-memory)")


def test_the_default_memory_limit_refuses_a_shape_no_machine_holds(cli, tmp_path):
    """f32[1000000,1000000] x 3 = 1.2e13 B (10.9 TiB): over half of any machine's memory."""
    hlo = write(tmp_path, "m.hlo", HUGE.replace("SIZE", "1000000"))
    code, out, err = cli("run", hlo)
    assert code == 2 and out == ""
    assert "needs about 10.9 TiB for 1 device, more than the limit of" in one_error_line(err)


def test_values_the_same_on_every_device_are_counted_once(cli, tmp_path):
    """The 10 MB broadcast of a constant is replicated: on 1000 devices the run needs tens of
    MB, not the 10 GB it would if every device held a copy — it runs under a 200 MB limit."""
    hlo = write(tmp_path, "m.hlo", SHARED)
    code, out, err = cli("run", hlo, "--replicas", "1000", "--max-memory", "200M", "--json")
    assert code == 0, err
    assert '"num_devices": 1000' in out


def test_verify_refuses_a_source_over_the_memory_limit_before_drawing_inputs(cli, tmp_path):
    """The same estimate and sentence as run's, before any input is drawn (inputs for a huge
    parameter were a MemoryError): exit 2 — for a pair the proof on symbolic positions cannot
    take instead (a reduce by a computation of two ops: issue 26 proves the index-uniform
    ones, the next test)."""
    hlo = write(tmp_path, "m.hlo", HUGE_REDUCED)
    code, out, err = cli("verify", hlo, hlo, "--max-memory", "8G")
    assert code == 2 and out == ""
    assert one_error_line(err) == (
        f"neuron-sim: error: {hlo}: running it on topology 1x1 needs about 149 GiB for 1 device, "
        "more than the limit of 8 GiB (--max-memory); the proof on symbolic positions, which "
        "executes nothing, does not apply: %r: its reduction computation is not one binary op of "
        "its two parameters")


def test_verify_proves_an_index_uniform_pair_over_the_memory_limit(cli, tmp_path):
    """f32[100000,100000] (37 GiB a value) negated: too large to execute under 8 GiB, but the
    same at every position, so verify proves it on symbolic positions instead of refusing."""
    hlo = write(tmp_path, "m.hlo", HUGE.replace("SIZE", "100000"))
    code, out, err = cli("verify", hlo, hlo, "--max-memory", "8G")
    assert code == 0, err
    assert "Result: CORRECT (proved for all inputs" in out


# --------------------------------------------------------------------------------------------
# Hang never.


def test_local_run_of_an_endless_loop_ends_at_its_timeout(cli, tmp_path):
    hlo = write(tmp_path, "m.hlo", forever())
    started = time.monotonic()
    code, out, err = cli("run", hlo, "--timeout", "1", timeout=60)
    elapsed = time.monotonic() - started
    assert 1 <= elapsed < 1 + 10
    assert code == 1 and out == ""
    assert one_error_line(err).startswith(
        f"neuron-sim: error: {hlo}: did not finish within 1 s (--timeout), stopped in %w = ")


def test_the_corpus_collatz_loop_on_drawn_inputs_ends_at_its_timeout(cli):
    """Drawn inputs include 0 and negative numbers, on which the Collatz loop never ends."""
    started = time.monotonic()
    code, _, err = cli("run", str(CORPUS / "compiled_while_collatz.hlo"), "--seed", "0",
                       "--timeout", "1", timeout=60)
    assert time.monotonic() - started < 1 + 10
    assert code == 1
    assert "did not finish within 1 s (--timeout)" in one_error_line(err)


@needs_mpiexec
def test_mpi_run_of_an_endless_loop_ends_at_its_timeout(tmp_path):
    hlo = write(tmp_path, "m.hlo", forever(2))
    started = time.monotonic()
    done = mpiexec(2, "run", hlo, "--backend", "mpi", "--timeout", "2", timeout=60)
    assert time.monotonic() - started < 2 + 15
    assert done.returncode == 1
    assert "did not finish within 2 s (--timeout)" in done.stderr


def test_verify_bounds_every_execution_of_an_endless_source(cli, tmp_path):
    """Two input sets, half a second each: FAILED_TO_PROVE (exit 2) in about a second."""
    hlo = write(tmp_path, "m.hlo", forever())
    started = time.monotonic()
    code, out, err = cli("verify", hlo, hlo, "--timeout", "0.5", "--trials", "2", timeout=60)
    assert time.monotonic() - started < 1 + 10
    assert code == 2, err
    assert "did not finish within 0.5 s" in out and "Result: FAILED_TO_PROVE" in out


def test_verify_reports_a_target_that_never_ends_as_unsound(cli, tmp_path):
    source = write(tmp_path, "before.hlo", TEN_ITERATIONS)
    target = write(tmp_path, "after.hlo", forever())
    started = time.monotonic()
    code, out, _ = cli("verify", source, target, "--timeout", "1", "--no-minimize", timeout=60)
    assert time.monotonic() - started < 1 + 10
    assert code == 1
    assert "ERROR: Target fails where source does not" in out
    assert "did not finish within 1 s" in out


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
@pytest.mark.parametrize("command", ["run", "verify"])
def test_a_time_limit_that_is_not_positive_is_a_usage_error(cli, tmp_path, command, value):
    hlo = write(tmp_path, "m.hlo", forever())
    args = [hlo, hlo] if command == "verify" else [hlo]
    code, out, err = cli(command, *args, f"--timeout={value}", timeout=60)
    assert code == 2 and out == ""
    assert "argument --timeout: the time limit must be a positive number of seconds" in err
    assert "Traceback" not in err


@needs_mpiexec
def test_mpi_run_refuses_a_zero_time_limit(tmp_path):
    hlo = write(tmp_path, "m.hlo", forever(2))
    done = mpiexec(2, "run", hlo, "--backend", "mpi", "--timeout", "0", timeout=60)
    assert done.returncode == 2
    assert "the time limit must be a positive number of seconds" in done.stderr


def test_verify_shows_progress_on_a_terminal_and_not_when_captured(tmp_path):
    """With stderr a terminal, a status line names the execution under way; captured (as
    above, and in CI) stderr stays empty and stdout is the same report."""
    hlo = write(tmp_path, "m.hlo", forever())
    argv = [sys.executable, "-m", "neuron_sim.cli", "verify", hlo, hlo, "--timeout", "0.5",
            "--trials", "1"]
    env = dict(os.environ, PYTHONPATH=str(REPO), TERM="xterm", COLUMNS="120")
    captured = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert captured.stderr == ""
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=follower, text=True,
                              env=env, timeout=60)
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal is closed once everything was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert done.stdout == captured.stdout
    assert b"execution 1 (forever on topology 1x1)" in shown
