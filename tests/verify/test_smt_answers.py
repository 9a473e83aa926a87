"""z3's answers kept for the rest of one verification (neuron_sim/proofs/answers.py): a formula
equal up to renaming to one proved unsat earlier is not asked again, one that timed out is not
asked again with no more time, and nothing is kept outside ``remembering_answers``.

Expected verdicts are derived by hand in each docstring."""

from __future__ import annotations

import z3

import neuron_sim.proofs.smt as smt
from neuron_sim import parse_module
from neuron_sim.proofs import answers
from neuron_sim.proofs.answers import Remembered, remembering_answers
from neuron_sim.verify import Status, VerifyOptions, check_modules


def _keys(*formulas):
    return [key for _, key in smt._classes(list(formulas))]


# select(p == q, p, q) and its exact rewrite q (where p == q the select gives p, which has q's
# bits; elsewhere q): each device's pair is the same formula on its own p and q.
SELECT_SOURCE = """HloModule source
ENTRY %main (p: s32[8], q: s32[8]) -> s32[8] {
  %p = s32[8]{0} parameter(0)
  %q = s32[8]{0} parameter(1)
  %c = pred[8]{0} compare(%p, %q), direction=EQ
  ROOT %r = s32[8]{0} select(%c, %p, %q)
}
"""
SELECT_TARGET = """HloModule target
ENTRY %main (p: s32[8], q: s32[8]) -> s32[8] {
  %p = s32[8]{0} parameter(0)
  %q = s32[8]{0} parameter(1)
  ROOT %r = s32[8]{0} copy(%q)
}
"""


def test_unsat_is_kept_for_every_class_and_only_inside_the_block():
    """x != x and y + 1 == y are unsat (bit-vector equality is reflexive; y + 1 differs from y
    modulo 2^8). Remembered as a joint answer, each class is known unsat in the block; after
    it, nothing is known."""
    x, y = z3.BitVec("x", 8), z3.BitVec("y", 8)
    first, second = _keys(x != x, y + 1 == y)
    assert answers.recall([first], 10) is None          # outside a block: nothing
    with remembering_answers():
        assert answers.recall([first, second], 10) is None
        answers.remember([first, second], "unsat", 10)
        assert answers.known_unsat(first) and answers.known_unsat(second)
        assert answers.recall([second], 10_000) == Remembered("unsat", 0, "")
    assert not answers.known_unsat(first)


def test_a_formula_equal_up_to_renaming_is_known_by_its_key():
    """a * 3 == 7 and b * 3 == 7 (8 bits) are one formula with a renamed b: one key, so an
    answer on the first is the second's. a * 3 == 5 is another formula."""
    a, b = z3.BitVec("a", 8), z3.BitVec("b", 8)
    keys = _keys(a * 3 == 7, b * 3 == 7, a * 3 == 5)
    assert len(keys) == 2
    renamed = _keys(b * 3 == 7)[0]
    with remembering_answers():
        answers.remember([keys[0]], "unsat", 10)
        assert answers.known_unsat(renamed)
        assert not answers.known_unsat(keys[1])


def test_a_timeout_answers_only_a_query_with_no_more_time():
    """Unknown by timeout with 100 ms: asked with 100 ms or less, the answer is that unknown;
    with 200 ms, z3 is asked again. An unknown for another reason and sat are not kept."""
    x = z3.BitVec("x", 8)
    (key,) = _keys(x * x == 9)
    (other,) = _keys(x * x == 16)
    with remembering_answers():
        answers.remember([key], "unknown", 100, "timeout")
        assert answers.recall([key], 100) == Remembered("unknown", 100, "timeout")
        assert answers.recall([key], 50) is not None
        assert answers.recall([key], 200) is None
        answers.remember([other], "unknown", 100, "(incomplete (theory ...))")
        answers.remember([other], "sat", 100)
        assert answers.recall([other], 1) is None
        answers.remember([key], "unsat", 200)             # a later proof replaces the timeout
        assert answers.recall([key], 10_000) == Remembered("unsat", 0, "")


def _count_queries(monkeypatch) -> list:
    """The formulas z3 is asked from now on (``smt._check`` still answers them)."""
    asked = []
    real = smt._check

    def counting(formula, timeout_ms):
        asked.append(formula)
        return real(formula, timeout_ms)

    monkeypatch.setattr(smt, "_check", counting)
    return asked


def test_the_second_topology_asks_z3_nothing_it_proved_on_the_first(monkeypatch):
    """select(p == q, p, q) is q for every input (where p == q the select gives p, which has
    q's bits; elsewhere q), so the rewrite to q is exact; each device's pair is the same
    formula on its own p and q. On 1x4 z3 is asked once (one class); on 1x8 the pairs are
    that formula again up to renaming: no query, and still proved for all inputs."""
    source = parse_module(SELECT_SOURCE)
    target = parse_module(SELECT_TARGET)
    asked = _count_queries(monkeypatch)
    result = check_modules(source, target, ["1x4", "1x8"], VerifyOptions(minimize=False))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    assert [t.proof for t in result.topology_results] == ["all-inputs", "all-inputs"]
    assert len(asked) == 1


def test_a_query_kind_has_its_own_memory():
    """The classes asked one by one within an overall budget are another query than their
    disjunction: a timeout of one is not an answer for the other."""
    x, y = z3.BitVec("x", 8), z3.BitVec("y", 8)
    keys = _keys(x * x == 9, y * 3 == 7)
    with remembering_answers():
        answers.remember(keys, "unknown", 30_000, "timeout", "one by one")
        assert answers.recall(keys, 30_000, "one by one") == \
            Remembered("unknown", 30_000, "timeout")
        assert answers.recall(keys, 2_500) is None


def test_classes_that_ran_out_of_time_on_one_topology_are_not_asked_on_the_next(monkeypatch):
    """z3 made to run out of time (a stand-in for a query too hard for its budget): on 1x4 the
    one class of select(p == q, p, q) -> q is asked and the decision is unknown; on 1x8 the
    same class (up to renaming) is not asked again, and the decision there is unknown too,
    saying why."""
    from neuron_sim.proofs.all_inputs import prove
    from neuron_sim.topology import Topology

    source = parse_module(SELECT_SOURCE)
    target = parse_module(SELECT_TARGET)
    asked = []

    def out_of_time(formula, timeout_ms):
        asked.append(timeout_ms)
        return z3.unknown, None, "timeout"

    monkeypatch.setattr(smt, "_check", out_of_time)
    with remembering_answers():
        decisions = []
        for topology in ("1x4", "1x8"):
            proof = prove(source, target, Topology.parse(topology))
            decisions.append(smt.decide(proof.table, proof.pairs, "exact"))
    assert [d.outcome for d in decisions] == ["unknown", "unknown"]
    assert asked == [smt.TIMEOUT_MS]
    assert "before" in decisions[1].reason and "before" not in decisions[0].reason


def test_pairs_equal_up_to_renaming_are_one_class_however_z3_would_order_them(monkeypatch):
    """movement_flat through RewriteModuleDtype (f32 inputs and output rounded through bf16):
    every output element r[i, j] = max(-x[j, i], max(y[i], y[i])) is the same formula of its
    own x and y elements, so the 8 differing pairs are one class. z3 is asked twice: once
    under exactness alone (the cheaper predicate, tried first: refuted, since rounding to bf16
    changes values) and once under the bf16-rounding tolerance (proved). Classing the
    formulas after z3's simplifier, which orders a commutative operation's operands by term
    id, split these pairs into several classes: z3 was asked 6 or 7 times here."""
    from pathlib import Path

    from neuron_sim.hlo import parse_module_file
    from neuron_sim.verify import check_pass

    path = Path(__file__).resolve().parents[1] / "data" / "passes" / "cleanup_io" / \
        "movement_flat.hlo"
    asked = _count_queries(monkeypatch)
    result = check_pass(parse_module_file(str(path)), "aws_neuron_rewrite_module_dtype",
                        ["1x1"], VerifyOptions(minimize=False))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    assert any("on 8 differing term pair(s)" in n for n in result.notes), result.notes
    assert len(asked) == 2
