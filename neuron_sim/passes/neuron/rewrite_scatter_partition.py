"""RewriteScatterPartition (key ``aws_neuron_rewrite_scatter_partition``), an OpExpander.

Seed: hlo-misc-cleanup-sweep.txt §3.9 (matcher @0x2009240, Expand @0x20093c0). The matcher
tries ``pattern_one`` / ``pattern_two``, which walk an operand chain testing opcodes only —
all-gather, all-reduce, collective-permute, get-tuple-element, reshape, while — for "a
scatter-style partition built from collectives + reshapes around a loop"; the expansion builds
``CreateAllGather(target_shape, operand(0), recomputed groups, channel_id)`` and a
``CreateReshape(final_shape, all-gather)`` and replaces the operand with it. The seed gives no
shapes, no offsets and no group rule.

Our reading (seed status "inferred"): two idioms that assemble every shard of a group on every
device, as JAX writes them (``scripts/jax_programs/scatter_partition.py``) and XLA:CPU compiles
them. A "block write" is ``dynamic-update-slice(buf, reshape(v), start, ...)`` of a ``[1, ...]``
block into an ``[n, ...]`` buffer, or a fusion whose root is one (its parameters followed out;
copies and row-major bitcasts count as reshapes); the other starts are clamped to 0 whatever
they are. Slots are index computations read with ``proofs/index/index_encoding`` (HLO's
integer semantics) and evaluated on every device of the pass's topology, clamped to [0, n-1].

1. The psum form: ``reshape(all-reduce(add, write(broadcast(0), shard, slot)))`` (the broadcast
   maybe in its own fusion) -> ``reshape(all-gather(shard))`` with the all-reduce's channel,
   groups and ``use_global_device_ids``, when every group has n devices and every device's slot
   is its position in its group.
2. The loop form (pattern_one's while / get-tuple-element chain): ``get-tuple-element(while(
   tuple(...)), index=b)`` whose body sets element b to a block write into element b of the
   shard element s (before or after the permute), element s to ``collective-permute(element s)``
   and every other element to itself or to a scalar integer; no side effect in body or
   condition. The initial buffer may be a block write of the initial shard. We run the loop's
   scalar state (counter, invariants) on every device: the condition must give one value on
   every device each step and stop within n steps; each step's slot is evaluated, and whose
   shard each device holds follows the permute's pairs in its group mode (no pair: zeros). The
   rewrite happens only if, at the end, every device's buffer holds n distinct devices' shards,
   its own among them, and every one of those devices holds the same list: that list is then
   an all-gather group in position order, and ``all-gather(reshape(initial shard))`` with those
   groups (FlattenedID, a new channel_id) equals the loop on every device — exactly.

Known unsafety / contract: the sum adds zeros, so a ``-0`` shard comes out ``+0`` in the source
(``+0 + -0 = +0``) and ``-0`` after the rewrite: the contract is exact except that a ``+0`` may
become ``-0`` (the loop form is exact). The groups are flattened ids of the pass's topology: the
rewritten module is for that topology only (as every check here is). The seed's matcher tests
opcodes only; every check of slots, trip count and ring is ours. Physical groups are declined.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import functools

import numpy as np

from neuron_sim.arrays import equal_mask
from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloComputation, HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.physical_groups import groups_are_physical
from neuron_sim.topology import (Topology, group_mode, participant_groups,
                                 permute_pairs_flattened)
from neuron_sim.proofs.index import int_semantics as sem
from neuron_sim.proofs.index.index_encoding import (CallPath, DeviceCoordinates, IndexEncoder,
                                            OutsideSubLanguage, SymValue,
                                            resolve_through_calls)
from neuron_sim.lazy import LazyModule
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.contracts import Refinement
from neuron_sim.passes.neuron.pattern_helpers import is_effective_scalar_constant
from neuron_sim.passes.xla.dce import has_side_effect
from neuron_sim.semantics.elementwise import DEFINITIONS

z3 = LazyModule("z3")

_LOG = logging.getLogger(__name__)


def positive_zero_to_negative_zero(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Elementwise: the source is ``+0`` and the target ``-0`` (floats only)."""
    source, target = np.asarray(source), np.asarray(target)
    if source.dtype.kind not in "fV" or source.dtype != target.dtype:
        return np.zeros(np.broadcast_shapes(source.shape, target.shape), dtype=bool)
    wide_s, wide_t = source.astype(np.float64), target.astype(np.float64)
    return ((wide_s == 0) & ~np.signbit(wide_s) & (wide_t == 0) & np.signbit(wide_t)
            & ~equal_mask(source, target))


ZERO_SIGN = Refinement("zero-sign", positive_zero_to_negative_zero,
                       "a +0 may become -0 (a sum with zeros turned -0 shards into +0)")



# --- per-device values of index terms ---------------------------------------------------------
#
# The encoder's z3 terms are read back on every device at once: each z3 bit-vector operator is an
# HLO op on the same bits, computed by that op's definition (``neuron_sim.semantics``); a
# ``w``-bit value is held in uint64 (below 2**w), read as signed by sign-extending it to int64.

class _Unevaluable(Exception):
    """A term outside what the per-device evaluation covers (the pass then declines)."""


def _op(opcode: Opcode, *arrays: np.ndarray, **params: object) -> np.ndarray:
    """The definition's numpy kernel of ``opcode``."""
    return np.asarray(DEFINITIONS[opcode].numpy(*(np.asarray(a) for a in arrays), **params))


def _u64(value: int) -> np.ndarray:
    return np.asarray(value, dtype=np.uint64)


def _wrap(bits: np.ndarray, width: int) -> np.ndarray:
    """The low ``width`` bits."""
    return bits if width == 64 else _op(Opcode.AND, bits, _u64((1 << width) - 1))


def _signed(bits: np.ndarray, width: int) -> np.ndarray:
    """Two's-complement reading of ``width``-bit values held in uint64, as int64."""
    spare = np.asarray(64 - width, dtype=np.int64)
    top = _op(Opcode.SHIFT_LEFT, bits, spare.astype(np.uint64)).view(np.int64)
    return _op(Opcode.SHIFT_RIGHT_ARITHMETIC, top, spare)


def _apply(opcode: Opcode, args: list[np.ndarray]) -> np.ndarray:
    """``opcode`` on z3's operands: a binary op folds z3's n-ary application left to right."""
    if opcode.arity != 2:
        return _op(opcode, *args)
    out = args[0]
    for arg in args[1:]:
        out = _op(opcode, out, arg)
    return out


@functools.cache
def _operators() -> dict[str, dict]:
    """z3 operator kinds -> the HLO op on the same bits (z3 is imported lazily)."""
    return {
        "wrapping": {z3.Z3_OP_BADD: Opcode.ADD, z3.Z3_OP_BMUL: Opcode.MULTIPLY,
                     z3.Z3_OP_BAND: Opcode.AND, z3.Z3_OP_BOR: Opcode.OR,
                     z3.Z3_OP_BXOR: Opcode.XOR, z3.Z3_OP_BSUB: Opcode.SUBTRACT,
                     z3.Z3_OP_BNEG: Opcode.NEGATE, z3.Z3_OP_BNOT: Opcode.NOT,
                     z3.Z3_OP_BSHL: Opcode.SHIFT_LEFT,
                     z3.Z3_OP_BLSHR: Opcode.SHIFT_RIGHT_LOGICAL},
        "logic": {z3.Z3_OP_AND: Opcode.AND, z3.Z3_OP_OR: Opcode.OR, z3.Z3_OP_XOR: Opcode.XOR,
                  z3.Z3_OP_NOT: Opcode.NOT, z3.Z3_OP_ITE: Opcode.SELECT},
        # z3 kind -> (direction, signed)
        "comparisons": {z3.Z3_OP_EQ: ("EQ", False), z3.Z3_OP_ULEQ: ("LE", False),
                        z3.Z3_OP_ULT: ("LT", False), z3.Z3_OP_UGEQ: ("GE", False),
                        z3.Z3_OP_UGT: ("GT", False), z3.Z3_OP_SLEQ: ("LE", True),
                        z3.Z3_OP_SLT: ("LT", True), z3.Z3_OP_SGEQ: ("GE", True),
                        z3.Z3_OP_SGT: ("GT", True)},
        # z3 kind -> (HLO op, signed); a zero divisor is left to z3's simplifier
        "divisions": {z3.Z3_OP_BUDIV: (Opcode.DIVIDE, False),
                      z3.Z3_OP_BUDIV_I: (Opcode.DIVIDE, False),
                      z3.Z3_OP_BUREM: (Opcode.REMAINDER, False),
                      z3.Z3_OP_BUREM_I: (Opcode.REMAINDER, False),
                      z3.Z3_OP_BSDIV: (Opcode.DIVIDE, True),
                      z3.Z3_OP_BSDIV_I: (Opcode.DIVIDE, True),
                      z3.Z3_OP_BSREM: (Opcode.REMAINDER, True),
                      z3.Z3_OP_BSREM_I: (Opcode.REMAINDER, True)},
    }


def _evaluate(term: z3.ExprRef, leaves: dict[str, np.ndarray],
              memo: dict[int, np.ndarray]) -> np.ndarray:
    """``term`` on every device at once: uint64 for a bit-vector, bool for a boolean."""
    key = term.get_id()
    if key in memo:
        return memo[key]
    kind = term.decl().kind()
    operators = _operators()
    args = [_evaluate(child, leaves, memo) for child in term.children()]
    width = term.size() if z3.is_bv(term) else 0
    if width > 64:
        raise _Unevaluable(f"a {width}-bit term")
    if kind == z3.Z3_OP_BNUM:
        out = _u64(term.as_long())
    elif kind in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE):
        out = np.asarray(kind == z3.Z3_OP_TRUE)
    elif kind == z3.Z3_OP_UNINTERPRETED and not args:
        out = leaves[term.decl().name()]
    elif kind in operators["wrapping"]:
        out = _wrap(_apply(operators["wrapping"][kind], args), width)
    elif kind == z3.Z3_OP_BASHR:
        shifted = _op(Opcode.SHIFT_RIGHT_ARITHMETIC, _signed(args[0], width), args[1])
        out = _wrap(shifted.view(np.uint64), width)
    elif kind == z3.Z3_OP_CONCAT:
        out = _u64(0)
        for child, value in zip(term.children(), args):
            out = _op(Opcode.OR, _op(Opcode.SHIFT_LEFT, out, _u64(child.size())), value)
    elif kind == z3.Z3_OP_EXTRACT:
        high, low = term.params()
        out = _wrap(_op(Opcode.SHIFT_RIGHT_LOGICAL, args[0], _u64(low)), high - low + 1)
    elif kind == z3.Z3_OP_ZERO_EXT:
        out = args[0]
    elif kind == z3.Z3_OP_SIGN_EXT:
        out = _wrap(_signed(args[0], term.children()[0].size()).view(np.uint64), width)
    elif kind in operators["divisions"]:
        opcode, signed = operators["divisions"][kind]
        if np.any(args[1] == 0):
            raise _Unevaluable("a division by zero")
        if signed:
            quotient = _op(opcode, _signed(args[0], width), _signed(args[1], width))
            out = _wrap(quotient.view(np.uint64), width)
        else:
            out = _op(opcode, *args)
    elif kind == z3.Z3_OP_DISTINCT and len(args) == 2:
        out = _op(Opcode.COMPARE, *args, direction="NE")
    elif kind in operators["comparisons"]:
        direction, signed = operators["comparisons"][kind]
        if signed:
            child = term.children()[0].size()
            args = [_signed(a, child) for a in args]
        out = _op(Opcode.COMPARE, *args, direction=direction)
    elif kind in operators["logic"]:
        out = _apply(operators["logic"][kind], args)
    else:
        raise _Unevaluable(f"the z3 operation {term.decl().name()}")
    memo[key] = out
    return out


class _Devices:
    """Every device of a topology, for evaluating index values: a symbolic device for the
    encoder (``proofs/index/index_encoding``, HLO's exact integer semantics) and the concrete
    replica and partition ids of every flattened device to read its terms at."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.device = DeviceCoordinates.of_topology(topology)
        flat = np.arange(topology.num_devices, dtype=np.uint64)
        partitions = np.uint64(topology.num_partitions)
        self._leaves = {self.device.replica.decl().name(): flat // partitions,
                        self.device.partition.decl().name(): flat % partitions}

    def encoder(self, bindings: dict[HloInstruction, SymValue] | None = None) -> IndexEncoder:
        return IndexEncoder(self.device, bindings=bindings)

    def values(self, value: SymValue) -> np.ndarray:
        """The value on every flattened device, as int64 read by its element type."""
        term = z3.simplify(value.term)
        bits = _evaluate(term, self._leaves, {})
        bits = np.broadcast_to(bits, (self.topology.num_devices,))
        if value.etype.is_signed:
            return _signed(bits, term.size())
        return bits.astype(np.int64)

    def slots(self, write: "_Write", encoder: IndexEncoder) -> np.ndarray | None:
        """The block each device's write lands in: the start clamped to ``[0, n - 1]``, as
        dynamic-update-slice clamps it; None if the start is no index computation we read."""
        try:
            start = self.values(encoder.encode(write.start, write.path))
        except (OutsideSubLanguage, _Unevaluable) as why:
            _LOG.debug("slot of %%%s not evaluated: %s", write.start.name, why)
            return None
        return np.clip(start, 0, write.slots - 1)


# --- the written block ------------------------------------------------------------------------

def _row_major(shape: object) -> bool:
    """The array's elements lie in row-major order (dims of extent 1 do not matter)."""
    if not isinstance(shape, ArrayShape) or not shape.is_array:
        return False
    if shape.layout is None:
        return True
    order = [d for d in shape.layout.minor_to_major if shape.dims[d] > 1]
    return order == sorted(order, reverse=True)


def _is_reshape(inst: HloInstruction) -> bool:
    """A reshape, or a bitcast that is one (same element type, both shapes row-major)."""
    if inst.opcode is Opcode.RESHAPE:
        return True
    operand = inst.operand(0) if inst.operands else None
    return (inst.opcode is Opcode.BITCAST and operand is not None
            and operand.shape.element_type == inst.shape.element_type
            and _row_major(inst.shape) and _row_major(operand.shape))


def _peel(inst: HloInstruction, path: CallPath = (), *, reshapes: bool = False
          ) -> tuple[HloInstruction, CallPath]:
    """Follow copies (and reshapes if asked) and fusion parameters to the value's origin."""
    while True:
        if inst.opcode is Opcode.COPY or (reshapes and _is_reshape(inst)):
            inst = inst.operand(0)
            continue
        outer, outer_path = resolve_through_calls(inst, path)
        if outer is inst:
            return inst, path
        inst, path = outer, outer_path


@dataclass(frozen=True)
class _Write:
    """``dynamic-update-slice(base, reshape(source), start, ...)`` writing block ``start`` of a
    ``[n, ...]`` buffer, maybe the root of a fusion (``path``: the fusion), seen from outside."""

    base: HloInstruction
    source: HloInstruction
    block: HloInstruction | None
    start: HloInstruction
    path: CallPath
    slots: int


def _write_of(inst: HloInstruction) -> _Write | None:
    """The block write ``inst`` computes, itself or as a fusion's root; None otherwise.

    The update must be ``[1] + buffer dims[1:]``, so every other start is clamped to 0 whatever
    its value; base and source must come from outside the fusion."""
    dus, path = inst, ()
    if inst.opcode is Opcode.FUSION and inst.called_computations:
        dus, path = inst.called_computations[0].root, (inst,)
    if dus is None or dus.opcode is not Opcode.DYNAMIC_UPDATE_SLICE or len(dus.operands) < 3:
        return None
    buffer, update = dus.shape, dus.operand(1).shape
    if (not isinstance(buffer, ArrayShape) or not buffer.is_array or buffer.rank < 1
            or not isinstance(update, ArrayShape) or not update.is_array
            or tuple(update.dims) != (1,) + tuple(buffer.dims[1:])
            or update.element_type != buffer.element_type):
        return None
    base, base_path = _peel(dus.operand(0), path)
    source, source_path = _peel(dus.operand(1), path, reshapes=True)
    block, block_path = _peel(dus.operand(1), path)
    if base_path or source_path or source.shape.element_type != buffer.element_type:
        return None
    return _Write(base, source, None if block_path else block, dus.operand(2), path,
                  buffer.dims[0])


def _is_zero_broadcast(inst: HloInstruction) -> bool:
    """``broadcast(constant(0))``, maybe wrapped in a fusion of its own (XLA:CPU's form)."""
    path: CallPath = ()
    if inst.opcode is Opcode.FUSION and inst.called_computations:
        inst, path = inst.called_computations[0].root, (inst,)
    if inst is None or inst.opcode is not Opcode.BROADCAST:
        return False
    scalar, _ = _peel(inst.operand(0), path)
    return is_effective_scalar_constant(scalar, 0, _LOG)


# --- the patterns -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Gather:
    """What the matched instruction equals: the all-gather of ``operand`` (or of ``source``
    reshaped to one block) over ``groups`` along dimension 0, then reshaped to its shape."""

    source: HloInstruction
    operand: HloInstruction | None
    block_dims: tuple[int, ...]
    gathered: ArrayShape
    attributes: dict


def _is_add(computation: HloComputation) -> bool:
    root = computation.root
    return (root.opcode is Opcode.ADD and len(computation.parameters) == 2
            and {o.opcode for o in root.operands} == {Opcode.PARAMETER})


def _tuple_index(inst: HloInstruction, parameter: HloInstruction) -> int | None:
    """``i`` if ``inst`` is (a copy of) element ``i`` of ``parameter``."""
    inst, _ = _peel(inst)
    if inst.opcode is Opcode.GET_TUPLE_ELEMENT and inst.operand(0) is parameter:
        return inst.get("index")
    return None


def _is_scalar_index(inst: HloInstruction) -> bool:
    shape = inst.shape
    return (isinstance(shape, ArrayShape) and shape.is_array and shape.rank == 0
            and sem.is_index_type(shape.element_type))


def _side_effect_in(computations: list[HloComputation]) -> HloInstruction | None:
    stack, seen = list(computations), set()
    while stack:
        comp = stack.pop()
        if comp in seen:
            continue
        seen.add(comp)
        for inst in comp.instructions:
            if has_side_effect(inst):
                return inst
            stack.extend(inst.called_computations)
    return None


def _decline(inst: HloInstruction, reason: str) -> None:
    _LOG.debug("%s [%%%s]", reason, inst.name)


def psum_pattern(inst: HloInstruction, topology: Topology) -> _Gather | None:
    """The all-reduce form: ``reshape(all-reduce(add, write(zeros, shard, slot)))``."""
    if not _is_reshape(inst) or inst.parent is None:
        return None
    ar = inst.operand(0)
    if (ar.opcode is not Opcode.ALL_REDUCE or len(ar.operands) != 1
            or not _is_add(ar.to_apply) or groups_are_physical(ar)):
        return None
    write = _write_of(ar.operand(0))
    if write is None or not _is_zero_broadcast(write.base):
        return None
    try:
        mode = group_mode("all-reduce", ar.channel_id is not None, ar.use_global_device_ids)
        groups = participant_groups(mode, ar.get("replica_groups") or ReplicaGroups(), topology)
    except ValueError:
        return None
    if any(len(g) != write.slots for g in groups):
        return _decline(inst, "a group's size differs from the buffer's slots")
    position = np.full(topology.num_devices, -1)
    for group in groups:
        position[list(group)] = np.arange(write.slots)
    devices = _Devices(topology)
    slots = devices.slots(write, devices.encoder())
    if slots is None or not np.array_equal(slots, position):
        return _decline(inst, "a device's slot is not its position in its group")
    attributes = {} if ar.channel_id is None else {"channel_id": ar.channel_id}
    attributes["replica_groups"] = ar.get("replica_groups") or ReplicaGroups()
    if ar.use_global_device_ids:
        attributes["use_global_device_ids"] = True
    return _Gather(write.source, write.block, (1,) + tuple(ar.shape.dims[1:]), ar.shape,
                   attributes)


@dataclass(frozen=True)
class _Loop:
    """The parts of a ring loop: element ``b`` the buffer, ``s`` the shard."""

    loop: HloInstruction
    body: HloComputation
    condition: HloComputation
    step: _Write
    permute: HloInstruction
    permuted_write: bool
    shard: HloInstruction
    first: _Write | None


def _ring_loop(gte: HloInstruction) -> _Loop | None:
    """The loop's structure, or None: ``get-tuple-element(while(tuple(...)), index=b)`` whose
    body writes a shard into element b and rotates the shard element s with one
    collective-permute, every other element passed through or a scalar integer."""
    if gte.opcode is not Opcode.GET_TUPLE_ELEMENT or gte.parent is None:
        return None
    loop = gte.operand(0)
    if loop.opcode is not Opcode.WHILE or loop.operand(0).opcode is not Opcode.TUPLE:
        return None
    init, b = loop.operand(0), gte.get("index")
    body, condition = loop.get("body"), loop.get("condition")
    if (body is None or condition is None or len(body.parameters) != 1
            or body.root.opcode is not Opcode.TUPLE):
        return None
    param = body.parameters[0]
    step = _write_of(body.root.operand(b))
    if step is None or _tuple_index(step.base, param) != b:
        return _decline(gte, "the loop's element is not a block write into itself")
    source = step.source
    permuted_write = source.opcode is Opcode.COLLECTIVE_PERMUTE
    s = _tuple_index(source.operand(0) if permuted_write else source, param)
    if s is None or s == b:
        return _decline(gte, "the written block is not the loop's shard element")
    permute, _ = _peel(body.root.operand(s))
    if (permute.opcode is not Opcode.COLLECTIVE_PERMUTE or len(permute.operands) != 1
            or _tuple_index(permute.operand(0), param) != s
            or (permuted_write and permute is not source)):
        return _decline(gte, "the shard element is not rotated by one collective-permute")
    for i, element in enumerate(body.root.operands):
        if i not in (b, s) and not _is_scalar_index(element) and _tuple_index(element, param) != i:
            return _decline(gte, f"loop element {i} is computed, not passed through")
    if _side_effect_in([body, condition]) is not None:
        return _decline(gte, "the loop has a side effect")
    shard, _ = _peel(init.operand(s))
    first = _write_of(init.operand(b))
    if first is not None and first.source is not shard:
        first = None
    return _Loop(loop, body, condition, step, permute, permuted_write, shard, first)


def _bindings(ring: _Loop, state: dict[int, SymValue]) -> dict[HloInstruction, SymValue]:
    """The loop's scalar elements, bound where the body and condition read them."""
    bound = {}
    for comp in (ring.body, ring.condition):
        param = comp.parameters[0]
        for user in param.users:
            index = _tuple_index(user, param)
            if index in state:
                bound[user] = state[index]
    return bound


def _holders_after_permute(ring: _Loop, topology: Topology, holder: np.ndarray) -> np.ndarray:
    """Whose shard every device holds after one collective-permute (-1: it received zeros)."""
    mode = group_mode("collective-permute", ring.permute.channel_id is not None, False)
    pairs = np.asarray(permute_pairs_flattened(mode, ring.permute.get("source_target_pairs"),
                                               topology), dtype=np.int64).reshape(-1, 2)
    received = np.full(topology.num_devices, -1, dtype=np.int64)
    received[pairs[:, 1]] = holder[pairs[:, 0]]
    return received


def _assembled(ring: _Loop, topology: Topology) -> np.ndarray | None:
    """``[D, n]``: whose shard each device's buffer holds in each slot when the loop ends (-1:
    zeros or never written), by running the loop's scalar state on every device; None if the
    trip count is not one number on every device, or exceeds n, or an index is unreadable."""
    devices, n, D = _Devices(topology), ring.step.slots, topology.num_devices
    outer = devices.encoder()
    state: dict[int, SymValue] = {}
    for i, operand in enumerate(ring.loop.operand(0).operands):
        if _is_scalar_index(operand):
            try:
                state[i] = outer.encode(operand)
            except OutsideSubLanguage:
                pass
    holder = np.arange(D, dtype=np.int64)
    final = np.full((D, n), -1, dtype=np.int64)
    if ring.first is not None:
        slots = devices.slots(ring.first, outer)
        if slots is None:
            return None
        final[holder, slots] = holder
    rows = np.arange(D)
    for trip in range(n + 1):
        encoder = devices.encoder(_bindings(ring, state))
        try:
            go = devices.values(encoder.encode(ring.condition.root))
        except (OutsideSubLanguage, _Unevaluable) as why:
            _LOG.debug("loop condition not evaluated: %s", why)
            return None
        if not (np.all(go == go[0])):
            return None
        if not go[0]:
            break
        if trip == n:
            return None
        slots = devices.slots(ring.step, encoder)
        if slots is None:
            return None
        try:
            received = _holders_after_permute(ring, topology, holder)
        except ValueError as why:
            _LOG.debug("the ring's pairs do not fit the topology: %s", why)
            return None
        final[rows, slots] = received if ring.permuted_write else holder
        holder = received
        next_state = {}
        for i in state:
            try:
                term = encoder.encode(ring.body.root.operand(i))
            except OutsideSubLanguage:
                continue
            next_state[i] = SymValue(z3.simplify(term.term), term.etype)
        state = next_state
    return final


def _groups_of(final: np.ndarray) -> tuple[tuple[int, ...], ...] | None:
    """The all-gather groups that place what ``final`` holds: every device's row lists distinct
    devices, itself among them, and every member's row is the same list."""
    D = final.shape[0]
    if np.any(final < 0):
        return None
    ordered = np.sort(final, axis=1)
    if np.any(ordered[:, 1:] == ordered[:, :-1]):
        return None
    if not np.all(np.any(final == np.arange(D)[:, None], axis=1)):
        return None
    if not np.all(final[final] == final[:, None, :]):
        return None
    return tuple(tuple(int(d) for d in row) for row in np.unique(final, axis=0))


def loop_pattern(inst: HloInstruction, topology: Topology) -> _Gather | None:
    """The collective-permute ring form: the buffer element of a while loop."""
    ring = _ring_loop(inst)
    if ring is None:
        return None
    final = _assembled(ring, topology)
    groups = None if final is None else _groups_of(final)
    if groups is None:
        return _decline(inst, "the loop does not assemble every group member in its slot")
    module = inst.parent.parent
    attributes = {"channel_id": module.next_channel_id(),
                  "replica_groups": ReplicaGroups(explicit=groups),
                  "use_global_device_ids": True}
    return _Gather(ring.shard, None, (1,) + tuple(inst.shape.dims[1:]), inst.shape, attributes)


class RewriteScatterPartition(OpExpanderPass):
    """A partition assembled on every device — a psum of a zero buffer holding each shard in
    its slot, or a collective-permute ring writing each received shard into its slot in a
    while loop — becomes one all-gather (and reshapes), when it provably equals one."""

    name = "aws_neuron_rewrite_scatter_partition"
    contract = ZERO_SIGN
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §3.9 RewriteScatterPartition"
    summary = ("psum of a zero buffer with each shard in its slot, or a while loop of "
               "collective-permutes writing each received shard into its slot -> "
               "all-gather (+ reshape); slots evaluated per device against group positions")
    pipelines = {"neuron-closer": 93}
    seed_says = ("OpExpander; `pattern_one` / `pattern_two` test opcodes only (all-gather, "
                 "all-reduce, collective-permute, GTE, reshape, while) for a partition assembled "
                 "by collectives around a loop; expand: `CreateAllGather` with recomputed groups "
                 "+ `CreateReshape`")
    our_reading = ("two exact patterns (section below): `reshape(all-reduce(add, block write of a "
                   "zero buffer))` and `get-tuple-element(while)` of a collective-permute ring "
                   "writing each shard into its slot (block writes maybe fused); slots, trip "
                   "count and ring run on every device of the pass's topology; rewritten only "
                   "when every device ends with its group's shards in position order -> "
                   "`all-gather` (+ reshape)")
    known_unsafety = ("zero-sign refinement for the psum form (a `-0` shard summed with zeros is "
                      "`+0` in the source); the loop form is exact; groups are flattened ids of "
                      "the pass's topology; the checks are ours (the seed tests opcodes only); "
                      "physical groups are declined")

    def _pattern(self, inst: HloInstruction) -> _Gather | None:
        if inst.parent is None:
            return None
        topology = self.context.topology_for(inst.parent.parent)
        if inst.opcode is Opcode.GET_TUPLE_ELEMENT:
            return loop_pattern(inst, topology)
        return psum_pattern(inst, topology)

    def matches(self, inst: HloInstruction) -> bool:
        return self._pattern(inst) is not None

    def expand(self, inst: HloInstruction) -> HloInstruction | None:
        found = self._pattern(inst)
        if found is None:
            return None
        comp = inst.parent
        operand = found.operand
        if operand is None:
            operand = make_instruction(comp, Opcode.RESHAPE, (found.source,),
                                       shape=found.source.shape.with_dims(found.block_dims),
                                       name=f"{found.source.name}.block")
            comp.add_before(operand, inst)
        gather = make_instruction(comp, Opcode.ALL_GATHER, (operand,), shape=found.gathered,
                                  check=False, name=f"{inst.name}.all-gather",
                                  dimensions=(0,), **found.attributes)
        comp.add_before(gather, inst)
        if gather.shape == inst.shape:
            return gather
        reshape = make_instruction(comp, Opcode.RESHAPE, (gather,), shape=inst.shape,
                                   name=f"{inst.name}.reshape")
        comp.add_before(reshape, inst)
        return reshape
