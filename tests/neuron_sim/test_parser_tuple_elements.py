"""Tuple-element operands ``%name#i``: the form XLA's pass dumps use since JAX 0.12 for an
element of a tuple-shaped instruction (``%add.25 = s32[] add(%param#0, %constant.5.clone)``).

``%p#i`` means exactly what ``get-tuple-element(%p), index=i`` means, so every test compares the
``#`` form with the same module written with get-tuple-element lines (the independent
reference): same checker verdict, same outputs on every device, equal under the symbolic
evaluator; and the ``#`` form prints back as it was read.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from neuron_sim.hlo import HloParseError, Opcode, parse_module
from neuron_sim.hlo.checker import check_module
from neuron_sim.interpreter.api import execute
from neuron_sim.proofs.all_inputs import prove
from neuron_sim.topology import Topology

# A while loop over (counter, accumulator) whose body and condition read the loop tuple with
# '#' operands, an all-reduce over two replicas inside the body, and a nested element (n#0#1)
# and a bare name without '%' (w#1) in the entry.
HASH_FORM = """HloModule jit_loop, replica_count=2

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%body (param: (s32[], f32[4])) -> (s32[], f32[4]) {
  %param = (s32[], f32[4]) parameter(0)
  %constant.5.clone = s32[] constant(1)
  %add.25 = s32[] add(%param#0, %constant.5.clone)
  %ar = f32[4] all-reduce(%param#1), replica_groups={{0,1}}, to_apply=%sum
  %mul = f32[4] multiply(%ar, %param#1)
  ROOT %t = (s32[], f32[4]) tuple(%add.25, %mul)
}

%cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]) parameter(0)
  %c = s32[] constant(3)
  ROOT %lt = pred[] compare(%p#0, %c), direction=LT
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[4]) tuple(%z, %x)
  %w = (s32[], f32[4]) while(%init), condition=%cond, body=%body
  %n = ((s32[], f32[4]), f32[4]) tuple(%w, %x)
  ROOT %r = f32[4] add(%n#0#1, %w#1)
}

"""

# The same module with a get-tuple-element line for every '#' operand.
GTE_FORM = """HloModule jit_loop, replica_count=2

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%body (param: (s32[], f32[4])) -> (s32[], f32[4]) {
  %param = (s32[], f32[4]) parameter(0)
  %constant.5.clone = s32[] constant(1)
  %g0 = s32[] get-tuple-element(%param), index=0
  %add.25 = s32[] add(%g0, %constant.5.clone)
  %g1 = f32[4] get-tuple-element(%param), index=1
  %ar = f32[4] all-reduce(%g1), replica_groups={{0,1}}, to_apply=%sum
  %mul = f32[4] multiply(%ar, %g1)
  ROOT %t = (s32[], f32[4]) tuple(%add.25, %mul)
}

%cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]) parameter(0)
  %c = s32[] constant(3)
  %g = s32[] get-tuple-element(%p), index=0
  ROOT %lt = pred[] compare(%g, %c), direction=LT
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[4]) tuple(%z, %x)
  %w = (s32[], f32[4]) while(%init), condition=%cond, body=%body
  %n = ((s32[], f32[4]), f32[4]) tuple(%w, %x)
  %n0 = (s32[], f32[4]) get-tuple-element(%n), index=0
  %n01 = f32[4] get-tuple-element(%n0), index=1
  %w1 = f32[4] get-tuple-element(%w), index=1
  ROOT %r = f32[4] add(%n01, %w1)
}
"""


def test_the_issues_line_parses_and_its_operand_is_the_tuple_element():
    """The line of the issue (``file.hlo:274:44: expected ',' or ')' after operand %call``):
    ``%param#0`` is element 0 of %param, an s32[]."""
    module = parse_module(HASH_FORM)
    add = module.computation("body").instruction("add.25")
    element = add.operands[0]
    assert element.opcode is Opcode.GET_TUPLE_ELEMENT
    assert element.attrs == {"index": 0}
    assert element.operands[0].name == "param"
    assert str(element.shape.without_layout()) == "s32[]"


def test_the_hash_form_prints_back_as_read():
    module = parse_module(HASH_FORM)
    printed = module.to_text()
    assert printed == HASH_FORM
    assert parse_module(printed).to_text() == printed
    assert module.clone().to_text() == printed


def test_one_element_instruction_per_tuple_and_index():
    """``%param#1`` used twice in the body is one get-tuple-element with two uses."""
    body = parse_module(HASH_FORM).computation("body")
    elements = [i for i in body.instructions if i.opcode is Opcode.GET_TUPLE_ELEMENT]
    assert sorted(i.attrs["index"] for i in elements) == [0, 1]


def test_nested_elements_and_names_without_percent():
    """``n#0#1`` is element 1 of element 0 of %n: %x in the tuple (w, x) -> w's f32[4]."""
    module = parse_module(HASH_FORM.replace("%", ""))
    root = module.entry.root
    inner = root.operands[0]
    assert inner.attrs["index"] == 1 and inner.operands[0].attrs["index"] == 0
    assert inner.operands[0].operands[0].name == "n"
    assert module.to_text() == HASH_FORM.replace("%", "")


def test_same_checker_verdict_outputs_and_symbolic_terms_as_get_tuple_element_lines():
    """Run both forms on 2 replicas: the loop runs 3 times, each multiplying the accumulator
    by the all-reduced sum of it, so the outputs are data-dependent and the interpreter,
    collectives and while loop are all on the path."""
    hashed, lines = parse_module(HASH_FORM), parse_module(GTE_FORM)
    check_module(hashed)
    check_module(lines)
    rng = np.random.default_rng(7)
    inputs = [[rng.standard_normal(4).astype(np.float32) for _ in range(2)]]
    a = execute(hashed, [np.stack(inputs[0])])
    b = execute(lines, [np.stack(inputs[0])])
    assert len(a.outputs) == len(b.outputs) == 1
    np.testing.assert_array_equal(a.outputs[0], b.outputs[0])
    # A hand check of device 0: x -> x * (x0 + x1), three times, plus x again via %n#0#1 = w#1.
    x0, x1 = inputs[0]
    acc = x0
    other = x1
    for _ in range(3):
        total = acc + other
        acc, other = acc * total, other * total
    np.testing.assert_allclose(a.outputs[0][0], acc + acc, rtol=1e-5)
    assert prove(hashed, lines, Topology(2, 1)).outcome == "equal"


@pytest.mark.parametrize(("operand", "message"), [
    ("%param#2", "index 2 is out of range for a tuple of 2 elements"),
    ("%constant.5.clone#0", "needs a tuple operand"),
])
def test_a_bad_element_is_an_error_at_the_operand(operand: str, message: str):
    text = HASH_FORM.replace("add(%param#0,", f"add({operand},")
    with pytest.raises(HloParseError) as info:
        parse_module(text, "f.hlo")
    err = info.value
    assert message in err.message and operand in err.message
    assert (err.line, err.col) == (12, 23)  # the operand's first character


def test_an_element_of_an_undefined_instruction_is_an_error_naming_the_operand():
    with pytest.raises(HloParseError) as info:
        parse_module(HASH_FORM.replace("add(%param#0,", "add(%nothing#0,"), "f.hlo")
    assert "operand %nothing#0 names %nothing, which is not defined" in info.value.message
    assert (info.value.line, info.value.col) == (12, 23)


def test_an_element_written_with_another_shape_is_an_error_naming_it():
    with pytest.raises(HloParseError) as info:
        parse_module(HASH_FORM.replace("add(%param#0,", "add(f32[] %param#0,"), "f.hlo")
    assert "operand %param#0 is written with shape f32[] but is defined as s32[]" \
        in info.value.message


def test_a_hash_without_an_index_is_a_parse_error():
    with pytest.raises(HloParseError) as info:
        parse_module(HASH_FORM.replace("%param#0", "%param#x"), "f.hlo")
    assert "expected a tuple index after '#'" in info.value.message
    assert info.value.line == 12


def test_an_element_the_rewrite_makes_the_root_gets_a_line_of_its_own():
    """A pass that makes the element the root: it no longer fits the operand form, so it
    prints as a get-tuple-element line, and the text still reads back the same."""
    module = parse_module(HASH_FORM)
    body = module.computation("cond")
    element = body.root.operands[0]
    body.root = element
    printed = module.to_text()
    assert f"ROOT %{element.name} = s32[] get-tuple-element(%p), index=0" in printed
    assert parse_module(printed).to_text() == printed


# -- JAX 0.12's own dumps (tests/data/jax_0_12: XLA's text and XLA:CPU's outputs) --------------

JAX_0_12 = Path(__file__).resolve().parents[1] / "data" / "jax_0_12"
HASH_OPERAND = re.compile(r"%[\w.\-]+#\d")
WITH_HASH = sorted(p for p in JAX_0_12.glob("*.hlo") if HASH_OPERAND.search(p.read_text()))


def test_jax_0_12_dumps_with_hash_operands_print_them_back_verbatim():
    """Every line of XLA's own text that uses a ``%p#i`` operand prints back unchanged."""
    assert len(WITH_HASH) >= 5
    for path in WITH_HASH:
        text = path.read_text()
        printed = parse_module(text, str(path)).to_text()
        assert ([line for line in text.splitlines() if HASH_OPERAND.search(line)]
                == [line for line in printed.splitlines() if HASH_OPERAND.search(line)]), path


def _smallest_runnable(count: int) -> list[Path]:
    runnable = [p for p in WITH_HASH if p.with_suffix(".npz").exists()
                and not any(a.dtype.kind == "V" for a in np.load(p.with_suffix(".npz")).values())]
    return sorted(runnable, key=lambda p: p.stat().st_size)[:count]


@pytest.mark.parametrize("path", _smallest_runnable(3), ids=lambda p: p.stem)
def test_jax_0_12_dumps_with_hash_operands_compute_what_xla_computed(path: Path):
    """The outputs XLA:CPU computed for the module (its ``.npz``), on every device."""
    data = np.load(path.with_suffix(".npz"))
    args = [data[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in data))]
    expected = [data[f"out{j}"] for j in range(sum(k.startswith("out") for k in data))]
    result = execute(parse_module(path.read_text(), str(path)), args)
    assert len(result.outputs) == len(expected)
    for got, want in zip(result.outputs, expected):
        np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=1e-6,
                                   atol=1e-6)
