"""A computation is walked instruction by instruction on its first evaluations and runs its
compiled plan from then on (``module_facts.WALKED_EVALUATIONS``): what that must not change.

The two ways of running a computation are two implementations of the same ops, so every
runnable module of the three front ends' corpora (JAX 0.10, JAX 0.12, PyTorch/XLA; tests/data)
is executed both ways here and the outputs compared bit for bit (NaN payloads and the signs of
zeros included); the corpora's own tests compare the default way against the front ends'
per-device results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from interp_helpers import runnable_corpus
from neuron_sim.hlo import parse_module, parse_module_file
from neuron_sim.interpreter import module_facts
from neuron_sim.interpreter.module_facts import facts_of
from neuron_sim.io import read_npz

CORPUS = runnable_corpus()


def _outputs(path: Path, data: Path, walked: int, monkeypatch: pytest.MonkeyPatch
             ) -> list[np.ndarray]:
    """The module's outputs on its corpus inputs, every computation walked on its first
    ``walked`` evaluations."""
    monkeypatch.setattr(module_facts, "WALKED_EVALUATIONS", walked)
    inputs = {k: v for k, v in read_npz(data).items() if k.startswith("arg")}
    return interpreter.run(parse_module_file(path), inputs)


def test_the_corpora_are_all_here() -> None:
    assert len(CORPUS) >= 200


@pytest.mark.parametrize("name,path,data", CORPUS, ids=[c[0] for c in CORPUS])
def test_walked_and_planned_runs_are_bit_identical(name: str, path: Path, data: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    walked = _outputs(path, data, 1 << 30, monkeypatch)
    planned = _outputs(path, data, 0, monkeypatch)
    assert len(walked) == len(planned)
    for j, (a, b) in enumerate(zip(walked, planned)):
        assert a.shape == b.shape and a.dtype == b.dtype, f"output {j}"
        assert a.tobytes() == b.tobytes(), f"output {j}"


ADD = """HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  ROOT r = f32[2] add(x, x)
}
"""


def test_a_computation_is_walked_twice_then_planned() -> None:
    """x + x with x = [1, 2] is [2, 4] on every execute: the first two walk (the module's
    facts hold no plan), the third compiles the plan and runs it, and so do the next."""
    module = parse_module(ADD)
    x = np.array([1, 2], np.float32)
    planned = []
    for _ in range(4):
        assert interpreter.run(module, [x])[0].tolist() == [[2, 4]]
        planned.append(module.entry in facts_of(module).plans)
    assert module_facts.WALKED_EVALUATIONS == 2
    assert planned == [False, False, True, True]


LOOP = """HloModule m

cond {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  five = s32[] constant(5)
  ROOT lt = pred[] compare(i, five), direction=LT
}

body {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[2] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = f32[2] add(v, v)
  ROOT t = (s32[], f32[2]) tuple(j, w)
}

ENTRY main {
  x = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, x)
  loop = (s32[], f32[2]) while(init), condition=cond, body=body
  ROOT out = f32[2] get-tuple-element(loop), index=1
}
"""


def test_a_loop_body_gets_its_plan_within_one_execute() -> None:
    """The body doubles v five times (the condition i < 5 holds for i = 0..4, so it is
    evaluated 6 times and the body 5): [1, 3] -> [32, 96]. Within that one execute the body
    and the condition pass their two walked evaluations and get plans; the entry, evaluated
    once, is walked."""
    module = parse_module(LOOP)
    out = interpreter.run(module, [np.array([1, 3], np.float32)])[0]
    assert out.tolist() == [[32, 96]]
    plans = facts_of(module).plans
    names = {c.name for c in plans}
    assert names == {"cond", "body"}


def test_a_changed_module_starts_walking_again() -> None:
    """A module changed after its plans were made gets new facts, whose computations are
    walked again before being planned: x * x with x = [3, 4] is [9, 16]."""
    module = parse_module(ADD)
    x = np.array([3, 4], np.float32)
    for _ in range(3):
        interpreter.run(module, [x])
    assert module.entry in facts_of(module).plans
    module.entry.root.opcode = type(module.entry.root.opcode).MULTIPLY
    assert interpreter.run(module, [x])[0].tolist() == [[9, 16]]
    assert module.entry not in facts_of(module).plans
