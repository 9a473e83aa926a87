"""Trace back never: what a user gets wrong is one sentence naming the file, exit code 2.

Every test runs the real command line as a subprocess (the ``cli`` fixture, or ``mpiexec``) and
judges what the user would see: the exit code, and stderr being the error sentences and nothing
else — never a Python traceback, never "internal error". Each case below reached the user as a
raw exception or a misleading message before (issue 11).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from real_cli import mpiexec, needs_mpiexec


# One f32[4] parameter: the inputs file is what the tests vary.
ONE_PARAMETER = """HloModule one_parameter

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  ROOT %n = f32[4] negate(%p)
}
"""

# Devices 2 and 3 take a branch the interpreter cannot execute; devices 0 and 1 do not. Under
# mpiexec -n 2, rank 1 hosts devices 2-3 (XLA's default assignment, partition-major).
ERROR_ON_RANK_1 = """HloModule error_on_rank_1, num_partitions=4

%unsupported (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %cc = f32[4] custom-call(%x), custom_call_target="NoSuchTarget"
}

%keep (x: f32[4]) -> f32[4] {
  ROOT %x = f32[4] parameter(0)
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %pid = u32[] partition-id()
  %two = u32[] constant(2)
  %high = pred[] compare(%pid, %two), direction=GE
  ROOT %c = f32[4] conditional(%high, %p, %p), true_computation=%unsupported, false_computation=%keep
}
"""


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def assert_one_sentence(code: int, stderr: str, *expected: str) -> str:
    """Exit 2 and a single ``neuron-sim: error:`` line containing every ``expected`` text."""
    assert code == 2, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    lines = error_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith("neuron-sim: error: "), stderr
    for text in expected:
        assert text in lines[0], stderr
    return lines[0]


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "m.hlo"
    path.write_text(ONE_PARAMETER)
    return path


def run_with_inputs(cli, module: Path, inputs: Path) -> tuple[int, str, str]:
    return cli("run", module.name, "--inputs", inputs.name, cwd=module.parent)


# --------------------------------------------------------------------------------------------
# Bad inputs files.

def test_npy_file_renamed_to_npz_names_the_file(cli, module, tmp_path):
    np.save(tmp_path / "in.npy", np.zeros(4, np.float32))
    (tmp_path / "in.npy").rename(tmp_path / "in.npz")
    code, _, stderr = run_with_inputs(cli, module, tmp_path / "in.npz")
    assert_one_sentence(code, stderr, "in.npz", ".npy", "numpy.savez")


def test_header_claiming_a_huge_shape_is_refused_before_loading(cli, module, tmp_path):
    """The header says 10^6 x 10^6 f32 (4 TB); the member holds 16 bytes of data. Loading it
    would be a MemoryError; the header is judged first."""
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        member, {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)})
    member.write(bytes(16))
    with zipfile.ZipFile(tmp_path / "in.npz", "w") as archive:
        archive.writestr("arg0.npy", member.getvalue())
    code, _, stderr = run_with_inputs(cli, module, tmp_path / "in.npz")
    assert_one_sentence(code, stderr, "in.npz", "'arg0'", "entry parameter 0",
                        "[1000000, 1000000]")
    assert "MemoryError" not in stderr


def test_text_file_given_as_npz_is_called_text_not_pickled(cli, module, tmp_path):
    (tmp_path / "in.npz").write_text("arg0 = [1, 2, 3, 4]\n")
    code, _, stderr = run_with_inputs(cli, module, tmp_path / "in.npz")
    line = assert_one_sentence(code, stderr, "in.npz", "text file", "not an npz")
    assert "pickle" not in line


def test_pickled_array_is_refused_naming_the_file_and_the_parameter(cli, module, tmp_path):
    np.savez(tmp_path / "in.npz", arg0=np.array([{"not": "numbers"}] * 4, dtype=object))
    code, _, stderr = run_with_inputs(cli, module, tmp_path / "in.npz")
    assert_one_sentence(code, stderr, "in.npz", "'arg0'", "entry parameter 0", "pickled")


def test_truncated_npz_names_the_file(cli, module, tmp_path):
    np.savez(tmp_path / "whole.npz", arg0=np.arange(4, dtype=np.float32))
    (tmp_path / "in.npz").write_bytes((tmp_path / "whole.npz").read_bytes()[:60])
    code, _, stderr = run_with_inputs(cli, module, tmp_path / "in.npz")
    assert_one_sentence(code, stderr, "in.npz", "not a readable npz")


def test_archive_member_that_is_not_an_array_names_the_member(cli, module, tmp_path):
    with zipfile.ZipFile(tmp_path / "in.npz", "w") as archive:
        archive.writestr("arg0.txt", "1 2 3 4")
    code, _, stderr = run_with_inputs(cli, module, tmp_path / "in.npz")
    assert_one_sentence(code, stderr, "in.npz", "'arg0.txt'", ".npy")


def test_verify_reads_inputs_through_the_same_checks(cli, module, tmp_path):
    (tmp_path / "in.npz").write_text("not an archive\n")
    code, _, stderr = cli("verify", module.name, module.name, "--inputs", "in.npz",
                          cwd=tmp_path)
    assert_one_sentence(code, stderr, "in.npz", "text file")


def test_a_good_npz_still_runs(cli, module, tmp_path):
    np.savez(tmp_path / "in.npz", arg0=np.array([1, -2, 3, -4], np.float32))
    code, stdout, stderr = cli("run", "m.hlo", "--inputs", "in.npz", "-o", "out.npz",
                               cwd=tmp_path)
    assert code == 0, stderr
    with np.load(tmp_path / "out.npz") as out:
        assert out["out0"].tolist() == [[-1, 2, -3, 4]]  # negate, on the one device


# --------------------------------------------------------------------------------------------
# --debug: accepted before or after the command, the same either way.

@pytest.mark.parametrize("where", ("before", "after"))
def test_debug_anywhere_runs_the_command(cli, module, tmp_path, where):
    np.savez(tmp_path / "in.npz", arg0=np.zeros(4, np.float32))
    args = ["run", "m.hlo", "--inputs", "in.npz"]
    args = ["--debug", *args] if where == "before" else [args[0], "--debug", *args[1:]]
    code, _, stderr = cli(*args, cwd=tmp_path)
    assert code == 0 and stderr == "", stderr


@pytest.mark.parametrize("where", ("before", "after"))
def test_debug_anywhere_shows_the_traceback_of_an_error(cli, tmp_path, where):
    args = ["--debug", "check", "missing.hlo"] if where == "before" else \
        ["check", "--debug", "missing.hlo"]
    code, _, stderr = cli(*args, cwd=tmp_path)
    assert code == 2
    assert "Traceback" in stderr and stderr.rstrip().endswith("missing.hlo: no such file")


def test_usage_error_without_debug_has_no_traceback(cli, module):
    code, _, stderr = cli("run", "m.hlo", "--no-such-flag", cwd=module.parent)
    assert code == 2
    assert "Traceback" not in stderr
    assert stderr.rstrip().endswith("unrecognized arguments: --no-such-flag")


# --------------------------------------------------------------------------------------------
# MPI launches.

def test_a_launcher_environment_without_backend_mpi_is_refused(cli, module):
    """What mpiexec (hydra) sets in each process: PMI_SIZE and PMI_RANK."""
    code, stdout, stderr = cli("run", "m.hlo", "--seed", "0", cwd=module.parent,
                               env={"PMI_SIZE": "4", "PMI_RANK": "0"})
    assert stdout == ""
    assert_one_sentence(code, stderr, "4 processes", "PMI_SIZE=4", "add --backend mpi")


def test_other_ranks_refuse_silently(cli, module):
    code, stdout, stderr = cli("run", "m.hlo", "--seed", "0", cwd=module.parent,
                               env={"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"})
    assert (code, stdout, stderr) == (2, "", "")


def test_commands_other_than_run_are_refused_under_a_launcher(cli, module):
    code, _, stderr = cli("check", "m.hlo", cwd=module.parent,
                          env={"PMI_SIZE": "2", "PMI_RANK": "0"})
    assert_one_sentence(code, stderr, "`check`", "without mpiexec")


def test_a_launch_of_one_process_is_an_ordinary_run(cli, module):
    code, _, stderr = cli("run", "m.hlo", "--seed", "0", cwd=module.parent,
                          env={"PMI_SIZE": "1", "PMI_RANK": "0"})
    assert code == 0, stderr


@needs_mpiexec
def test_mpiexec_without_backend_mpi_refuses_once(module):
    done = mpiexec(4, "run", "m.hlo", "--seed", "0", cwd=module.parent)
    assert done.stdout == ""
    assert_one_sentence(done.returncode, done.stderr, "4 processes", "add --backend mpi")


@needs_mpiexec
def test_mpi_error_before_the_run_prints_once_on_its_own_line(module):
    done = mpiexec(3, "run", "m.hlo", "--backend", "mpi", "--inputs", "missing.npz",
                   cwd=module.parent)
    assert_one_sentence(done.returncode, done.stderr, "missing.npz: no such file")


@needs_mpiexec
def test_mpi_error_on_one_rank_prints_once_naming_the_rank(tmp_path):
    (tmp_path / "m.hlo").write_text(ERROR_ON_RANK_1)
    done = mpiexec(2, "run", "m.hlo", "--backend", "mpi", "--seed", "1", cwd=tmp_path)
    assert_one_sentence(done.returncode, done.stderr, "%cc", "NoSuchTarget",
                        "(on MPI rank 1, devices 2-3)")
