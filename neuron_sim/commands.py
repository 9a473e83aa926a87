"""The command scaffold every subcommand stands on: exit codes, errors, shared flag groups.

Each package contributes its subcommands through a ``commands.py`` module with a
``register(subparsers)`` function; ``neuron_sim/cli.py`` wires them up. What they share is
spelled here once, so every command reads the same flags the same way and fails the same way:

* exit codes — 0 success, 1 the check found a problem, 2 bad usage or bad input, 130 interrupted;
* errors — ``UserError`` (neuron_sim.errors) is the user's to fix: one sentence, exit 2; any
  other exception is our bug: an internal error with a pointer to ``--debug``;
* flag groups — ``--json``, the topology options, ``--seed``, ``--timeout``, ``--max-memory``;
* the prologue — read MODULE.hlo and the topology the user asked for.

Light on purpose: the command line imports this module before it knows which command runs
(``neuron-sim --help`` needs nothing else), so the HLO reader and the topology, which bring
numpy, are imported by the prologue functions that use them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator

from neuron_sim.errors import UsageError, UserError

if TYPE_CHECKING:
    from neuron_sim.hlo import HloModule
    from neuron_sim.topology import Topology

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class ProblemFound(UserError):
    """The command found a problem in the module the user gave — it fails the checker for the
    topology, or its run does not finish in time: one sentence, exit code 1 (not 2: the
    command did its job)."""

    exit_code = EXIT_PROBLEM

__all__ = [
    "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE", "ProblemFound", "UsageError",
    "UserError",
    "add_command", "add_json_argument", "add_max_memory_argument", "add_seed_argument",
    "add_timeout_argument", "add_topologies_argument", "add_topology_arguments",
    "error_message", "is_user_error", "load_module", "module_and_topology", "parse_size",
    "print_json", "topologies_from_args", "topology_from_args",
]


# --------------------------------------------------------------------------------------------
# Registering a command, and the shared flag groups.


def add_command(subparsers: argparse._SubParsersAction, name: str, *, help: str,
                description: str, handler: Callable[[argparse.Namespace], int],
                module: str | None = "MODULE.hlo", module_nargs: str | None = None,
                topology: bool = True, epilog: str | None = None) -> argparse.ArgumentParser:
    """A subcommand: its parser with the positional module (``module=None``: none) and the
    topology options (``topology=False``: none), run by ``handler(args) -> exit code``."""
    parser = subparsers.add_parser(name, help=help, description=description, epilog=epilog)
    if module is not None:
        parser.add_argument("module", metavar=module, nargs=module_nargs)
    if topology:
        add_topology_arguments(parser)
    parser.set_defaults(handler=handler)
    return parser



def add_json_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                      help: str = "machine-readable output on stdout") -> None:
    """``--json``: the command reports as JSON on stdout instead of text."""
    parser.add_argument("--json", action="store_true", help=help)


_INT64_MAX = (1 << 63) - 1


def device_count(text: str) -> int:
    """An argparse type: a replica or partition count, 1 .. 2**63 - 1 (XLA holds both in an
    int64, as the module header's parser checks too)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value <= _INT64_MAX:
        raise argparse.ArgumentTypeError(f"expected a positive integer up to 2**63 - 1 (XLA's "
                                         f"int64), got {text}")
    return value


def seed_value(text: str) -> int:
    """An argparse type: a seed, a non-negative integer (numpy's SeedSequence refuses others)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") \
            from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text}")
    return value


def add_topology_arguments(parser: argparse.ArgumentParser) -> None:
    """``--replicas``, ``--partitions``, ``--device-assignment`` (defaults: the module header)."""
    group = parser.add_argument_group("topology (defaults: the module header)")
    group.add_argument("--replicas", type=device_count, metavar="R",
                       help="replica count (default: the header's replica_count, else 1)")
    group.add_argument("--partitions", type=device_count, metavar="P",
                       help="partition count (default: the header's num_partitions, else 1)")
    group.add_argument("--device-assignment", metavar="'{{0,1},{2,3}}'",
                       help="R x P physical device ids, row r = replica r "
                            "(default: XLA's partition-major assignment)")


def add_topologies_argument(parser: argparse.ArgumentParser, *, help: str) -> None:
    """``--topology RxP`` (repeatable): more topologies beside the topology options' one."""
    parser.add_argument("--topology", action="append", metavar="RxP", help=help)


def add_seed_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *,
                      default: int | None, help: str) -> None:
    """``--seed S``: the seed of whatever the command draws at random."""
    parser.add_argument("--seed", type=seed_value, default=default, metavar="S", help=help)


def add_timeout_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *,
                         default: float | None, help: str, metavar: str = "SECONDS") -> None:
    """``--timeout SECONDS``: a time limit, a positive number of seconds (``inf``: none); zero,
    a negative number or NaN is a usage error."""
    parser.add_argument("--timeout", type=_seconds, default=default, metavar=metavar, help=help)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(
            f"the time limit must be a positive number of seconds (inf for none), not {text}")
    return value


_SIZE_UNITS = {"": 1, "b": 1, "k": 2 ** 10, "kb": 10 ** 3, "kib": 2 ** 10, "m": 2 ** 20,
               "mb": 10 ** 6, "mib": 2 ** 20, "g": 2 ** 30, "gb": 10 ** 9, "gib": 2 ** 30,
               "t": 2 ** 40, "tb": 10 ** 12, "tib": 2 ** 40}


def parse_size(text: str) -> int:
    """``"512M"``, ``"1.5GiB"``, ``"4GB"``, ``"1000"`` -> bytes (K/M/G/T and KiB.. are binary,
    KB/MB/GB/TB decimal); a non-positive or malformed size is an ``ArgumentTypeError``."""
    stripped = text.strip().lower()
    number = stripped.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = stripped[len(number):].strip()
    try:
        value = float(number) * _SIZE_UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(
            f"expected a size such as 512M, 8G or 1.5GiB, not {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"the memory limit must be positive, not {text}")
    return int(value)


def add_max_memory_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *,
                            help: str) -> None:
    """``--max-memory SIZE``: refuse a run whose estimated memory exceeds SIZE (bytes, or with
    a unit: 512M, 8G); the default (None) is the executing package's (half the memory
    available)."""
    parser.add_argument("--max-memory", type=parse_size, default=None, metavar="SIZE",
                        help=help)


# --------------------------------------------------------------------------------------------
# The prologue.


def load_module(path: str) -> HloModule:
    """Read a module file, HLO text or a binary HloModuleProto (``.pb``, ``.pb.gz``), told
    apart by content (HloParseError, ProtoError and OSError reach the CLI as one-line errors).
    Every command reads its modules through here."""
    from neuron_sim.hlo.proto import read_module_file

    return read_module_file(path)


def inferred_topology(args: argparse.Namespace, module: HloModule) -> Topology | None:
    """When neither the topology options nor the module header give both device counts (XLA's
    tests and torch_xla's graphs keep them in the module config): the smallest topology the
    collectives' groups are valid on, keeping the counts that are given
    (``hlo.checks.groups.smallest_topology``); None when nothing needs inferring or the
    collectives fix nothing beyond the header's defaults."""
    from neuron_sim.hlo.checks.groups import smallest_topology
    from neuron_sim.topology import Topology

    explicit = getattr(args, "replicas", None) is not None \
        or getattr(args, "partitions", None) is not None or getattr(args, "device_assignment", None)
    header_r = module.header.get("replica_count")
    header_p = module.header.get("num_partitions")
    if explicit or (header_r is not None and header_p is not None):
        return None
    inferred = smallest_topology(
        module, replica_count=None if header_r is None else int(header_r),
        num_partitions=None if header_p is None else int(header_p))
    if inferred is None or inferred == Topology(module.replica_count, module.num_partitions):
        return None
    return inferred


def topology_from_args(args: argparse.Namespace, module: HloModule) -> Topology:
    """The topology the user asked for, defaulting to the module header's counts, and where the
    header leaves them out, to what the collectives need (``inferred_topology``)."""
    from neuron_sim.topology import Topology, TopologyError, parse_device_assignment

    inferred = inferred_topology(args, module)
    if inferred is not None:
        return inferred
    replicas = args.replicas if args.replicas is not None else module.replica_count
    partitions = args.partitions if args.partitions is not None else module.num_partitions
    assignment = None
    if args.device_assignment:
        assignment = parse_device_assignment(args.device_assignment)
    try:
        return Topology(replicas, partitions, assignment)
    except TopologyError as exc:  # name the module whose header (or options) asked for it
        path = getattr(args, "module", None)
        raise TopologyError(f"{path}: {exc}" if path else str(exc)) from None


def module_and_topology(args: argparse.Namespace) -> tuple[HloModule, Topology]:
    """``args.module`` parsed, and the topology of the topology options for it."""
    module = load_module(args.module)
    return module, topology_from_args(args, module)


def topologies_from_args(args: argparse.Namespace, module: HloModule) -> list[Topology]:
    """``--replicas/--partitions/--device-assignment`` (one topology, default the header's) plus
    every ``--topology RxP``; with only ``--topology`` options, just those."""
    from neuron_sim.topology import Topology, TopologyError

    explicit = args.replicas is not None or args.partitions is not None or args.device_assignment
    extra = []
    for text in args.topology or []:
        try:
            extra.append(Topology.parse(text))
        except TopologyError as exc:
            raise TopologyError(f"--topology {text}: {exc}") from None
    topologies = [topology_from_args(args, module)] if explicit or not extra else []
    for topology in extra:
        if topology not in topologies:
            topologies.append(topology)
    return topologies


def print_json(data: Any, *, indent: int = 2) -> None:
    """``data`` as JSON on stdout, newline-terminated. (json is imported here: only --json
    output needs it, and every command's start-up imports this module.)"""
    import json

    json.dump(data, sys.stdout, indent=indent)
    print()


# --------------------------------------------------------------------------------------------
# Errors.


def is_user_error(exc: BaseException) -> bool:
    """Is ``exc`` a problem in what the user gave us (exit 2, one sentence)? Anything else that
    escapes a command — a bare ValueError included — is our own bug."""
    return isinstance(exc, (UserError, OSError, UnicodeDecodeError))


def error_message(exc: BaseException) -> str:
    """One clear sentence for an error a user can fix (HLO parse errors also show the line)."""
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{exc.filename}: is a directory"
    if isinstance(exc, PermissionError):
        return f"{exc.filename}: permission denied"
    if isinstance(exc, UnicodeDecodeError):
        return f"input is not UTF-8 text: {exc.reason}"
    return str(exc) or type(exc).__name__


# --------------------------------------------------------------------------------------------
# Progress.


@contextlib.contextmanager
def terminal_progress(columns: Callable[[Any], tuple], *, total: float | None = None,
                      description: str = "") -> Iterator[Callable[..., None] | None]:
    """A rich progress display on stderr, yielding ``update(**fields)`` (rich's
    ``Progress.update`` of its one task: ``completed``, ``description``, ``advance``); None when
    stderr is not a terminal, so that piped and captured output stay as they are.
    ``columns(rich.progress)`` gives the display's columns (rich is imported only on a
    terminal)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich import progress as rich_progress
    from rich.console import Console

    with rich_progress.Progress(*columns(rich_progress), console=Console(stderr=True),
                                transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda **fields: bar.update(task, **fields)
