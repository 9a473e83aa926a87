"""Launching a run on every MPI rank, and leaving it: the start and the end of the data flow.

``mpiexec -n W neuron-sim run MODULE.hlo --backend mpi`` starts W processes; each one parses the
module, hosts D/W of the D simulated devices (placed by the device assignment, see ``layout``),
prepares its devices' rows of the arguments (``neuron_sim.interpreter.arguments``), runs the shared
evaluator on them and hands every collective to its ``MpiTransport``. Rank 0 then gathers the
outputs (or each rank writes its own).

Python API, for code already running under mpiexec::

    from neuron_sim.interpreter.backends.mpi import run_mpi
    result = run_mpi(module, inputs, topology, mode="exact")   # on every rank
    result.outputs        # rank 0: one [D, *shape] array per result leaf; other ranks: None

Every rank raises the same ``MpiRunError`` when the run ends early (collective mismatch, an
error on some rank, the ``timeout`` watchdog) and rank 0 alone reports it, so the user reads it
once; ``exit_process`` then ends the process the way that keeps mpiexec quiet. A module-level ``mpi4py`` import is avoided: importing mpi4py starts
MPI, which only an MPI run should do.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, NoReturn, Sequence

import numpy as np

from neuron_sim.hlo import HloModule, parse_module
from neuron_sim.io import output_arrays, write_npz
from neuron_sim.outputs import check_output_file
from neuron_sim.topology import Topology

from neuron_sim.interpreter.arguments import prepare_arguments
from neuron_sim.interpreter.backends.mpi.layout import RankLayout, RankLayoutError
from neuron_sim.interpreter.backends.mpi.protocol import (EXIT_INTERNAL, EXIT_MISMATCH, EXIT_TIMEOUT,
                                               MpiRunError)
from neuron_sim.interpreter.backends.mpi.transport import MODES, MpiTransport
from neuron_sim.interpreter.collective_calls import collective_groups
from neuron_sim.interpreter.defaults import RUN_TIMEOUT
from neuron_sim.interpreter.errors import CollectiveMismatchError, LoopNeverEnds
from neuron_sim.interpreter.evaluator import Evaluator
from neuron_sim.interpreter.values import leaves, output_rows

__all__ = ["BLAS_THREAD_VARIABLES", "DEFAULT_TIMEOUT", "MODES", "MpiResult", "MpiRunError",
           "RankLayout", "RankLayoutError", "check_per_rank_outputs", "exit_process",
           "limit_blas_threads", "per_rank_path", "ranks_on_this_host", "run_mpi",
           "write_outputs"]

DEFAULT_TIMEOUT = RUN_TIMEOUT  # the watchdog's default (neuron_sim.interpreter.defaults)


@dataclass
class MpiResult:
    """What one rank knows after a successful run.

    ``local_outputs[j]`` is leaf j stacked over ``devices`` (this rank's flattened ids; a
    read-only view when the value is the same on all of them);
    ``outputs`` is the gathered ``[D, *shape]`` list on rank 0 and None elsewhere (or when not
    gathered).
    """

    rank: int
    world_size: int
    devices: tuple[int, ...]
    local_outputs: list[np.ndarray]
    outputs: list[np.ndarray] | None
    topology: Topology
    mode: str
    collectives_run: int = 0
    instructions_executed: int = 0
    device_instructions: int = 0


def _report(error: MpiRunError) -> None:
    # One write per line: mpiexec forwards (and labels) output by write, not by line.
    sys.stderr.write(f"neuron-sim: error: {error.message}\n")
    sys.stderr.flush()


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                         "BLIS_NUM_THREADS")


LOCAL_SIZE_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE",
                        "MV2_COMM_WORLD_LOCAL_SIZE")


def ranks_on_this_host(world_size: int) -> int:
    """How many ranks share this host, as the launcher says (hydra, Open MPI, MVAPICH), else
    ``world_size`` (every rank on one host: the safe assumption). Read from the environment,
    not by a collective, so that a rank failing before the run keeps nobody waiting."""
    for name in LOCAL_SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return world_size


def limit_blas_threads(ranks_on_host: int) -> int:
    """Give this rank's BLAS its share of the host's cores (at least one thread), and return it.

    Every rank's BLAS would otherwise start one thread per core, W ranks on one host then run W
    times more threads than cores and a matmul-heavy module runs slower than in one process.
    numpy is already loaded when a run starts, so the environment variables (set unless the
    user set them, for libraries loaded later) are not enough: the loaded OpenBLAS is told
    directly, through threadpoolctl when it is installed, else through OpenBLAS's own
    ``openblas_set_num_threads`` (numpy's wheels bundle it with a ``scipy_`` prefix and a ``64_``
    suffix). A user's ``OPENBLAS_NUM_THREADS`` or ``OMP_NUM_THREADS`` wins.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    threads = max(1, cores // max(1, ranks_on_host))
    if any(name in os.environ for name in BLAS_THREAD_VARIABLES[:2]):
        return int(os.environ.get("OPENBLAS_NUM_THREADS") or os.environ["OMP_NUM_THREADS"])
    for name in BLAS_THREAD_VARIABLES:
        os.environ[name] = str(threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        _set_openblas_threads(threads)
    else:
        threadpool_limits(threads, user_api="blas")
    return threads


def _set_openblas_threads(threads: int) -> None:
    """Call ``openblas_set_num_threads`` of every OpenBLAS loaded in this process."""
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()
                     and line.split()[-1].startswith("/")}
    except OSError:
        return
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("", "scipy_"):
            for suffix in ("", "64_"):
                setter = getattr(library, f"{prefix}openblas_set_num_threads{suffix}", None)
                if setter is not None:
                    setter(ctypes.c_int(threads))


def run_mpi(module: HloModule | str, inputs: Sequence[Any] | Mapping[str, Any] | None = None,
            topology: Topology | None = None, *, mode: str = "exact",
            timeout: float | None = DEFAULT_TIMEOUT, seed: int | None = None,
            comm: Any = None, gather: bool = True,
            report: Callable[[MpiRunError], None] = _report) -> MpiResult:
    """Run ``module`` on this rank's devices; call it on every rank of ``comm`` (default world).

    ``inputs`` and ``seed`` mean what they mean for ``interpreter.run`` (every rank reads or
    draws all devices' inputs and keeps its own rows). Raises ``RankLayoutError`` on every rank
    when W does not divide D. When the run ends early every rank calls ``report`` once with the
    agreed error (rank 0 calls ``report`` with it), waits until all ranks got there, and raises
    it as ``MpiRunError``.
    """
    from mpi4py import MPI

    world = MPI.COMM_WORLD if comm is None else comm
    if isinstance(module, str):
        module = parse_module(module)
    if topology is None:
        topology = Topology(module.replica_count, module.num_partitions)
    layout = RankLayout(topology, world.Get_size())
    limit_blas_threads(ranks_on_this_host(world.Get_size()))
    _wait_for_every_rank(world, timeout, report)
    transport = MpiTransport(layout, mode=mode, timeout=timeout, comm=world,
                             collective_groups=collective_groups(module, topology)
                             if mode == "native" else ())
    control = transport.control
    control.start_watchdog(report)
    devices = transport.devices
    try:
        try:
            args = prepare_arguments(module, topology, inputs, seed, devices)
            evaluator = Evaluator(module, topology, transport, seed)
            result = evaluator.run_entry(args, np.asarray(devices, dtype=np.int64))
            # Replicated leaves stay read-only views: gathering or writing copies anyway.
            local = [output_rows(value, len(devices)) for value in leaves(result)]
            transport.finish()
            outputs = transport.gather(local) if gather else None
        except MpiRunError:
            raise
        except CollectiveMismatchError as error:
            transport.fail(error, exit_code=EXIT_MISMATCH)
        except LoopNeverEnds as error:  # a timeout found early: exit 1, as the watchdog's
            transport.fail(error, exit_code=EXIT_TIMEOUT)
        except Exception as error:  # noqa: BLE001 - every rank must end with the same error
            # Bad input, an op we cannot run, our own bug: exit code 2, as `neuron-sim run`.
            transport.fail(error, exit_code=EXIT_INTERNAL)
    except MpiRunError as error:
        error.clean_shutdown = control.conclude(error, report)
        raise
    control.stop_watchdog()
    transport.close()
    return MpiResult(transport.rank, layout.world_size, devices, local, outputs, topology, mode,
                     transport.collectives_run, evaluator.instructions_executed,
                     evaluator.device_instructions)


def _wait_for_every_rank(world: Any, timeout: float | None,
                         report: Callable[[MpiRunError], None]) -> None:
    """Wait (bounded by ``timeout``) until every rank has started the run.

    Setting up the run takes collective MPI calls, which would wait forever for a rank that
    failed before it got here (a module or input file missing on its host, say) and now waits
    in MPI's shutdown. Such a rank never answers; the job is ended instead.
    """
    import time

    request = world.Ibarrier()
    deadline = None if not timeout else time.monotonic() + timeout
    while not request.Test():
        if deadline is not None and time.monotonic() > deadline:
            if world.Get_rank() == 0:
                report(MpiRunError(f"not every MPI process started the run within {timeout:g} "
                                   "s (--timeout); a process that failed before it (a file "
                                   "missing on its host, say) keeps the others waiting",
                                   EXIT_TIMEOUT))
            exit_process(EXIT_TIMEOUT, clean=False)
        time.sleep(0.001)


# ---------------------------------------------------------------------------------------------
# Output and leaving.


def per_rank_path(path: str | os.PathLike, rank: int) -> Path:
    """``out.npz`` -> ``out.rank3.npz``: where rank 3 writes with ``--output-per-rank``."""
    path = Path(path)
    suffix = path.suffix or ".npz"
    return path.with_name(f"{path.stem if path.suffix else path.name}.rank{rank}{suffix}")


def check_per_rank_outputs(path: str | os.PathLike,
                           inputs: Sequence[str | os.PathLike | None], *, comm: Any = None) -> None:
    """Refuse, on every rank alike, ``--output-per-rank`` files of which one would be one of
    ``inputs`` or cannot be written (``neuron_sim.outputs.check_output_file``)."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD if comm is None else comm
    for rank in range(world.Get_size()):
        check_output_file(per_rank_path(path, rank), inputs, option="--output-per-rank")


def write_outputs(result: MpiResult, path: str | os.PathLike, *, per_rank: bool = False) -> None:
    """Rank 0 writes the gathered npz; with ``per_rank`` every rank writes its own devices.

    A per-rank file holds ``out{j}`` stacked over the rank's devices and ``devices``, their
    flattened ids.
    """
    if per_rank:
        arrays = output_arrays(result.local_outputs)
        arrays["devices"] = np.asarray(result.devices, dtype=np.int64)
        write_npz(per_rank_path(path, result.rank), arrays)
    elif result.outputs is not None:
        write_npz(path, output_arrays(result.outputs))


def exit_process(code: int, *, clean: bool = True) -> NoReturn:
    """End this rank: shut MPI down and exit with ``code`` when ``clean``, else ``os._exit``.

    A clean shutdown waits for every rank to finalize; ``os._exit`` is for a rank whose MPI
    state cannot be trusted (a transfer still pending), and makes mpiexec end the others.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    if clean:
        from mpi4py import MPI

        if not MPI.Is_finalized():
            MPI.Finalize()
        sys.exit(code)
    os._exit(code)
