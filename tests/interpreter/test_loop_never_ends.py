"""A while loop whose state comes back to an earlier one, and whose condition and body compute a
function of the state alone, never ends (neuron_sim/interpreter/ops/control.py): the run stops
at once with ``LoopNeverEnds``, a kind of ``ExecutionTimeout``, instead of at its time limit.
The state is compared at iterations 64, 128, 256, ... with the previous such state. Every
expected outcome is derived by hand in the test's docstring."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.interpreter.errors import ExecutionTimeout, LoopNeverEnds
from neuron_sim.topology import Topology

REPO = Path(__file__).resolve().parents[2]


def loop(condition: str, body: str, state: str = "s32[]", init: str = "constant(0)",
         header: str = "") -> str:
    return f"""HloModule loop{header}
cond {{
  s = {state} parameter(0)
{condition}
}}
body {{
  s = {state} parameter(0)
{body}
}}
ENTRY main {{
  i = {state} {init}
  ROOT w = {state} while(i), condition=cond, body=body
}}"""


ALWAYS = "  ROOT t = pred[] constant(true)"


def test_a_fixed_point_under_a_constant_true_condition_is_found_at_once():
    """body(s) = s + 0: the state is 0 after every iteration, so the states after iterations
    64 and 128 are equal and the condition (always true) keeps it running: it never ends. The
    run stops at once, long before its 10 s limit."""
    module = parse_module(loop(ALWAYS, "  z = s32[] constant(0)\n  ROOT n = s32[] add(s, z)"))
    started = time.process_time()
    with pytest.raises(LoopNeverEnds, match="iteration 128 is its state after iteration 64"):
        interpreter.run(module, [], time_limit=10)
    assert time.process_time() - started < 5


def test_a_cycle_of_two_states_is_found_and_is_a_timeout():
    """body(s) = 1 - s from 0: 0, 1, 0, 1, ...; after an even number of iterations the state
    is 0, so iterations 64 and 128 agree. The error is an ExecutionTimeout, which is what
    callers (run's exit code, verify's failure kinds) already handle."""
    module = parse_module(loop(ALWAYS, "  one = s32[] constant(1)\n"
                                       "  ROOT n = s32[] subtract(one, s)"))
    with pytest.raises(ExecutionTimeout) as caught:
        interpreter.run(module, [], time_limit=10)
    assert isinstance(caught.value, LoopNeverEnds)


def test_a_loop_that_ends_after_many_iterations_is_left_alone():
    """s + 1 while s < 1000: the states at the checkpoints 64, 128, 256, 512 all differ (they
    are 64, 128, 256, 512), and the loop ends with 1000."""
    module = parse_module(loop("  k = s32[] constant(1000)\n"
                               "  ROOT t = pred[] compare(s, k), direction=LT",
                               "  one = s32[] constant(1)\n  ROOT n = s32[] add(s, one)"))
    assert np.asarray(interpreter.run(module, [])[0]).reshape(-1).tolist() == [1000]


def test_a_cycle_of_three_states_is_not_found_and_the_limit_ends_it():
    """(s + 1) mod 3: the state after iteration 2^k is 2^k mod 3, which alternates 1, 2, 1, 2
    over k: no two consecutive checkpoints agree (only cycles whose length is a power of two
    are found), so the time limit ends the run, as before."""
    module = parse_module(loop(ALWAYS, "  one = s32[] constant(1)\n  three = s32[] constant(3)\n"
                                       "  a = s32[] add(s, one)\n"
                                       "  ROOT n = s32[] remainder(a, three)"))
    with pytest.raises(ExecutionTimeout) as caught:
        interpreter.run(module, [], time_limit=0.5)
    assert not isinstance(caught.value, LoopNeverEnds)


def test_a_body_that_draws_random_numbers_is_not_judged_by_its_state():
    """The state stays 0 (the draw is multiplied by 0), but the body draws from the rng: the
    check does not call such a loop endless, and the time limit ends it."""
    module = parse_module(loop(ALWAYS, "  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
                                       "  r = f32[] rng(lo, hi), distribution=rng_uniform\n"
                                       "  z = f32[] constant(0)\n"
                                       "  m = f32[] multiply(r, z)\n"
                                       "  ROOT n = f32[] add(s, m)",
                               state="f32[]", init="constant(0)"))
    with pytest.raises(ExecutionTimeout) as caught:
        interpreter.run(module, [], time_limit=0.5)
    assert not isinstance(caught.value, LoopNeverEnds)


def test_devices_that_stop_early_do_not_hide_one_that_never_does():
    """Per device s starts at its partition id (0 or 1) and the loop runs while s < 1 with
    body(s) = s + 0: device 1 stops at once, device 0 keeps the state 0 forever. After device 1
    leaves, the rows still running are device 0's, whose state repeats: never ends."""
    module = parse_module(loop("  k = s32[] constant(1)\n"
                               "  ROOT t = pred[] compare(s, k), direction=LT",
                               "  z = s32[] constant(0)\n  ROOT n = s32[] add(s, z)",
                               init="convert(p)", header=", num_partitions=2").replace(
        "  i = s32[] convert(p)", "  p = u32[] partition-id()\n  i = s32[] convert(p)"))
    with pytest.raises(LoopNeverEnds):
        interpreter.run(module, [], Topology(1, 2), time_limit=10)


def test_a_large_state_is_not_kept():
    """A fixed point over a 2 MiB state (f32[524288] zeros plus zeros, larger than
    LOOP_STATE_BYTES = 1 MiB): the state is not copied, so the loop is not found endless; the
    time limit ends it."""
    module = parse_module(loop(ALWAYS, "  z = f32[] constant(0)\n"
                                       "  b = f32[524288] broadcast(z), dimensions={}\n"
                                       "  ROOT n = f32[524288] add(s, b)",
                               state="f32[524288]", init="parameter(0)"))
    with pytest.raises(ExecutionTimeout) as caught:
        interpreter.run(module, [np.zeros(524288, np.float32)], time_limit=0.5)
    assert not isinstance(caught.value, LoopNeverEnds)


PASS_THROUGH = """HloModule m
cond {
  s = f32[524288] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  ROOT s = f32[524288] parameter(0)
}
ENTRY e {
  x = f32[524288] parameter(0)
  ROOT w = f32[524288] while(x), condition=cond, body=body
}
"""


def test_a_pass_through_loop_too_large_to_compare_stops_at_the_time_limit():
    """A constant-true condition and a body that returns its state unchanged: their plans
    have no step, so nothing inside them checks the deadline, and the 2 MiB state is past
    what the repeated-state check keeps. The loop itself checks the time limit on each
    iteration: ExecutionTimeout, not a hang (run in a child process, which a hang would
    keep past its 120 s)."""
    code = ("import numpy as np, sys\n"
            "import neuron_sim.interpreter as interpreter\n"
            "from neuron_sim.hlo import parse_module\n"
            "from neuron_sim.interpreter.errors import ExecutionTimeout\n"
            "module = parse_module(sys.stdin.read())\n"
            "try:\n"
            "    interpreter.run(module, [np.zeros(524288, np.float32)], time_limit=0.2)\n"
            "except ExecutionTimeout as error:\n"
            "    print(type(error).__name__)\n")
    done = subprocess.run([sys.executable, "-c", code], input=PASS_THROUGH, text=True,
                          capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.strip() == "ExecutionTimeout", done.stderr
