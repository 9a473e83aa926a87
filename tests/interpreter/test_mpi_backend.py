"""The MPI backend under real ``mpiexec``: bit-identical to the local backend, never hanging.

Each launch of mpiexec costs about a second, so one launch per process count W runs a whole batch
of modules (``mpi/run_modules.py``) and the tests compare every module's outputs with the local
backend run in this process. The reference is the local backend (the issue's acceptance
criterion), plus a few expectations written out with numpy where placement could hide a bug
that both backends share.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.interpreter.backends.mpi import per_rank_path
from neuron_sim.interpreter.backends.mpi.layout import RankLayout, RankLayoutError, format_devices
from neuron_sim.interpreter.backends.mpi.protocol import Arrival, check_groups_arrived, describe_mismatch
from neuron_sim.interpreter.transport import Fingerprint
from neuron_sim.hlo import parse_module_file
from neuron_sim.io import read_npz, storable
from neuron_sim.topology import Topology, parse_device_assignment

sys.path.insert(0, str(Path(__file__).parent / "mpi"))
from collective_modules import (DIFFERENT_COLLECTIVES, ERROR_ON_SOME_DEVICES,  # noqa: E402
                                MISMATCH, MODULES)

REPO = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
RUNNER = Path(__file__).parent / "mpi" / "run_modules.py"
CORPUS = REPO / "tests" / "data" / "jax"
WORLD_SIZES = (1, 2, 4)
# A device assignment that reverses the default placement: rank 0 hosts other devices.
REVERSED = "{{7,5,3,1},{6,4,2,0}}"
NATIVE_MODULES = ("ar_cross_replica", "ar_flattened_unsorted", "rs_flattened_iota",
                  "ar_cross_replica_and_partition_shift_add", "ag_cross_replica_and_partition",
                  "a2a_cross_partition", "a2a_tuple_cross_replica",
                  "permute_cross_partition_ring", "permute_cross_replica_partial",
                  "broadcast_cross_partition", "ar_bf16_cross_replica", "ar_two_operands_max",
                  "while_replica_dependent_trips", "cond_partition_dependent_groups",
                  "ragged_cross_partition")


def mpiexec(n: int, *args: str, timeout: float = 150) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([str(MPIEXEC), "-n", str(n), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


def corpus_names() -> list[str]:
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    return [entry["name"] for entry in manifest if entry["runnable"]]


def corpus_devices(name: str) -> int:
    module = parse_module_file(CORPUS / f"{name}.hlo")
    return module.replica_count * module.num_partitions


# --------------------------------------------------------------------------------------------
# The batches: one mpiexec launch per W.

def jobs_for(world_size: int, directory: Path) -> list[dict]:
    jobs = []
    for name in corpus_names():
        if corpus_devices(name) % world_size == 0:
            jobs.append({"name": f"corpus/{name}", "hlo": str(CORPUS / f"{name}.hlo"),
                         "inputs": str(CORPUS / f"{name}.npz"), "mode": "exact"})
    for name, text in MODULES.items():
        path = directory / f"{name}.hlo"
        path.write_text(text)
        jobs.append({"name": f"exact/{name}", "hlo": str(path), "seed": 7, "mode": "exact"})
        jobs.append({"name": f"reversed/{name}", "hlo": str(path), "seed": 8, "mode": "exact",
                     "device_assignment": REVERSED})
        if world_size > 1 and name in NATIVE_MODULES:
            jobs.append({"name": f"native/{name}", "hlo": str(path), "seed": 9,
                         "mode": "native"})
    for job in jobs:
        job["output"] = str(directory / (job["name"].replace("/", "__") + ".npz"))
    return jobs


_BATCHES: dict[int, tuple[list[dict], subprocess.CompletedProcess]] = {}


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    def get(world_size: int) -> tuple[dict[str, dict], subprocess.CompletedProcess]:
        if world_size not in _BATCHES:
            directory = tmp_path_factory.mktemp(f"mpi_w{world_size}")
            jobs = jobs_for(world_size, directory)
            spec = directory / "jobs.json"
            spec.write_text(json.dumps(jobs))
            done = mpiexec(world_size, sys.executable, str(RUNNER), str(spec))
            _BATCHES[world_size] = (jobs, done)
        jobs, done = _BATCHES[world_size]
        assert done.returncode == 0, f"the batch failed:\n{done.stdout}\n{done.stderr}"
        return {job["name"]: job for job in jobs}, done

    return get


def local_outputs(job: dict) -> list[np.ndarray]:
    module = parse_module_file(job["hlo"])
    topology = Topology(module.replica_count, module.num_partitions,
                        parse_device_assignment(job["device_assignment"])
                        if job.get("device_assignment") else None)
    inputs = None
    if job.get("inputs"):
        inputs = {k: v for k, v in read_npz(job["inputs"]).items() if k.startswith("arg")}
    return interpreter.run(module, inputs, topology, seed=job.get("seed"))


def stored_outputs(job: dict) -> list[np.ndarray]:
    error = Path(job["output"] + ".error.json")
    assert not error.exists(), f"{job['name']} failed under MPI: {error.read_text()}"
    arrays = read_npz(job["output"])
    return [arrays[f"out{j}"] for j in range(len(arrays))]


def assert_bit_identical(mpi: list[np.ndarray], local: list[np.ndarray], what: str) -> None:
    assert len(mpi) == len(local), what
    for j, (got, expected) in enumerate(zip(mpi, local)):
        expected = storable(expected)
        assert got.shape == expected.shape and got.dtype == expected.dtype, f"{what} out{j}"
        assert got.tobytes() == expected.tobytes(), f"{what} out{j} differs from local"


def batch_cases(kinds: tuple[str, ...]) -> list:
    cases = []
    for world_size in WORLD_SIZES:
        names = [f"corpus/{n}" for n in corpus_names()
                 if corpus_devices(n) % world_size == 0] if "corpus" in kinds else []
        for kind in kinds:
            if kind != "corpus":
                names += [f"{kind}/{n}" for n in MODULES
                          if kind != "native" or (world_size > 1 and n in NATIVE_MODULES)]
        cases += [pytest.param(world_size, name, id=f"W{world_size}-{name}") for name in names]
    return cases


@pytest.mark.parametrize("world_size, name", batch_cases(("corpus", "exact", "reversed")))
def test_exact_mode_is_bit_identical_to_local(batches, world_size, name):
    jobs, _ = batches(world_size)
    job = jobs[name]
    assert_bit_identical(stored_outputs(job), local_outputs(job), f"W={world_size} {name}")


@pytest.mark.parametrize("world_size, name", batch_cases(("native",)))
def test_native_mode_matches_local_up_to_float_rounding(batches, world_size, name):
    jobs, _ = batches(world_size)
    job = jobs[name]
    for j, (got, expected) in enumerate(zip(stored_outputs(job), local_outputs(job))):
        expected = storable(expected)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        else:  # integers, predicates, and bf16 (stored as raw bytes; exact fallback) exactly
            assert got.tobytes() == expected.tobytes(), f"{name} out{j}"


def test_every_runnable_corpus_module_ran_with_one_two_and_four_ranks(batches):
    eight_device = [n for n in corpus_names() if corpus_devices(n) == 8]
    assert len(eight_device) >= 20
    for world_size in WORLD_SIZES:
        jobs, _ = batches(world_size)
        for name in eight_device:
            assert Path(jobs[f"corpus/{name}"]["output"]).exists()


def test_shift_add_fold_follows_group_positions_across_ranks(batches):
    """all-reduce(a*2+b) over CrossReplicaAndPartition groups {{1,0}}: positions are replica 1's
    partitions then replica 0's; the fold order is written out here with numpy."""
    jobs, _ = batches(4)
    job = jobs["exact/ar_cross_replica_and_partition_shift_add"]
    (got,) = stored_outputs(job)
    x = interpreter.draw_inputs(parse_module_file(job["hlo"]), Topology(2, 4), 7)["arg0"]
    order = [4, 5, 6, 7, 0, 1, 2, 3]
    acc = x[order[0]].astype(np.int64)
    for device in order[1:]:
        acc = acc * 2 + x[device]
    expected = np.broadcast_to(acc.astype(np.int32), (8, *acc.shape))
    np.testing.assert_array_equal(got, expected)


def test_partial_permute_sends_replica_zero_to_one_and_zeros_elsewhere(batches):
    jobs, _ = batches(2)
    job = jobs["reversed/permute_cross_replica_partial"]
    (got,) = stored_outputs(job)
    x = interpreter.draw_inputs(parse_module_file(job["hlo"]), Topology(2, 4), 8)["arg0"]
    expected = np.zeros_like(x)
    expected[4:8] = x[0:4]  # (replica 1, p) receives (replica 0, p); replica 0 gets zeros
    np.testing.assert_array_equal(got, expected)


# --------------------------------------------------------------------------------------------
# Placement.

def test_default_placement_follows_physical_ids():
    layout = RankLayout(Topology(2, 4), 2)
    # Default assignment: physical id of (r, p) = 2p + r; rank = physical // 4.
    assert layout.hosted(0) == (0, 1, 4, 5)
    assert layout.hosted(1) == (2, 3, 6, 7)


def test_placement_uses_the_order_of_arbitrary_physical_ids():
    topology = Topology(2, 2, parse_device_assignment("{{33,34},{44,12}}"))
    layout = RankLayout(topology, 2)
    # Sorted physical ids 12, 33, 34, 44 -> ordinals: f3=0, f0=1, f1=2, f2=3.
    assert layout.hosted(0) == (0, 3)
    assert layout.hosted(1) == (1, 2)


def test_world_size_must_divide_the_device_count():
    with pytest.raises(RankLayoutError, match="3 processes cannot share the 8 devices"):
        RankLayout(Topology(2, 4), 3)


def test_device_ranges_are_compact():
    assert format_devices([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert format_devices([]) == "none"


def test_per_rank_file_names():
    assert per_rank_path("out/result.npz", 3) == Path("out/result.rank3.npz")
    assert per_rank_path("result", 0) == Path("result.rank0.npz")


# --------------------------------------------------------------------------------------------
# Mismatch sentences are the same whichever side writes them.

def arrival(rank, name, active, *, groups="{{0,1,2,3}}"):
    fingerprint = None if name is None else Fingerprint(
        (("instruction", f"%{name} in %main"), ("opcode", "all-reduce"),
         ("replica_groups", groups)))
    label = "the end of the program" if name is None else f"%{name} = f32[4] all-reduce(%x)"
    return Arrival(rank, fingerprint, label, tuple(active))


def test_mismatch_sentence_is_symmetric_and_names_what_differs():
    a = arrival(0, "ar.1", [0, 1], groups="{{0,1,2,3}}")
    b = arrival(1, "ar.2", [2, 3], groups="{{0,2},{1,3}}")
    text = describe_mismatch(a, b)
    assert text == describe_mismatch(b, a)
    assert text.startswith("collective mismatch: devices 0-1 (rank 0) reached %ar.1")
    assert "instruction (%ar.1 in %main vs %ar.2 in %main)" in text
    assert "replica_groups ({{0,1,2,3}} vs {{0,2},{1,3}})" in text


def test_mismatch_with_a_finished_rank_says_the_collective_was_skipped():
    text = describe_mismatch(arrival(1, None, [2, 3]), arrival(0, "ar.1", [0, 1]))
    assert "devices 2-3 (rank 1) finished the program" in text
    assert "skipped %ar.1 on some of its participants" in text


def test_partial_group_names_the_missing_devices_and_their_rank():
    layout = RankLayout(Topology(1, 8), 4)
    mine = arrival(0, "ar", [0, 1])
    peer = arrival(1, "ar", [2])
    text = check_groups_arrived(mine, [peer], [(0, 1, 2, 3), (4, 5, 6, 7)], layout)
    assert "devices 0-2 reached it but devices 3 (rank 1)" in text
    assert check_groups_arrived(mine, [arrival(1, "ar", [2, 3])],
                                [(0, 1, 2, 3), (4, 5, 6, 7)], layout) is None


# --------------------------------------------------------------------------------------------
# Failures end every process, quickly, with one message.

def launch_with_codes(tmp_path: Path, world_size: int, argv: list[str]) -> tuple[
        subprocess.CompletedProcess, float, list[int]]:
    """``mpiexec -n W argv`` with rank-labelled output; each rank's exit code is recorded by a
    shell wrapper (mpiexec itself reports only one)."""
    codes = tmp_path / "codes"
    codes.mkdir()
    command = " ".join(f'"{a}"' for a in argv)
    # Written then renamed: a rank that mpiexec kills while it records its code leaves no file
    # rather than an empty one.
    wrapper = (f'{command}; code=$?; echo $code > "{codes}/.rank$PMI_RANK" && '
               f'mv "{codes}/.rank$PMI_RANK" "{codes}/rank$PMI_RANK"; exit $code')
    started = time.monotonic()
    try:
        done = mpiexec(world_size, "-prepend-pattern", LABEL, "sh", "-c", wrapper, timeout=60)
    except subprocess.TimeoutExpired as expired:  # say what was still alive, for the next look
        processes = subprocess.run(["ps", "-eo", "pid,ppid,stat,etime,args"],
                                   capture_output=True, text=True).stdout
        alive = [line for line in processes.splitlines() if "mpi" in line or "run_modules" in line
                 or "hydra" in line]
        codes_seen = sorted(p.name for p in codes.iterdir())
        pytest.fail(f"mpiexec -n {world_size} did not end within 60 s; exit codes recorded: "
                    f"{codes_seen}; processes still alive:\n" + "\n".join(alive)
                    + f"\nstdout: {expired.stdout!r}\nstderr: {expired.stderr!r}")
    elapsed = time.monotonic() - started
    rank_codes = [int((codes / f"rank{k}").read_text()) for k in range(world_size)
                  if (codes / f"rank{k}").exists()]
    return done, elapsed, rank_codes


def run_single(tmp_path: Path, world_size: int, text: str, **job) -> tuple[
        subprocess.CompletedProcess, float, list[int]]:
    """One job of the batch runner in its own launch."""
    hlo = tmp_path / "module.hlo"
    hlo.write_text(text)
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps([{"name": "single", "hlo": str(hlo), "seed": 3,
                                 "output": str(tmp_path / "out.npz"), **job}]))
    return launch_with_codes(tmp_path, world_size, [sys.executable, str(RUNNER), str(spec)])


def cli(*args: str) -> list[str]:
    """The ``neuron-sim`` console script's command line, without installing it."""
    return [sys.executable, "-c", "import sys; from neuron_sim.cli import main; sys.exit(main())",
            *args]


LABEL = "@@%r@@"  # mpiexec's label for each piece of a rank's output


def error_lines(stderr: str) -> list[str]:
    """The ``neuron-sim: error:`` lines of every rank, rank by rank.

    mpiexec labels each piece of output it forwards, not each line, so pieces of different
    ranks interleave; each rank's stream is put back together from its labelled pieces.
    """
    pieces = re.split(r"@@(\d+)@@", stderr)
    streams: dict[int, str] = {}
    for rank, piece in zip(pieces[1::2], pieces[2::2]):
        streams[int(rank)] = streams.get(int(rank), "") + piece
    if not streams:  # not launched by mpiexec
        streams = {0: stderr}
    return [line for rank in sorted(streams) for line in streams[rank].splitlines()
            if line.startswith("neuron-sim: error:")]


@pytest.mark.parametrize("world_size", (2, 4))
def test_device_dependent_branch_skipping_a_collective_ends_every_rank(tmp_path, world_size):
    done, elapsed, codes = run_single(tmp_path, world_size, MISMATCH)
    assert elapsed < 30
    assert done.returncode != 0
    assert len(codes) == world_size and all(code == 1 for code in codes), done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1, "rank 0 alone prints the agreed message: " + done.stderr
    message = lines[0]
    assert "collective mismatch" in message and "%ar = f32[4]" in message
    assert "devices 0-1 (rank 0) reached" in message
    error = json.loads((tmp_path / "out.npz.error.json").read_text())
    assert error["exit_code"] == 1 and error["message"] == message.split("error: ", 1)[1]


def test_single_rank_mismatch_names_the_devices_that_did_not_arrive(tmp_path):
    done, elapsed, codes = run_single(tmp_path, 1, MISMATCH)
    assert codes == [1]
    error = json.loads((tmp_path / "out.npz.error.json").read_text())
    assert "devices 0-1 reached it but devices 2-7 (rank 0)" in error["message"]


def test_a_rank_killed_mid_run_ends_the_job(tmp_path):
    done, elapsed, codes = run_single(tmp_path, 4, MODULES["ar_cross_replica"], kill=[1, 0])
    assert elapsed < 30
    assert done.returncode != 0
    assert "BAD TERMINATION" in done.stdout + done.stderr  # mpiexec names the failed process
    assert (tmp_path / "codes" / "rank1").read_text().strip() == str(128 + 9)  # SIGKILL
    assert not (tmp_path / "out.npz").exists()


def test_a_rank_that_fails_before_the_run_does_not_keep_the_others_waiting(tmp_path):
    done, elapsed, codes = run_single(tmp_path, 2, MODULES["ar_cross_replica"], exit_before=1,
                                      timeout=3)
    assert elapsed < 30
    assert done.returncode != 0
    assert "not every MPI process started the run within 3 s" in done.stderr


def test_watchdog_ends_a_run_that_never_finishes(tmp_path):
    spin = """HloModule spin, num_partitions=2

%never (s: s32[]) -> pred[] {
  %s = s32[] parameter(0)
  ROOT %t = pred[] constant(true)
}

%step (s: s32[]) -> s32[] {
  %s = s32[] parameter(0)
  %one = s32[] constant(1)
  ROOT %n = s32[] add(%s, %one)
}

ENTRY %main () -> s32[] {
  %zero = s32[] constant(0)
  ROOT %w = s32[] while(%zero), condition=%never, body=%step
}
"""
    # The body counts (a loop whose state repeats is found endless at once, without the
    # watchdog: test_loop_never_ends.py).
    done, elapsed, codes = run_single(tmp_path, 2, spin, timeout=3)
    assert elapsed < 30
    assert done.returncode != 0
    assert "did not finish within 3 s (--timeout)" in done.stderr


def test_ranks_reaching_different_collectives_name_both(tmp_path):
    done, elapsed, codes = run_single(tmp_path, 2, DIFFERENT_COLLECTIVES)
    assert elapsed < 30 and codes == [1, 1]
    (message,) = set(error_lines(done.stderr))
    assert "devices 0-3 (rank 0) reached %ar_low" in message
    assert "devices 4-7 (rank 1) reached %ar_high" in message
    assert "they differ in instruction (%ar_low in %low vs %ar_high in %high)" in message


# --------------------------------------------------------------------------------------------
# The command line: neuron-sim run --backend mpi under mpiexec.

def test_cli_output_is_the_local_backends_file(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(MODULES["ar_flattened_unsorted"])
    local = subprocess.run(cli("run", str(hlo), "--seed", "5", "-o", str(tmp_path / "l.npz")),
                           capture_output=True, text=True, cwd=REPO,
                           env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert local.returncode == 0, local.stderr
    done = mpiexec(4, *cli("run", str(hlo), "--backend", "mpi", "--seed", "5",
                           "-o", str(tmp_path / "m.npz")))
    assert done.returncode == 0, done.stderr
    expected, got = read_npz(tmp_path / "l.npz"), read_npz(tmp_path / "m.npz")
    assert sorted(got) == sorted(expected)
    assert all(got[k].tobytes() == expected[k].tobytes() for k in expected)


def test_cli_output_per_rank_holds_each_ranks_devices(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(MODULES["a2a_cross_partition"])
    done = mpiexec(2, *cli("run", str(hlo), "--backend", "mpi", "--seed", "5", "-o",
                           str(tmp_path / "out.npz"), "--output-per-rank"))
    assert done.returncode == 0, done.stderr
    expected = interpreter.run(parse_module_file(hlo), None, seed=5)[0]
    for rank, devices in enumerate(([0, 1, 4, 5], [2, 3, 6, 7])):
        part = read_npz(tmp_path / f"out.rank{rank}.npz")
        assert part["devices"].tolist() == devices
        assert part["out0"].tobytes() == expected[devices].tobytes()
    assert not (tmp_path / "out.npz").exists()


def test_cli_process_count_that_does_not_divide_the_devices_is_a_usage_error(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(MODULES["ar_cross_replica"])
    done, elapsed, codes = launch_with_codes(
        tmp_path, 3, cli("run", str(hlo), "--backend", "mpi", "--seed", "1"))
    assert codes == [2, 2, 2]
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert "3 processes cannot share the 8 devices" in lines[0]
    assert "use one of 1, 2, 4, 8" in lines[0]


def test_cli_error_on_some_ranks_ends_every_rank_with_the_local_message(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(ERROR_ON_SOME_DEVICES)
    local = subprocess.run(cli("run", str(hlo), "--seed", "1"), capture_output=True,
                           text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert local.returncode == 2
    (expected,) = error_lines(local.stderr)
    assert "custom-call" in expected
    done, elapsed, codes = launch_with_codes(
        tmp_path, 2, cli("run", str(hlo), "--backend", "mpi", "--seed", "1"))
    assert elapsed < 30
    assert codes == [2, 2]
    assert error_lines(done.stderr) == [expected + " (on MPI rank 0, devices 0-3)"]


def test_cli_mismatch_exit_code_is_the_local_backends(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(MISMATCH)
    local = subprocess.run(cli("run", str(hlo), "--seed", "1"), capture_output=True,
                           text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    done, elapsed, codes = launch_with_codes(
        tmp_path, 4, cli("run", str(hlo), "--backend", "mpi", "--seed", "1"))
    assert local.returncode == 1
    assert codes == [1, 1, 1, 1]
    assert len(set(error_lines(done.stderr))) == 1
