"""What ``neuron-sim run`` does once its arguments are parsed (``neuron_sim.interpreter.commands``
registers the command and imports this module only when it runs): check the module for the
topology, estimate the memory, run it locally or under MPI, and report or save the outputs."""


from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import numpy as np

from neuron_sim.commands import (EXIT_OK, EXIT_PROBLEM, ProblemFound, UsageError,
                                 module_and_topology, print_json)
from neuron_sim.hlo import HloModule
from neuron_sim.hlo.checker import HloCheckError, check_module
from neuron_sim.interrupts import hard_deadline
from neuron_sim.io import output_arrays, read_inputs, write_npz
from neuron_sim.outputs import check_output_file
from neuron_sim.topology import Topology

from neuron_sim.interpreter.arguments import needs_inputs
from neuron_sim.interpreter.memory import default_memory_limit, require_memory

MAX_TABLE_DEVICES = 64


def handle_run(args: argparse.Namespace) -> int:
    """Run the parsed ``neuron-sim run`` command; its exit code."""
    if args.output:
        check_output_file(args.output, [args.module, args.inputs])
    module, topology = module_and_topology(args)
    try:
        check_module(module, topology)
    except (HloCheckError, ValueError) as error:  # ValueError: replica groups, other IR rules
        raise ProblemFound(f"{args.module}: {error}") from error
    max_memory = args.max_memory if args.max_memory is not None else default_memory_limit()
    require_memory(module, topology, max_memory, what=args.module)
    inputs = read_inputs(args.inputs) if args.inputs else None
    if inputs is None and args.seed is None and needs_inputs(module):
        raise UsageError(f"{args.module}: the entry computation has parameters; give "
                         "--inputs IN.npz or --seed S to draw them")
    if args.output_per_rank and (args.backend != "mpi" or not args.output):
        raise UsageError("--output-per-rank needs --backend mpi and -o OUT.npz")
    if args.backend == "mpi":
        return _run_mpi(args, module, topology, inputs)
    if args.backend == "xla":
        return _run_xla(args, module, topology, inputs)
    from neuron_sim.interpreter import (CollectiveMismatchError, ExecutionTimeout, InputError,
                             InterpreterError, execute)
    from neuron_sim.interpreter.errors import LoopNeverEnds

    try:
        with hard_deadline(args.timeout, f"{args.module}: did not finish within "
                                         f"{args.timeout:g} s (--timeout), stopped inside one "
                                         "instruction that ran past the limit"):
            result = execute(module, inputs, topology, seed=args.seed, time_limit=args.timeout)
    except InputError as error:
        raise UsageError(f"{args.inputs}: {error}" if args.inputs else str(error)) from None
    except CollectiveMismatchError as error:
        print(f"neuron-sim: error: {error}", file=sys.stderr)
        return EXIT_PROBLEM
    except ExecutionTimeout as error:
        where = f", stopped in {error.instruction_text}" if error.instruction_text else ""
        if isinstance(error, LoopNeverEnds):  # found without waiting for the limit
            raise ProblemFound(f"{args.module}: {error.reason}{where}") from None
        raise ProblemFound(f"{args.module}: {error.reason} (--timeout){where}") from None
    except InterpreterError as error:
        raise UsageError(str(error)) from error
    replicated = [_is_replicated(v) for v in result.values]
    _report(args, module, topology, result.outputs, replicated,
            {"instructions_executed": result.instructions_executed,
             "device_instructions": result.device_instructions})
    return EXIT_OK


def _is_replicated(value) -> bool:
    from neuron_sim.interpreter.values import PerDevice
    return not isinstance(value, PerDevice)


XLA_NEEDS_JAXLIB = "--backend xla needs jaxlib: pip install 'neuron-sim[xla]'"


def _run_xla(args: argparse.Namespace, module: HloModule, topology: Topology, inputs) -> int:
    """The module compiled and run by XLA:CPU (``neuron_sim.xla_cpu``, a worker process with
    the topology's device count): the same inputs (given or drawn as the local backend draws
    them) and the same reports."""
    from neuron_sim.xla_cpu import XlaRefused, XlaUnavailable, jaxlib_installed, shared_xla
    from neuron_sim.xla_cpu.client import XlaTimeout, per_device_arguments

    if not jaxlib_installed():
        raise UsageError(XLA_NEEDS_JAXLIB)
    if inputs is None:
        from neuron_sim.interpreter.arguments import draw_inputs
        inputs = draw_inputs(module, topology, args.seed or 0)
    from neuron_sim.io import ArgumentError
    try:
        arguments = per_device_arguments(module, inputs, topology.num_devices)
    except ArgumentError as error:
        raise UsageError(f"{args.inputs}: {error}" if args.inputs else str(error)) from None
    except XlaRefused as error:
        raise UsageError(f"{args.module}: {error}") from None
    seconds = args.timeout if math.isfinite(args.timeout) else None
    xla = shared_xla(topology.num_devices)  # one worker per process, closed at exit
    xla.run_seconds = seconds
    xla.fast_compile = False  # XLA's default compile options: what JAX runs
    try:
        outputs = xla.run(module, arguments, topology)
    except XlaUnavailable:
        raise UsageError(XLA_NEEDS_JAXLIB) from None
    except XlaTimeout as error:
        raise ProblemFound(f"{args.module}: {error} (--timeout)") from None
    except XlaRefused as error:
        raise UsageError(f"{args.module}: XLA:CPU refused the module: {error}") from None
    _report(args, module, topology, outputs, [False] * len(outputs),
            {"backend": "xla", "jaxlib": xla.info.get("jaxlib")})
    return EXIT_OK


def _run_mpi(args: argparse.Namespace, module: HloModule, topology: Topology, inputs) -> int:
    try:
        from neuron_sim.interpreter.backends.mpi import MpiRunError, exit_process, run_mpi, write_outputs
    except ImportError as error:
        raise UsageError(f"--backend mpi needs mpi4py ({error}); pip install "
                         "'neuron-sim[mpi]'") from None
    if args.output_per_rank:
        from neuron_sim.interpreter.backends.mpi.launch import check_per_rank_outputs
        check_per_rank_outputs(args.output, [args.module, args.inputs])
    timeout = None if args.timeout == float("inf") else args.timeout
    try:
        result = run_mpi(module, inputs, topology, mode=args.mpi_mode, timeout=timeout,
                         seed=args.seed, gather=not args.output_per_rank)
    except MpiRunError as error:  # already reported by every rank
        exit_process(error.exit_code, clean=bool(error.clean_shutdown))
    if args.output:
        write_outputs(result, args.output, per_rank=args.output_per_rank)
        if result.rank == 0:
            print(f"wrote {args.output}{' (one file per rank)' if args.output_per_rank else ''}")
        return EXIT_OK
    if result.rank == 0 and result.outputs is not None:
        _report(args, module, topology, result.outputs, [False] * len(result.outputs),
                {"processes": result.world_size, "mode": result.mode})
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# Reporting.

def _report(args, module: HloModule, topology: Topology, outputs: list[np.ndarray],
            replicated: list[bool], stats: dict[str, Any]) -> None:
    leaf_shapes = [s for s in module.entry.root.shape.leaves()]
    if args.output:
        write_npz(args.output, output_arrays(outputs))
    if args.json:
        record: dict[str, Any] = {
            "module": module.name, "file": args.module, "topology": str(topology),
            "replica_count": topology.replica_count, "num_partitions": topology.num_partitions,
            "num_devices": topology.num_devices, **stats,
            "outputs": [{"name": f"out{j}", "shape": str(shape.without_layout()),
                         "same_on_every_device": same}
                        for j, (shape, same) in enumerate(zip(leaf_shapes, replicated))]}
        if args.output:
            record["output_file"] = args.output
        else:
            for entry, array in zip(record["outputs"], outputs):
                entry["values"] = [_json_values(row) for row in array]
        print_json(record, indent=1)
        return
    if args.output:
        print(f"{args.module}: ran on {topology.num_devices} "
              f"device{'s' * (topology.num_devices != 1)} (topology {topology}); "
              f"wrote {len(outputs)} output{'s' * (len(outputs) != 1)} to {args.output}")
        return
    _print_table(args.module, topology, outputs, leaf_shapes, replicated)


def _print_table(path: str, topology: Topology, outputs, leaf_shapes, replicated) -> None:
    from rich.console import Console
    from rich.table import Table

    count = topology.num_devices
    table = Table(title=f"{path}: {count} device{'s' * (count != 1)} (topology {topology})",
                  title_justify="left")
    table.add_column("device", justify="right")
    table.add_column("(replica, partition)")
    for j, (shape, same) in enumerate(zip(leaf_shapes, replicated)):
        note = " = on every device" if same and topology.num_devices > 1 else ""
        table.add_column(f"out{j} {shape.without_layout()}{note}")
    shown = range(min(topology.num_devices, MAX_TABLE_DEVICES))
    for f in shown:
        r, p = topology.replica_partition(f)
        table.add_row(str(f), f"({r}, {p})", *(_preview(out[f]) for out in outputs))
    console = Console(width=160)
    console.print(table)
    if topology.num_devices > MAX_TABLE_DEVICES:
        console.print(f"... {topology.num_devices - MAX_TABLE_DEVICES} more devices not shown; "
                      "use -o OUT.npz or --json for all of them")


def _preview(value: np.ndarray, limit: int = 6) -> str:
    """A one-line preview: the values in row-major order, the middle elided past ``limit``."""
    if value.dtype.kind == "V" or (value.dtype.kind == "f" and value.dtype.itemsize < 4):
        value = value.astype(np.float32)
    flat = value.reshape(-1)
    if value.ndim == 0:
        return _format_scalar(flat[0])
    if flat.size <= limit:
        items = [_format_scalar(v) for v in flat]
    else:
        half = limit // 2
        items = [_format_scalar(v) for v in flat[:half]] + ["…"] + \
            [_format_scalar(v) for v in flat[-half:]]
    return "[" + ", ".join(items) + "]"


def _format_scalar(value) -> str:
    if isinstance(value, (np.floating, float)):
        return np.format_float_positional(value, precision=4, trim="-") \
            if value == 0 or 1e-4 <= abs(value) < 1e6 or not np.isfinite(value) \
            else np.format_float_scientific(value, precision=3, trim="-")
    if isinstance(value, np.bool_):
        return "true" if value else "false"
    return str(value)


def _json_values(value: np.ndarray) -> Any:
    if value.dtype.kind == "c":
        return [_json_values(value.real), _json_values(value.imag)]
    if value.dtype.kind == "b":
        return value.tolist()
    if value.dtype.kind in "iu":
        return value.tolist()
    floats = value.astype(np.float64)
    return _finite_or_text(floats.tolist())


def _finite_or_text(item):
    if isinstance(item, list):
        return [_finite_or_text(x) for x in item]
    if math.isnan(item):
        return "nan"
    if math.isinf(item):
        return "inf" if item > 0 else "-inf"
    return item
