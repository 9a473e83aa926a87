"""Deeply nested calls: never a RecursionError.

A chain of N computations, c{i} calling c{i-1} and c0 negating its parameter, is a module XLA
accepts for any N (the call graph is acyclic). By hand: the entry's result is negate(x) once,
whatever N. Up to the interpreter's MAX_CALL_DEPTH (150) it runs; past it, run and verify say in
one sentence that the interpreter does not execute that many nested calls (exit 2), and check
and prove, which do not execute, still answer (exit 0: nothing to prove is "proven").
"""

from __future__ import annotations

import numpy as np
import pytest

from neuron_sim.interpreter.limits import MAX_CALL_DEPTH


def chain(depth: int) -> str:
    lines = ["HloModule deep_calls", "",
             "%c0 (p: f32[2]) -> f32[2] {", "  %p = f32[2]{0} parameter(0)",
             "  ROOT %n = f32[2]{0} negate(%p)", "}", ""]
    for i in range(1, depth):
        lines += [f"%c{i} (p: f32[2]) -> f32[2] {{", "  %p = f32[2]{0} parameter(0)",
                  f"  ROOT %c = f32[2]{{0}} call(%p), to_apply=%c{i - 1}", "}", ""]
    lines += ["ENTRY %main (x: f32[2]) -> f32[2] {", "  %x = f32[2]{0} parameter(0)",
              f"  ROOT %r = f32[2]{{0}} call(%x), to_apply=%c{depth - 1}", "}"]
    return "\n".join(lines) + "\n"


def test_a_chain_at_the_limit_runs_and_gives_negate(cli, tmp_path):
    path = tmp_path / "at_limit.hlo"
    path.write_text(chain(MAX_CALL_DEPTH))
    np.savez(tmp_path / "in.npz", arg0=np.array([1.5, -2.0], np.float32))
    code, out, err = cli("run", str(path), "--inputs", str(tmp_path / "in.npz"),
                         "-o", str(tmp_path / "out.npz"))
    assert (code, err) == (0, "")
    with np.load(tmp_path / "out.npz") as data:
        assert data["out0"].tolist() == [[-1.5, 2.0]]


@pytest.mark.parametrize("command", [["run", "--seed", "0"], ["verify", "SELF"]])
def test_past_the_limit_executing_commands_say_so_in_one_sentence(cli, tmp_path, command):
    """verify compares the module with itself as a second module, which it executes (a pass
    that changes nothing is CORRECT without executing: the target is the source)."""
    path = tmp_path / "deep.hlo"
    path.write_text(chain(1500))
    code, out, err = cli(*command[:1], str(path),
                         *[str(path) if a == "SELF" else a for a in command[1:]])
    assert code == 2
    assert err == ("neuron-sim: error: the interpreter does not implement 'nested calls' (the "
                   "computations of module deep_calls nest 1500 calls deep; the interpreter "
                   f"executes at most {MAX_CALL_DEPTH} nested calls)\n")


@pytest.mark.parametrize("command", ["check", "prove"])
def test_commands_that_do_not_execute_answer_on_any_depth(cli, tmp_path, command):
    path = tmp_path / "deep.hlo"
    path.write_text(chain(1500))
    code, out, err = cli(command, str(path))
    assert code == 0, err
    assert "Traceback" not in err and "internal error" not in err


def test_call_depth_is_the_longest_chain_and_a_cycle_is_unbounded():
    import sys

    from neuron_sim.hlo import parse_module

    assert parse_module(chain(3)).call_depth() == 3
    cyclic = parse_module(chain(2))
    c1 = cyclic.computation("c1")
    c1.root.attrs["to_apply"] = c1  # c1 now calls itself
    assert cyclic.call_depth() == sys.maxsize
