"""Recognising the (value, index) comparators of argmax / argmin reduces.

JAX lowers ``jnp.argmax`` to a variadic reduce over (values, indices) whose ``to_apply`` takes
``(value_a, index_a, value_b, index_b)`` (the accumulator first) and returns the pair it keeps::

    pick  = compare(value_a, value_b, GT)              # LT for argmin
    pick  = or(pick, compare(value_a, value_a, NE))    # floats only: a NaN accumulator stays
    value = select(pick, value_a, value_b)
    index = select(or(pick, and(compare(value_a, value_b, EQ), compare(index_a, index_b, LT))),
                   index_a, index_b)

Folded left from the init over the reduced elements this keeps, exactly: the first NaN in fold
order (its value and index) if there is one; otherwise as the value the *last* element in fold
order that equals the extreme (so with zeros of both signs, the last zero's sign) and as the
index the smallest index among the elements, init included, that equal the extreme. Both the
interpreter (to compute such reduces with numpy instead of one fold step per element) and
TransformVariadicReduce (to rewrite them) use this recogniser, so they agree on which
comparators those facts hold for: exactly this topology, up to the operand order of the
commutative ``and`` / ``or`` / ``EQ`` and a compare written mirrored (``b LT a`` for ``a GT b``).
"""

from __future__ import annotations

from neuron_sim.hlo.dtypes import Kind
from neuron_sim.hlo.ir import HloComputation, HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.records import Record

_MIRRORED = {"GT": "LT", "LT": "GT", "EQ": "EQ", "NE": "NE"}


class ArgReducer(Record):
    """A recognised argmax (``direction="max"``) or argmin (``"min"``) comparator; ``nan_first``
    when it keeps a NaN accumulator (the float form). (A ``Record``: a frozen dataclass's
    behaviour.)"""

    __slots__ = ("direction", "nan_first")

    direction: str
    nan_first: bool

    def __init__(self, direction: str, nan_first: bool) -> None:
        self._set(direction=direction, nan_first=nan_first)


def _param(inst: HloInstruction, number: int) -> bool:
    return inst.opcode is Opcode.PARAMETER and inst.parameter_number == number


def _is_compare(inst: HloInstruction, lhs: int, rhs: int, direction: str) -> bool:
    """``compare(param lhs, param rhs), direction`` or its mirror, with IEEE comparison."""
    if inst.opcode is not Opcode.COMPARE or len(inst.operands) != 2:
        return False
    if str(inst.get("type", "")) == "TOTALORDER":
        return False
    a, b = inst.operands
    written = str(inst.get("direction", ""))
    return ((written == direction and _param(a, lhs) and _param(b, rhs))
            or (written == _MIRRORED[direction] and _param(a, rhs) and _param(b, lhs)))


def _either_order(inst: HloInstruction, opcode: Opcode, first, second) -> bool:
    """``opcode(x, y)`` with ``first(x) and second(y)`` in either operand order."""
    if inst.opcode is not opcode or len(inst.operands) != 2:
        return False
    x, y = inst.operands
    return (first(x) and second(y)) or (first(y) and second(x))


def _value_pick(pick: HloInstruction, direction: str, is_float: bool) -> bool:
    strict = lambda i: _is_compare(i, 0, 2, direction)  # noqa: E731
    if not is_float:
        return strict(pick)
    return _either_order(pick, Opcode.OR, strict, lambda i: _is_compare(i, 0, 0, "NE"))


def _select_of(inst: HloInstruction, on_true: int, on_false: int) -> HloInstruction | None:
    """The predicate of ``select(pred, param on_true, param on_false)``, else None."""
    if inst.opcode is not Opcode.SELECT or len(inst.operands) != 3:
        return None
    pred, a, b = inst.operands
    return pred if _param(a, on_true) and _param(b, on_false) else None


def recognise_arg_reducer(computation: HloComputation) -> ArgReducer | None:
    """The ArgReducer that ``computation`` is, or None if it is not exactly the JAX argmax /
    argmin comparator over a scalar (value, index) pair with an integral index."""
    params = computation.parameters
    root = computation.root
    if len(params) != 4 or root is None or root.opcode is not Opcode.TUPLE \
            or len(root.operands) != 2:
        return None
    shapes = [p.shape for p in params]
    if not all(isinstance(s, ArrayShape) and s.rank == 0 for s in shapes):
        return None
    if shapes[0].element_type != shapes[2].element_type \
            or shapes[1].element_type != shapes[3].element_type:
        return None
    value_type, index_type = shapes[0].element_type, shapes[1].element_type
    if not index_type.is_integral:
        return None
    is_float = value_type.is_float
    if not (is_float or value_type.is_integral):
        return None
    value_pick = _select_of(root.operand(0), 0, 2)
    index_pick = _select_of(root.operand(1), 1, 3)
    if value_pick is None or index_pick is None:
        return None
    for direction in ("max", "min"):
        compare = "GT" if direction == "max" else "LT"
        if not _value_pick(value_pick, compare, is_float):
            continue
        tie = lambda i: _either_order(  # noqa: E731
            i, Opcode.AND, lambda c: _is_compare(c, 0, 2, "EQ"),
            lambda c: _is_compare(c, 1, 3, "LT"))
        if _either_order(index_pick, Opcode.OR, lambda i: i is value_pick, tie):
            return ArgReducer(direction, is_float)
    return None


# Read on every execute of an argmax reduce: bound once (an Enum member read through its class
# costs a lookup in the enum's metaclass on Python 3.11).
_BROADCAST, _IOTA, _SIGNED, _UNSIGNED = Opcode.BROADCAST, Opcode.IOTA, Kind.SIGNED, Kind.UNSIGNED


def increases_along(inst: HloInstruction, dim: int) -> bool:
    """Whether ``inst``'s values are the positions ``0, 1, ...`` along dimension ``dim`` (so
    index order is fold order): an integral iota on ``dim``, or a broadcast of a 1-D one to
    ``dim``, whose type holds its largest position (a narrower iota wraps around and does not
    increase)."""
    attrs = inst.attrs
    if inst.opcode is _BROADCAST and tuple(attrs.get("dimensions", ())) == (dim,):
        inst, dim = inst.operands[0], 0
        attrs = inst.attrs
    if inst.opcode is not _IOTA or int(attrs.get("iota_dimension", -1)) != dim:
        return False
    shape = inst.shape
    if not isinstance(shape, ArrayShape) or not 0 <= dim < len(shape.dims):
        return False
    et = shape.element_type
    if et.kind is _SIGNED:
        return shape.dims[dim] - 1 <= (1 << (et.bits - 1)) - 1
    return et.kind is _UNSIGNED and shape.dims[dim] - 1 <= (1 << et.bits) - 1
