"""Collectives on term handles: what the symbolic evaluator does with an input-dependent
collective operand, as its descriptor (``neuron_sim.semantics.collectives``) says.

A reduction (``SymbolicForm.FOLD_MULTISET``) folds each group's positions into one term — a
multiset term when ``to_apply`` is a reassociable binary op (``SymbolicReduction``), else the
computation applied to handles — and every other kind moves handles. Both run through the same
transport and data functions as numbers do, so the groups, positions and fill rules are the
interpreter's own.

What is kept cheap, because a proof at hundreds of devices runs one of these per collective:
the group's positions reach the reducer as one gathered array (no list of per-position
arrays), a result the transport hands back as one broadcast row (one group, or one operand
on every device) stays one row without being compared element by element, and a per-device
result is told apart from a replicated one by its first differing row.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from neuron_sim.hlo import ElementType, Opcode
from neuron_sim.hlo.shapes import ArrayShape, TupleShape
from neuron_sim.interpreter.evaluator import OpContext
from neuron_sim.interpreter.ops.control import zeros_value
from neuron_sim.interpreter.ops.reduce import binary_reducer
from neuron_sim.interpreter.transport import CollectiveCall, collective_kind
from neuron_sim.interpreter.values import TOKEN, PerDevice, TupleValue, Value
from neuron_sim.proofs.symbolic.terms import TermTable
from neuron_sim.proofs.symbolic.values import Symbolic, SymbolicUnsupported, has_symbolic
from neuron_sim.semantics.collectives.descriptor import SymbolicForm
from neuron_sim.semantics.collectives.reading import read_collective
from neuron_sim.semantics.elementwise import is_commutative

__all__ = ["SymbolicReduction", "symbolic_collective"]


class SymbolicReduction:
    """A reassociable reduction on term handles.

    ``fold_positions(values)`` folds the positions of every group into one multiset term
    (``semantics.collectives.reductions`` calls it instead of a left fold; ``values`` holds
    the group positions on axis 1); called as ``combine(acc, x)`` it folds two."""

    def __init__(self, table: TermTable, opcode: Opcode, element_type: ElementType,
                 tag: str = "") -> None:
        self.table = table
        et = element_type
        repeat = None
        if opcode is Opcode.ADD and not tag and et is not ElementType.PRED:
            multiply = table.operator(("apply", Opcode.MULTIPLY, et, (et, et), ()),
                                      commutative=is_commutative(Opcode.MULTIPLY))
            repeat = (multiply, et.numpy_dtype, et.is_integral)
        self.op = table.multiset_operator((opcode, et, tag) if tag else (opcode, et),
                                          repeat=repeat)

    def fold_positions(self, values: np.ndarray) -> np.ndarray:
        """One multiset term per group and element: ``values`` is ``(groups, n, *shape)``,
        the result ``(groups, *shape)``."""
        return self.table.multiset(self.op, np.moveaxis(np.asarray(values, np.int64), 1, -1))

    def __call__(self, acc: np.ndarray, item: np.ndarray) -> np.ndarray:
        return self.table.multiset(self.op, np.stack(np.broadcast_arrays(acc, item), axis=-1))


def symbolic_collective(evaluator: Any, ctx: OpContext, args: list[Value]) -> Value:
    """``ctx.inst`` (a collective) on the handles of ``args`` for the rows of ``ctx.frame``.

    ``evaluator`` is the ``SymbolicEvaluator`` running it (this module is its delegate: it
    reads its term table, topology and transport, and builds the reducer with its
    ``_reduction_of`` / ``_make_symbolic``). Operands that decide indexing
    (``index_operands``) must be concrete and travel as numbers."""
    inst = ctx.inst
    if not ctx.frame.is_device_frame:
        raise SymbolicUnsupported("a collective inside a computation applied elementwise")
    reading = read_collective(inst, evaluator.topology)
    descriptor = reading.descriptor
    result_shape = descriptor.result_shape(inst.opcode, inst.shape)
    leaves = result_shape.elements if isinstance(result_shape, TupleShape) \
        else (result_shape,)
    computation = inst.get("to_apply")
    combine = None
    applied = False  # the reducer is the computation applied to handles
    if descriptor.symbolic is SymbolicForm.FOLD_MULTISET:
        combine = evaluator._reduction_of(computation, leaves[0].element_type)
        applied = combine is None
    if applied:
        evaluator._symbolic_calls += 1
    try:
        if applied:
            combine = evaluator._make_symbolic(computation)
        rows = _operand_rows(evaluator, ctx, descriptor.index_operands, args)
        call = CollectiveCall(kind=collective_kind(inst), operands=rows,
                              active=tuple(np.asarray(ctx.frame.devices).tolist()),
                              groups=reading.groups, dim=reading.dim, pairs=reading.pairs,
                              combine=combine, label=inst.name,
                              reduction=binary_reducer(computation)
                              if combine is not None else None)
        outputs = evaluator.transport.collective(call, None)
    finally:
        if applied:
            evaluator._symbolic_calls -= 1
    results = [_leaf_value(evaluator.table, leaf, np.asarray(out))
               for leaf, out in zip(leaves, outputs)]
    value = TupleValue(results) if isinstance(result_shape, TupleShape) else results[0]
    if not descriptor.wraps(inst.opcode):
        return value
    operand_part = args[0] if len(args) == 1 else TupleValue(list(args))
    return TupleValue([operand_part, value, *(zeros_value(s) for s in inst.shape.elements[2:])])


def _operand_rows(evaluator: Any, ctx: OpContext, index_operands: Sequence[int],
                  args: list[Value]) -> list[np.ndarray]:
    """Each operand stacked over the frame's rows: handles, or numbers for an index operand.
    A value the same on every row stays one broadcast row (the transport then computes a
    group's result once)."""
    inst = ctx.inst
    rows = []
    for position, value in enumerate(args):
        if value is TOKEN:
            continue
        if position in index_operands:
            if has_symbolic(value):
                raise SymbolicUnsupported(f"operand {position} of {inst.opcode.spelling} "
                                          "decides indexing and depends on the inputs")
            numbers = value.array if isinstance(value, PerDevice) else value.array[None]
            rows.append(np.broadcast_to(numbers, (ctx.n, *numbers.shape[1:])))
            continue
        handles = evaluator.handles_of(value, np.int64)
        rows.append(np.broadcast_to(handles, (ctx.n, *handles.shape[1:])))
    return rows


def _leaf_value(table: TermTable, leaf: ArrayShape, out: np.ndarray) -> Symbolic:
    """One result leaf as a value: the rows the collective fills with zeros (devices that
    receive nothing) become a zero constant of the leaf's type; a result the same on every
    row is held once."""
    if out.ndim and out.shape[0] and out.strides[0] == 0:  # one row, broadcast
        return Symbolic(_zero_filled(table, leaf, np.array(out[0])), True)
    out = _zero_filled(table, leaf, out)
    if out.shape[0] and _rows_equal(out):
        return Symbolic(np.array(out[0]), True)
    return Symbolic(out, False)


def _zero_filled(table: TermTable, leaf: ArrayShape, handles: np.ndarray) -> np.ndarray:
    """``handles`` with the reserved handle 0 (a zero the collective filled in) replaced by
    the zero constant of the leaf's element type."""
    filled = handles == 0
    if filled.any():
        zero = table.constants(np.zeros(1, leaf.element_type.numpy_dtype))[0]
        handles = np.where(filled, zero, handles)
    return handles


def _rows_equal(out: np.ndarray) -> bool:
    """Whether every row of ``out`` equals row 0: the first other row is compared first, so
    a per-device result is usually told apart without reading the rest."""
    if out.shape[0] < 2:
        return True
    if not np.array_equal(out[1], out[0]):
        return False
    return bool((out[2:] == out[:1]).all())
