"""The ``neuron-sim`` command.

Thin on purpose and on top of everything (nothing imports it): each package contributes its
subcommands through a ``commands.py`` module with a function that adds them to the subparsers; the
scaffold they share (exit codes, errors, flag groups) is ``neuron_sim.commands``. This file
wires them up and turns errors into exit codes: a user's mistake (``neuron_sim.errors.UserError``,
an unreadable file) is one sentence with exit code 2; anything else is an internal error with a
pointer to ``--debug``, which shows the traceback. ``--debug`` is accepted before or after the
command (``neuron-sim --debug run M`` and ``neuron-sim run --debug M`` mean the same).

Start-up imports only what the command needs: ``COMMANDS`` names, in help order, each command's
module and one-line help, so ``neuron-sim --help`` lists the commands without importing any, and
``neuron-sim CMD ...`` imports CMD's module alone (its package, numpy and the HLO reader), not
the verifier, the passes or z3 of the others. The arguments are parsed twice: once against the
list, to learn which command they name, then against that command's full parser, so every usage
error and every ``--help`` reads as if all the parsers had been built.

Started by an MPI launcher (``mpiexec -n W``, W > 1), only ``run --backend mpi`` makes sense:
any other command would repeat the whole simulation in every process, so it is refused with a
usage error. Under a launcher an error is printed once, by rank 0 (every rank meets the same
error before the run; during an MPI run the ranks agree on one).

Exit codes: 0 success, 1 the check found a problem, 2 bad usage or bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from typing import Any, Callable, Collection, Iterator, Mapping, Sequence


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C while the commands are still being imported: nothing has run or been written
    yet, so end at once with the command's one line and code 130 (not an import traceback)."""
    sys.stderr.write("neuron-sim: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


@contextlib.contextmanager
def _starting(active: bool = True) -> Iterator[None]:
    """Within the block, Ctrl-C ends the process at once (``_interrupted_while_starting``): for
    the imports, the command line's own and then the command's. Only from the main thread (a
    signal handler can only be set there); afterwards Python's handler is back."""
    if not active or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _interrupted_while_starting)
    try:
        yield
    finally:  # a handler installed outside Python reads as None: put Python's back then
        signal.signal(signal.SIGINT, previous if previous is not None
                      else signal.default_int_handler)


with _starting():
    from neuron_sim import __version__
    from neuron_sim.commands import (EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError,
                                     error_message, is_user_error)
    from neuron_sim.interrupts import watch_interrupts
    from neuron_sim.outputs import discard_pending_writes
    from neuron_sim.process_end import end

# The packages' subcommands, in help order: ``module:function``, the function that adds each to
# the subparsers (one adding several adds them in this order), and the one-line help that
# ``neuron-sim --help`` shows (the same as the module's own; tests/neuron_sim/test_cli_startup.py
# compares them).
COMMANDS: Mapping[str, tuple[str, str]] = {
    "check": ("neuron_sim.check_command:add_check_command",
              "parse and verify modules (files or dump directories); summarize collectives"),
    "run": ("neuron_sim.interpreter.commands:add_run_command", "execute a module on every simulated device"),
    "opt": ("neuron_sim.passes.commands:add_pass_commands",
            "run passes on a module and print the result (like XLA's hlo-opt)"),
    "passes": ("neuron_sim.passes.commands:add_pass_commands", "list every pass: key, class, seed status, contract"),
    "verify": ("neuron_sim.verify.commands:add_verify_commands",
               "check that a rewrite preserves the program on every device (like alive-tv)"),
    "demo": ("neuron_sim.verify.commands:add_verify_commands",
             "a short tour: the seed passes on the bundled examples, and the verdicts"),
    "prove": ("neuron_sim.proofs.commands:add_prove_command",
              "prove with z3 that all-reduce + dynamic-slice folds are sound"),
    "check-schedule": ("neuron_sim.verify.schedule.commands:add_schedule_command",
                       "find where a pipeline runs a context-dependent pass where it is unsafe"),
    "sweep": ("neuron_sim.verify.sweep.commands:add_sweep_command",
              "sweep all-reduce + dynamic-slice folds over topologies, groups and offset forms"),
    "fuzz": ("neuron_sim.verify.fuzz.commands:add_fuzz_command",
             "run passes on random modules and idioms with collectives, and verify them"),
}

# What MPI launchers put in each process's environment: the process count (MPICH and Intel
# MPI's hydra, Open MPI, MVAPICH; MPI_LOCALNRANKS is hydra's count on this host) and the rank.
LAUNCHER_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE",
                           "MPI_LOCALNRANKS")
LAUNCHER_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK",
                           "PMIX_RANK", "MPI_LOCALRANKID")

DEBUG_HELP = "show Python tracebacks instead of one-line errors"


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own usage errors: exit code 2
        launch = mpi_launch()
        if launch is None or launch[0] == 0:
            self.print_usage(sys.stderr)
        raise UsageError(message)


def command_modules() -> list[str]:
    """The ``module:function`` references that add the commands, in help order, each once."""
    return list(dict.fromkeys(reference for reference, _ in COMMANDS.values()))


def command_adder(reference: str) -> Callable[[Any], None]:
    """The function a ``module:function`` reference of ``COMMANDS`` names (its module imported)."""
    module, _, function = reference.partition(":")
    return getattr(importlib.import_module(module), function)


def build_parser(commands: Collection[str] | None = None, *,
                 others: bool = True) -> argparse.ArgumentParser:
    """The ``neuron-sim`` parser. ``commands=None``: every command's full parser (every command
    module imported). Otherwise only the modules of ``commands`` are imported and their
    commands' parsers built; every other command is listed by name and one-line help alone,
    which is all ``neuron-sim --help`` shows and all it takes to tell which command an argument
    list names. ``others=False`` leaves the other commands out: for an argument list that
    names one of ``commands``, which then parses, helps and fails as with them listed (the
    top level's usage names no command: its metavar is COMMAND)."""
    wanted = set(COMMANDS) if commands is None else set(commands)
    parser = _ArgumentParser(
        prog="neuron-sim",
        description="Simulate HLO modules on every device and verify the passes that rewrite them.")
    parser.add_argument("--version", action="version", version=f"neuron-sim {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       parser_class=_ArgumentParser)
    listed: set[str] = set()
    for module in command_modules():
        names = [name for name, (owner, _) in COMMANDS.items() if owner == module]
        if wanted.intersection(names):
            command_adder(module)(subparsers)
        elif others:  # listed only, without arguments (not even -h): every argument is left over
            for name in names:
                subparsers.add_parser(name, help=COMMANDS[name][1], add_help=False)
            listed.update(names)
    for name, command in subparsers.choices.items():
        if name not in listed:
            # SUPPRESS: a subcommand without the flag keeps the value given before the command.
            command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                 help=DEBUG_HELP)
    return parser


def named_command(argv: Sequence[str]) -> str | None:
    """The command that ``argv`` names, parsed as ``neuron-sim`` would parse it (None: none);
    imports no command module. ``neuron-sim --help`` and ``--version`` end here, and an
    unknown command is the usage error it always was. An argument list that starts with a
    command's name names that command (argparse reads a first argument that is not an option
    as the command, and hands everything after it to the command's parser), so that case is
    read without building the parser of the list."""
    if argv and argv[0] in COMMANDS:
        return argv[0]
    known, _ = build_parser(()).parse_known_args(argv)
    return known.command


def mpi_launch(environ: Mapping[str, str] | None = None) -> tuple[int, int, str] | None:
    """``(rank, size, "VARIABLE=value")`` when an MPI launcher started this process as one
    of several (size > 1), else None."""
    environ = os.environ if environ is None else environ
    for name in LAUNCHER_SIZE_VARIABLES:
        value = environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            rank = next((int(environ[r]) for r in LAUNCHER_RANK_VARIABLES
                         if environ.get(r, "").isdigit()), 0)
            return rank, int(value), f"{name}={value}"
    return None


def refuse_repeated_simulation(args: argparse.Namespace,
                               launch: tuple[int, int, str] | None) -> None:
    """A UsageError when an MPI launcher started several processes for a command that would
    run the whole simulation in each of them (anything but ``run --backend mpi``)."""
    if launch is None or (args.command == "run" and getattr(args, "backend", None) == "mpi"):
        return
    _, size, variable = launch
    advice = ("add --backend mpi to share the devices among the processes"
              if args.command == "run" else f"run `neuron-sim {args.command}` without mpiexec")
    raise UsageError(f"`{args.command}` was started by an MPI launcher as {size} processes "
                     f"({variable}), and each would repeat the whole simulation: {advice}")


def _print_error(text: str, launch: tuple[int, int, str] | None) -> None:
    """One write per message (a launcher forwards output by write), from rank 0 only."""
    if launch is None or launch[0] == 0:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``neuron-sim ARGV`` (None: this process's arguments, and the process is the
    command's own) and return its exit code; errors become one line and a code here. A process
    of the command's own ends as soon as the command is over (``process_end.end``: what a
    normal exit does that can be observed, without tearing the interpreter down), so ``main()``
    does not return there."""
    code = _command(argv)
    if argv is None:
        end(code)
    return code


def _command(argv: Sequence[str] | None) -> int:
    """``main`` up to the end of the process: the command run, its exit code."""
    argv_given = argv is not None
    if not argv_given:  # the process is ours: Ctrl-C ends it within a second, even in z3
        watch_interrupts()
    argv = list(sys.argv[1:] if argv is None else argv)
    options = argv[:argv.index("--")] if "--" in argv else argv
    debug = "--debug" in options  # until parsing succeeds: a usage error may come first
    launch = mpi_launch()
    try:
        command = named_command(argv)
        # The command's module, imported now: Ctrl-C meanwhile ends at once, as in the imports
        # above (only in a process of our own: an in-process caller keeps its handler).
        with _starting(active=not argv_given):
            parser = build_parser(() if command is None else (command,),
                                  others=command is None)
        args = parser.parse_args(argv)
        debug = args.debug
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        refuse_repeated_simulation(args, launch)
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except KeyboardInterrupt:
        # The command is over: a further SIGINT (or one already pending) must not raise again
        # while this is reported or Python shuts down, which would end the process by the signal
        # instead of with code 130.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # An interrupt between a temporary file's creation and the write's own clean-up (or in
        # native code that never unwound through it) must not leave the file behind.
        discard_pending_writes()
        _print_error("neuron-sim: interrupted", launch)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        if debug:
            import traceback  # only --debug shows one: not imported at start-up

            _print_error(traceback.format_exc().rstrip("\n"), launch)
        if is_user_error(exc):
            _print_error(f"neuron-sim: error: {error_message(exc)}", launch)
            return getattr(exc, "exit_code", EXIT_USAGE)
        else:
            _print_error(f"neuron-sim: internal error: {type(exc).__name__}: {exc} "
                         f"(rerun with --debug for the traceback)", launch)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
