"""Decide differing symbolic terms with z3, in IEEE arithmetic: is the contract met for all inputs?

The symbolic proof (``neuron_sim.proofs.all_inputs``) compares term handles; different handles are not yet a
difference in value. ``rewrite (x, -inf) -> max(x, lowest)`` differs in its terms and is allowed
by the infinity-to-finite refinement for every x; ``compare(p, true) -> p`` is an identity the
term normal form does not know. This module translates each differing (source, target) term
pair into z3's floating-point, bit-vector and Boolean theories — every operation with exactly
the interpreter's semantics — and asks whether some input makes the contract's predicate false
on some pair:

* unsat: the contract holds on every differing element for every input -> a proof for all
  inputs (``"proved"``);
* sat: z3's model is a concrete assignment of the input variables -> a witness candidate the
  ordinary checks then confirm (``"refuted"``);
* anything z3 cannot model exactly here (a transcendental, a float sum whose order is left to
  the implementation, a conversion), too many pairs, or z3's timeout -> ``"unknown"`` with the
  reason, and the verifier falls back to sampled inputs.

What is modelled, and how: each op as its definition's z3 term
(``neuron_sim.semantics.elementwise``, the same row the interpreter executes; a differential
test holds the two to the same bits). Floats f16, bf16, f32, f64 are z3 FP sorts (one NaN: the
verifier's NaN equals NaN), integers of 8 to 64 bits bit-vectors, pred Bool. Where a row has no
term for the operands' sort (a transcendental, a float remainder, a conversion to or from a
float) the answer is unknown. ``compare type=TOTALORDER`` is modelled on input and constant
floats (an input float is its bit pattern, so every NaN payload is a possible input); a
multiset (a reduction) is folded only where the definition says any fold order gives the same
bits (``fold_is_exact``: not a float sum, whose order is left to the implementation).

The contracts, as predicates on one z3 value pair (``CONTRACT_PREDICATES``, keyed by the
contract's rule): exact is SMT-LIB equality, which is the verifier's (NaN equals NaN, -0
differs from +0); infinity-to-finite mirrors ``neuron_sim.passes.contracts.infinity_to_finite``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.lazy import LazyModule
from neuron_sim.proofs import answers
from neuron_sim.proofs.symbolic import TermTable
from neuron_sim.proofs.symbolic.loops import LOOP_REST
from neuron_sim.semantics.element_kinds import NotDefined
from neuron_sim.semantics.elementwise import DEFINITIONS, Form, Sort, fold_is_exact, sort_of
from neuron_sim.semantics.z3_terms import DIRECTIONS, fp_sort

z3 = LazyModule("z3")

__all__ = ["CONTRACT_PREDICATES", "Decision", "MAX_PAIRS", "NoModel", "decide", "rule_of"]

DEFINED = "defined!"      # the name prefix of fresh constants standing for a term
MAX_PAIRS = 512            # distinct differing pairs z3 is asked about at most
TIMEOUT_MS = 10_000        # z3's budget for one query
JOINT_SHARE = 4            # several pairs: the joint query gets TIMEOUT_MS / JOINT_SHARE, then
PAIR_BY_PAIR_BUDGET = 3    # the pairs one by one, TIMEOUT_MS each, this many TIMEOUT_MS in all
FEW_CLASSES = 8            # this many classes of pairs or fewer are asked one by one at once
ONE_BY_ONE = "one by one"  # the remembered answers' name for the one-by-one query


class NoModel(Exception):
    """A term z3 cannot model with the interpreter's exact semantics here."""


@dataclass
class Decision:
    """z3's answer for a set of differing term pairs under one contract."""

    outcome: str                       # "proved" | "refuted" | "unknown"
    reason: str = ""                   # why unknown; what was proved / refuted
    pair: int | None = None            # refuted: the index of a pair that breaks
    assignment: dict[tuple, Any] = field(default_factory=dict)  # variable row -> value
    seconds: float = 0.0
    iterations: int | None = None      # proved only on inputs whose loops on data end within


def _element_type(text: str) -> ElementType:
    """A variable's element type, which the term table keeps as its HLO spelling."""
    try:
        return ElementType.from_spelling(text)
    except KeyError:
        raise NoModel(f"no z3 model for element type {text}") from None


def _canonical(numpy_name: str) -> ElementType:
    """A constant term's element type, which the term table keys by numpy's name (``float32``
    is f32)."""
    try:
        return ElementType.from_numpy(np.dtype(numpy_name))
    except (TypeError, KeyError):
        raise NoModel(f"no z3 model for constants of numpy dtype {numpy_name}") from None


def _sort_of(et: ElementType) -> Sort:
    """The z3 sort of ``et`` here: floats with an FP sort, integers of 8 to 64 bits (an input
    is placed by its bytes), pred."""
    try:
        sort = sort_of(et)
    except NotDefined:
        raise NoModel(f"no z3 model for element type {et}") from None
    if sort is Sort.BITS and et.bits < 8:
        raise NoModel(f"no z3 model for element type {et}")
    return sort


def _z3_sort(et: ElementType) -> Any:
    sort = _sort_of(et)
    if sort is Sort.FLOAT:
        return fp_sort(et)
    if sort is Sort.BITS:
        return z3.BitVecSort(et.bits)
    return z3.BoolSort()


def _bits(et: ElementType) -> int:
    """The width of ``et``'s bit pattern (1 for pred)."""
    return 1 if _sort_of(et) is Sort.BOOL else et.bits


def _attribute(attrs: tuple, name: str) -> str | None:
    for key, text in attrs:
        if key == name:
            return text.strip("'\"")
    return None


def _compare_params(attrs: tuple, et: ElementType) -> dict[str, Any]:
    """compare's direction and type as the definition's parameters; NoModel for a type the
    operands do not have (the HLO checker rejects those)."""
    direction = _attribute(attrs, "direction") or ""
    if direction not in DIRECTIONS:
        raise NoModel(f"no z3 model for compare direction {direction}")
    kind = _attribute(attrs, "type")
    sort = _sort_of(et)
    fits = {Sort.FLOAT: (None, "FLOAT"), Sort.BOOL: (None, "UNSIGNED"),
            Sort.BITS: (None, "SIGNED" if et.is_signed else "UNSIGNED")}[sort]
    if kind not in fits:
        raise NoModel(f"no z3 model for compare type {kind} on {et}")
    return {"direction": direction}


# -- translation --------------------------------------------------------------------------------

class _Translator:
    """z3 expressions for term handles, memoised; variables named by their table row."""

    def __init__(self, table: TermTable) -> None:
        self.table = table
        self.memo: dict[int, Any] = {}
        self.dtypes: dict[int, ElementType] = {}
        self.variables: dict[str, tuple] = {}   # z3 name -> (signature, device, element)
        self.bits: dict[int, Any] = {}          # float leaves: their exact bit pattern
        self.definitions: dict[str, Any] = {}   # fresh constant's name -> its definition
        # handle -> the fresh constants its term uses, each after those its definition uses
        self.uses: dict[int, tuple[str, ...]] = {}

    def defined(self, formula: Any) -> Any:
        """``formula`` and the definitions of the fresh constants it uses (and theirs): each
        definition pins its constant to one value, so the conjunction is satisfiable exactly
        when ``formula`` is with each constant replaced by the term it stands for."""
        if not self.definitions:
            return formula
        used: list[Any] = []
        pending, seen = [formula], set()
        while pending:
            node = pending.pop()
            if node.get_id() in seen:
                continue
            seen.add(node.get_id())
            if z3.is_const(node) and str(node) in self.definitions:
                definition = self.definitions[str(node)]
                used.append(definition)
                pending.append(definition)
            elif z3.is_app(node):
                pending.extend(node.children())
        return z3.And(*used, formula) if used else formula

    def expr(self, handle: int) -> Any:
        handle = int(handle)
        found = self.memo.get(handle)
        if found is not None:
            return found
        stack = [handle]
        while stack:  # post-order without recursion: terms can be deep
            h = stack[-1]
            if h in self.memo:
                stack.pop()
                continue
            children = self._children(h)
            pending = [c for c in children if c not in self.memo]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            self.memo[h], self.dtypes[h] = self._build(h)
            own = f"{DEFINED}{h}"
            used = [self.uses[c] for c in children if self.uses[c]]
            if own in self.definitions:
                used.append((own,))
            self.uses[h] = used[0] if len(used) == 1 else \
                tuple(dict.fromkeys(n for u in used for n in u)) if used else ()
        return self.memo[handle]

    def definitions_of(self, handles: Sequence[int]) -> list[Any]:
        """The definitions of the fresh constants that the terms of ``handles`` (translated)
        use, each after the definitions it uses: the conjunct ``defined`` adds, read from the
        terms' structure instead of walking z3's formula (the order depends on the terms only,
        not on z3's term ids, so equal formulas up to renaming stay equal)."""
        names = dict.fromkeys(n for h in handles for n in self.uses[int(h)])
        return [self.definitions[n] for n in names]

    def _children(self, h: int) -> list[int]:
        signature, a, b = self.table.row(h)
        kind = signature[0]
        if kind in ("variable", "constant", LOOP_REST):
            return []
        if kind == "multiset":
            return list(self.table.leaves(h) or ())
        if kind == "apply":
            return self._operands(h)
        raise NoModel(f"no z3 model for a {kind} term")

    def _operands(self, h: int) -> list[int]:
        signature, a, b = self.table.row(h)
        if b == -1:
            return [a]
        operands = [a]
        rest = b
        while len(operands) + 1 < len(signature[3]):  # a pair chain holds the rest
            pair_signature, first, second = self.table.row(rest)
            if pair_signature != ("pair",):
                raise NoModel("an operand list the term table does not hold as pairs")
            operands.append(first)
            rest = second
        operands.append(rest)
        return operands

    def _build(self, h: int) -> tuple[Any, ElementType]:
        signature, a, b = self.table.row(h)
        kind = signature[0]
        if kind == "variable":
            _, name, spelling, _leaf = signature
            et = _element_type(spelling)
            label = f"{name}[{'r' if a < 0 else f'd{a}'}][{b}]"
            self.variables[label] = (signature, a, b)
            if _sort_of(et) is Sort.FLOAT:  # a bit pattern: every NaN payload is an input
                bits = self.bits[h] = z3.BitVec(label, _bits(et))
                return z3.fpBVToFP(bits, _z3_sort(et)), et
            return z3.Const(label, _z3_sort(et)), et
        if kind == "constant":
            et = _canonical(signature[1])
            width = _bits(et)
            pattern = a & ((1 << width) - 1)
            sort = _sort_of(et)
            if sort is Sort.FLOAT:
                bits = self.bits[h] = z3.BitVecVal(pattern, width)
                return z3.fpBVToFP(bits, _z3_sort(et)), et
            if sort is Sort.BITS:
                return z3.BitVecVal(pattern, width), et
            return z3.BoolVal(bool(pattern)), et
        if kind == LOOP_REST:  # a loop continued past its bound: any value (see decide)
            et = signature[5]
            return z3.Const(f"{LOOP_REST}!{h}", _z3_sort(et)), et
        if kind == "multiset":
            opcode, et = signature[1], signature[2]
            if len(signature) > 3:
                raise NoModel(f"no exact z3 model for a {signature[3]} reduction")
            combine = _fold(opcode, et)
            leaves = [self.memo[leaf] for leaf in self.table.leaves(h) or ()]
            chosen = self._extreme_of_choices(h, opcode, et)
            if chosen is not None:
                return chosen, et
            if opcode in (Opcode.MAXIMUM, Opcode.MINIMUM) and len(leaves) > 2 and \
                    _sort_of(et) is not Sort.BOOL:
                name = f"{DEFINED}{h}"
                extreme = z3.Const(name, _z3_sort(et))
                maximum = opcode is Opcode.MAXIMUM
                self.definitions[name] = float_extreme(maximum, extreme, leaves) \
                    if _sort_of(et) is Sort.FLOAT else \
                    integer_extreme(maximum, et.is_signed, extreme, leaves)
                return extreme, et
            value = leaves[0]
            for leaf in leaves[1:]:
                value = combine(value, leaf)
            return value, et
        _, opcode, et, operand_types, attrs = signature
        children = self._operands(h)
        if opcode is Opcode.COMPARE and _attribute(attrs, "type") == "TOTALORDER" and \
                _sort_of(operand_types[0]) is Sort.FLOAT:
            return self._total_order(children, operand_types[0], attrs), et
        operands = [self.memo[c] for c in children]
        if opcode is Opcode.EXP and len(operands) == 1 and operand_types[0] is et and \
                _sort_of(et) is Sort.FLOAT:
            name = f"{DEFINED}{h}"
            value = z3.Const(name, _z3_sort(et))
            self.definitions[name] = exp_facts(et, operands[0], value)
            return value, et
        if len(operands) == 1 and opcode is Opcode.CONVERT:
            # convert(if c then a else b) is (if c then convert(a) else convert(b)): the same
            # value, in the shape that lines up with a target whose converts were moved inside.
            return _through_ifs(lambda x: _apply(opcode, et, operand_types, attrs, [x]),
                                operands[0]), et
        return _apply(opcode, et, operand_types, attrs, operands), et

    def _extreme_of_choices(self, h: int, opcode: Opcode, et: ElementType) -> Any | None:
        """An integer maximum / minimum multiset whose every leaf is a constant or a select
        between two constants (``min{MAX, select(c_k, k, MAX), ...}``: the first index whose
        condition holds) as the if-then-else over the values it can take, best first: value v
        when some leaf takes v and no leaf takes a better one. Exact, and flat where the fold
        nests every leaf (None when the leaves are not of that form)."""
        if opcode not in (Opcode.MAXIMUM, Opcode.MINIMUM) or _sort_of(et) is not Sort.BITS:
            return None
        takes: dict[int, list[Any]] = {}
        for leaf in self.table.leaves(h) or ():
            signature, a, b = self.table.row(leaf)
            if signature[0] == "constant":
                takes.setdefault(_signed_value(a, et), []).append(z3.BoolVal(True))
                continue
            if signature[0] != "apply" or signature[1] is not Opcode.SELECT or b < 0:
                return None
            pair, first, second = self.table.row(b)
            if pair != ("pair",):
                return None
            values = []
            for branch in (first, second):
                branch_signature, payload, _ = self.table.row(branch)
                if branch_signature[0] != "constant":
                    return None
                values.append(_signed_value(payload, et))
            condition = self.memo[a]
            takes.setdefault(values[0], []).append(condition)
            takes.setdefault(values[1], []).append(z3.Not(condition))
        order = sorted(takes, reverse=opcode is Opcode.MAXIMUM)
        if not order:
            return None
        width = _bits(et)
        value = z3.BitVecVal(order[-1] & ((1 << width) - 1), width)
        for candidate in reversed(order[:-1]):
            value = z3.If(z3.Or(*takes[candidate]),
                          z3.BitVecVal(candidate & ((1 << width) - 1), width), value)
        return value

    def _total_order(self, children: list[int], et: ElementType, attrs: tuple) -> Any:
        """compare type=TOTALORDER on float leaves, by their bit patterns (the definition's
        term). Only leaves have a known bit pattern (an arithmetic NaN's sign and payload are
        the hardware's), so a computed operand has no model."""
        if any(c not in self.bits for c in children):
            raise NoModel("no exact z3 model for a TOTALORDER compare of a computed float "
                          "(its NaN bits are the hardware's)")
        direction = _attribute(attrs, "direction") or ""
        if direction not in DIRECTIONS:
            raise NoModel(f"no z3 model for compare direction {direction}")
        operands = [self.memo[c] for c in children]
        return DEFINITIONS[Opcode.COMPARE].term(
            et, *operands, direction=direction, total_order=True,
            bits=tuple(self.bits[c] for c in children))


def _signed_value(payload: int, et: ElementType) -> int:
    """A constant term's payload as the integer ``et`` reads it (signed types two's
    complement), for ordering."""
    width = _bits(et)
    raw = payload & ((1 << width) - 1)
    return raw - (1 << width) if et.is_signed and raw >> (width - 1) else raw


def _fold(opcode: Opcode, et: ElementType) -> Callable[[Any, Any], Any]:
    """The definition's term of a reduction's op, where folding it in z3's order is exact."""
    _sort_of(et)
    definition = DEFINITIONS.get(opcode)
    if definition is None or not fold_is_exact(opcode, et):
        order = " (a float sum's order is left to the implementation)" \
            if et.is_float and opcode in (Opcode.ADD, Opcode.MULTIPLY) else ""
        raise NoModel(f"no exact z3 model for a reduction {opcode} on {et}{order}")
    return lambda a, b: definition.term(et, a, b)


def float_extreme(maximum: bool, extreme: Any, leaves: Sequence[Any]) -> Any:
    """The definition of ``extreme`` as XLA's maximum (``maximum``) or minimum of the float
    ``leaves``, without folding them: a NaN if a leaf is NaN; else a leaf itself (as a value:
    SMT equality) that no leaf exceeds in IEEE order, and when it is a zero, +0 for a maximum
    with a +0 leaf (-0 for a minimum with a -0 leaf), since XLA orders -0 below +0. This pins
    down one value, the fold's in any order; it is flat (n comparisons with one constant)
    where the fold nests n deep, which z3 decides far faster on argmax-like terms.
    ``tests/proofs/test_smt_facts.py`` has z3 prove it equal to the fold."""
    any_nan = z3.Or(*[z3.fpIsNaN(leaf) for leaf in leaves])
    bounded = [z3.fpLEQ(leaf, extreme) if maximum else z3.fpGEQ(leaf, extreme)
               for leaf in leaves]
    preferred_zero = z3.fpIsPositive if maximum else z3.fpIsNegative
    other_zero = z3.fpIsNegative if maximum else z3.fpIsPositive
    sign = z3.Implies(z3.And(z3.fpIsZero(extreme), other_zero(extreme)),
                      z3.Not(z3.Or(*[z3.And(z3.fpIsZero(leaf), preferred_zero(leaf))
                                     for leaf in leaves])))
    equal = [z3.fpEQ(leaf, extreme) for leaf in leaves]
    # Implied, and stated for z3's search: no leaf IEEE-equals a NaN extreme; without NaNs
    # some leaf IEEE-equals it (the atoms an argmax's hit test is made of).
    lemmas = [z3.Implies(any_nan, z3.Not(z3.Or(*equal))),
              z3.Implies(z3.Not(any_nan), z3.Or(*equal))]
    return z3.And(z3.If(any_nan, z3.fpIsNaN(extreme),
                        z3.And(z3.Or(*[extreme == leaf for leaf in leaves]), *bounded, sign)),
                  *lemmas)


def integer_extreme(maximum: bool, signed: bool, extreme: Any, leaves: Sequence[Any]) -> Any:
    """The definition of ``extreme`` as the maximum (``maximum``) or minimum of the integer
    ``leaves`` (bit-vectors, compared ``signed`` or not): a leaf that no leaf exceeds — one
    value, the fold's, flat instead of nested."""
    if signed:
        bounded = [(leaf <= extreme) if maximum else (leaf >= extreme) for leaf in leaves]
    else:
        bounded = [z3.ULE(leaf, extreme) if maximum else z3.UGE(leaf, extreme)
                   for leaf in leaves]
    return z3.And(z3.Or(*[extreme == leaf for leaf in leaves]), *bounded)


def exp_facts(et: ElementType, x: Any, value: Any) -> Any:
    """What is known of ``value = exponential(x)`` on ``et``, without a model of the function:
    an uninterpreted function of x (equal arguments, equal results: the interpreter's exp is
    deterministic) and the facts the verdicts need, each one the interpreter's exp meets
    (``tests/verify/test_exp_facts.py`` checks them on every f16 value and on the edges and
    samples of the wider types): a NaN gives a NaN, anything else a value that is not NaN and
    not negative (+0 at the least); exp(-inf) = exp(x <= the lowest finite value) = +0,
    exp(+inf) = +inf, exp(+-0) = 1. A sound over-approximation: every proof under these facts
    holds for the real function; a violation z3 finds is only a witness candidate, which the
    verifier runs."""
    sort = _z3_sort(et)
    function = z3.Function(f"exponential!{et.spelling}", sort, sort)
    lowest = z3.FPVal(_lowest(et), sort)
    zero = z3.FPVal(0.0, sort)
    return z3.And(
        value == function(x),
        z3.Implies(z3.fpIsNaN(x), z3.fpIsNaN(value)),
        z3.Implies(z3.Not(z3.fpIsNaN(x)), z3.And(z3.Not(z3.fpIsNaN(value)),
                                                  z3.Not(z3.fpIsNegative(value)))),
        z3.Implies(z3.fpLEQ(x, lowest), value == zero),
        z3.Implies(z3.fpIsInf(x), z3.Or(z3.fpIsNegative(x), z3.fpIsInf(value))),
        z3.Implies(z3.fpIsZero(x), value == z3.FPVal(1.0, sort)))


def _lowest(et: ElementType) -> float:
    """The most negative finite value of the float type ``et``."""
    from neuron_sim.hlo.dtypes import finfo  # noqa: PLC0415 - narrow types load ml_dtypes
    return float(finfo(et.numpy_dtype).min)


def _through_ifs(fn: Callable[[Any], Any], term: Any) -> Any:
    """``fn`` applied at the leaves of ``term``'s if-then-else tree."""
    if z3.is_app_of(term, z3.Z3_OP_ITE):
        return z3.If(term.arg(0), _through_ifs(fn, term.arg(1)), _through_ifs(fn, term.arg(2)))
    return fn(term)


def _aligned(predicate: Callable[[Any, Any, ElementType], Any], source: Any, target: Any,
             et: ElementType) -> Any:
    """``predicate(source, target)``, taken inside if-then-else trees whose conditions are the
    same on both sides: P(if c then a else b, if c then a' else b') is
    (if c then P(a, a') else P(b, b')) — the same formula, which z3 then decides branch by
    branch."""
    if z3.is_app_of(source, z3.Z3_OP_ITE) and z3.is_app_of(target, z3.Z3_OP_ITE) and \
            source.arg(0).eq(target.arg(0)):
        return z3.If(source.arg(0), _aligned(predicate, source.arg(1), target.arg(1), et),
                     _aligned(predicate, source.arg(2), target.arg(2), et))
    return predicate(source, target, et)


def _apply(opcode: Opcode, et: ElementType, operand_types: tuple, attrs: tuple,
           operands: list[Any]) -> Any:
    """The definition's term of an application, when its operand types fit its form."""
    definition = DEFINITIONS.get(opcode)
    if definition is None:
        raise NoModel(f"no exact z3 model for {opcode} on {et}")
    form = definition.form
    try:
        if form is Form.SAME and all(t is et for t in operand_types):
            _sort_of(et)
            return definition.term(et, *operands)
        if form is Form.COMPARE and operand_types[0] is operand_types[1]:
            params = _compare_params(attrs, operand_types[0])
            return definition.term(operand_types[0], *operands, **params)
        if form is Form.SELECT and operand_types[0] is ElementType.PRED and \
                operand_types[1] is et and operand_types[2] is et:
            _sort_of(et)
            return definition.term(et, *operands)
        if form in (Form.CONVERT, Form.PREDICATE) and len(operands) == 1:
            _sort_of(operand_types[0])
            _sort_of(et)
            params = {"target": et} if form is Form.CONVERT else {}
            return definition.term(operand_types[0], *operands, **params)
    except NotDefined as missing:
        raise NoModel(str(missing)) from None
    raise NoModel(f"no exact z3 model for {opcode} on {et} with operands of type "
                  f"{', '.join(str(t) for t in operand_types)}")


# -- contracts ----------------------------------------------------------------------------------

def _exact(source: Any, target: Any, et: ElementType) -> Any:
    return source == target  # SMT-LIB equality: NaN = NaN, -0 != +0 — the verifier's rule


def _infinity_to_finite(source: Any, target: Any, et: ElementType) -> Any:
    """``neuron_sim.passes.contracts.infinity_to_finite`` on one float pair, or exactness."""
    if _sort_of(et) is not Sort.FLOAT:
        return source == target
    zero = z3.FPVal(0.0, _z3_sort(et))
    finite = z3.Not(z3.Or(z3.fpIsInf(target), z3.fpIsNaN(target)))
    return z3.Or(source == target,
                 z3.And(z3.fpIsInf(source), z3.fpIsNegative(source), finite,
                        z3.fpLT(target, zero)),
                 z3.And(z3.fpIsInf(source), z3.fpIsPositive(source), finite,
                        z3.fpGT(target, zero)),
                 z3.fpIsNaN(source))


def _zero_sign(source: Any, target: Any, et: ElementType) -> Any:
    """``rewrite_scatter_partition.positive_zero_to_negative_zero``: +0 may become -0."""
    if _sort_of(et) is not Sort.FLOAT:
        return z3.BoolVal(False)
    return z3.And(z3.fpIsZero(source), z3.fpIsPositive(source), z3.fpIsZero(target),
                  z3.fpIsNegative(target))


def _bf16_rounding(source: Any, target: Any, et: ElementType) -> Any:
    """A sufficient case of ``Tolerance`` within half a bf16 ulp: the target is the source
    rounded to nearest even into bf16 and back (f32 and f64; otherwise nothing). That rounding
    moves a value by at most half the bf16 spacing of its binade (at least half the smallest
    subnormal), and one beyond bf16's largest finite value rounds to it or to the same-signed
    infinity: each case is one the tolerance allows."""
    if et not in (ElementType.F32, ElementType.F64):
        return z3.BoolVal(False)
    bf16 = z3.FPSort(8, 8)
    return target == z3.fpToFP(z3.RNE(), z3.fpToFP(z3.RNE(), source, bf16), _z3_sort(et))


CONTRACT_PREDICATES: dict[str, Callable[[Any, Any, ElementType], Any]] = {
    "exact": _exact,
    "infinity-to-finite": _infinity_to_finite,
    "zero-sign": _zero_sign,
    "bf16-rounding": _bf16_rounding,
}
# Refinements whose elementwise rule allows nothing beyond exactness (their real check is
# elsewhere): leaving them out of a union loses nothing.
_ALLOWS_NOTHING = {"rng-support"}


def _modelled(rule: str) -> list[str]:
    """The parts of a union rule (``"a | b"``) that z3 models."""
    return [part.strip() for part in rule.split("|")
            if part.strip() in CONTRACT_PREDICATES and part.strip() not in _ALLOWS_NOTHING]


def rule_of(contract: Any) -> str | None:
    """The key of ``contract`` for ``predicate_of`` (None: z3 cannot judge it). A union of
    rules is judged by the parts z3 models: a stronger predicate, so a proof stays a proof. A
    bf16 tolerance (at least half an ulp) is judged by exactness or ``_bf16_rounding``, and
    by what its refinement allows."""
    name = getattr(contract, "name", None)
    if name in ("exact", "changes-results"):
        return "exact"
    rule = getattr(contract, "rule", None)
    if name == "refinement" and rule is not None and _modelled(rule):
        return " | ".join(_modelled(rule))
    if name == "tolerance" and getattr(contract, "ulps", 0) >= 0.5 and \
            str(getattr(contract, "unit", "")) == "bfloat16":
        also = getattr(contract, "also", None)
        extra = _modelled(also.rule) if also is not None else []
        return " | ".join(["exact", "bf16-rounding", *extra])
    return None


def predicate_of(rule: str) -> Callable[[Any, Any, ElementType], Any]:
    """The z3 predicate of a rule key (``rule_of``): the disjunction of its parts."""
    parts = [CONTRACT_PREDICATES[part.strip()] for part in rule.split("|")]
    if len(parts) == 1:
        return parts[0]
    return lambda source, target, et: z3.Or(*[p(source, target, et) for p in parts])


# -- the query ----------------------------------------------------------------------------------

def decide(table: TermTable, pairs: Sequence[tuple[int, int]], rule: str, *,
           timeout_ms: int = TIMEOUT_MS,
           assume_ended: Sequence[Sequence[np.ndarray]] = ()) -> Decision:
    """Does ``CONTRACT_PREDICATES[rule]`` hold on every (source, target) pair of handles for
    every assignment of the input variables? One z3 query: the disjunction of the predicate's
    negations. A loop continued past its unrolled bound (a ``loop-rest`` term) is any value;
    ``assume_ended`` restricts the inputs to those on which each such loop ends within its
    bound: per loop, the handles of its conditions (``[rows]`` each), on no row all true."""
    start = time.perf_counter()
    if len(pairs) > MAX_PAIRS:
        return Decision("unknown", f"{len(pairs)} distinct differing term pairs (z3 is asked "
                                   f"about at most {MAX_PAIRS})")
    translator = _Translator(table)
    predicate = predicate_of(rule)
    violations, aligned, definitions = [], [], []
    try:
        assumed, conditions = _ended(translator, assume_ended)
        for source, target in pairs:
            s, t = translator.expr(source), translator.expr(target)
            s_type, t_type = translator.dtypes[int(source)], translator.dtypes[int(target)]
            if s_type != t_type:
                return Decision("unknown", f"the source is {s_type} and the target {t_type}",
                                seconds=time.perf_counter() - start)
            aligned.append(_aligned(predicate, s, t, s_type))
            definitions.append(translator.definitions_of([source, target, *conditions]))
            violations.append(z3.And(*definitions[-1], *assumed, z3.Not(aligned[-1])))
    except NoModel as exc:
        return Decision("unknown", str(exc), seconds=time.perf_counter() - start)
    # Every device usually computes the same formula on its own variables: one violation per
    # class of formulas equal up to renaming their variables is asked (the others are
    # satisfiable exactly when it is). The classes are of the formulas as built, before z3's
    # simplifier, which orders a commutative operation's operands by z3's term ids (they
    # depend on what the process made and freed before: a second topology's 224 argmax pairs
    # fell into 43 classes after simplifying, 11 before). A class asked before within
    # ``remembering_answers`` (an earlier topology) is not asked again when z3 proved it or
    # ran out of time on it (``neuron_sim.proofs.answers``), and the same classes are not
    # asked again at all when they ran out of the whole budget before (ReplaceMinimumConstant's
    # -inf buffer: 9 classes of 1.6 to 10 s each against 30 s, on each of three topologies).
    # A few classes are asked one by one; many are asked in one query over their disjunction
    # first, which is fastest when they are easy. When that times out, z3 often decides them
    # one by one (26 pairs of case-split dynamic-slice terms: no answer in 10 s jointly, all
    # proved in 2.8 s separately; 8 classes of a deleted all-reduce's sums: no answer in 2.5 s
    # jointly, each proved in 0.1 s).
    every = _classes(violations)
    classes = [(i, key) for i, key in every if not answers.known_unsat(key)]
    keys = [key for _, key in classes]
    asked = [z3.And(*definitions[i], *assumed, z3.Not(z3.simplify(aligned[i])))
             for i, _ in classes]
    answer, model, why = (z3.unknown if asked else z3.unsat), None, ""
    every_keys = [key for _, key in every]
    overall = PAIR_BY_PAIR_BUDGET * timeout_ms
    gave_up = answers.recall(every_keys, overall, ONE_BY_ONE) if asked else None
    if gave_up is not None:  # these classes ran out of the whole budget before: not again
        why = (f"{gave_up.reason}: the same {len(every)} classes of pairs ran out of "
               f"{gave_up.budget_ms} ms before")
    elif len(asked) > FEW_CLASSES:
        budget = max(1, timeout_ms // JOINT_SHARE)
        if answers.recall(keys, budget) is None:
            answer, model, why = _check(z3.Or(*asked), budget)
            answers.remember(keys, str(answer), budget, why)
    if answer == z3.unknown and gave_up is None:
        answer, model, why = _pair_by_pair(asked, keys, timeout_ms, start)
        if answer == z3.unknown and why.startswith(("timeout", "out of time")):
            answers.remember(every_keys, "unknown", overall, "timeout", ONE_BY_ONE)
    seconds = time.perf_counter() - start
    if answer == z3.unsat:
        return Decision("proved", f"z3 proved the {rule} contract on {len(pairs)} differing "
                                  "term pair(s) for every input (IEEE arithmetic)",
                        seconds=seconds)
    if answer == z3.unknown:
        return Decision("unknown", f"z3 gave no answer ({why})", seconds=seconds)
    broken = next((i for i, v in enumerate(violations)
                   if z3.is_true(model.eval(v, model_completion=True))), 0)
    assignment = {}
    for label, row in translator.variables.items():
        et = _element_type(row[0][2])
        sort = _sort_of(et)
        variable = z3.BitVec(label, _bits(et)) if sort is Sort.FLOAT else \
            z3.Const(label, _z3_sort(et))
        value = model.eval(variable, model_completion=True)
        assignment[row] = bool(z3.is_true(value)) if sort is Sort.BOOL else value.as_long()
    return Decision("refuted", f"z3 found inputs breaking the {rule} contract at pair {broken}",
                    pair=broken, assignment=assignment, seconds=seconds)


def _renaming_classes(formulas: list[Any]) -> list[Any]:
    """The first of each class of ``formulas`` that are the same formula up to a one-to-one
    renaming of their free constants, in their order (``_classes``)."""
    return [formulas[i] for i, _ in _classes(formulas)]


def _classes(formulas: list[Any]) -> list[tuple[int, Any]]:
    """The index of the first of each class of ``formulas`` that are the same formula up to a
    one-to-one renaming of their free constants, in their order, with the class's key. Two
    formulas of a class are satisfiable together or not at all (a model of one, renamed, is a
    model of the other), so asking z3 about one of each decides them all; and a model of the
    one asked is a model of a formula of the list, so a witness read from it is one. The key
    of a formula is the formula with its constants renamed ``_v0, _v1, ...`` in the order
    they first occur, operands left to right (``_constants_in_order``): z3 shares equal
    terms, so equal keys are the same term (while both live: z3 reuses the id of a freed
    term, so every key is kept until the end; the caller keeps the classes' keys alive for as
    long as it compares them by id)."""
    kept: dict[int, tuple[int, Any]] = {}
    keys: list[Any] = []
    orders: dict[int, tuple[int, ...]] = {}
    constants: dict[int, Any] = {}
    for index, formula in enumerate(formulas):
        order = _constants_in_order(formula, orders, constants)
        renamed = z3.substitute(formula, *[
            (c, z3.Const(f"_v{n}", c.sort()))
            for n, c in enumerate(_z3_expr(constants[key], formula.ctx) for key in order)]) \
            if order else formula
        keys.append(renamed)
        kept.setdefault(renamed.get_id(), (index, renamed))
    return list(kept.values())


def _z3_expr(ast: Any, ctx: Any) -> Any:
    """A z3 expression object for a raw AST of ``ctx``."""
    return z3.z3._to_expr_ref(ast, ctx)


def _constants_in_order(formula: Any, orders: dict[int, tuple[int, ...]],
                        constants: dict[int, Any]) -> tuple[int, ...]:
    """The ids of ``formula``'s free constants (uninterpreted, no arguments) in the order they
    first occur, operands left to right. Walks z3's C API (the Python objects cost tens of
    times more per node); ``orders`` keeps each term's order by its id, shared between the
    formulas of one call, and ``constants`` the constants' raw ASTs."""
    core = z3.z3core
    ctx = formula.ctx_ref()
    application = z3.Z3_APP_AST
    uninterpreted = z3.Z3_OP_UNINTERPRETED
    stack: list[tuple[Any, int, list | None]] = [
        (formula.as_ast(), core.Z3_get_ast_id(ctx, formula.as_ast()), None)]
    while stack:
        node, key, operands = stack.pop()
        if key in orders:
            continue
        if operands is not None:  # every operand's order is known
            orders[key] = tuple(dict.fromkeys(
                c for operand in operands for c in orders[operand]))
            continue
        if core.Z3_get_ast_kind(ctx, node) != application:
            orders[key] = ()
            continue
        count = core.Z3_get_app_num_args(ctx, node)
        if count == 0:
            if core.Z3_get_decl_kind(ctx, core.Z3_get_app_decl(ctx, node)) == uninterpreted:
                orders[key] = (key,)
                constants[key] = node
            else:
                orders[key] = ()
            continue
        args = [core.Z3_get_app_arg(ctx, node, i) for i in range(count)]
        ids = [core.Z3_get_ast_id(ctx, a) for a in args]
        stack.append((node, key, ids))
        stack.extend((a, i, None) for a, i in zip(reversed(args), reversed(ids))
                     if i not in orders)
    return orders[core.Z3_get_ast_id(ctx, formula.as_ast())]


def _ended(translator: _Translator, loops: Sequence[Sequence[np.ndarray]]
           ) -> tuple[list[Any], list[int]]:
    """Per loop and row: not every condition of the loop holds there (it ends in the bound);
    and the handles of the conditions used."""
    ended, handles = [], []
    for conditions in loops:
        rows = max((len(c) for c in conditions), default=0)
        for row in range(rows):
            used = [int(c[row if len(c) > 1 else 0]) for c in conditions]
            handles.extend(used)
            ended.append(z3.Not(z3.And(*[translator.expr(h) for h in used])))
    return ended, handles


def _check(violation: Any, timeout_ms: int) -> tuple[Any, Any, str]:
    """z3 on one formula: (answer, its model when sat, why when unknown)."""
    solver = z3.Solver()
    solver.set("timeout", int(timeout_ms))
    solver.add(violation)
    answer = solver.check()
    return (answer, solver.model() if answer == z3.sat else None,
            solver.reason_unknown() if answer == z3.unknown else "")


def _pair_by_pair(violations: list[Any], keys: list[Any], timeout_ms: int,
                  start: float) -> tuple[Any, Any, str]:
    """Each pair's violation on its own, ``timeout_ms`` each, within ``PAIR_BY_PAIR_BUDGET``
    times ``timeout_ms`` in all since ``start``: unsat when every pair is, the first sat pair's
    model, else unknown. ``keys``: the violations' class keys, for the answers remembered
    within ``remembering_answers`` (an unsat one is not asked; one that ran out of time before
    with as long a budget is unknown at once)."""
    for number, (violation, key) in enumerate(zip(violations, keys)):
        if answers.known_unsat(key):
            continue
        left = PAIR_BY_PAIR_BUDGET * timeout_ms - (time.perf_counter() - start) * 1000
        if left <= 0:
            return z3.unknown, None, (f"out of time after {number} of {len(violations)} "
                                      "pairs decided one by one")
        budget = min(timeout_ms, int(left))
        known = answers.recall([key], budget)
        if known is not None:
            return z3.unknown, None, (f"{known.reason} on the same formula up to renaming "
                                      f"before, with {known.budget_ms} ms")
        answer, model, why = _check(violation, budget)
        answers.remember([key], str(answer), budget, why)
        if answer != z3.unsat:
            return answer, model, why if answer == z3.unknown else ""
    return z3.unsat, None, ""


def place(values: list[Any], assignment: dict[tuple, Any]) -> list[Any]:
    """``values`` (per-parameter inputs as ``separating_inputs`` makes them: a leaf is
    ``[D, *dims]``, or ``dims`` when replicated) with each assigned variable's element set to
    its model value; leaves are numbered as ``neuron_sim.proofs.symbolic`` numbers them."""
    out = [tuple(np.array(leaf) for leaf in v) if isinstance(v, tuple) else np.array(v)
           for v in values]
    for (signature, device, element), value in assignment.items():
        _, name, dtype, leaf = signature
        param = int(name[1:].split(".")[0])
        holder = out[param]
        array = holder[leaf] if isinstance(holder, tuple) else holder
        if isinstance(holder, tuple) and leaf >= len(holder):
            continue
        flat = array.reshape(-1) if device < 0 else array.reshape(array.shape[0], -1)[device]
        if element >= flat.size:
            continue
        if dtype == str(ElementType.PRED):
            flat[element] = value
        else:
            flat.view(f"u{flat.dtype.itemsize}")[element] = value
    return out
