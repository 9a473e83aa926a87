"""The ``neuron-sim`` command.

Thin on purpose: each package contributes its subcommands through a ``commands.py`` module with a
``register(subparsers)`` function; this file only wires them up and turns errors into one clear
sentence on stderr with exit code 2 (``--debug`` shows the traceback instead).

Exit codes: 0 success, 1 the check found a problem, 2 bad usage or bad input.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from typing import Callable, Sequence

from neuron_sim import __version__

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2

# Packages that contribute subcommands, in help order. A package whose commands module is not
# there yet is skipped; an import error inside one that is there is a bug and is raised.
COMMAND_MODULES = ("neuron_sim.commands", "interpreter.commands", "passes.commands",
                   "verify.commands", "verify.symbolic.commands")


class UsageError(Exception):
    """Bad usage or bad input: reported as one sentence, exit code 2."""


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
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                continue
            raise
        module.register(subparsers)
    return parser


def error_message(exc: BaseException) -> str:
    """One clear sentence for an error a user can fix (HLO parse errors also show the line)."""
    from neuron_sim.hlo.parser import HloParseError

    if isinstance(exc, HloParseError):
        return str(exc)
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{exc.filename}: is a directory"
    if isinstance(exc, PermissionError):
        return f"{exc.filename}: permission denied"
    if isinstance(exc, UnicodeDecodeError):
        return f"input is not UTF-8 text: {exc.reason}"
    return str(exc) or type(exc).__name__


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
        return 130
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


def is_user_error(exc: BaseException) -> bool:
    """Errors in what the user gave us (exit 2), as opposed to a failed check or our own bug."""
    from neuron_sim.hlo.parser import HloParseError

    return isinstance(exc, (UsageError, HloParseError, OSError, UnicodeDecodeError, ValueError,
                            KeyError))


if __name__ == "__main__":
    # Run the imported module's main, so that `python -m neuron_sim.cli` and the console script
    # share one UsageError class with the command modules.
    from neuron_sim.cli import main as _main

    sys.exit(_main())
