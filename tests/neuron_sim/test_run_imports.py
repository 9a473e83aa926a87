"""What ``neuron-sim run`` of a one-op module leaves unimported (issue 27's start-up goal).

Not timed (``scripts/bench.py --only startup`` measures the seconds): each subsystem below is
needed only by some programs, and is imported where it is first used, so a program without
one does not pay for it at start-up. A fresh ``neuron-sim run`` process writes its
``sys.modules`` at exit; the other side of each lazy import (a program that does use the
subsystem gets it, and the same result) is the existing tests of that subsystem, which go
through the same code paths.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

# ``python -m neuron_sim.cli ARGV`` as it starts, writing sys.modules at exit to argv[1].
AS_THE_COMMAND = """
import atexit, runpy, sys
modules_file = sys.argv.pop(1)
atexit.register(lambda: open(modules_file, "w").write("\\n".join(sorted(sys.modules))))
runpy.run_module("neuron_sim.cli", run_name="__main__", alter_sys=True)
"""

ONE_OP = "HloModule tiny\n\nENTRY main {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] negate(x)\n}\n"

# Loaded only by a program that needs them, each with the reason it is not needed here.
NOT_FOR_ONE_OP = {
    # the collectives' descriptors and data functions: a program's first collective (the
    # topology's group modes, the checker's pairing rules, the local transport)
    "neuron_sim.semantics.collectives",
    "neuron_sim.semantics.collectives.descriptor",
    "neuron_sim.semantics.collectives.kinds",
    "neuron_sim.semantics.collectives.reductions",
    "neuron_sim.semantics.collectives.movement",
    # physical device groups: read for a collective's groups or pairs
    "neuron_sim.physical_groups",
    # what a collective call carries (the transport seam alone is imported by the evaluator)
    "neuron_sim.interpreter.collective_calls",
    # the replica-group classes and the structured attribute values (slice, padding, window,
    # dim_labels, sparsity): a module with such an attribute
    "neuron_sim.hlo.replica_groups",
    "neuron_sim.hlo.attribute_values",
    # the sharding checks: a module with a sharding attribute
    "neuron_sim.hlo.checks.sharding",
    # the transcendental kernels: a program's first exp, tanh, sin...
    "neuron_sim.numerics",
    "neuron_sim.numerics.transcendental",
    # the standard library's json (--json output) and traceback (--debug)
    "json",
    "traceback",
}


def modules_of_run(tmp_path: Path, text: str, *inputs: str) -> set[str]:
    """Every module a fresh ``neuron-sim run MODULE INPUTS -o OUT.npz`` has imported at exit
    (``INPUTS``: ``--seed 0`` unless given)."""
    hlo = tmp_path / "module.hlo"
    hlo.write_text(text)
    out = tmp_path / "out.npz"
    modules_file = tmp_path / "modules.txt"
    done = subprocess.run([sys.executable, "-c", AS_THE_COMMAND, str(modules_file), "run",
                           str(hlo), *(inputs or ("--seed", "0")), "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.exists()
    return set(modules_file.read_text().split())


def test_a_one_op_run_leaves_the_subsystems_it_does_not_use_unimported(tmp_path):
    modules = modules_of_run(tmp_path, ONE_OP)
    assert "neuron_sim.interpreter.evaluator" in modules  # it did run
    assert sorted(modules & NOT_FOR_ONE_OP) == []


def test_a_collective_run_loads_them_and_computes_the_sum(tmp_path):
    """The other side: an all-reduce over 2 partitions imports the descriptors and the call,
    and sums: device d's input is d-dependent, so out0 is input0 + input1 on both devices."""
    text = ("HloModule ar, num_partitions=2\n\nadd {\n  a = f32[] parameter(0)\n"
            "  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n"
            "  x = f32[3] parameter(0)\n"
            "  ROOT r = f32[3] all-reduce(x), channel_id=1, replica_groups={}, to_apply=add\n}\n")
    inputs = tmp_path / "in.npz"
    given = np.array([[1, 2, 3], [10, 20, 30]], np.float32)
    np.savez(inputs, arg0=given)
    modules = modules_of_run(tmp_path, text, "--inputs", str(inputs))
    assert {"neuron_sim.semantics.collectives.kinds",
            "neuron_sim.interpreter.collective_calls"} <= modules
    with np.load(tmp_path / "out.npz") as saved:
        assert saved["out0"].tolist() == [[11, 22, 33], [11, 22, 33]]


def test_a_tanh_run_loads_the_numerics_kernels(tmp_path):
    """The other side of the numerics' lazy import: tanh(0) = 0 and tanh(x) = -tanh(-x)
    exactly (the kernel is odd by construction), whatever the drawn inputs."""
    text = ("HloModule t\n\nENTRY main {\n  x = f32[4] parameter(0)\n"
            "  ROOT y = f32[4] tanh(x)\n}\n")
    given = np.array([0.0, 0.5, -0.5, 2.0], np.float32)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, arg0=given)
    modules = modules_of_run(tmp_path, text, "--inputs", str(inputs))
    assert "neuron_sim.numerics.transcendental" in modules
    with np.load(tmp_path / "out.npz") as saved:
        out = saved["out0"][0]
    assert out[0] == 0 and out[1] == -out[2] and 0 < out[1] < out[3] < 1


def test_a_leading_command_name_is_read_as_argparse_reads_it():
    """``cli.named_command`` reads an argument list that starts with a command's name without
    building the parser of the list; argparse's own reading (the list's parser, which is what
    named_command builds otherwise) is the reference, whatever follows the name."""
    from neuron_sim import cli

    tails = [[], ["m.hlo"], ["--version"], ["-h"], ["--help"], ["--debug", "m.hlo"],
             ["--bogus"], ["--", "x"], ["run"], ["check", "--seed", "3"]]
    for name in cli.COMMANDS:
        for tail in tails:
            argv = [name, *tail]
            expected = cli.build_parser(()).parse_known_args(argv)[0].command
            assert cli.named_command(argv) == expected == name, argv


def _outcome(parser, argv, capsys):
    """What parsing ``argv`` gives: the namespace, or the exception's text, and the output."""
    from neuron_sim.errors import UsageError

    try:
        result = sorted(vars(parser.parse_args(argv)).items(), key=lambda item: item[0])
    except (UsageError, SystemExit) as stop:
        result = f"{type(stop).__name__}: {stop}"
    return result, capsys.readouterr()


def test_a_named_command_s_parser_without_the_others_parses_as_with_them(capsys):
    """``main`` builds, for an argument list naming a command, that command's parser without
    the other commands' entries; parsing, ``--help`` and usage errors read as with every
    parser built (the reference)."""
    from neuron_sim import cli

    for name in cli.COMMANDS:
        for argv in ([name, "--help"], [name, "--bogus"], ["--bogus", name], [name, "m.hlo"],
                     ["--debug", name, "m.hlo", "--debug"], [name]):
            alone = _outcome(cli.build_parser((name,), others=False), argv, capsys)
            assert alone == _outcome(cli.build_parser(), argv, capsys), argv
