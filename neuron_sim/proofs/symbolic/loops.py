"""While loops whose condition depends on the inputs, unrolled on symbols to a stated bound.

The loop's value is the state at the first iteration k whose condition is false. Running the
body unconditionally k times from the entry state gives every candidate ``s_0, s_1, ..., s_N``
(the counters stay concrete: nothing is merged), and the loop's value is the if-then-else chain

    select(c_0, select(c_1, ... select(c_N, REST(s_N), s_N) ..., s_1), s_0)

with ``c_k`` the condition on ``s_k``. It is exact: on an input whose loop ends after k <= N
iterations the chain selects ``s_k``. ``REST(s_N)`` — the loop continued from ``s_N`` — is one
uninterpreted term per element (``loop-rest``: the loop's name-free fingerprint applied to the
whole state and the position), so a loop the rewrite left alone still gives equal handles on
both sides (proved for all inputs). Where a condition is concretely false (a loop that also
counts to a constant) the chain ends there and no REST is needed: exact for all inputs.

When the differing terms of a proof contain a REST, z3 may take REST as any value and decide
under the assumption that each of the *source's* truncated loops ends within N iterations (on
every device): its ``LoopBound`` is the conditions whose conjunction reaches REST. A proof that
needs the assumption is the distinct verdict "proved for all inputs up to N loop iterations";
the target's loops are not assumed to end (a target that runs longer than the source where the
source ends is refuted, not assumed away).

Only loops whose condition and body have no effects beyond their value (collectives, rng, I/O,
custom-calls, device ids) are unrolled: the body runs on states the loop may never reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from neuron_sim.hlo.shapes import TupleShape
from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.values import TOKEN, PerDevice, Replicated, TupleValue, Value
from neuron_sim.proofs.symbolic.values import Symbolic, has_symbolic

__all__ = ["LOOP_REST", "LoopBound", "MAX_ITERATIONS", "MAX_UNROLLED_ELEMENTS", "unroll_while"]

MAX_ITERATIONS = 16              # iterations unrolled past the first condition on data
MAX_UNROLLED_ELEMENTS = 1 << 18  # state elements the unrolled candidates may hold in all
LOOP_REST = "loop-rest"          # the term kind of the loop continued past the bound


@dataclass(frozen=True)
class LoopBound:
    """A loop truncated after ``iterations`` unrolled iterations: on a row, the rest of the loop
    is reached exactly when every one of ``conditions`` (scalar pred handles, ``[rows]`` each)
    holds there."""

    iterations: int
    conditions: tuple[np.ndarray, ...]


def _state_elements(value: Value) -> int:
    if isinstance(value, TupleValue):
        return sum(_state_elements(e) for e in value.elements)
    if isinstance(value, Symbolic):
        return int(value.handles.size)
    array = getattr(value, "array", None)
    return int(array.size) if array is not None else 0


def _concrete(decision: Value) -> bool | None:
    """A condition that is concrete and the same on every row, as a bool (else None)."""
    if has_symbolic(decision) or not isinstance(decision, (Replicated, PerDevice)):
        return None
    raw = np.asarray(decision.array).reshape(-1)
    if raw.size == 0 or not (raw == raw[0]).all():
        return None
    return bool(raw[0])


def unroll_while(evaluator: Any, ctx: Any, state: Value, decision: Value,
                 fingerprint: Callable[[Any], str],
                 effect: Callable[[Any], Any]) -> Value | None:
    """The loop ``ctx.inst`` from ``state``, whose condition ``decision`` there depends on the
    inputs, as the chain above (None when it cannot be unrolled: an effect in the condition or
    body, or a state too large; the caller then compares the loop only as a whole).
    ``fingerprint(inst)`` names the loop without names; ``effect(computation)`` is the first
    instruction with an effect beyond its value (device ids included), or None. A truncated
    loop is recorded in ``evaluator.loop_bounds``."""
    condition, body = ctx.attr("condition"), ctx.attr("body")
    if effect(condition) is not None or effect(body) is not None:
        return None
    size = max(1, _state_elements(state))
    iterations = min(MAX_ITERATIONS, MAX_UNROLLED_ELEMENTS // size)
    if iterations < 1:
        return None
    states, tests = [state], [decision]
    truncated = True
    for _ in range(iterations):
        try:
            following = evaluator.evaluate(body, [states[-1]], ctx.frame)
            decided = evaluator.evaluate(condition, [following], ctx.frame)
        except InterpreterError:
            break  # the body fails on a state the loop may not reach: stop the bound here
        states.append(following)
        tests.append(decided)
        if _concrete(decided) is False:
            truncated = False
            break
    if len(states) == 1:
        return None  # not one iteration unrolled: the loop is compared as a whole
    if not truncated:
        value = states[-1]
    else:
        value = _rest(evaluator, ctx, states[-1], fingerprint)
        conditions = tuple(evaluator.handles_of(t, np.int64).reshape(-1) for t in tests
                           if _concrete(t) is not True)
        evaluator.loop_bounds.append(LoopBound(len(states) - 1, conditions))
    shape = ctx.inst.shape
    for test, candidate in zip(reversed(tests[:len(states) - (0 if truncated else 1)]),
                               reversed(states[:len(states) - (0 if truncated else 1)])):
        known = _concrete(test)
        if known is True:
            continue
        if known is False:
            value = candidate
            continue
        handles = evaluator.handles_of(test, np.int64).reshape(-1)
        value = evaluator._select_values(ctx, handles, value, candidate, shape)
    return value


def _rest(evaluator: Any, ctx: Any, state: Value, fingerprint: Callable[[Any], str]) -> Value:
    """The loop continued from ``state``: per output element a ``loop-rest`` term of the
    loop's fingerprint, the whole state and the position."""
    leaves = _leaves(state)
    arrays = [evaluator.handles_of(leaf, np.int64) for leaf in leaves if leaf is not TOKEN]
    rows = max((a.shape[0] for a in arrays), default=1)
    flat = np.concatenate([np.broadcast_to(a, (rows, *a.shape[1:])).reshape(rows, -1)
                           for a in arrays], axis=1) if arrays else np.zeros((rows, 0), np.int64)
    whole = evaluator._whole(flat)
    table = evaluator.table
    shapes = ctx.inst.shape.elements if isinstance(ctx.inst.shape, TupleShape) \
        else (ctx.inst.shape,)
    base = fingerprint(ctx.inst)
    results: list[Value] = []
    for number, shape in enumerate(shapes):
        if isinstance(shape, TupleShape) or shape.is_token:
            results.append(_token_or_nested(shape))
            continue
        op = table.operator((LOOP_REST, "rest-of-while", base, number, str(shape),
                             shape.element_type))
        dims = tuple(shape.dims)
        positions = table.constants(np.arange(int(np.prod(dims, dtype=np.int64)),
                                              dtype=np.int64))
        out = table.intern(op, whole[:, None], positions[None, :]).reshape(rows, *dims)
        results.append(Symbolic(out[0], True) if rows == 1 else
                       Symbolic(np.broadcast_to(out, (ctx.n, *dims)) if rows != ctx.n
                                else out, False))
    return TupleValue(results) if isinstance(ctx.inst.shape, TupleShape) else results[0]


def _token_or_nested(shape: Any) -> Value:
    if shape.is_token:
        return TOKEN
    from neuron_sim.proofs.symbolic.values import SymbolicUnsupported  # noqa: PLC0415
    raise SymbolicUnsupported("the while condition depends on the inputs and its state nests "
                              "tuples, which the unrolled loop does not model")


def _leaves(value: Value) -> list[Value]:
    if isinstance(value, TupleValue):
        return [leaf for element in value.elements for leaf in _leaves(element)]
    return [value]
