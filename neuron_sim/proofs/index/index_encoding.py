"""The integer index sub-language of HLO, encoded as z3 bit-vectors over a symbolic device.

Offsets of per-device slices are computed from ``partition-id`` and ``replica-id`` with a small
integer language. ``IndexEncoder.encode`` turns such a computation into one z3 term whose free
variables are the device's coordinates, with HLO's exact semantics (``int_semantics``):

* constants; ``partition-id`` and ``replica-id`` (``DeviceCoordinates``);
* ``convert`` (integer and pred types), same-width integer ``bitcast-convert``;
* ``add``, ``subtract``, ``multiply``, ``divide``, ``remainder``, ``negate``, ``abs``;
  ``and``, ``or``, ``xor``, ``not``, the three shifts; ``compare``, ``select``; ``minimum``,
  ``maximum``, ``clamp``;
* ``reshape``, ``bitcast``, ``broadcast``, ``copy`` and ``slice`` of one-element values
  (any shape with one element is a scalar here);
* ``dynamic-slice`` of a constant table with every slice size 1 (the table's start indices
  clamped as dynamic-slice clamps them), the way per-device offset tables are read;
* parameters of fusions and calls, which stand for the caller's operand: an offset computed
  inside a kLoop fusion from a ``partition-id`` passed in from outside is seen through.

Anything else — a float, an entry parameter, a while loop, a reduce — raises
``OutsideSubLanguage`` naming the instruction; nothing is ever guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloComputation, HloInstruction
from neuron_sim.hlo.literals import LiteralError
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.topology import Topology
from neuron_sim.proofs.index import int_semantics as sem
from neuron_sim.proofs.index.tables import lookup
from neuron_sim.lazy import LazyModule

z3 = LazyModule("z3")

CallPath = tuple[HloInstruction, ...]
"""The fusion / call instructions leading from an outer computation to an inner one, outermost
first. A parameter of the innermost computation stands for ``path[-1]``'s operand."""


class OutsideSubLanguage(Exception):
    """An instruction the index sub-language does not cover (the proof is FAILED_TO_PROVE)."""

    def __init__(self, instruction: HloInstruction, reason: str) -> None:
        self.instruction = instruction
        self.reason = reason
        super().__init__(f"%{instruction.name} is outside the index sub-language ({reason}): "
                         f"{instruction.to_text()}")


@dataclass(frozen=True)
class SymValue:
    """A symbolic value of an integer or pred element type."""

    term: z3.BitVecRef
    etype: ElementType

    @property
    def signed(self) -> bool:
        return self.etype.is_signed


U32 = ElementType.U32


@dataclass(frozen=True)
class DeviceCoordinates:
    """The ``replica-id`` and ``partition-id`` (u32) of a symbolic device, and the constraints
    that make it a device of the topology."""

    replica: z3.BitVecRef
    partition: z3.BitVecRef
    constraints: tuple[z3.BoolRef, ...] = ()

    @classmethod
    def of_topology(cls, topology: Topology, name: str = "") -> "DeviceCoordinates":
        """A device (r, p) with ``r < replica_count`` and ``p < num_partitions``."""
        replica = z3.BitVec(f"{name}replica", 32)
        partition = z3.BitVec(f"{name}partition", 32)
        return cls(replica, partition,
                   (z3.ULT(replica, topology.replica_count),
                    z3.ULT(partition, topology.num_partitions)))

    def flattened_id(self, topology: Topology) -> z3.BitVecRef:
        """``r * P + p`` as a 64-bit term (no overflow for any topology)."""
        return (z3.ZeroExt(32, self.replica) * topology.num_partitions
                + z3.ZeroExt(32, self.partition))

    def lookup(self, topology: Topology, values_by_flattened_id: list[int],
               width: int) -> z3.BitVecRef:
        """``values[r * P + p]`` as a table over the bits of r and p (no multiplication)."""
        R, P = topology.replica_count, topology.num_partitions
        if len(values_by_flattened_id) != R * P:
            raise ValueError(f"need one value per device ({R * P}), "
                             f"got {len(values_by_flattened_id)}")
        r_bits, p_bits = (R - 1).bit_length(), (P - 1).bit_length()
        # Table index = r's low bits, then p's low bits; unused slots repeat a real value.
        table = [0] * (1 << (r_bits + p_bits))
        for slot in range(len(table)):
            r, p = divmod(slot, 1 << p_bits)
            r, p = min(r, R - 1), min(p, P - 1)
            table[slot] = values_by_flattened_id[r * P + p]
        parts = []
        if r_bits:
            parts.append(z3.Extract(r_bits - 1, 0, self.replica))
        if p_bits:
            parts.append(z3.Extract(p_bits - 1, 0, self.partition))
        if not parts:
            return z3.BitVecVal(table[0] % (1 << width), width)
        index = parts[0] if len(parts) == 1 else z3.Concat(*parts)
        return lookup(index, table, width)


Rule = Callable[["IndexEncoder", HloInstruction, CallPath], SymValue]
_RULES: dict[Opcode, Rule] = {}


def _rule(*opcodes: Opcode) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for opcode in opcodes:
            _RULES[opcode] = fn
        return fn
    return register


SUPPORTED_OPCODES = _RULES  # filled below; read it to list the sub-language


class IndexEncoder:
    """Encodes index computations for one symbolic device; results are cached per call path.

    ``lane`` (tests only) lets elementwise ops run on arrays: the encoder then stands for element
    ``lane`` of every array, reading array constants at that element; ``bindings`` gives values
    to instructions (e.g. entry parameters) the encoder would otherwise reject.
    """

    def __init__(self, device: DeviceCoordinates, *, lane: int | None = None,
                 bindings: Mapping[HloInstruction, SymValue] | None = None) -> None:
        self.device = device
        self.lane = lane
        self.bindings = dict(bindings or {})
        self._cache: dict[tuple[HloInstruction, CallPath], SymValue] = {}

    def encode(self, inst: HloInstruction, path: CallPath = ()) -> SymValue:
        """The symbolic value of ``inst`` (evaluated inside the calls ``path``)."""
        key = (inst, path)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if inst in self.bindings:
            value = self.bindings[inst]
        else:
            self._check_shape(inst)
            rule = _RULES.get(inst.opcode)
            if rule is None:
                raise OutsideSubLanguage(inst, f"{inst.opcode.spelling} is not an index operation")
            value = rule(self, inst, path)
        self._cache[key] = value
        return value

    def operand(self, inst: HloInstruction, i: int, path: CallPath) -> SymValue:
        return self.encode(inst.operand(i), path)

    def _check_shape(self, inst: HloInstruction) -> None:
        shape = inst.shape
        if not isinstance(shape, ArrayShape) or shape.is_tuple or not shape.is_array:
            raise OutsideSubLanguage(inst, f"its shape {shape} is not an array")
        if not sem.is_index_type(shape.element_type):
            raise OutsideSubLanguage(inst, f"{shape.element_type} is not an integer or pred type")
        if shape.element_count != 1 and self.lane is None:
            raise OutsideSubLanguage(inst, f"{shape} has {shape.element_count} elements; "
                                           "index values have one")


def _etype(inst: HloInstruction) -> ElementType:
    return inst.shape.element_type


# --- leaves -----------------------------------------------------------------------------------

@_rule(Opcode.CONSTANT)
def _constant(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    values = _literal_values(inst)
    index = 0 if values.size == 1 else enc.lane
    return SymValue(sem.constant_bits(int(values[index]), _etype(inst)), _etype(inst))


def _literal_values(inst: HloInstruction) -> np.ndarray:
    """The constant's elements, flattened, as Python-int-convertible numpy values."""
    if inst.literal is None:
        raise OutsideSubLanguage(inst, "the constant has no literal")
    try:
        value = np.asarray(inst.literal.value)
    except LiteralError:
        raise OutsideSubLanguage(inst, "the constant is elided ({...}): its value is not in "
                                       "the text") from None
    return value.reshape(-1)


def _table_values(table: HloInstruction) -> np.ndarray:
    """A lookup table's elements, flattened: a constant's literal, or an iota's ramp along its
    ``iota_dimension`` (XLA's table form ``dynamic-slice(iota, id)``)."""
    if table.opcode is Opcode.CONSTANT:
        return _literal_values(table)
    dims = tuple(table.shape.dims)
    axis = int(table.get("iota_dimension", 0))
    ramp = np.arange(dims[axis]).reshape([-1 if d == axis else 1 for d in range(len(dims))])
    return np.broadcast_to(ramp, dims).reshape(-1)


@_rule(Opcode.PARTITION_ID)
def _partition_id(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    return SymValue(sem.convert(enc.device.partition, U32, _etype(inst)), _etype(inst))


@_rule(Opcode.REPLICA_ID)
def _replica_id(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    return SymValue(sem.convert(enc.device.replica, U32, _etype(inst)), _etype(inst))


@_rule(Opcode.PARAMETER)
def _parameter(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    caller = _caller_of_parameter(inst, path)
    value = enc.encode(caller.operand(inst.parameter_number), path[:-1])
    return SymValue(value.term, _etype(inst))


def _caller_of_parameter(inst: HloInstruction, path: CallPath) -> HloInstruction:
    computation = inst.parent
    if not path or computation not in _calls_of(path[-1]):
        where = computation.name if computation is not None else "?"
        raise OutsideSubLanguage(inst, f"parameter {inst.parameter_number} of {where} is an "
                                       "input, not a device coordinate")
    caller = path[-1]
    if inst.parameter_number >= len(caller.operands):
        raise OutsideSubLanguage(inst, f"%{caller.name} passes no operand "
                                       f"{inst.parameter_number}")
    return caller


def _calls_of(caller: HloInstruction) -> list[HloComputation]:
    """The computation whose parameters are ``caller``'s operands (fusion and call only)."""
    if caller.opcode in (Opcode.FUSION, Opcode.CALL):
        return caller.called_computations[:1]
    return []


def resolve_through_calls(inst: HloInstruction, path: CallPath
                          ) -> tuple[HloInstruction, CallPath]:
    """Follow parameters of fusions and calls out to the instruction they stand for."""
    while inst.opcode is Opcode.PARAMETER and path and inst.parent in _calls_of(path[-1]):
        caller = path[-1]
        if inst.parameter_number >= len(caller.operands):
            break
        inst, path = caller.operand(inst.parameter_number), path[:-1]
    return inst, path


# --- one-element data movement ----------------------------------------------------------------

@_rule(Opcode.RESHAPE, Opcode.BITCAST, Opcode.COPY, Opcode.BROADCAST)
def _same_value(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    operand = inst.operand(0)
    if (enc.lane is not None and inst.opcode is not Opcode.BROADCAST
            and operand.shape.element_count != 1):
        raise OutsideSubLanguage(inst, "only elementwise ops run lane by lane")
    value = enc.encode(operand, path)
    return SymValue(value.term, _etype(inst))


@_rule(Opcode.SLICE)
def _slice(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    operand, _ = resolve_through_calls(inst.operand(0), path)
    if operand.shape.element_count == 1:
        return SymValue(enc.operand(inst, 0, path).term, _etype(inst))
    if operand.opcode is Opcode.CONSTANT and enc.lane is None:
        values = np.asarray(_literal_values(operand)).reshape(operand.shape.dims)
        window = tuple(slice(d.start, d.limit, d.stride) for d in inst.get("slice", ()))
        picked = values[window].reshape(-1)
        return SymValue(sem.constant_bits(int(picked[0]), _etype(inst)), _etype(inst))
    raise OutsideSubLanguage(inst, "a slice of a many-element value that is not a constant")


# --- elementwise ------------------------------------------------------------------------------

# The integer ops the sub-language encodes, each as its definition's bit-vector term
# (neuron_sim.semantics.elementwise): the first read their operands' signedness, the others
# only their bits.
_SIGNED_OPS = (Opcode.DIVIDE, Opcode.REMAINDER, Opcode.MINIMUM, Opcode.MAXIMUM, Opcode.ABS)
_BIT_OPS = (Opcode.ADD, Opcode.SUBTRACT, Opcode.MULTIPLY, Opcode.AND, Opcode.OR, Opcode.XOR,
            Opcode.SHIFT_LEFT, Opcode.SHIFT_RIGHT_LOGICAL, Opcode.SHIFT_RIGHT_ARITHMETIC,
            Opcode.NEGATE, Opcode.NOT)
# Arithmetic on pred is not HLO (the verifier rejects it); bit operations are.
_PRED_OPCODES = {Opcode.AND, Opcode.OR, Opcode.XOR, Opcode.NOT, Opcode.MINIMUM, Opcode.MAXIMUM}


def _operands_of_result_type(enc: IndexEncoder, inst: HloInstruction,
                             path: CallPath) -> list[SymValue]:
    values = [enc.operand(inst, i, path) for i in range(len(inst.operands))]
    et = _etype(inst)
    for value in values:
        if value.etype is not et:
            raise OutsideSubLanguage(inst, f"operand type {value.etype} differs from the "
                                           f"result type {et}")
    if et is ElementType.PRED and inst.opcode not in _PRED_OPCODES:
        raise OutsideSubLanguage(inst, f"{inst.opcode.spelling} on pred")
    return values


@_rule(*_SIGNED_OPS, *_BIT_OPS)
def _elementwise(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    values = _operands_of_result_type(enc, inst, path)
    signed = values[0].signed and inst.opcode in _SIGNED_OPS
    return SymValue(sem.apply_op(inst.opcode, signed, *(v.term for v in values)),
                    values[0].etype)


@_rule(Opcode.CLAMP)
def _clamp(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    lo, x, hi = _operands_of_result_type(enc, inst, path)
    return SymValue(sem.clamp(lo.term, x.term, hi.term, x.signed), x.etype)


@_rule(Opcode.COMPARE)
def _compare(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    a, b = enc.operand(inst, 0, path), enc.operand(inst, 1, path)
    if a.etype is not b.etype:
        raise OutsideSubLanguage(inst, f"compares {a.etype} with {b.etype}")
    direction = inst.get("direction")
    if direction not in sem.DIRECTIONS:
        raise OutsideSubLanguage(inst, f"comparison direction {direction!r}")
    kind = inst.get("type")
    if kind is None:
        signed = a.signed
    elif str(kind) in ("SIGNED", "UNSIGNED"):
        signed = str(kind) == "SIGNED"
    else:
        raise OutsideSubLanguage(inst, f"comparison type {kind} on integers")
    return SymValue(sem.compare(a.term, b.term, direction, signed), ElementType.PRED)


@_rule(Opcode.SELECT)
def _select(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    pred = enc.operand(inst, 0, path)
    on_true, on_false = enc.operand(inst, 1, path), enc.operand(inst, 2, path)
    if pred.etype is not ElementType.PRED or on_true.etype is not on_false.etype:
        raise OutsideSubLanguage(inst, "select needs a pred and two values of one type")
    return SymValue(sem.select(pred.term, on_true.term, on_false.term), on_true.etype)


@_rule(Opcode.CONVERT)
def _convert(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    a = enc.operand(inst, 0, path)
    return SymValue(sem.convert(a.term, a.etype, _etype(inst)), _etype(inst))


@_rule(Opcode.BITCAST_CONVERT)
def _bitcast_convert(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    a = enc.operand(inst, 0, path)
    if a.etype is ElementType.PRED or sem.width(a.etype) != sem.width(_etype(inst)):
        raise OutsideSubLanguage(inst, "bitcast-convert between types of different widths")
    return SymValue(a.term, _etype(inst))


# --- tables -----------------------------------------------------------------------------------

@_rule(Opcode.DYNAMIC_SLICE)
def _table_lookup(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    """One element of a constant table: every start index clamped to ``[0, dim - 1]``."""
    if enc.lane is not None:
        raise OutsideSubLanguage(inst, "table lookups do not run lane by lane")
    table, _ = resolve_through_calls(inst.operand(0), path)
    if table.opcode not in (Opcode.CONSTANT, Opcode.IOTA):
        raise OutsideSubLanguage(inst, f"the sliced array %{table.name} is not a constant table")
    dims = tuple(table.shape.dims)
    sizes = tuple(inst.get("dynamic_slice_sizes", ()))
    if len(sizes) != len(dims) or any(s != 1 for s in sizes):
        raise OutsideSubLanguage(inst, "a table lookup reads one element (every slice size 1)")
    if len(inst.operands) != 1 + len(dims):
        raise OutsideSubLanguage(inst, "expects one scalar start index per dimension")
    values = _table_values(table)
    et = table.shape.element_type
    if not sem.is_index_type(et):
        raise OutsideSubLanguage(inst, f"the table holds {et}, not integers")
    linear = z3.BitVecVal(0, sem.WIDE)
    stride = 1
    for axis in reversed(range(len(dims))):
        start = enc.operand(inst, 1 + axis, path)
        if start.etype is ElementType.PRED:
            raise OutsideSubLanguage(inst, "a pred start index")
        clamped = sem.clamp_start_index(start.term, start.etype, dims[axis] - 1)
        linear = linear + clamped * stride
        stride *= dims[axis]
    return SymValue(lookup(linear, [int(v) for v in values], sem.width(et)), et)


# --- calls --------------------------------------------------------------------------------------

@_rule(Opcode.FUSION, Opcode.CALL)
def _call(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    """A fusion or call computing an index: its computation's root, its parameters bound to
    this instruction's operands."""
    (computation,) = _calls_of(inst)
    root = computation.root
    if root is None or root.opcode is Opcode.TUPLE:
        raise OutsideSubLanguage(inst, "the called computation does not return one value")
    value = enc.encode(root, path + (inst,))
    return SymValue(value.term, _etype(inst))


@_rule(Opcode.GET_TUPLE_ELEMENT)
def _get_tuple_element(enc: IndexEncoder, inst: HloInstruction, path: CallPath) -> SymValue:
    """An element of a tuple instruction or of a multi-output fusion / call."""
    source, source_path = resolve_through_calls(inst.operand(0), path)
    index = inst.get("index")
    if source.opcode is Opcode.TUPLE:
        element, element_path = source.operand(index), source_path
    elif source.opcode in (Opcode.FUSION, Opcode.CALL):
        root = _calls_of(source)[0].root
        if root is None or root.opcode is not Opcode.TUPLE:
            raise OutsideSubLanguage(inst, "the called computation's root is not a tuple")
        element, element_path = root.operand(index), source_path + (source,)
    else:
        raise OutsideSubLanguage(inst, f"an element of {source.opcode.spelling} %{source.name}")
    value = enc.encode(element, element_path)
    return SymValue(value.term, _etype(inst))
