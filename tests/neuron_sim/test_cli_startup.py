"""The command line's start-up (issue 18): ``neuron-sim --help`` imports no command module, and
``neuron-sim CMD`` imports CMD's alone, yet every help text and usage error reads as if every
parser had been built.

Not timed (``scripts/bench.py --only startup`` measures the seconds): what a path imports is
read from the real command's process, its ``sys.modules`` at exit.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from neuron_sim import cli
from neuron_sim.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# What only some commands need: the verifier and its campaigns, the passes, the proofs' z3,
# property testing, plotting, MPI, the terminal tables, protobuf (binary modules only), XLA.
HEAVY = ("verify", "passes", "z3", "hypothesis", "matplotlib", "mpi4py", "rich", "google",
         "jax", "jaxlib")


# ``python -m neuron_sim.cli ARGV`` as it starts (runpy is what -m uses), writing at exit every
# module in sys.modules to the file named by the first argument.
AS_THE_COMMAND = """
import atexit, runpy, sys
modules_file = sys.argv.pop(1)
atexit.register(lambda: open(modules_file, "w").write("\\n".join(sorted(sys.modules))))
runpy.run_module("neuron_sim.cli", run_name="__main__", alter_sys=True)
"""


def imported_by(*argv: str, cwd: Path = ROOT) -> set[str]:
    """Every module that the real ``neuron-sim ARGV`` process has imported when it exits."""
    with tempfile.TemporaryDirectory() as tmp:
        modules_file = Path(tmp) / "modules.txt"
        done = subprocess.run([sys.executable, "-c", AS_THE_COMMAND, str(modules_file), *argv],
                              capture_output=True, text=True, cwd=cwd, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return set(modules_file.read_text().split())


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in packages)


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def test_the_top_level_help_imports_no_command_and_not_numpy():
    modules = imported_by("--help")
    assert "neuron_sim.commands" in modules  # the list is read: the scaffold is in it
    assert loaded(modules, HEAVY + ("interpreter", "numpy")) == []
    assert not any(m.startswith("neuron_sim.hlo") for m in modules)


def test_run_help_imports_run_s_parser_but_not_the_interpreter_nor_numpy():
    """The parser of ``run`` is read; what executes a module (the evaluator, its ops, numpy)
    is imported only by the handler."""
    modules = imported_by("run", "--help")
    assert "neuron_sim.interpreter.commands" in modules
    assert loaded(modules, HEAVY + ("numpy",)) == []
    assert "neuron_sim.interpreter.evaluator" not in modules and "neuron_sim.interpreter.run_handler" not in modules


# What a run of an f32 module does not need: ml_dtypes (the narrow float and integer types;
# its import alone cost more CPU than the whole run).
NOT_FOR_F32 = ("ml_dtypes",)

# Op families a negate does not use: the interpreter's and the checker's families load on the
# first lookup of one of their opcodes (neuron_sim.lazy.LazyTable).
UNUSED_FAMILIES = tuple(
    f"neuron_sim.{package}.{family}"
    for package in ("interpreter.ops", "hlo.checks")
    for family in ("indexing", "reduce", "linalg", "control", "random", "collective",
                   "batch_norm", "send_recv"))


def test_a_run_imports_nothing_the_run_does_not_use(tmp_path):
    hlo = tmp_path / "tiny.hlo"
    hlo.write_text("HloModule tiny\n\nENTRY main {\n  x = f32[4] parameter(0)\n"
                   "  ROOT y = f32[4] negate(x)\n}\n")
    modules = imported_by("run", str(hlo), "--seed", "0", "-o", str(tmp_path / "out.npz"))
    assert "neuron_sim.interpreter.evaluator" in modules
    assert loaded(modules, HEAVY + NOT_FOR_F32) == []
    assert sorted(modules & set(UNUSED_FAMILIES)) == []
    assert (tmp_path / "out.npz").exists()


def test_a_bf16_run_imports_ml_dtypes_when_it_needs_it(tmp_path):
    """The other side of the lazy import: a module with a narrow type still runs (its dtype
    comes from ml_dtypes, imported on first use) and writes its output. The expected sum is
    exact in bf16: 1.5 + 2 = 3.5 and -2 + 0.25 = -1.75 need at most 3 significant bits."""
    hlo = tmp_path / "narrow.hlo"
    hlo.write_text("HloModule narrow\n\nENTRY main {\n  a = bf16[2] constant({1.5, -2})\n"
                   "  b = bf16[2] constant({2, 0.25})\n  ROOT y = bf16[2] add(a, b)\n}\n")
    out = tmp_path / "out.npz"
    modules = imported_by("run", str(hlo), "-o", str(out))
    assert "ml_dtypes" in modules
    import ml_dtypes
    import numpy as np

    with np.load(out) as saved:
        values = saved["out0"].view(ml_dtypes.bfloat16).astype(np.float32)
    assert values.tolist() == [[3.5, -1.75]]


def test_check_help_imports_the_hlo_reader_alone():
    modules = imported_by("check", "--help")
    assert "neuron_sim.check_command" in modules
    assert loaded(modules, HEAVY + ("interpreter",)) == []


def test_every_command_module_together_still_leaves_z3_out():
    """z3 takes a tenth of a second to import and only the proofs use it: building every
    command's full parser (every command module and every registered pass imported) must not
    load it."""
    code = "import sys, neuron_sim.cli as c; c.build_parser(); print('z3' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    assert done.stdout.strip() == "False"


# --- the table of commands and the modules that register them ------------------------------


def test_the_table_lists_each_modules_commands_in_its_order_with_its_help():
    """COMMANDS (what --help shows without importing) against what each module's own adder
    registers: the same names, in the same order, with the same one-line help."""
    for module in cli.command_modules():
        subparsers = argparse.ArgumentParser().add_subparsers()
        cli.command_adder(module)(subparsers)
        registered = [(a.dest, a.help) for a in subparsers._choices_actions]
        listed = [(name, text) for name, (owner, text) in cli.COMMANDS.items() if owner == module]
        assert registered == listed, module


def test_the_help_without_the_command_modules_is_the_help_with_them():
    assert cli.build_parser(()).format_help() == cli.build_parser().format_help()


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_a_commands_parser_built_alone_is_the_one_built_with_all(name):
    alone = subparser(cli.build_parser((name,)), name)
    together = subparser(cli.build_parser(), name)
    assert alone.format_help() == together.format_help()
    assert alone.format_usage() == together.format_usage()


@pytest.mark.parametrize("argv, command", [
    (["run", "m.hlo"], "run"),
    (["--debug", "run", "m.hlo"], "run"),
    (["run", "--debug", "m.hlo", "--seed", "3"], "run"),
    (["check-schedule", "--help"], "check-schedule"),
    (["--bogus", "opt", "m.hlo"], "opt"),
    (["--debug"], None),
    ([], None),
])
def test_the_named_command_is_read_as_argparse_reads_it(argv, command):
    assert cli.named_command(argv) == command


def test_an_unknown_command_is_the_usage_error_it_always_was(capsys):
    with pytest.raises(UsageError, match="invalid choice: 'frob'"):
        cli.named_command(["frob"])
    assert capsys.readouterr().err.startswith("usage: neuron-sim")


@pytest.mark.parametrize("argv", [
    ["run", "--seed", "x", "m.hlo"],
    ["--bogus", "run", "m.hlo"],
    ["passes", "--frobnicate"],
    ["run", "--debug=1", "m.hlo"],
])
def test_usage_errors_read_as_with_every_parser_built(capsys, argv):
    """The lazily built parser fails on bad arguments with the message and usage line of the
    parser with every command (the reference), and main's exit code is 2."""
    with pytest.raises(UsageError) as reference:
        cli.build_parser().parse_args(argv)
    expected = capsys.readouterr().err
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err == expected + f"neuron-sim: error: {reference.value}\n"
