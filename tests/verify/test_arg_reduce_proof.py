"""argmax / argmin reduces in the proof for all inputs: the closed form of JAX's comparator fold
(``neuron_sim.proofs.symbolic.arg_reduce``) and the flat z3 definitions of a maximum / minimum
(``neuron_sim.proofs.smt``), each checked against the literal left fold written here from the
comparator's HLO text, and TransformVariadicReduce's rewrite proved while wrong rewrites are
refuted with witnesses the interpreter confirms."""

from __future__ import annotations

import pytest
import z3

from neuron_sim.hlo import parse_module
from neuron_sim.proofs import smt
from neuron_sim.proofs.all_inputs import prove
from neuron_sim.proofs.symbolic import TermTable, run_symbolic
from neuron_sim.topology import Topology
from neuron_sim.verify import Status, VerifyOptions, check_modules, check_pass

OPTIONS = VerifyOptions(trials=2, minimize=False)

# JAX's argmax comparator (jnp.argmax of f32 / s32), as lowered_argmax.hlo has it; PICK is GT
# for argmax and LT for argmin, NAN the float form's "or a NaN accumulator".
COMPARATOR = """%cmp (a: T[], i: s32[], b: T[], j: s32[]) -> (T[], s32[]) {
  %a = T[] parameter(0)
  %i = s32[] parameter(1)
  %b = T[] parameter(2)
  %j = s32[] parameter(3)
  %gt = pred[] compare(%a, %b), direction=PICK
  %ne = pred[] compare(%a, %a), direction=NE
  %pick = pred[] NAN
  %v = T[] select(%pick, %a, %b)
  %eq = pred[] compare(%a, %b), direction=EQ
  %lt = pred[] compare(%i, %j), direction=LT
  %tie = pred[] and(%eq, %lt)
  %keep = pred[] or(%pick, %tie)
  %k = s32[] select(%keep, %i, %j)
  ROOT %r = (T[], s32[]) tuple(%v, %k)
}
"""

SOURCE = """HloModule arg
COMPARATOR
ENTRY %main (x: T[N]) -> (T[], s32[]) {
  %x = T[N] parameter(0)
  %iota = s32[N] iota(), iota_dimension=0
  %init = T[] constant(INIT)
  %zero = s32[] constant(0)
  ROOT %r = (T[], s32[]) reduce(%x, %iota, %init, %zero), dimensions={0}, to_apply=%cmp
}
"""


def source_text(et: str, n: int, direction: str) -> str:
    is_float = et == "f32"
    init = {("f32", "max"): "-inf", ("f32", "min"): "inf",
            ("s32", "max"): "-2147483648", ("s32", "min"): "2147483647"}[et, direction]
    comparator = COMPARATOR.replace("PICK", "GT" if direction == "max" else "LT")
    if is_float:
        comparator = comparator.replace("NAN", "or(%gt, %ne)")
    else:  # the integer form: the strict compare alone picks
        comparator = "\n".join(line for line in comparator.splitlines()
                               if "%ne" not in line and "%pick =" not in line)
        comparator = comparator.replace("%pick", "%gt")
    return SOURCE.replace("COMPARATOR", comparator).replace("T[", f"{et}[").replace(
        "N]", f"{n}]").replace("INIT", init)


def literal_fold(xs: list, et: str, direction: str) -> tuple:
    """The comparator's left fold from the init, step by step, in z3 (read off the HLO
    text above): keep the accumulator when it is strictly better or (floats) a NaN; the index
    also on a tie with a smaller index."""
    if et == "f32":
        v = z3.fpMinusInfinity(z3.Float32()) if direction == "max" else \
            z3.fpPlusInfinity(z3.Float32())
        better = z3.fpGT if direction == "max" else z3.fpLT
        pick_of = lambda v, x: z3.Or(better(v, x), z3.Not(z3.fpEQ(v, v)))  # noqa: E731
        equal = z3.fpEQ
    else:
        v = z3.BitVecVal(-2**31 if direction == "max" else 2**31 - 1, 32)
        pick_of = (lambda v, x: v > x) if direction == "max" else (lambda v, x: v < x)
        equal = lambda a, b: a == b  # noqa: E731
    i = z3.BitVecVal(0, 32)
    for k, x in enumerate(xs):
        pick = pick_of(v, x)
        keep = z3.Or(pick, z3.And(equal(v, x), i < k))
        v, i = z3.If(pick, v, x), z3.If(keep, i, z3.BitVecVal(k, 32))
    return v, i


@pytest.mark.parametrize("et", ["f32", "s32"])
@pytest.mark.parametrize("direction", ["max", "min"])
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_the_closed_form_is_the_comparator_fold_for_every_input(et, direction, n):
    """z3 proves the symbolic evaluator's terms of the variadic reduce equal (SMT equality:
    NaN = NaN, -0 != +0) to the literal fold of the comparator, value and index, for every
    input of n elements."""
    module = parse_module(source_text(et, n, direction))
    table = TermTable()
    value, index = run_symbolic(module, Topology(1, 1), table, [(True,)])
    translator = smt._Translator(table)
    closed_value, closed_index = translator.expr(value[0]), translator.expr(index[0])
    sort = z3.Float32() if et == "f32" else z3.BitVecSort(32)
    xs = []
    for k in range(n):
        label = f"p0[r][{k}]"
        xs.append(z3.fpBVToFP(z3.BitVec(label, 32), sort) if et == "f32"
                  else z3.BitVec(label, 32))
    fold_value, fold_index = literal_fold(xs, et, direction)
    solver = z3.Solver()
    solver.set("timeout", 60_000)
    solver.add(translator.defined(z3.Or(closed_value != fold_value, closed_index != fold_index)))
    assert solver.check() == z3.unsat


@pytest.mark.parametrize("n", [3, 4])
@pytest.mark.parametrize("maximum", [True, False])
def test_the_flat_extreme_is_the_fold(n, maximum):
    """``float_extreme`` pins its constant to XLA's maximum / minimum fold (NaN wins, -0 below
    +0) of n half-precision floats, and ``integer_extreme`` to the signed fold."""
    sort = z3.FloatHalf()
    leaves = [z3.FP(f"h{k}", sort) for k in range(n)]
    fold = leaves[0]
    for leaf in leaves[1:]:
        fold = smt.DEFINITIONS[smt.Opcode.MAXIMUM if maximum else smt.Opcode.MINIMUM].term(
            smt.ElementType.F16, fold, leaf)
    extreme = z3.FP("m", sort)
    assert z3.Solver().check(smt.float_extreme(maximum, extreme, leaves), extreme != fold) \
        == z3.unsat
    ints = [z3.BitVec(f"i{k}", 8) for k in range(n)]
    int_fold = ints[0]
    for leaf in ints[1:]:
        int_fold = z3.If(leaf > int_fold if maximum else leaf < int_fold, leaf, int_fold)
    int_extreme = z3.BitVec("e", 8)
    assert z3.Solver().check(smt.integer_extreme(maximum, True, int_extreme, ints),
                             int_extreme != int_fold) == z3.unsat


def index_only(text: str) -> str:
    """The module returning only the index leaf, as ``jnp.argmax`` does (the value leaf of the
    rewrite is a plain reduce-max: the pass's documented signed-zero difference)."""
    head, entry = text.split("ENTRY")
    for values in ("f32", "s32"):
        entry = entry.replace(f") -> ({values}[], s32[])", ") -> s32[]")
    entry = entry.replace("ROOT %r", "%r")
    entry = entry.rstrip().rstrip("}") + "  ROOT %i = s32[] get-tuple-element(%r), index=1\n}\n"
    return head + "ENTRY" + entry


def test_transform_variadic_reduce_is_proved_for_all_inputs():
    """The rewrite (reduce-max, compare, select over the iota, reduce-min) of an f32 argmax
    over 6 elements, an f32 argmin over 24 and an s32 argmin over 5 is proved: CORRECT, all
    inputs."""
    for et, direction, n in (("f32", "max", 6), ("f32", "min", 24), ("s32", "min", 5)):
        module = parse_module(index_only(source_text(et, n, direction)))
        result = check_pass(module, "aws_neuron_transform_variadic_reduce", ["1x1"], OPTIONS)
        assert result.changed and result.status is Status.CORRECT, result.detail
        assert result.proof == "all-inputs", result.notes


WRONG = """HloModule wrong
%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}
%pick (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %m = s32[] PICK(%a, %b)
}
ENTRY %main (x: f32[4]) -> (f32[], s32[]) {
  %x = f32[4] parameter(0)
  %iota = s32[4] iota(), iota_dimension=0
  %ninf = f32[] constant(-inf)
  %m = f32[] reduce(%x, %ninf), dimensions={0}, to_apply=%max
  %mb = f32[4] broadcast(%m), dimensions={}
  %hit = pred[4] compare(%x, %mb), direction=EQ
  %nan = pred[4] compare(%x, %x), direction=NE
  %any = pred[4] HIT
  %none = s32[] constant(NONE)
  %nones = s32[4] broadcast(%none), dimensions={}
  %chosen = s32[4] select(%any, %iota, %nones)
  %index = s32[] reduce(%chosen, %none), dimensions={0}, to_apply=%pick
  ROOT %r = (f32[], s32[]) tuple(%m, %index)
}
"""


def wrong_target(pick: str, none: str, hit: str) -> str:
    return WRONG.replace("PICK", pick).replace("NONE", none).replace("HIT", hit)


def test_a_rewrite_taking_the_last_maximum_is_refuted():
    """The index chosen by a reduce-max over the hits instead of a reduce-min: on x = [1, 1, 0,
    0] (by hand) argmax's first maximum is index 0 and this rewrite gives 1, so z3 finds a tie
    and the witness is UNSOUND. Only the index leaf is compared (the source's value leaf is
    the comparator's, the target's a reduce-max: the same here as both keep the one 1)."""
    source = parse_module(source_text("f32", 4, "max"))
    target = parse_module(wrong_target("maximum", "-2147483648", "or(%hit, %nan)"))
    proof = prove(source, target, Topology(1, 1))
    assert proof.outcome == "differ"
    result = check_modules(source, target, ["1x1"], VerifyOptions(trials=1, minimize=False,
                                                                   proof="symbolic"))
    assert result.status is Status.UNSOUND, result.detail


def test_a_rewrite_forgetting_the_nan_is_refuted():
    """Without ``or(compare(x, x, NE))`` a NaN is never a hit: on x = [1, NaN, 0, 0] (by hand)
    the comparator keeps the first NaN, index 1, and its value NaN; the rewrite's maximum is
    NaN too (XLA's maximum: NaN wins) but no element compares equal to it, so the reduce-min
    of only the 2147483647 fills gives 2147483647. The sampled inputs rarely hold a NaN in
    every trial; z3's model does, and it replays UNSOUND."""
    source = parse_module(source_text("f32", 4, "max"))
    target = parse_module(wrong_target("minimum", "2147483647", "and(%hit, %hit)"))
    result = check_modules(source, target, ["1x1"], VerifyOptions(trials=1, minimize=False,
                                                                   proof="symbolic"))
    assert result.status is Status.UNSOUND, result.detail
