"""Collectives and device identity: the glue between HLO instructions and the transport.

A collective op reads its instruction once (kind, participant groups in flattened ids from
``neuron_sim.topology``'s group mode / participant groups / permute pairs, dimension, reduction:
``neuron_sim.interpreter.transport``), stacks its operands over the frame's devices and hands the transport
one ``CollectiveCall``; the transport checks the rendezvous and applies
``neuron_sim.interpreter.collectives``. Async ``-start``/``-done`` pairs have the synchronous semantics: the
start computes the result, the done yields it.

Results identical on every device (an all-reduce over all devices, say) become replicated
values again, so the work after a collective stays cheap.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo import Opcode
from neuron_sim.hlo.shapes import TupleShape

from neuron_sim.interpreter.errors import InterpreterError, Unimplemented, describe
from neuron_sim.interpreter.ops.control import zeros_value
from neuron_sim.interpreter.ops.elementwise import (element_type_of, float_maximum, float_minimum,
                                         is_float, is_pred)
from neuron_sim.interpreter.ops.reduce import binary_reducer
from neuron_sim.interpreter.ops.registry import implements
from neuron_sim.interpreter.transport import (CollectiveCall, collective_kind, fingerprint_of,
                                   flattened_pairs, participant_groups_of)
from neuron_sim.interpreter.values import PerDevice, Replicated, TupleValue, collapse_if_uniform, stacked


# ---------------------------------------------------------------------------------------------
# Device identity.

@implements(Opcode.PARTITION_ID, values=True)
def partition_id(ctx):
    partitions = ctx.evaluator.topology.num_partitions
    return _identity_value(ctx, lambda devices: devices % partitions, partitions == 1)


@implements(Opcode.REPLICA_ID, values=True)
def replica_id(ctx):
    topology = ctx.evaluator.topology
    return _identity_value(ctx, lambda devices: devices // topology.num_partitions,
                           topology.replica_count == 1)


def _identity_value(ctx, of_devices, always_zero: bool):
    dtype = ctx.dtype
    if always_zero:
        return Replicated(np.zeros((), dtype))
    ids = of_devices(_devices(ctx)).astype(dtype)
    if len(ids) and (ids == ids[0]).all():
        return Replicated(np.array(ids[0], dtype))
    return PerDevice(ids)


def _devices(ctx) -> np.ndarray:
    if not ctx.frame.is_device_frame:
        raise InterpreterError(f"{ctx.inst.opcode.spelling} inside a computation applied "
                               "elementwise (a reducer, comparator or map) has no device")
    return ctx.frame.devices


# ---------------------------------------------------------------------------------------------
# Building the transport's call.

class _Static:
    """What a collective instruction means on a topology (computed once per instruction)."""

    __slots__ = ("kind", "groups", "pairs", "dim", "label", "reduction", "combine")

    def __init__(self, ctx) -> None:
        inst, topology = ctx.inst, ctx.evaluator.topology
        self.kind = collective_kind(inst)
        self.groups = participant_groups_of(inst, topology)
        self.pairs = flattened_pairs(inst, topology) \
            if self.kind is Opcode.COLLECTIVE_PERMUTE else ()
        dims = inst.dimensions if self.kind in (Opcode.ALL_GATHER, Opcode.REDUCE_SCATTER,
                                                Opcode.ALL_TO_ALL) and inst.has("dimensions") \
            else ()
        self.dim = dims[0] if dims else None
        self.label = describe(inst)
        self.reduction = None
        self.combine = None
        if self.kind in (Opcode.ALL_REDUCE, Opcode.REDUCE_SCATTER):
            self.reduction = binary_reducer(inst.get("to_apply"))
            self.combine = combiner(ctx)


def _static(ctx) -> _Static:
    cache = ctx.evaluator.cache.setdefault("collectives", {})
    static = cache.get(ctx.inst)
    if static is None:
        static = cache[ctx.inst] = _Static(ctx)
    return static


def combiner(ctx):
    """The to_apply reduction as a vectorized binary function (a numpy ufunc when possible,
    which lets the collectives fold in place)."""
    computation = ctx.attr("to_apply")
    opcode = binary_reducer(computation)
    dtype = computation.root.shape.element_type.numpy_dtype
    et = element_type_of(dtype)
    if opcode is not None and not (et.is_integral and et.bits < 8):
        if is_pred(dtype):
            return {Opcode.ADD: np.logical_or, Opcode.OR: np.logical_or,
                    Opcode.MAXIMUM: np.logical_or, Opcode.MULTIPLY: np.logical_and,
                    Opcode.AND: np.logical_and, Opcode.MINIMUM: np.logical_and,
                    Opcode.XOR: np.logical_xor}[opcode]
        if opcode is Opcode.ADD:
            return np.add
        if opcode is Opcode.MULTIPLY:
            return np.multiply
        if opcode in (Opcode.MAXIMUM, Opcode.MINIMUM):
            if is_float(dtype):
                return float_maximum if opcode is Opcode.MAXIMUM else float_minimum
            return np.maximum if opcode is Opcode.MAXIMUM else np.minimum
        if et.is_integral:
            return {Opcode.AND: np.bitwise_and, Opcode.OR: np.bitwise_or,
                    Opcode.XOR: np.bitwise_xor}[opcode]
    return ctx.elementwise(computation)


def run_collective(ctx, operands) -> list:
    """Hand the collective to the transport; its results as values."""
    for value in operands:
        if not isinstance(value, (Replicated, PerDevice)):
            raise InterpreterError("collective operands must be arrays")
    static = _static(ctx)
    devices = _devices(ctx)
    rows = [stacked(v, ctx.n) for v in operands]
    call = CollectiveCall(kind=static.kind, operands=rows,
                          active=tuple(np.asarray(devices).tolist()), groups=static.groups,
                          dim=static.dim, pairs=static.pairs, combine=static.combine,
                          label=static.label, reduction=static.reduction)
    transport = ctx.evaluator.transport
    fingerprint = None
    if getattr(transport, "uses_fingerprints", True):
        fingerprint = fingerprint_of(ctx.inst, ctx.evaluator.topology, rows)
    outputs = transport.collective(call, fingerprint)
    return [collapse_if_uniform(np.asarray(out)) for out in outputs]


def _result(ctx, operands, results):
    """The op's value: one result or a tuple; all-gather-start and collective-permute-start
    return (operands, results, context...) as their shape says."""
    inst = ctx.inst
    shape = inst.shape
    wrapped_start = inst.opcode in (Opcode.ALL_GATHER_START, Opcode.COLLECTIVE_PERMUTE_START)
    result_shape = shape.elements[1] if wrapped_start else shape
    leaves = result_shape.elements if isinstance(result_shape, TupleShape) else (result_shape,)
    for leaf, result in zip(leaves, results):
        got = result.array.shape if isinstance(result, Replicated) else result.array.shape[1:]
        if tuple(got) != tuple(leaf.dims):
            raise InterpreterError(f"the collective produced shape {list(got)} but the "
                                   f"instruction's shape is {leaf}")
    value = TupleValue(results) if isinstance(result_shape, TupleShape) else results[0]
    if not wrapped_start:
        return value
    operand_part = operands[0] if len(operands) == 1 else TupleValue(list(operands))
    return TupleValue([operand_part, value, *(zeros_value(s) for s in shape.elements[2:])])


# ---------------------------------------------------------------------------------------------
# The collectives.

@implements(Opcode.ALL_REDUCE, Opcode.ALL_REDUCE_START, Opcode.ALL_GATHER,
            Opcode.ALL_GATHER_START, Opcode.REDUCE_SCATTER, Opcode.ALL_TO_ALL,
            Opcode.COLLECTIVE_BROADCAST, values=True)
def collective(ctx, *operands):
    return _result(ctx, operands, run_collective(ctx, operands))


@implements(Opcode.COLLECTIVE_PERMUTE, Opcode.COLLECTIVE_PERMUTE_START, values=True)
def collective_permute(ctx, *operands):
    if len(operands) == 4 and not isinstance(ctx.inst.shape, TupleShape):
        raise Unimplemented(ctx.inst.opcode.spelling, "the in-place form with slice offsets")
    return _result(ctx, operands, run_collective(ctx, operands))


@implements(Opcode.ALL_REDUCE_DONE, values=True)
def all_reduce_done(ctx, operand):
    return operand


@implements(Opcode.ALL_GATHER_DONE, Opcode.COLLECTIVE_PERMUTE_DONE, values=True)
def start_done(ctx, operand):
    if not isinstance(operand, TupleValue) or len(operand.elements) < 2:
        raise InterpreterError(f"{ctx.inst.opcode.spelling} needs the tuple its start returns")
    return operand.elements[1]
