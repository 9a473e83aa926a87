"""Collectives and device identity: the glue between HLO instructions and the transport.

A collective op reads its instruction once (``neuron_sim.semantics.collectives.reading``: the
kind's descriptor, rendezvous groups, flattened pairs, dimension; plus the reduction), stacks its
operands over the frame's devices and hands the transport one ``CollectiveCall``; the transport
checks the rendezvous and applies the kind's data function. Which opcodes run a collective, and
what an async start returns and its done yields, come from the descriptors: ``-start``/``-done``
pairs have the synchronous semantics (the start computes the result, the done yields it).

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
from neuron_sim.interpreter.trial_topology import Trials
from neuron_sim.interpreter.transport import (COLLECTIVE_KINDS, CollectiveCall, collective_kind,
                                              fingerprint_of)
from neuron_sim.interpreter.values import PerDevice, Replicated, TupleValue, collapse_if_uniform, stacked
from neuron_sim.semantics.collectives.descriptor import StartForm
from neuron_sim.semantics.collectives.kinds import DESCRIPTORS, descriptor_of
from neuron_sim.semantics.collectives.reading import read_collective


# ---------------------------------------------------------------------------------------------
# Device identity.

@implements(Opcode.PARTITION_ID, values=True)
def partition_id(ctx):
    partitions = ctx.evaluator.topology.num_partitions
    return _identity_value(ctx, lambda devices: devices % partitions, partitions == 1)


@implements(Opcode.REPLICA_ID, values=True)
def replica_id(ctx):
    topology = ctx.evaluator.topology
    # (v // P) % R: a flattened id's replica, also for a row of a later trial (its id is
    # t * R * P + the device's; neuron_sim.interpreter.trial_topology).
    return _identity_value(
        ctx, lambda devices: devices // topology.num_partitions % topology.replica_count,
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

    __slots__ = ("kind", "reading", "label", "reduction", "combine")

    def __init__(self, ctx) -> None:
        inst = ctx.inst
        self.kind, self.reading, self.label = _read(inst, ctx.evaluator.topology)
        self.reduction = None
        self.combine = None
        if self.reading.descriptor.reduces:
            self.reduction = binary_reducer(inst.get("to_apply"))
            self.combine = combiner(ctx)


def _read(inst, topology) -> tuple:
    """The instruction's kind, its reading on ``topology`` and its text, kept between executes
    while the instruction's text (name, shape, operands, attributes) and the topology are the
    same: building them costs more than a small collective (the text alone is 5-15% of a small
    module's execute)."""
    key = (topology, inst.name, inst.opcode, inst.shape,
           tuple((o.name, o.shape) for o in inst.operands), tuple(inst.attrs.items()))
    # Kept in the computation's own ``derived`` caches: the key refers to the instruction's
    # attributes (its to_apply computation), so a global table would keep the module alive.
    # Several input sets at once (``Trials``) keep theirs beside the topology's own: the
    # verifier runs a topology's first set alone and the others together, alternating.
    trials = type(topology) is Trials
    table = inst.parent.derived.setdefault((_read, trials), {}) if inst.parent is not None \
        else {}
    kept = table.get(inst)
    if kept is not None:
        try:
            if kept[0] == key:
                return kept[1]
        except (TypeError, ValueError):  # an attribute value that does not compare as a bool
            pass
    if trials:  # each trial's own groups
        reading = topology.per_trial(read_collective(inst, topology.topology))
    else:
        reading = read_collective(inst, topology)
    read = (collective_kind(inst), reading, describe(inst))
    table[inst] = (key, read)
    return read


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
    reading = static.reading
    devices = _devices(ctx)
    rows = [stacked(v, ctx.n) for v in operands]
    call = CollectiveCall(kind=static.kind, operands=rows,
                          active=tuple(np.asarray(devices).tolist()), groups=reading.groups,
                          dim=reading.dim, pairs=reading.pairs, combine=static.combine,
                          label=static.label, reduction=static.reduction)
    transport = ctx.evaluator.transport
    fingerprint = None
    if getattr(transport, "uses_fingerprints", True):
        fingerprint = fingerprint_of(ctx.inst, ctx.evaluator.topology, rows)
    outputs = transport.collective(call, fingerprint)
    return [collapse_if_uniform(np.asarray(out)) for out in outputs]


def _result(ctx, operands, results):
    """The op's value: one result or a tuple; a start whose descriptor wraps returns
    (operands, results, context...) as its shape says."""
    inst = ctx.inst
    shape = inst.shape
    descriptor = _static(ctx).reading.descriptor
    result_shape = descriptor.result_shape(inst.opcode, shape)
    leaves = result_shape.elements if isinstance(result_shape, TupleShape) else (result_shape,)
    for leaf, result in zip(leaves, results):
        got = result.array.shape if isinstance(result, Replicated) else result.array.shape[1:]
        if tuple(got) != tuple(leaf.dims):
            raise InterpreterError(f"the collective produced shape {list(got)} but the "
                                   f"instruction's shape is {leaf}")
    value = TupleValue(results) if isinstance(result_shape, TupleShape) else results[0]
    if not descriptor.wraps(inst.opcode):
        return value
    operand_part = operands[0] if len(operands) == 1 else TupleValue(list(operands))
    return TupleValue([operand_part, value, *(zeros_value(s) for s in shape.elements[2:])])


# ---------------------------------------------------------------------------------------------
# The collectives: every opcode that runs an executable kind, and the dones of its starts.

def collective(ctx, *operands):
    """A collective's sync op or async start: the transport runs it."""
    form = descriptor_of(ctx.inst.opcode).unexecuted_form(ctx.inst)
    if form is not None:
        raise Unimplemented(ctx.inst.opcode.spelling, form)
    return _result(ctx, operands, run_collective(ctx, operands))


def passed_done(ctx, operand):
    """The done of a start that returns its result: the result."""
    return operand


def wrapped_done(ctx, operand):
    """The done of a start that returns (operands, result, ...): element 1."""
    if not isinstance(operand, TupleValue) or len(operand.elements) < 2:
        raise InterpreterError(f"{ctx.inst.opcode.spelling} needs the tuple its start returns")
    return operand.elements[1]


implements(*COLLECTIVE_KINDS, values=True)(collective)
implements(*(d.done for d in DESCRIPTORS if d.executable and d.start_form is StartForm.RESULT),
           values=True)(passed_done)
implements(*(d.done for d in DESCRIPTORS if d.executable and d.start_form is StartForm.WRAPPED),
           values=True)(wrapped_done)
