"""z3 is asked one formula per class of differing pairs that are equal up to renaming their
variables (neuron_sim/proofs/smt.py ``_renaming_classes``): what every device computes on its
own inputs is decided once, and the verdict is the one each pair has on its own.

Expected verdicts are derived by hand in each docstring."""

from __future__ import annotations

import numpy as np
import z3

import neuron_sim.proofs.smt as smt
from neuron_sim import parse_module
from neuron_sim.verify import Status, VerifyOptions, check_modules, check_pass


def _queries(monkeypatch) -> list:
    """Record every formula handed to z3."""
    asked: list = []
    real = smt._check

    def counting(formula, timeout_ms):
        asked.append(formula)
        return real(formula, timeout_ms)

    monkeypatch.setattr(smt, "_check", counting)
    return asked


def test_renamed_formulas_are_one_class_and_shared_variables_are_not_renamed_apart():
    """x + y > 3 and a + b > 3 are the same formula with x, y renamed a, b; x + x > 3 is not (it
    says something about one variable: x + x is even in two's complement, x + y is not), nor is
    y + x > 3 (another operand order, another formula to z3's term sharing, so it is kept: a
    class is never merged on a guess)."""
    x, y, a, b = (z3.BitVec(n, 8) for n in "xyab")
    formulas = [x + y > 3, a + b > 3, x + x > 3, y + x > 3, b + a > 3]
    kept = smt._renaming_classes(formulas)
    assert [str(f) for f in kept] == ["x + y > 3", "x + x > 3"]


def test_distinct_formulas_stay_distinct_classes_however_many():
    """x_k * (k + 1) == k for k = 0..199 are 200 different formulas (each renamed to
    _v0 * (k + 1) == k keeps its own constants), so 200 classes. z3 gives a freed term's id to
    the next new term, so keys compared by id must all stay alive: a first version freed each
    key after use and put these 200 into 2 classes, which would have left 198 formulas
    unasked."""
    xs = [z3.BitVec(f"x{k}", 8) for k in range(200)]
    formulas = [xs[k] * (k + 1) == k for k in range(200)]
    assert [f.get_id() for f in smt._renaming_classes(formulas)] == \
        [f.get_id() for f in formulas]


def test_the_query_is_not_decided_on_an_unrelated_formula():
    """x != x is unsatisfiable, z == 3 is satisfiable: with both among the differing pairs'
    violations, z3 must be asked about both, and the decision is refuted (a class merged by a
    reused id would have dropped z == 3 and proved a false claim)."""
    forms = [z3.BitVec(f"x{k}", 8) != z3.BitVec(f"x{k}", 8) for k in range(50)]
    forms.append(z3.BitVec("z", 8) == 3)
    kept = smt._renaming_classes(forms)
    assert any(f.eq(forms[-1]) for f in kept)
    assert len(kept) == 2


def test_each_device_s_identical_difference_is_decided_by_one_query(monkeypatch):
    """select(p == q, p, q) is q whatever p is: where p == q the select gives p, which has q's
    bits (s32 equality is bit equality), and elsewhere q. So the rewrite to q is exact for all
    inputs; the terms differ (the normal form does not know it) on each of 8 devices x 8
    elements, 64 pairs, each the same formula on that device's own element of p and q. One
    z3 query decides them (before: a joint query over 64 disjuncts, which timed out after
    2.5 s in a fuzz campaign, then 64 queries)."""
    source = parse_module("""HloModule source, replica_count=1, num_partitions=8
ENTRY %main (p: s32[8], q: s32[8]) -> s32[8] {
  %p = s32[8]{0} parameter(0)
  %q = s32[8]{0} parameter(1)
  %c = pred[8]{0} compare(%p, %q), direction=EQ
  ROOT %r = s32[8]{0} select(%c, %p, %q)
}
""")
    target = parse_module("""HloModule target, replica_count=1, num_partitions=8
ENTRY %main (p: s32[8], q: s32[8]) -> s32[8] {
  %p = s32[8]{0} parameter(0)
  %q = s32[8]{0} parameter(1)
  ROOT %r = s32[8]{0} copy(%q)
}
""")
    asked = _queries(monkeypatch)
    result = check_modules(source, target, ["1x8"], VerifyOptions(minimize=False))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    assert any("z3 proved the exact contract on 64 differing term pair(s)" in n
               for n in result.notes), result.notes
    assert len(asked) == 1 and not z3.is_or(asked[0])


def test_a_class_with_a_violation_still_gives_a_witness_from_its_model(monkeypatch):
    """p * 3 == 3703.5 (f32) rewritten to false differs only where p * 3 rounds to 3703.5
    (p = 1234.5 and its neighbours that round there); every device's 4 elements pose the same
    question on their own p, so z3 is asked once, and its model (for the first element) is a
    witness the ordinary checks confirm: UNSOUND, with an input p * 3 == 3703.5."""
    source = parse_module("""HloModule source, replica_count=1, num_partitions=4
ENTRY %main (x: f32[4]) -> pred[4] {
  %x = f32[4]{0} parameter(0)
  %three = f32[] constant(3)
  %t = f32[4]{0} broadcast(%three), dimensions={}
  %y = f32[4]{0} multiply(%x, %t)
  %c = f32[] constant(3703.5)
  %b = f32[4]{0} broadcast(%c), dimensions={}
  ROOT %r = pred[4]{0} compare(%y, %b), direction=EQ
}
""")
    target = parse_module("""HloModule target, replica_count=1, num_partitions=4
ENTRY %main (x: f32[4]) -> pred[4] {
  %x = f32[4]{0} parameter(0)
  %f = pred[] constant(false)
  ROOT %r = pred[4]{0} broadcast(%f), dimensions={}
}
""")
    asked = _queries(monkeypatch)
    result = check_modules(source, target, ["1x4"], VerifyOptions(minimize=False))
    assert result.status is Status.UNSOUND, result.detail
    inputs = np.asarray(result.counterexample.inputs[0]).reshape(-1)
    assert (inputs * np.float32(3) == np.float32(3703.5)).any()
    assert len(asked) == 1


def test_a_few_classes_are_asked_one_by_one(monkeypatch):
    """Deleting the all-reduce here is exact: x + (-x) is 0 in s32, so the select gives x where
    x == 0 and 0 elsewhere, 0 either way; the all-reduce sums eight zeros and the slice squared
    is 0 on every device, with or without it. The terms differ per device (device d's own
    element sits at another place of the sum), 8 classes on 8 devices, each proved by z3 on
    its own in about 0.1 s; their disjunction gave no answer within the joint query's 2.5 s
    (a module drawn by fuzz --seed 7). A few classes are asked one by one: no disjunction."""
    source = parse_module("""HloModule ar_ds_single, replica_count=1, num_partitions=8

%add_s32 (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %add = s32[] add(%a, %b)
}

ENTRY %main (x: s32[8,1]) -> s32[1,1] {
  %x = s32[8,1]{1,0} parameter(0)
  %negate = s32[8,1]{1,0} negate(%x)
  %add = s32[8,1]{1,0} add(%x, %negate)
  %compare = pred[8,1]{1,0} compare(%x, %add), direction=EQ
  %select = s32[8,1]{1,0} select(%compare, %x, %add)
  %all-reduce = s32[8,1]{1,0} all-reduce(%select), channel_id=1, replica_groups={{6,7,3,1,4,0,5,2}}, use_global_device_ids=true, to_apply=%add_s32
  %partition-id = u32[] partition-id()
  %id = s32[] convert(%partition-id)
  %s = s32[] constant(1)
  %offset = s32[] multiply(%id, %s)
  %zero = s32[] constant(0)
  %dynamic-slice = s32[1,1]{1,0} dynamic-slice(%all-reduce, %offset, %zero), dynamic_slice_sizes={1,1}
  ROOT %multiply = s32[1,1]{1,0} multiply(%dynamic-slice, %dynamic-slice)
}
""")
    asked = _queries(monkeypatch)
    result = check_pass(source, "aws_neuron_delete_permute", ["1x8"],
                        VerifyOptions(minimize=False))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    assert 1 < len(asked) <= smt.FEW_CLASSES and not any(z3.is_or(f) for f in asked)
