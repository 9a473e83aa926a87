"""``neuron-sim run``: execute a module on every simulated device.

    neuron-sim run MODULE.hlo [--replicas R] [--partitions P] [--device-assignment '{{..}}']
                   [--inputs IN.npz | --seed S] [-o OUT.npz] [--backend local|mpi|xla] [--json]

Inputs come from an npz file (``arg{i}`` per entry parameter, ``[D, *shape]`` or ``shape``) or
are drawn from ``--seed`` (distinct per device). The outputs go to ``-o OUT.npz`` (``out{j}``
shaped ``[D, *shape]``, written atomically) or are printed as a per-device table (``--json``:
machine-readable). Before anything runs, the module is checked for the topology (as ``check``
and ``verify`` do) and the memory the run needs is estimated (``neuron_sim.interpreter.memory``), so a
module that is not a program for this topology, or would not fit in memory, is refused instead
of half-run. Exit codes: 0 ran, 1 the module fails the checker for the topology, a collective
mismatch (the program would hang) or the run did not finish within ``--timeout``; 2 bad usage,
bad input, more memory than ``--max-memory``, or an op the interpreter cannot execute.
"""

from __future__ import annotations

import argparse

from neuron_sim.commands import (add_command, add_json_argument, add_max_memory_argument,
                                 add_seed_argument, add_timeout_argument)

from neuron_sim.interpreter.defaults import RUN_TIMEOUT as DEFAULT_TIMEOUT


def add_run_command(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "run", handler=run_command,
        help="execute a module on every simulated device",
        description="Execute MODULE.hlo on every device of the topology (replica_count x "
                    "num_partitions, default from the module header) with XLA's collective "
                    "semantics, and print or save every device's outputs.")
    data = parser.add_argument_group("inputs and outputs")
    data.add_argument("--inputs", metavar="IN.npz",
                      help="arg{i} for entry parameter i, shaped [D, *shape] (per device) or "
                           "shape (same on every device), arg{i}.{j} for leaf j of a tuple "
                           "parameter; bf16/f8 may be raw bytes (|V2, |V1)")
    add_seed_argument(data, default=None,
                      help="draw inputs (distinct per device) when --inputs is not given; "
                           "also seeds rng ops (default 0)")
    data.add_argument("-o", "--output", metavar="OUT.npz",
                      help="write out{j} = result leaf j, shaped [D, *shape] (atomically)")
    add_json_argument(data)
    backend = parser.add_argument_group("backend")
    backend.add_argument("--backend", choices=("local", "mpi", "xla"), default="local",
                         help="local: every device in this process (default); mpi: one process "
                              "per block of devices, under mpiexec (docs/mpi.md); xla: compiled "
                              "and run by XLA:CPU on as many host devices (needs jaxlib: the "
                              "xla extra; docs/run.md)")
    backend.add_argument("--mpi-mode", choices=("exact", "native"), default="exact",
                         help="mpi only: exact = bit-identical to local (default); native = "
                              "MPI's own reductions")
    add_timeout_argument(backend, default=DEFAULT_TIMEOUT, metavar="S",
                         help=f"end a run that has not finished after S seconds, exit code 1 "
                              f"(default {DEFAULT_TIMEOUT:g}; inf: no limit)")
    add_max_memory_argument(backend, help="refuse to start a run whose estimated memory "
                                          "exceeds SIZE, e.g. 8G (default: half of the memory "
                                          "available)")
    backend.add_argument("--output-per-rank", action="store_true",
                         help="mpi only: rank k writes OUT.rank{k}.npz with its own devices")


def run_command(args: argparse.Namespace) -> int:
    """The handler: the interpreter is imported only now (``run --help`` does not need it)."""
    from neuron_sim.interpreter.run_handler import handle_run

    return handle_run(args)
