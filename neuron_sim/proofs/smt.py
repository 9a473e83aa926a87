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

What is modelled, and how (the interpreter's semantics, ``neuron_sim.interpreter.ops.elementwise``):

* floats f16, bf16, f32, f64 as z3 FP sorts: add, subtract, multiply, divide, sqrt (correctly
  rounded to nearest even — what numpy computes in the type, and for f16/bf16 what computing
  in f32 and rounding gives, since f32 has more than twice their precision plus two bits);
  negate, abs; maximum / minimum as XLA's (NaN wins, -0 < +0); compare in every direction with
  IEEE's unordered NaN, and ``type=TOTALORDER`` on inputs and constants (an input float is its
  bit pattern, so every NaN payload is a possible input); select; multisets of maximum /
  minimum (associative and commutative with those rules);
* integers as bit vectors of their width: add, subtract, multiply (wrapping), and, or, xor,
  not, negate, maximum, minimum, compare (signed or unsigned by type), select, and multisets of
  add, multiply, maximum, minimum, and, or, xor;
* pred as Bool: and, or, xor, not, compare EQ / NE, select, multisets of and / or / xor.

The contracts, as predicates on one z3 value pair (``CONTRACT_PREDICATES``, keyed by the
contract's rule): exact is SMT-LIB equality, which is the verifier's (NaN equals NaN, -0
differs from +0); infinity-to-finite mirrors ``neuron_sim.passes.contracts.infinity_to_finite``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from neuron_sim.proofs.symbolic import TermTable
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.proofs.index.lazy import LazyModule

z3 = LazyModule("z3")

__all__ = ["CONTRACT_PREDICATES", "Decision", "MAX_PAIRS", "NoModel", "decide", "rule_of"]

MAX_PAIRS = 512            # distinct differing pairs z3 is asked about at most
TIMEOUT_MS = 10_000        # z3's budget for the one query


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


_FLOAT_SORTS = {"f16": (5, 11), "bf16": (8, 8), "f32": (8, 24), "f64": (11, 53)}
_INT_BITS = {f"{sign}{bits}": bits for sign in "su" for bits in (8, 16, 32, 64)}


def _canonical(numpy_name: str) -> str:
    """The HLO spelling of a constant term's element type, which the term table keys by numpy's
    name (``float32`` is ``f32``)."""
    try:
        return str(ElementType.from_numpy(np.dtype(numpy_name)))
    except (TypeError, KeyError):
        raise NoModel(f"no z3 model for constants of numpy dtype {numpy_name}") from None


def _sort_kind(dtype: str) -> str:
    if dtype in _FLOAT_SORTS:
        return "float"
    if dtype in _INT_BITS:
        return "int"
    if dtype == "pred":
        return "pred"
    raise NoModel(f"no z3 model for element type {dtype}")


def _sort(dtype: str) -> Any:
    kind = _sort_kind(dtype)
    if kind == "float":
        return z3.FPSort(*_FLOAT_SORTS[dtype])
    if kind == "int":
        return z3.BitVecSort(_INT_BITS[dtype])
    return z3.BoolSort()


def _bits(dtype: str) -> int:
    if dtype in _FLOAT_SORTS:
        exponent, significand = _FLOAT_SORTS[dtype]
        return exponent + significand
    return _INT_BITS.get(dtype, 1)


# -- operations ---------------------------------------------------------------------------------

def _rne() -> Any:
    return z3.RNE()


def _float_max(a: Any, b: Any) -> Any:
    """XLA's maximum: a NaN operand wins; equal values (+0 and -0 included) give the one that
    is not negative; else the larger (``neuron_sim.interpreter.ops.elementwise._float_max``)."""
    return z3.If(z3.fpIsNaN(a), a, z3.If(z3.fpIsNaN(b), b, z3.If(
        z3.fpEQ(a, b), z3.If(z3.fpIsNegative(a), b, a), z3.If(z3.fpGT(a, b), a, b))))


def _float_min(a: Any, b: Any) -> Any:
    return z3.If(z3.fpIsNaN(a), a, z3.If(z3.fpIsNaN(b), b, z3.If(
        z3.fpEQ(a, b), z3.If(z3.fpIsNegative(a), a, b), z3.If(z3.fpLT(a, b), a, b))))


def _float_binary(name: str) -> Callable[[Any, Any], Any]:
    return {"add": lambda a, b: z3.fpAdd(_rne(), a, b),
            "subtract": lambda a, b: z3.fpSub(_rne(), a, b),
            "multiply": lambda a, b: z3.fpMul(_rne(), a, b),
            "divide": lambda a, b: z3.fpDiv(_rne(), a, b),
            "maximum": _float_max, "minimum": _float_min}[name]


def _int_binary(name: str, signed: bool) -> Callable[[Any, Any], Any]:
    if name == "maximum":
        return lambda a, b: z3.If(a > b if signed else z3.UGT(a, b), a, b)
    if name == "minimum":
        return lambda a, b: z3.If(a < b if signed else z3.ULT(a, b), a, b)
    return {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
            "multiply": lambda a, b: a * b, "and": lambda a, b: a & b,
            "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}[name]


def _pred_binary(name: str) -> Callable[[Any, Any], Any]:
    return {"and": z3.And, "or": z3.Or, "xor": z3.Xor, "maximum": z3.Or, "minimum": z3.And,
            "add": z3.Or, "multiply": z3.And}[name]


_FLOAT_BINARY = {"add", "subtract", "multiply", "divide", "maximum", "minimum"}
_INT_BINARY = {"add", "subtract", "multiply", "maximum", "minimum", "and", "or", "xor"}
_PRED_BINARY = {"and", "or", "xor", "maximum", "minimum", "add", "multiply"}
_FLOAT_MULTISET = {"maximum", "minimum"}
_INT_MULTISET = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}
_PRED_MULTISET = {"and", "or", "xor", "maximum", "minimum"}


def _binary_for(name: str, dtype: str, multiset: bool = False) -> Callable[[Any, Any], Any]:
    kind = _sort_kind(dtype)
    allowed = {"float": _FLOAT_MULTISET if multiset else _FLOAT_BINARY,
               "int": _INT_MULTISET if multiset else _INT_BINARY,
               "pred": _PRED_MULTISET if multiset else _PRED_BINARY}[kind]
    if name not in allowed:
        what = "a reduction" if multiset else "an operation"
        order = " (a float sum's order is left to the implementation)" \
            if multiset and kind == "float" and name in ("add", "multiply") else ""
        raise NoModel(f"no exact z3 model for {what} {name} on {dtype}{order}")
    if kind == "float":
        return _float_binary(name)
    if kind == "int":
        return _int_binary(name, dtype.startswith("s"))
    return _pred_binary(name)


_COMPARE = {"EQ": ("fpEQ", "__eq__", "__eq__"), "NE": ("fpNEQ", "__ne__", "__ne__"),
            "LT": ("fpLT", "__lt__", "ULT"), "LE": ("fpLEQ", "__le__", "ULE"),
            "GT": ("fpGT", "__gt__", "UGT"), "GE": ("fpGEQ", "__ge__", "UGE")}


def _compare(direction: str, kind: str, dtype: str, type_attr: str | None) -> Callable:
    if direction not in _COMPARE:
        raise NoModel(f"no z3 model for compare direction {direction}")
    if type_attr not in (None, "FLOAT", "SIGNED", "UNSIGNED"):
        raise NoModel(f"no z3 model for compare type {type_attr}")
    floating, signed, unsigned = _COMPARE[direction]
    if kind == "float":
        if type_attr not in (None, "FLOAT"):
            raise NoModel(f"no z3 model for compare type {type_attr} on {dtype}")
        return getattr(z3, floating)
    if kind == "pred":
        if direction not in ("EQ", "NE"):
            raise NoModel(f"no z3 model for an ordered compare of pred ({direction})")
        return lambda a, b: a == b if direction == "EQ" else a != b
    is_signed = dtype.startswith("s") if type_attr is None else type_attr == "SIGNED"
    if is_signed or direction in ("EQ", "NE"):
        return lambda a, b: getattr(a, signed)(b)
    return getattr(z3, unsigned)


def _attribute(attrs: tuple, name: str) -> str | None:
    for key, text in attrs:
        if key == name:
            return text.strip("'\"")
    return None


# -- translation --------------------------------------------------------------------------------

class _Translator:
    """z3 expressions for term handles, memoised; variables named by their table row."""

    def __init__(self, table: TermTable) -> None:
        self.table = table
        self.memo: dict[int, Any] = {}
        self.dtypes: dict[int, str] = {}
        self.variables: dict[str, tuple] = {}   # z3 name -> (signature, device, element)
        self.bits: dict[int, Any] = {}          # float leaves: their exact bit pattern

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
        return self.memo[handle]

    def _children(self, h: int) -> list[int]:
        signature, a, b = self.table.row(h)
        kind = signature[0]
        if kind in ("variable", "constant"):
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

    def _build(self, h: int) -> tuple[Any, str]:
        signature, a, b = self.table.row(h)
        kind = signature[0]
        if kind == "variable":
            _, name, dtype, _leaf = signature
            label = f"{name}[{'r' if a < 0 else f'd{a}'}][{b}]"
            self.variables[label] = (signature, a, b)
            if _sort_kind(dtype) == "float":  # a bit pattern: every NaN payload is an input
                bits = self.bits[h] = z3.BitVec(label, _bits(dtype))
                return z3.fpBVToFP(bits, _sort(dtype)), dtype
            return z3.Const(label, _sort(dtype)), dtype
        if kind == "constant":
            dtype = _canonical(signature[1])
            width = _bits(dtype)
            pattern = a & ((1 << width) - 1)
            if _sort_kind(dtype) == "float":
                bits = self.bits[h] = z3.BitVecVal(pattern, width)
                return z3.fpBVToFP(bits, _sort(dtype)), dtype
            if _sort_kind(dtype) == "int":
                return z3.BitVecVal(pattern, width), dtype
            return z3.BoolVal(bool(pattern)), dtype
        if kind == "multiset":
            name, dtype = signature[1], signature[2]
            if len(signature) > 3:
                raise NoModel(f"no exact z3 model for a {signature[3]} reduction")
            combine = _binary_for(name, dtype, multiset=True)
            leaves = [self.memo[leaf] for leaf in self.table.leaves(h) or ()]
            value = leaves[0]
            for leaf in leaves[1:]:
                value = combine(value, leaf)
            return value, dtype
        _, opcode, dtype, operand_types, attrs = signature
        children = self._operands(h)
        if opcode == "compare" and _attribute(attrs, "type") == "TOTALORDER" and \
                _sort_kind(operand_types[0]) == "float":
            return self._total_order(children, attrs), dtype
        operands = [self.memo[c] for c in children]
        return self._apply(opcode, dtype, operand_types, attrs, operands), dtype

    def _total_order(self, children: list[int], attrs: tuple) -> Any:
        """compare type=TOTALORDER on float leaves: their bit patterns as signed integers,
        negative ones with the magnitude bits flipped (``elementwise.total_order_key``). Only
        leaves have a known bit pattern (an arithmetic NaN's sign and payload are the
        hardware's), so a computed operand has no model."""
        if any(c not in self.bits for c in children):
            raise NoModel("no exact z3 model for a TOTALORDER compare of a computed float "
                          "(its NaN bits are the hardware's)")
        keys = []
        for c in children:
            bits = self.bits[c]
            magnitude = (1 << (bits.size() - 1)) - 1
            keys.append(z3.If(bits < 0, bits ^ magnitude, bits))
        direction = _attribute(attrs, "direction") or ""
        if direction not in _COMPARE:
            raise NoModel(f"no z3 model for compare direction {direction}")
        return getattr(keys[0], _COMPARE[direction][1])(keys[1])

    @staticmethod
    def _apply(opcode: str, dtype: str, operand_types: tuple, attrs: tuple,
               operands: list[Any]) -> Any:
        kind = _sort_kind(dtype)
        if opcode == "compare":
            operand_kind = _sort_kind(operand_types[0])
            fn = _compare(_attribute(attrs, "direction") or "", operand_kind, operand_types[0],
                          _attribute(attrs, "type"))
            return fn(*operands)
        if opcode == "select":
            return z3.If(operands[0], operands[1], operands[2])
        if len(operands) == 2 and all(t == dtype for t in operand_types):
            return _binary_for(opcode, dtype)(*operands)
        if len(operands) == 1 and operand_types[0] == dtype:
            x = operands[0]
            if opcode == "negate" and kind == "float":
                return z3.fpNeg(x)
            if opcode == "negate" and kind == "int":
                return -x
            if opcode == "abs" and kind == "float":
                return z3.fpAbs(x)
            if opcode == "abs" and kind == "int" and dtype.startswith("s"):
                return z3.If(x < 0, -x, x)
            if opcode == "sqrt" and kind == "float":
                return z3.fpSqrt(_rne(), x)
            if opcode == "not" and kind == "pred":
                return z3.Not(x)
            if opcode == "not" and kind == "int":
                return ~x
            if opcode == "copy":
                return x
        return _no(opcode, dtype)


def _no(opcode: str, dtype: str) -> Any:
    raise NoModel(f"no exact z3 model for {opcode} on {dtype}")


# -- contracts ----------------------------------------------------------------------------------

def _exact(source: Any, target: Any, dtype: str) -> Any:
    return source == target  # SMT-LIB equality: NaN = NaN, -0 != +0 — the verifier's rule


def _infinity_to_finite(source: Any, target: Any, dtype: str) -> Any:
    """``neuron_sim.passes.contracts.infinity_to_finite`` on one float pair, or exactness."""
    if _sort_kind(dtype) != "float":
        return source == target
    zero = z3.FPVal(0.0, _sort(dtype))
    finite = z3.Not(z3.Or(z3.fpIsInf(target), z3.fpIsNaN(target)))
    return z3.Or(source == target,
                 z3.And(z3.fpIsInf(source), z3.fpIsNegative(source), finite,
                        z3.fpLT(target, zero)),
                 z3.And(z3.fpIsInf(source), z3.fpIsPositive(source), finite,
                        z3.fpGT(target, zero)),
                 z3.fpIsNaN(source))


CONTRACT_PREDICATES: dict[str, Callable[[Any, Any, str], Any]] = {
    "exact": _exact,
    "infinity-to-finite": _infinity_to_finite,
}


def rule_of(contract: Any) -> str | None:
    """The key of ``contract`` in ``CONTRACT_PREDICATES`` (None: z3 cannot judge it)."""
    if getattr(contract, "name", None) in ("exact", "changes-results"):
        return "exact"
    rule = getattr(contract, "rule", None)
    if getattr(contract, "name", None) == "refinement" and rule in CONTRACT_PREDICATES:
        return rule
    return None


# -- the query ----------------------------------------------------------------------------------

def decide(table: TermTable, pairs: Sequence[tuple[int, int]], rule: str, *,
           timeout_ms: int = TIMEOUT_MS) -> Decision:
    """Does ``CONTRACT_PREDICATES[rule]`` hold on every (source, target) pair of handles for
    every assignment of the input variables? One z3 query: the disjunction of the predicate's
    negations."""
    start = time.perf_counter()
    if len(pairs) > MAX_PAIRS:
        return Decision("unknown", f"{len(pairs)} distinct differing term pairs (z3 is asked "
                                   f"about at most {MAX_PAIRS})")
    translator = _Translator(table)
    predicate = CONTRACT_PREDICATES[rule]
    violations = []
    try:
        for source, target in pairs:
            s, t = translator.expr(source), translator.expr(target)
            s_type, t_type = translator.dtypes[int(source)], translator.dtypes[int(target)]
            if s_type != t_type:
                return Decision("unknown", f"the source is {s_type} and the target {t_type}",
                                seconds=time.perf_counter() - start)
            violations.append(z3.Not(predicate(s, t, s_type)))
    except NoModel as exc:
        return Decision("unknown", str(exc), seconds=time.perf_counter() - start)
    solver = z3.Solver()
    solver.set("timeout", int(timeout_ms))
    solver.add(z3.Or(*violations) if len(violations) > 1 else violations[0])
    answer = solver.check()
    seconds = time.perf_counter() - start
    if answer == z3.unsat:
        return Decision("proved", f"z3 proved the {rule} contract on {len(pairs)} differing "
                                  "term pair(s) for every input (IEEE arithmetic)",
                        seconds=seconds)
    if answer == z3.unknown:
        return Decision("unknown", f"z3 gave no answer ({solver.reason_unknown()})",
                        seconds=seconds)
    model = solver.model()
    broken = next((i for i, v in enumerate(violations)
                   if z3.is_true(model.eval(v, model_completion=True))), 0)
    assignment = {}
    for label, row in translator.variables.items():
        dtype = row[0][2]
        kind = _sort_kind(dtype)
        variable = z3.BitVec(label, _bits(dtype)) if kind == "float" else \
            z3.Const(label, _sort(dtype))
        value = model.eval(variable, model_completion=True)
        assignment[row] = bool(z3.is_true(value)) if kind == "pred" else value.as_long()
    return Decision("refuted", f"z3 found inputs breaking the {rule} contract at pair {broken}",
                    pair=broken, assignment=assignment, seconds=seconds)


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
        if _sort_kind(dtype) == "pred":
            flat[element] = value
        else:
            flat.view(f"u{flat.dtype.itemsize}")[element] = value
    return out
