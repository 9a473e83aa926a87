"""Control flow and called computations: fusion, call, map, while, conditional, the generic
async wrappers and copy-start/copy-done.

Device-dependent control flow runs in lockstep: a while whose predicate differs across the
frame's rows keeps iterating only the rows still running (the body is evaluated for that subset;
the others keep their final state), and a conditional whose branch differs runs each branch on
the rows that take it and merges the results. A collective reached inside such a subset by part
of a participant group is reported by the transport (CollectiveMismatchError).

A while loop whose state comes back to an earlier one never ends when its condition and body
are a function of the state alone: it raises ``LoopNeverEnds`` (a timeout) at once instead of
running until the time limit, or forever without one (the hostile fuzz's mutants with a
constant-true condition reach a fixed point within a few iterations). The state after
iteration 64, 128, 256, ... is compared with the one at the previous such iteration, bit for
bit: a fixed point, or a cycle whose length is a power of two, is found within twice its
start; a loop of fewer than 64 iterations is never looked at, and a state past
``LOOP_STATE_BYTES`` is not kept.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo import Opcode
from neuron_sim.hlo.shapes import TupleShape

from neuron_sim.hlo.opcodes import Category
from neuron_sim.interpreter.errors import InterpreterError, LoopNeverEnds
from neuron_sim.interpreter.ops.registry import implements
from neuron_sim.interpreter.values import (TOKEN, PerDevice, Replicated, TupleValue, merge_branches,
                                           restrict)


@implements(Opcode.FUSION, values=True)
def fusion(ctx, *operands):
    return ctx.call(ctx.attr("calls"), operands)


@implements(Opcode.CALL, values=True)
def call(ctx, *operands):
    return ctx.call(ctx.attr("to_apply"), operands)


@implements(Opcode.MAP)
def map_(ctx, *arrays):
    arrays = ctx.unify(*arrays)
    return ctx.elementwise(ctx.attr("to_apply"))(*arrays)


def row_flags(value, n: int) -> bool | np.ndarray:
    """A pred (or integer) scalar value as one Python bool if uniform, else one bool per row."""
    if isinstance(value, Replicated):
        return bool(value.array)
    if isinstance(value, PerDevice):
        flags = np.asarray(value.array, bool).reshape(n)
        count = np.count_nonzero(flags)
        if count == n:
            return True
        if not count:
            return False
        return flags
    raise InterpreterError(f"expected a scalar predicate, got {value!r}")


@implements(Opcode.WHILE, values=True)
def while_(ctx, initial):
    condition, body = ctx.attr("condition"), ctx.attr("body")
    frame = ctx.frame
    evaluate = ctx.evaluator.evaluate
    rows = None  # indices of the rows still iterating; None: all of them
    stopped = []  # (rows, their final state) of the rows that stopped, assembled at the end
    state = initial
    active = frame
    iteration = 0
    earlier = None  # (iteration, bytes) of the state at the last checkpoint, if kept
    deadline = ctx.evaluator.deadline
    while True:
        # Once per iteration: a condition and body whose plans have no step (a constant, the
        # state passed through) check the deadline nowhere else.
        if deadline is not None:
            deadline.check()
        flags = row_flags(evaluate(condition, [state], active), active.n)
        if flags is False:
            break
        if flags is not True:
            keep = flags.nonzero()[0]
            leave = (~flags).nonzero()[0]
            here = np.arange(frame.n) if rows is None else rows
            stopped.append((here[leave], restrict(state, leave)))
            rows = here[keep]
            state = restrict(state, keep)
            active = frame.subset(rows)
            earlier = None  # fewer rows: another state
        state = evaluate(body, [state], active)
        iteration += 1
        if iteration >= FIRST_CHECKPOINT and not iteration & (iteration - 1):
            earlier = _checkpoint(state, iteration, earlier, (condition, body))
    if rows is None:
        return state
    return merge_branches([*stopped, (rows, state)], frame.n)


FIRST_CHECKPOINT = 64          # the first iteration whose state a while loop keeps
LOOP_STATE_BYTES = 1 << 20     # a larger state is not kept (its copy would cost too much)
# What a loop that repeats a state may compute (a function of its operands and the device):
# not random numbers, I/O, collectives, asynchronous ops, custom calls, nor reductions, dots
# and convolutions (a float sum's order is the implementation's, and numpy's or BLAS's may
# change with the memory's alignment).
_DETERMINISTIC = {Category.UNARY, Category.BINARY, Category.TERNARY, Category.SOURCE,
                  Category.SHAPE, Category.CONTROL}
_DETERMINISTIC_OTHER = {Opcode.OPTIMIZATION_BARRIER, Opcode.DOMAIN, Opcode.ADD_DEPENDENCY}


def _checkpoint(state, iteration: int, earlier: tuple | None,
                computations: tuple) -> tuple | None:
    """At a checkpoint ``iteration``: raise ``LoopNeverEnds`` when ``state`` is the state kept
    at the previous one (``earlier``) and ``computations`` (the condition and body) compute
    a function of the state alone; else the state to keep (None: not kept)."""
    kept = _state_bytes(state)
    if kept is not None and earlier is not None and kept == earlier[1] and \
            all(_state_function(c, set()) for c in computations):
        raise LoopNeverEnds(f"the loop never ends: its state after iteration {iteration} is "
                            f"its state after iteration {earlier[0]}, and its condition and "
                            "body compute nothing but a function of the state")
    return None if kept is None else (iteration, kept)


def _state_bytes(value) -> tuple | None:
    """A copy of a loop state (kind, dtype, shape and bytes of each leaf), or None when it
    is larger than ``LOOP_STATE_BYTES``."""
    parts: list = []
    size = 0
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, TupleValue):
            parts.append(len(item.elements))
            pending.extend(reversed(item.elements))
        elif isinstance(item, (Replicated, PerDevice)):
            array = np.asarray(item.array)
            size += array.nbytes
            if size > LOOP_STATE_BYTES:
                return None
            parts.append((type(item), array.dtype, array.shape, array.tobytes()))
        elif item is TOKEN:
            parts.append(TOKEN)
        else:
            return None
    return tuple(parts)


def _state_function(computation, seen: set) -> bool:
    """Whether ``computation`` and those it calls compute a function of their parameters
    (and the device) alone: only the opcodes of ``_DETERMINISTIC``."""
    if id(computation) in seen:
        return True
    seen.add(id(computation))
    for inst in computation.instructions:
        opcode = inst.opcode
        if opcode.category not in _DETERMINISTIC and opcode not in _DETERMINISTIC_OTHER:
            return False
        if not all(_state_function(c, seen) for c in inst.called_computations):
            return False
    return True


@implements(Opcode.CONDITIONAL, values=True)
def conditional(ctx, selector, *operands):
    if ctx.inst.has("branch_computations"):
        branches = list(ctx.attr("branch_computations"))
    else:
        branches = [ctx.attr("true_computation"), ctx.attr("false_computation")]
    if len(operands) != len(branches):
        raise InterpreterError(f"conditional has {len(branches)} branches but "
                               f"{len(operands)} branch operands")
    indexed = ctx.inst.has("branch_computations")
    if type(selector) is PerDevice and 0 < selector.array.size <= _FEW_ROWS:
        index = _few_rows_branches(selector.array, len(branches), indexed)
    else:
        index = _branch_index(selector, len(branches), indexed)
    if isinstance(index, int):
        return ctx.call(branches[index], [operands[index]])
    if isinstance(index, (tuple, list)):  # the rows of each branch taken
        taken = index if isinstance(index, list) else enumerate(index)
    else:
        taken = ((branch, (index == branch).nonzero()[0])
                 for branch in np.bincount(index, minlength=len(branches)).nonzero()[0])
    parts = []
    for branch, rows in taken:
        result = ctx.call(branches[branch], [restrict(operands[branch], rows)],
                          ctx.frame.subset(rows))
        parts.append((rows, result))
    return merge_branches(parts, ctx.frame.n)


_FEW_ROWS = 64


def _few_rows_branches(raw: np.ndarray, count: int, indexed: bool
                       ) -> int | list[tuple[int, np.ndarray]]:
    """``_branch_index`` for a per-device selector of a few rows, read as Python numbers: the
    branch every row takes, or (branch, rows) for each branch taken, in branch order."""
    if indexed:
        last = count - 1
        chosen = [v if 0 <= v < count else last for v in raw.reshape(-1).tolist()]
    else:
        chosen = [0 if v else 1 for v in raw.reshape(-1).tolist()]
    first = chosen[0]
    if chosen.count(first) == len(chosen):
        return first
    rows: dict[int, list[int]] = {}
    for row, branch in enumerate(chosen):
        rows.setdefault(branch, []).append(row)
    return [(branch, np.array(rows[branch], np.intp)) for branch in sorted(rows)]


def _branch_index(selector, count: int, indexed: bool
                  ) -> int | np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The branch every row takes (an int), or the branch per row: pred true -> 0
    (true_computation), for a predicate as (rows taking 0, rows taking 1); an index out of
    range -> last."""
    if isinstance(selector, Replicated):
        raw = selector.array.reshape(())
    elif isinstance(selector, PerDevice):
        raw = selector.array.reshape(-1)
    else:
        raise InterpreterError("the conditional's selector is not an array")
    if not indexed:
        flags = raw.astype(bool)
        if raw.ndim == 0:
            return 0 if flags else 1
        true = flags.nonzero()[0]
        if len(true) == len(flags) or not len(true):
            return 0 if len(true) else 1
        return true, (~flags).nonzero()[0]
    signed = raw.astype(np.int64) if raw.dtype.kind != "u" else \
        np.ascontiguousarray(raw).view(f"i{raw.dtype.itemsize}").astype(np.int64)
    index = np.where((signed < 0) | (signed >= count), count - 1, signed)
    if index.ndim == 0:
        return int(index)
    if (index == index[0]).all():
        return int(index[0])
    return index


def zeros_value(shape):
    """A zero value of ``shape`` (the contents of async context buffers)."""
    if isinstance(shape, TupleShape):
        return TupleValue([zeros_value(s) for s in shape.elements])
    if shape.is_token or not shape.is_array:
        return TOKEN
    return Replicated(np.zeros(shape.dims, shape.element_type.numpy_dtype))


@implements(Opcode.ASYNC_START, values=True)
def async_start(ctx, *operands):
    called = ctx.attr("calls") or (ctx.attr("called_computations") or (None,))[0]
    if called is None:
        raise InterpreterError("async-start without a called computation")
    result = ctx.call(called, operands)
    shape = ctx.inst.shape
    if not isinstance(shape, TupleShape) or len(shape.elements) < 2:
        return result
    rest = [zeros_value(s) for s in shape.elements[2:]]
    return TupleValue([TupleValue(list(operands)), result, *rest])


@implements(Opcode.ASYNC_UPDATE, values=True)
def async_update(ctx, operand):
    return operand


@implements(Opcode.ASYNC_DONE, values=True)
def async_done(ctx, operand):
    return operand.elements[1] if isinstance(operand, TupleValue) else operand


@implements(Opcode.COPY_START, values=True)
def copy_start(ctx, operand):
    shape = ctx.inst.shape
    rest = [zeros_value(s) for s in shape.elements[2:]] if isinstance(shape, TupleShape) else []
    return TupleValue([operand, operand, *rest])


@implements(Opcode.COPY_DONE, values=True)
def copy_done(ctx, operand):
    return operand.elements[0] if isinstance(operand, TupleValue) else operand
