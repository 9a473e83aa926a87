"""The ``neuron-sim`` command.

Thin on purpose and on top of everything (nothing imports it): each package contributes its
subcommands through a ``commands.py`` module with a ``register(subparsers)`` function, listed
below in help order; the scaffold they share (exit codes, errors, flag groups) is
``neuron_sim.commands``. This file wires them up and turns errors into exit codes: a user's
mistake (``neuron_sim.errors.UserError``, an unreadable file) is one sentence with exit code 2;
anything else is an internal error with a pointer to ``--debug``, which shows the traceback.

Exit codes: 0 success, 1 the check found a problem, 2 bad usage or bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import Callable, Sequence

import interpreter.commands
import neuron_sim.check_command
import passes.commands
import verify.commands
import verify.symbolic.commands
from neuron_sim import __version__
from neuron_sim.commands import (EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError,
                                 error_message, is_user_error)

# The packages' subcommands, in help order.
COMMAND_MODULES = (neuron_sim.check_command, interpreter.commands, passes.commands,
                   verify.commands, verify.symbolic.commands)


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own usage errors: exit code 2
        self.print_usage(sys.stderr)
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="neuron-sim",
        description="Simulate HLO modules on every device and verify the passes that rewrite them.")
    parser.add_argument("--version", action="version", version=f"neuron-sim {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show Python tracebacks instead of one-line errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       parser_class=_ArgumentParser)
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except KeyboardInterrupt:
        print("neuron-sim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        if debug:
            traceback.print_exc()
        if is_user_error(exc):
            print(f"neuron-sim: error: {error_message(exc)}", file=sys.stderr)
        else:
            print(f"neuron-sim: internal error: {type(exc).__name__}: {exc} "
                  f"(rerun with --debug for the traceback)", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
