"""Shape inference and the HLO verifier.

``infer_shape(inst)`` computes the shape an instruction must have from its operands, attributes
and called computations, following XLA's ShapeInference (layouts ignored). ``check_instruction``
and ``check_module`` verify a whole program the way XLA's HloVerifier does: operand counts,
declared versus inferred shapes, called-computation signatures, parameter numbering, and the
replica-group rules of the collectives (SEMANTICS.md §2).

Every opcode has one rule: a small function registered in ``_RULES`` with ``@_rule(Opcode...)``.
A rule reads the instruction through a ``_Context`` and either returns the inferred shape or
raises ``_Invalid(reason)``; the public functions turn that reason into an ``HloCheckError`` that
names the computation and the instruction, e.g.::

    in computation main: %ds = f32[2,4]{1,0} dynamic-slice(%p, %i, %j): dynamic_slice_sizes
    has 3 entries but the operand has rank 2

Choices where XLA is silent or lenient are documented on the rule that makes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from neuron_sim.errors import UserError
from neuron_sim.hlo.attributes import ConvDimLabels, Raw, Window
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import VARIADIC, Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroupError, ReplicaGroups, SourceTargetPairs
from neuron_sim.hlo.shapes import UNBOUNDED, ArrayShape, Shape, TupleShape
from neuron_sim.topology import GroupMode, Topology, group_mode, validate_replica_groups

__all__ = ["HloCheckError", "check_instruction", "check_module", "infer_shape"]


# =============================================================================================
# Errors and the rule context.


class HloCheckError(UserError):
    """A module, computation or instruction that breaks an HLO rule.

    ``reason`` is the rule that was broken; ``computation`` and ``instruction`` are the names
    involved (None when the problem is not about one of them). ``str()`` gives the full sentence.
    """

    def __init__(self, reason: str, *, computation: str | None = None,
                 instruction: str | None = None, instruction_text: str | None = None) -> None:
        self.reason = reason
        self.computation = computation
        self.instruction = instruction
        parts = []
        if computation is not None:
            parts.append(f"in computation {computation}")
        if instruction_text is not None:
            parts.append(instruction_text)
        parts.append(reason)
        super().__init__(": ".join(parts))


class _Invalid(Exception):
    """Raised by a rule; the caller adds which instruction and computation it is about."""


def _describe(inst: HloInstruction) -> str:
    """The head of an instruction's line, without attributes: ``%x = f32[2]{0} add(%a, %b)``."""
    if inst.opcode is Opcode.PARAMETER:
        inside = str(inst.parameter_number)
    elif inst.opcode is Opcode.CONSTANT:
        text = inst.literal.text if inst.literal is not None else ""
        inside = text if len(text) <= 40 else text[:37] + "..."
    else:
        names = ["%" + op.name for op in inst.operands[:6]]
        if len(inst.operands) > 6:
            names.append(f"... {len(inst.operands) - 6} more")
        inside = ", ".join(names)
    return f"%{inst.name} = {inst.shape} {inst.opcode.spelling}({inside})"


def _error_for(inst: HloInstruction, reason: str) -> HloCheckError:
    computation = inst.parent.name if inst.parent is not None else None
    return HloCheckError(reason, computation=computation, instruction=inst.name,
                         instruction_text=_describe(inst))


def _fmt(shape: Shape) -> str:
    return str(shape.without_layout())


_MISSING = object()


@dataclass
class _Context:
    """What a rule may look at: the instruction and the topology its collectives run on."""

    inst: HloInstruction
    topology: Topology

    @property
    def opcode(self) -> Opcode:
        return self.inst.opcode

    @property
    def name(self) -> str:
        return self.opcode.spelling

    @property
    def operand_count(self) -> int:
        return len(self.inst.operands)

    def shape(self, i: int) -> Shape:
        return self.inst.operands[i].shape

    def shapes(self) -> list[Shape]:
        return [op.shape for op in self.inst.operands]

    def array(self, i: int, what: str | None = None) -> ArrayShape:
        """Operand ``i``'s shape, which must be an array (not a tuple or token)."""
        shape = self.shape(i)
        if not isinstance(shape, ArrayShape) or not shape.is_array:
            raise _Invalid(f"{what or f'operand {i}'} must be an array, but %"
                           f"{self.inst.operands[i].name} has shape {_fmt(shape)}")
        return shape

    def arrays(self, indices: Sequence[int] | None = None) -> list[ArrayShape]:
        indices = range(self.operand_count) if indices is None else indices
        return [self.array(i) for i in indices]

    def declared_array(self) -> ArrayShape:
        """The declared shape, for ops whose result dims or type come from it."""
        shape = self.inst.shape
        if not isinstance(shape, ArrayShape) or not shape.is_array:
            raise _Invalid(f"the result of {self.name} must be an array, not {_fmt(shape)}")
        return shape

    def require_operands(self, count: int | None = None, *, at_least: int | None = None) -> None:
        n = self.operand_count
        if count is not None and n != count:
            raise _Invalid(f"{self.name} expects {count} operand{'s' * (count != 1)} but has {n}")
        if at_least is not None and n < at_least:
            raise _Invalid(f"{self.name} expects at least {at_least} operand"
                           f"{'s' * (at_least != 1)} but has {n}")

    def attr(self, name: str, default: Any = _MISSING) -> Any:
        value = self.inst.attrs.get(name, default)
        if value is _MISSING:
            raise _Invalid(f"{self.name} needs the attribute {name}")
        return value

    def int_attr(self, name: str, default: Any = _MISSING) -> int:
        value = self.attr(name, default)
        if isinstance(value, Raw):
            try:
                return int(value.text)
            except ValueError:
                raise _Invalid(f"attribute {name}={value.text} is not an integer") from None
        return value

    def bool_attr(self, name: str, default: bool = False) -> bool:
        value = self.attr(name, default)
        if isinstance(value, Raw):
            if value.text not in ("true", "false"):
                raise _Invalid(f"attribute {name}={value.text} is not true or false")
            return value.text == "true"
        return bool(value)

    def dims_attr(self, name: str, default: Any = _MISSING) -> tuple[int, ...]:
        return tuple(self.attr(name, default))

    def computation(self, name: str) -> HloComputation:
        comp = self.attr(name)
        if not isinstance(comp, HloComputation):
            raise _Invalid(f"attribute {name} must name one computation")
        return comp


_Rule = Callable[[_Context], Shape]
_RULES: dict[Opcode, _Rule] = {}


def _rule(*opcodes: Opcode) -> Callable[[_Rule], _Rule]:
    """Register a shape rule for ``opcodes`` (each opcode has exactly one rule)."""
    def register(fn: _Rule) -> _Rule:
        for opcode in opcodes:
            if opcode in _RULES:
                raise AssertionError(f"two shape rules for {opcode.spelling}")
            _RULES[opcode] = fn
        return fn
    return register


# =============================================================================================
# Shape helpers.


def _array(element_type: ElementType, dims: Sequence[int]) -> ArrayShape:
    return ArrayShape(element_type, tuple(dims))


def _scalar(element_type: ElementType) -> ArrayShape:
    return ArrayShape(element_type, ())


def _tuple_or_single(shapes: Sequence[Shape]) -> Shape:
    """One shape as itself, several as a tuple (XLA's variadic collectives and sort)."""
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))


def _same_type_ignoring_fp(a: ElementType, b: ElementType) -> bool:
    return a is b or (a.is_float and b.is_float)


def _compatible_ignoring_fp(a: Shape, b: Shape) -> bool:
    """Same dims, and same element type or both floating point (XLA's ...IgnoringFpPrecision)."""
    if isinstance(a, TupleShape) or isinstance(b, TupleShape):
        return (isinstance(a, TupleShape) and isinstance(b, TupleShape)
                and len(a.elements) == len(b.elements)
                and all(_compatible_ignoring_fp(x, y) for x, y in zip(a.elements, b.elements)))
    return a.dims == b.dims and _same_type_ignoring_fp(a.element_type, b.element_type)


def _is_scalar_array(shape: Shape) -> bool:
    return isinstance(shape, ArrayShape) and shape.is_array and shape.rank == 0


def _check_dim_list(values: Sequence[int], rank: int, what: str, *, sorted_: bool = False,
                    unique: bool = True) -> None:
    """Every entry of ``values`` is a dimension of a rank-``rank`` shape (and unique/sorted)."""
    for value in values:
        if not 0 <= value < rank:
            raise _Invalid(f"{what} {{{_join(values)}}} names dimension {value}, out of range "
                           f"for rank {rank}")
    if unique and len(set(values)) != len(values):
        raise _Invalid(f"{what} {{{_join(values)}}} repeats a dimension")
    if sorted_ and list(values) != sorted(values):
        raise _Invalid(f"{what} {{{_join(values)}}} must be sorted")


def _join(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)


def _window_output_dims(dims: Sequence[int], window: Window, what: str) -> tuple[int, ...]:
    """Dimensions after sliding ``window`` over ``dims`` (XLA's InferWindowOutputShape)."""
    if len(window.dims) != len(dims):
        raise _Invalid(f"the window has {len(window.dims)} dimensions but {what} has rank "
                       f"{len(dims)}")
    out = []
    for i, (bound, w) in enumerate(zip(dims, window.dims)):
        if w.size <= 0:
            raise _Invalid(f"window dimension {i} has non-positive size {w.size}")
        if w.stride <= 0:
            raise _Invalid(f"window dimension {i} has non-positive stride {w.stride}")
        if w.lhs_dilation < 1 or w.rhs_dilation < 1:
            raise _Invalid(f"window dimension {i} has a dilation below 1")
        dilated_base = 0 if bound == 0 else (bound - 1) * w.lhs_dilation + 1
        padded = w.pad_low + dilated_base + w.pad_high
        dilated_window = (w.size - 1) * w.rhs_dilation + 1
        out.append(0 if dilated_window > padded else (padded - dilated_window) // w.stride + 1)
    return tuple(out)


def _program_shape(comp: HloComputation) -> tuple[list[Shape], Shape]:
    """The parameter shapes (by number) and the result shape of ``comp``."""
    if comp.root is None:
        raise _Invalid(f"called computation {comp.name} has no root")
    return [p.shape for p in comp.parameters], comp.root.shape


def _check_call_signature(comp: HloComputation, args: Sequence[Shape], role: str,
                          first_operand: int = 0) -> Shape:
    """``comp`` takes exactly ``args`` (layouts ignored); returns its result shape.

    ``args`` are the caller's operands from index ``first_operand`` on (for error messages).
    """
    params, result = _program_shape(comp)
    if len(params) != len(args):
        raise _Invalid(f"{role} {comp.name} takes {len(params)} parameter"
                       f"{'s' * (len(params) != 1)} but is given {len(args)} operand"
                       f"{'s' * (len(args) != 1)}")
    for i, (param, arg) in enumerate(zip(params, args)):
        if not param.compatible(arg):
            raise _Invalid(f"parameter {i} of {role} {comp.name} has shape {_fmt(param)} but "
                           f"operand {first_operand + i} has shape {_fmt(arg)}")
    return result


def _check_reducer(comp: HloComputation, init_shapes: Sequence[Shape],
                   input_types: Sequence[ElementType], role: str = "reducer") -> list[ArrayShape]:
    """XLA's VerifyReducerShape: ``comp`` folds N inputs with N accumulators.

    It takes 2N scalars (accumulators, then inputs) and returns a scalar (N = 1) or an N-tuple
    of scalars; accumulator i matches init value i and input type i up to float precision.
    Returns the accumulator shapes.
    """
    n = len(input_types)
    params, result = _program_shape(comp)
    if len(params) != 2 * n:
        raise _Invalid(f"{role} {comp.name} must take {2 * n} parameters but takes {len(params)}")
    if isinstance(result, TupleShape):
        if len(result.elements) != n:
            raise _Invalid(f"{role} {comp.name} must return {n} values but returns "
                           f"{_fmt(result)}")
        accumulators = list(result.elements)
    else:
        if n != 1:
            raise _Invalid(f"{role} {comp.name} must return a tuple of {n} scalars but returns "
                           f"{_fmt(result)}")
        accumulators = [result]
    for acc in accumulators:
        if not _is_scalar_array(acc):
            raise _Invalid(f"{role} {comp.name} must return scalars but returns {_fmt(result)}")
    for i in range(n):
        acc = accumulators[i]
        if not acc.compatible(params[i]):
            raise _Invalid(f"parameter {i} of {role} {comp.name} has shape {_fmt(params[i])} "
                           f"but its result {i} is {_fmt(acc)}")
        if not _compatible_ignoring_fp(acc, init_shapes[i]):
            raise _Invalid(f"{role} {comp.name} accumulates {_fmt(acc)} but init value {i} is "
                           f"{_fmt(init_shapes[i])}")
        element = _scalar(input_types[i])
        if not _compatible_ignoring_fp(element, params[n + i]):
            raise _Invalid(f"parameter {n + i} of {role} {comp.name} has shape "
                           f"{_fmt(params[n + i])} but input {i} has element type {input_types[i]}")
    return accumulators


def _check_binary_scalar_reducer(ctx: _Context, types: Sequence[ElementType]) -> None:
    """The to_apply of all-reduce / reduce-scatter: (T[], T[]) -> T[] for every operand type T."""
    comp = ctx.computation("to_apply")
    params, result = _program_shape(comp)
    if len(params) != 2:
        raise _Invalid(f"to_apply {comp.name} must take 2 parameters but takes {len(params)}")
    for et in types:
        expected = _scalar(et)
        for i, shape in enumerate(params + [result]):
            if not expected.compatible(shape):
                where = f"parameter {i}" if i < 2 else "the result"
                raise _Invalid(f"{where} of to_apply {comp.name} has shape {_fmt(shape)} but "
                               f"the operands are {et}, so it must be {_fmt(expected)}")


# =============================================================================================
# Elementwise.

_FLOAT = ("floating-point", lambda et: et.is_float)
_FLOAT_OR_COMPLEX = ("floating-point or complex", lambda et: et.is_float or et.is_complex)
_INTEGRAL = ("integral", lambda et: et.is_integral)
_PRED_OR_INTEGRAL = ("pred or integral", lambda et: et is ElementType.PRED or et.is_integral)
_NUMERIC = ("integral, floating-point or complex",
            lambda et: et.is_integral or et.is_float or et.is_complex)
_SIGNED = ("signed, floating-point or complex",
           lambda et: et.is_signed or et.is_float or et.is_complex)
_ANY = ("array", lambda et: et.is_array_type)

_UNARY_OPERAND_TYPES = {
    **{op: _FLOAT for op in (Opcode.FLOOR, Opcode.CEIL, Opcode.ROUND_NEAREST_AFZ,
                             Opcode.ROUND_NEAREST_EVEN, Opcode.IS_FINITE, Opcode.ERF,
                             Opcode.REDUCE_PRECISION)},
    **{op: _FLOAT_OR_COMPLEX for op in (Opcode.COS, Opcode.SIN, Opcode.TAN, Opcode.EXP,
                                        Opcode.EXPM1, Opcode.LOG, Opcode.LOG1P, Opcode.LOGISTIC,
                                        Opcode.RSQRT, Opcode.SQRT, Opcode.CBRT, Opcode.TANH,
                                        Opcode.REAL, Opcode.IMAG)},
    Opcode.CLZ: _INTEGRAL,
    Opcode.POPCNT: _INTEGRAL,
    Opcode.NOT: _PRED_OR_INTEGRAL,
    Opcode.NEGATE: _NUMERIC,
    Opcode.SIGN: _SIGNED,
    Opcode.ABS: _SIGNED,
}

_BINARY_OPERAND_TYPES = {
    Opcode.ATAN2: _FLOAT_OR_COMPLEX,
    Opcode.AND: _PRED_OR_INTEGRAL,
    Opcode.OR: _PRED_OR_INTEGRAL,
    Opcode.XOR: _PRED_OR_INTEGRAL,
    Opcode.SHIFT_LEFT: _INTEGRAL,
    Opcode.SHIFT_RIGHT_ARITHMETIC: _INTEGRAL,
    Opcode.SHIFT_RIGHT_LOGICAL: _INTEGRAL,
    Opcode.COMPLEX: ("f32 or f64", lambda et: et in (ElementType.F32, ElementType.F64)),
}

_COMPLEX_COMPONENT = {ElementType.C64: ElementType.F32, ElementType.C128: ElementType.F64}
_COMPLEX_OF = {ElementType.F32: ElementType.C64, ElementType.F64: ElementType.C128}


def _require_type(ctx: _Context, shape: ArrayShape, kinds: tuple[str, Callable], i: int) -> None:
    description, accepts = kinds
    if not accepts(shape.element_type):
        raise _Invalid(f"{ctx.name} expects {description} operands, but operand {i} is "
                       f"{_fmt(shape)}")


@_rule(*_UNARY_OPERAND_TYPES)
def _unary(ctx: _Context) -> Shape:
    """Same shape as the operand; abs/real/imag of complex give the component type, is-finite
    gives pred."""
    x = ctx.array(0)
    _require_type(ctx, x, _UNARY_OPERAND_TYPES[ctx.opcode], 0)
    et = x.element_type
    if ctx.opcode in (Opcode.ABS, Opcode.REAL, Opcode.IMAG) and et.is_complex:
        return _array(_COMPLEX_COMPONENT[et], x.dims)
    if ctx.opcode is Opcode.IS_FINITE:
        return _array(ElementType.PRED, x.dims)
    if ctx.opcode is Opcode.REDUCE_PRECISION:
        if ctx.int_attr("exponent_bits") < 1:
            raise _Invalid("reduce-precision needs exponent_bits >= 1")
        if ctx.int_attr("mantissa_bits") < 0:
            raise _Invalid("reduce-precision needs mantissa_bits >= 0")
    return _array(et, x.dims)


@_rule(Opcode.ADD, Opcode.SUBTRACT, Opcode.MULTIPLY, Opcode.DIVIDE, Opcode.REMAINDER,
       Opcode.MAXIMUM, Opcode.MINIMUM, Opcode.POWER, Opcode.ATAN2, Opcode.AND, Opcode.OR,
       Opcode.XOR, Opcode.SHIFT_LEFT, Opcode.SHIFT_RIGHT_ARITHMETIC, Opcode.SHIFT_RIGHT_LOGICAL,
       Opcode.COMPARE, Opcode.COMPLEX)
def _binary(ctx: _Context) -> Shape:
    """Both operands have the same dims and element type (HLO has no implicit broadcasting;
    mixed precision is rejected, as XLA's default verifier does). compare gives pred, complex
    gives c64/c128."""
    lhs, rhs = ctx.array(0), ctx.array(1)
    if lhs.dims != rhs.dims:
        raise _Invalid(f"{ctx.name} operands have different dimensions: {_fmt(lhs)} and "
                       f"{_fmt(rhs)}")
    if lhs.element_type is not rhs.element_type:
        raise _Invalid(f"{ctx.name} operands have different element types: {_fmt(lhs)} and "
                       f"{_fmt(rhs)}")
    kinds = _BINARY_OPERAND_TYPES.get(ctx.opcode)
    if kinds is not None:
        _require_type(ctx, lhs, kinds, 0)
    if ctx.opcode is Opcode.COMPARE:
        direction = ctx.attr("direction")
        if direction not in ("EQ", "NE", "LT", "LE", "GT", "GE"):
            raise _Invalid(f"compare direction {direction} is not one of EQ, NE, LT, LE, GT, GE")
        kind = ctx.attr("type", None)
        if kind is not None and kind not in ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"):
            raise _Invalid(f"compare type {kind} is not FLOAT, TOTALORDER, SIGNED or UNSIGNED")
        return _array(ElementType.PRED, lhs.dims)
    if ctx.opcode is Opcode.COMPLEX:
        return _array(_COMPLEX_OF[lhs.element_type], lhs.dims)
    return _array(lhs.element_type, lhs.dims)


@_rule(Opcode.SELECT)
def _select(ctx: _Context) -> Shape:
    """pred is pred-typed and scalar or of the branches' dims; the branches have one shape."""
    pred, on_true, on_false = ctx.array(0), ctx.array(1), ctx.array(2)
    if pred.element_type is not ElementType.PRED:
        raise _Invalid(f"select's predicate must be pred, not {_fmt(pred)}")
    if not on_true.compatible(on_false):
        raise _Invalid(f"select's branches have different shapes: {_fmt(on_true)} and "
                       f"{_fmt(on_false)}")
    if pred.rank != 0 and pred.dims != on_true.dims:
        raise _Invalid(f"select's predicate {_fmt(pred)} is neither a scalar nor of the "
                       f"branches' dimensions {_fmt(on_true)}")
    return _array(on_true.element_type, on_true.dims)


@_rule(Opcode.CLAMP)
def _clamp(ctx: _Context) -> Shape:
    """clamp(min, x, max): one element type; min and max are scalars or of x's dims."""
    low, x, high = ctx.array(0), ctx.array(1), ctx.array(2)
    for name, bound in (("min", low), ("max", high)):
        if bound.element_type is not x.element_type:
            raise _Invalid(f"clamp {name} {_fmt(bound)} has a different element type from the "
                           f"operand {_fmt(x)}")
        if bound.rank != 0 and bound.dims != x.dims:
            raise _Invalid(f"clamp {name} {_fmt(bound)} is neither a scalar nor of the "
                           f"operand's dimensions {_fmt(x)}")
    return _array(x.element_type, x.dims)


@_rule(Opcode.CONVERT)
def _convert(ctx: _Context) -> Shape:
    """Operand dims, declared element type; complex -> real is not an HLO convert (XLA)."""
    x = ctx.array(0)
    target = ctx.declared_array().element_type
    if x.element_type.is_complex and not target.is_complex:
        raise _Invalid(f"convert from complex {x.element_type} to real {target} is not allowed "
                       f"(use real or imag)")
    return _array(target, x.dims)


@_rule(Opcode.BITCAST_CONVERT)
def _bitcast_convert(ctx: _Context) -> Shape:
    """Same bit width: same dims. Wider input: a trailing dim of the width ratio is added.
    Narrower input: its last dim must equal the ratio and is removed (XLA)."""
    x = ctx.array(0)
    target = ctx.declared_array().element_type
    source = x.element_type
    if source.is_complex != target.is_complex:
        raise _Invalid(f"bitcast-convert between complex and real types ({source} -> {target}) "
                       f"is not allowed")
    wide, narrow = max(source.bits, target.bits), min(source.bits, target.bits)
    if narrow == 0 or wide % narrow:
        raise _Invalid(f"bitcast-convert cannot split {source} ({source.bits} bits) into "
                       f"{target} ({target.bits} bits)")
    ratio = wide // narrow
    if source.bits > target.bits:
        return _array(target, x.dims + (ratio,))
    if source.bits < target.bits:
        if x.rank < 1 or x.dims[-1] != ratio:
            raise _Invalid(f"bitcast-convert {source} -> {target} needs the operand's last "
                           f"dimension to be {ratio}, but the operand is {_fmt(x)}")
        return _array(target, x.dims[:-1])
    return _array(target, x.dims)


@_rule(Opcode.STOCHASTIC_CONVERT)
def _stochastic_convert(ctx: _Context) -> Shape:
    """stochastic-convert(x, random): random is unsigned of x's bit width and dims."""
    x, bits = ctx.array(0), ctx.array(1)
    if not x.element_type.is_float:
        raise _Invalid(f"stochastic-convert expects a floating-point operand, not {_fmt(x)}")
    if (bits.element_type.kind.value != "unsigned" or bits.element_type.bits != x.element_type.bits
            or bits.dims != x.dims):
        raise _Invalid(f"stochastic-convert's random operand must be unsigned with "
                       f"{x.element_type.bits} bits and dims {list(x.dims)}, not {_fmt(bits)}")
    return _array(ctx.declared_array().element_type, x.dims)


# =============================================================================================
# Data movement.


@_rule(Opcode.BROADCAST)
def _broadcast(ctx: _Context) -> Shape:
    """Output dims are declared; ``dimensions[i]`` is the output dim operand dim i becomes, and
    the two sizes must be equal (XLA's verifier; no degenerate-dim stretching in HLO)."""
    x = ctx.array(0)
    out = ctx.declared_array()
    mapping = ctx.dims_attr("dimensions")
    if len(mapping) != x.rank:
        raise _Invalid(f"broadcast dimensions {{{_join(mapping)}}} has {len(mapping)} entries "
                       f"but the operand has rank {x.rank}")
    _check_dim_list(mapping, out.rank, "broadcast dimensions")
    for i, d in enumerate(mapping):
        if out.dims[d] != x.dims[i]:
            raise _Invalid(f"broadcast maps operand dimension {i} (size {x.dims[i]}) to output "
                           f"dimension {d} of size {out.dims[d]}")
    return _array(x.element_type, out.dims)


@_rule(Opcode.RESHAPE)
def _reshape(ctx: _Context) -> Shape:
    """Declared dims holding the operand's element count."""
    x = ctx.array(0)
    out = ctx.declared_array()
    if out.element_count != x.element_count:
        raise _Invalid(f"reshape from {_fmt(x)} ({x.element_count} elements) to "
                       f"{list(out.dims)} ({out.element_count} elements) changes the element "
                       f"count")
    return _array(x.element_type, out.dims)


@_rule(Opcode.DYNAMIC_RESHAPE)
def _dynamic_reshape(ctx: _Context) -> Shape:
    """dynamic-reshape(x, size_0, ...): one s32[] size per output dim; declared dims are bounds."""
    ctx.require_operands(at_least=1)
    x = ctx.array(0)
    out = ctx.declared_array()
    if ctx.operand_count - 1 != out.rank:
        raise _Invalid(f"dynamic-reshape to rank {out.rank} needs {out.rank} size operands but "
                       f"has {ctx.operand_count - 1}")
    for i in range(1, ctx.operand_count):
        if not _scalar(ElementType.S32).compatible(ctx.shape(i)):
            raise _Invalid(f"dynamic-reshape size operand {i} must be s32[], not "
                           f"{_fmt(ctx.shape(i))}")
    return _array(x.element_type, out.dims)


@_rule(Opcode.TRANSPOSE)
def _transpose(ctx: _Context) -> Shape:
    """Output dim i is operand dim ``dimensions[i]``."""
    x = ctx.array(0)
    perm = ctx.dims_attr("dimensions")
    if sorted(perm) != list(range(x.rank)):
        raise _Invalid(f"transpose dimensions {{{_join(perm)}}} are not a permutation of the "
                       f"operand's {x.rank} dimensions")
    return _array(x.element_type, [x.dims[p] for p in perm])


@_rule(Opcode.SLICE)
def _slice(ctx: _Context) -> Shape:
    """Per dim: 0 <= start <= limit <= size, stride >= 1; size ceil((limit - start) / stride)."""
    x = ctx.array(0)
    spec = ctx.attr("slice")
    if len(spec) != x.rank:
        raise _Invalid(f"slice has {len(spec)} entries but the operand has rank {x.rank}")
    out = []
    for i, (s, size) in enumerate(zip(spec, x.dims)):
        if s.stride < 1:
            raise _Invalid(f"slice dimension {i} has stride {s.stride}; strides must be >= 1")
        if not 0 <= s.start <= s.limit <= size:
            raise _Invalid(f"slice dimension {i} is [{s.start}:{s.limit}], outside [0:{size}] or "
                           f"with start after limit")
        out.append(-(-(s.limit - s.start) // s.stride))
    return _array(x.element_type, out)


def _check_start_indices(ctx: _Context, first: int, rank: int, op: str) -> None:
    """Start indices from operand ``first`` on: ``rank`` integral scalars of one type (or XLA's
    older single rank-1 index vector)."""
    shapes = [ctx.array(i) for i in range(first, ctx.operand_count)]
    if len(shapes) == 1 and shapes[0].rank == 1 and rank != 1:
        if shapes[0].dims[0] != rank or not shapes[0].element_type.is_integral:
            raise _Invalid(f"{op} start index vector {_fmt(shapes[0])} must be integral with "
                           f"{rank} entries")
        return
    if len(shapes) != rank:
        raise _Invalid(f"{op} has {len(shapes)} start indices but the operand has rank {rank}")
    for shape in shapes:
        if shape.rank != 0 or not shape.element_type.is_integral:
            raise _Invalid(f"{op} start indices must be integral scalars, not {_fmt(shape)}")
        if shape.element_type is not shapes[0].element_type:
            raise _Invalid(f"{op} start indices must all have one type, but they mix "
                           f"{shapes[0].element_type} and {shape.element_type}")


@_rule(Opcode.DYNAMIC_SLICE)
def _dynamic_slice(ctx: _Context) -> Shape:
    """dynamic-slice(x, i_0, ...): result dims are dynamic_slice_sizes, each <= the operand's."""
    ctx.require_operands(at_least=1)
    x = ctx.array(0)
    sizes = ctx.dims_attr("dynamic_slice_sizes")
    if len(sizes) != x.rank:
        raise _Invalid(f"dynamic_slice_sizes has {len(sizes)} entries but the operand has rank "
                       f"{x.rank}")
    _check_start_indices(ctx, 1, x.rank, "dynamic-slice")
    for i, (size, bound) in enumerate(zip(sizes, x.dims)):
        if not 0 <= size <= bound:
            raise _Invalid(f"dynamic_slice_sizes[{i}] = {size} is outside [0, {bound}] (operand "
                           f"{_fmt(x)})")
    return _array(x.element_type, sizes)


@_rule(Opcode.DYNAMIC_UPDATE_SLICE)
def _dynamic_update_slice(ctx: _Context) -> Shape:
    """dynamic-update-slice(x, update, i_0, ...): update fits in x, same type; result is x."""
    ctx.require_operands(at_least=2)
    x, update = ctx.array(0), ctx.array(1)
    if update.rank != x.rank:
        raise _Invalid(f"the update {_fmt(update)} has rank {update.rank} but the operand "
                       f"{_fmt(x)} has rank {x.rank}")
    if update.element_type is not x.element_type:
        raise _Invalid(f"the update {_fmt(update)} and the operand {_fmt(x)} have different "
                       f"element types")
    for i, (u, bound) in enumerate(zip(update.dims, x.dims)):
        if u > bound:
            raise _Invalid(f"update dimension {i} is {u}, larger than the operand's {bound}")
    _check_start_indices(ctx, 2, x.rank, "dynamic-update-slice")
    return _array(x.element_type, x.dims)


@_rule(Opcode.CONCATENATE)
def _concatenate(ctx: _Context) -> Shape:
    """Operands agree on type, rank and every dim but ``dimensions={d}``, which is summed."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    dims = ctx.dims_attr("dimensions")
    if len(dims) != 1:
        raise _Invalid(f"concatenate needs exactly one dimension, not {{{_join(dims)}}}")
    d = dims[0]
    first = shapes[0]
    if not 0 <= d < first.rank:
        raise _Invalid(f"concatenate dimension {d} is out of range for rank {first.rank}")
    for i, shape in enumerate(shapes[1:], 1):
        if shape.rank != first.rank or shape.element_type is not first.element_type or any(
                a != b for k, (a, b) in enumerate(zip(shape.dims, first.dims)) if k != d):
            raise _Invalid(f"concatenate operand {i} {_fmt(shape)} does not match operand 0 "
                           f"{_fmt(first)} outside dimension {d}")
    out = list(first.dims)
    out[d] = sum(s.dims[d] for s in shapes)
    return _array(first.element_type, out)


@_rule(Opcode.PAD)
def _pad(ctx: _Context) -> Shape:
    """pad(x, v): size low + high + n + (n - 1) * interior per dim; low/high may be negative,
    interior may not, and no dim may end up negative."""
    x, value = ctx.array(0), ctx.array(1)
    if value.rank != 0 or value.element_type is not x.element_type:
        raise _Invalid(f"the padding value must be a {x.element_type} scalar, not {_fmt(value)}")
    padding = ctx.attr("padding")
    if len(padding) != x.rank:
        raise _Invalid(f"padding has {len(padding)} entries but the operand has rank {x.rank}")
    out = []
    for i, (p, n) in enumerate(zip(padding, x.dims)):
        if p.interior < 0:
            raise _Invalid(f"padding dimension {i} has negative interior padding {p.interior}")
        size = p.low + p.high + n + max(n - 1, 0) * p.interior
        if size < 0:
            raise _Invalid(f"padding dimension {i} ({p.low}_{p.high}_{p.interior}) makes size "
                           f"{n} negative ({size})")
        out.append(size)
    return _array(x.element_type, out)


@_rule(Opcode.REVERSE)
def _reverse(ctx: _Context) -> Shape:
    x = ctx.array(0)
    _check_dim_list(ctx.dims_attr("dimensions"), x.rank, "reverse dimensions")
    return _array(x.element_type, x.dims)


@_rule(Opcode.COPY, Opcode.DOMAIN, Opcode.OPTIMIZATION_BARRIER)
def _same_as_operand(ctx: _Context) -> Shape:
    return ctx.shape(0)


@_rule(Opcode.BITCAST)
def _bitcast(ctx: _Context) -> Shape:
    """Declared shape, holding as many bits as the operand (element count x bit width)."""
    x = ctx.array(0)
    out = ctx.declared_array()
    if x.element_count * x.element_type.bits != out.element_count * out.element_type.bits:
        raise _Invalid(f"bitcast from {_fmt(x)} ({x.element_count * x.element_type.bits} bits) "
                       f"to {_fmt(out)} ({out.element_count * out.element_type.bits} bits) "
                       f"changes the size")
    return out


@_rule(Opcode.TUPLE)
def _tuple(ctx: _Context) -> Shape:
    return TupleShape(tuple(ctx.shapes()))


@_rule(Opcode.GET_TUPLE_ELEMENT)
def _get_tuple_element(ctx: _Context) -> Shape:
    shape = ctx.shape(0)
    index = ctx.int_attr("index")
    if not isinstance(shape, TupleShape):
        raise _Invalid(f"get-tuple-element needs a tuple operand, not {_fmt(shape)}")
    if not 0 <= index < len(shape.elements):
        raise _Invalid(f"index {index} is out of range for a tuple of {len(shape.elements)} "
                       f"elements")
    return shape.elements[index]


# -- gather / scatter -------------------------------------------------------------------------


def _expanded_index_dims(indices: ArrayShape, index_vector_dim: int, op: str) -> list[int]:
    """Index dims with the implicit trailing 1 when index_vector_dim == rank (XLA)."""
    if not indices.element_type.is_integral:
        raise _Invalid(f"{op} indices must be integral, not {_fmt(indices)}")
    if not 0 <= index_vector_dim <= indices.rank:
        raise _Invalid(f"index_vector_dim {index_vector_dim} must be in [0, {indices.rank}] for "
                       f"indices {_fmt(indices)}")
    dims = list(indices.dims)
    if index_vector_dim == len(dims):
        dims.append(1)
    return dims


def _check_batching_dims(operand: ArrayShape, operand_batching: Sequence[int],
                         index_dims: Sequence[int], index_batching: Sequence[int],
                         index_vector_dim: int, names: tuple[str, str], op: str) -> None:
    """Batching dims pair up one to one and have equal sizes (XLA / StableHLO)."""
    if len(operand_batching) != len(index_batching):
        raise _Invalid(f"{names[0]} and {names[1]} must have the same length, but have "
                       f"{len(operand_batching)} and {len(index_batching)}")
    _check_dim_list(operand_batching, operand.rank, names[0], sorted_=True)
    _check_dim_list(index_batching, len(index_dims), names[1])
    if index_vector_dim in index_batching:
        raise _Invalid(f"{names[1]} must not contain index_vector_dim {index_vector_dim}")
    for o, s in zip(operand_batching, index_batching):
        if operand.dims[o] != index_dims[s]:
            raise _Invalid(f"{op} batching dimension {o} of the operand has size "
                           f"{operand.dims[o]} but indices dimension {s} has size {index_dims[s]}")


@_rule(Opcode.GATHER)
def _gather(ctx: _Context) -> Shape:
    """XLA's GatherShape: offset_dims of the output take the slice sizes of the operand dims that
    are neither collapsed nor batching (in order); the other output dims are the index dims
    other than index_vector_dim (in order)."""
    operand, indices = ctx.array(0), ctx.array(1)
    offset_dims = ctx.dims_attr("offset_dims", ())
    collapsed = ctx.dims_attr("collapsed_slice_dims", ())
    start_index_map = ctx.dims_attr("start_index_map", ())
    operand_batching = ctx.dims_attr("operand_batching_dims", ())
    indices_batching = ctx.dims_attr("start_indices_batching_dims", ())
    index_vector_dim = ctx.int_attr("index_vector_dim")
    slice_sizes = ctx.dims_attr("slice_sizes")

    index_dims = _expanded_index_dims(indices, index_vector_dim, "gather")
    out_rank = len(offset_dims) + len(index_dims) - 1
    _check_dim_list(offset_dims, out_rank, "offset_dims", sorted_=True)
    if len(start_index_map) != index_dims[index_vector_dim]:
        raise _Invalid(f"start_index_map has {len(start_index_map)} entries but dimension "
                       f"index_vector_dim={index_vector_dim} of the indices has size "
                       f"{index_dims[index_vector_dim]}")
    _check_dim_list(start_index_map, operand.rank, "start_index_map")
    _check_dim_list(collapsed, operand.rank, "collapsed_slice_dims", sorted_=True)
    _check_batching_dims(operand, operand_batching, index_dims, indices_batching,
                         index_vector_dim, ("operand_batching_dims",
                                            "start_indices_batching_dims"), "gather")
    if set(collapsed) & set(operand_batching):
        raise _Invalid("collapsed_slice_dims and operand_batching_dims overlap")
    if set(start_index_map) & set(operand_batching):
        raise _Invalid("start_index_map and operand_batching_dims overlap")
    if len(slice_sizes) != operand.rank:
        raise _Invalid(f"slice_sizes has {len(slice_sizes)} entries but the operand has rank "
                       f"{operand.rank}")
    if operand.rank != len(offset_dims) + len(collapsed) + len(operand_batching):
        raise _Invalid(f"the operand's rank {operand.rank} must equal len(offset_dims) + "
                       f"len(collapsed_slice_dims) + len(operand_batching_dims) = "
                       f"{len(offset_dims) + len(collapsed) + len(operand_batching)}")
    for i, (size, bound) in enumerate(zip(slice_sizes, operand.dims)):
        if not 0 <= size <= bound:
            raise _Invalid(f"slice_sizes[{i}] = {size} is outside [0, {bound}]")
    for d in tuple(collapsed) + tuple(operand_batching):
        if slice_sizes[d] > 1:
            raise _Invalid(f"collapsed or batching dimension {d} has slice size "
                           f"{slice_sizes[d]}; it must be 0 or 1")

    window_sizes = iter(s for d, s in enumerate(slice_sizes)
                        if d not in collapsed and d not in operand_batching)
    batch_sizes = iter(s for d, s in enumerate(index_dims) if d != index_vector_dim)
    out = [next(window_sizes) if i in offset_dims else next(batch_sizes) for i in range(out_rank)]
    return _array(operand.element_type, out)


@_rule(Opcode.SCATTER)
def _scatter(ctx: _Context) -> Shape:
    """XLA's ScatterShape: scatter(operands..., indices, updates...) returns the operands.

    Updates have rank len(update_window_dims) + (index rank - 1); their window dims fit in the
    operand dims that are neither inserted nor batching, their other dims equal the index dims
    other than index_vector_dim; to_apply folds (operand types) with (update types).
    """
    n = ctx.operand_count // 2
    if ctx.operand_count < 3 or ctx.operand_count != 2 * n + 1:
        raise _Invalid(f"scatter takes N operands, the indices and N updates (an odd count of "
                       f"at least 3), but has {ctx.operand_count} operands")
    operands = ctx.arrays(range(n))
    indices = ctx.array(n, "the scatter indices")
    updates = ctx.arrays(range(n + 1, 2 * n + 1))
    window_dims = ctx.dims_attr("update_window_dims", ())
    inserted = ctx.dims_attr("inserted_window_dims", ())
    to_operand = ctx.dims_attr("scatter_dims_to_operand_dims", ())
    input_batching = ctx.dims_attr("input_batching_dims", ())
    indices_batching = ctx.dims_attr("scatter_indices_batching_dims", ())
    index_vector_dim = ctx.int_attr("index_vector_dim")
    index_dims = _expanded_index_dims(indices, index_vector_dim, "scatter")

    for k, (operand, update) in enumerate(zip(operands, updates)):
        if operand.dims != operands[0].dims:
            raise _Invalid(f"scatter operand {k} {_fmt(operand)} and operand 0 "
                           f"{_fmt(operands[0])} have different dimensions")
        expected_rank = len(index_dims) - 1 + len(window_dims)
        if update.rank != expected_rank:
            raise _Invalid(f"updates {k} {_fmt(update)} must have rank {expected_rank} "
                           f"(update_window_dims plus the index batch dims)")
        _check_dim_list(window_dims, update.rank, "update_window_dims", sorted_=True)
        _check_dim_list(inserted, operand.rank, "inserted_window_dims", sorted_=True)
        if len(window_dims) + len(inserted) + len(input_batching) != operand.rank:
            raise _Invalid(f"len(update_window_dims) + len(inserted_window_dims) + "
                           f"len(input_batching_dims) = "
                           f"{len(window_dims) + len(inserted) + len(input_batching)} must equal "
                           f"the operand's rank {operand.rank}")
        if len(to_operand) != index_dims[index_vector_dim]:
            raise _Invalid(f"scatter_dims_to_operand_dims has {len(to_operand)} entries but "
                           f"dimension index_vector_dim={index_vector_dim} of the indices has "
                           f"size {index_dims[index_vector_dim]}")
        _check_dim_list(to_operand, operand.rank, "scatter_dims_to_operand_dims")
        _check_batching_dims(operand, input_batching, index_dims, indices_batching,
                             index_vector_dim, ("input_batching_dims",
                                                "scatter_indices_batching_dims"), "scatter")
        if set(inserted) & set(input_batching):
            raise _Invalid("inserted_window_dims and input_batching_dims overlap")
        if set(to_operand) & set(input_batching):
            raise _Invalid("scatter_dims_to_operand_dims and input_batching_dims overlap")
        window_bounds = [b for d, b in enumerate(operand.dims)
                         if d not in inserted and d not in input_batching]
        for w, d in zip(window_bounds, window_dims):
            if update.dims[d] > w:
                raise _Invalid(f"updates {k} window dimension {d} has size {update.dims[d]}, "
                               f"larger than the operand's {w}")
        scatter_sizes = [s for d, s in enumerate(index_dims) if d != index_vector_dim]
        update_scatter_dims = [d for d in range(update.rank) if d not in window_dims]
        for d, size in zip(update_scatter_dims, scatter_sizes):
            if update.dims[d] != size:
                raise _Invalid(f"updates {k} scatter dimension {d} has size {update.dims[d]} "
                               f"but the matching indices dimension has size {size}")
    _check_reducer(ctx.computation("to_apply"), [_scalar(o.element_type) for o in operands],
                   [u.element_type for u in updates], "to_apply")
    return _tuple_or_single([_array(o.element_type, o.dims) for o in operands])


# =============================================================================================
# Reductions, sort, map.


def _split_inputs_and_inits(ctx: _Context) -> tuple[list[ArrayShape], list[ArrayShape]]:
    n = ctx.operand_count // 2
    if ctx.operand_count == 0 or ctx.operand_count % 2:
        raise _Invalid(f"{ctx.name} takes N inputs and N init values, but has "
                       f"{ctx.operand_count} operands")
    inputs, inits = ctx.arrays(range(n)), ctx.arrays(range(n, 2 * n))
    for i, x in enumerate(inputs):
        if x.dims != inputs[0].dims:
            raise _Invalid(f"{ctx.name} input {i} {_fmt(x)} and input 0 {_fmt(inputs[0])} have "
                           f"different dimensions")
    for i, init in enumerate(inits):
        if init.rank != 0:
            raise _Invalid(f"{ctx.name} init value {i} must be a scalar, not {_fmt(init)}")
    return inputs, inits


@_rule(Opcode.REDUCE)
def _reduce(ctx: _Context) -> Shape:
    """reduce(inputs..., inits...): the kept dims, typed by to_apply's result(s)."""
    inputs, inits = _split_inputs_and_inits(ctx)
    dims = ctx.dims_attr("dimensions")
    _check_dim_list(dims, inputs[0].rank, "reduce dimensions")
    accumulators = _check_reducer(ctx.computation("to_apply"), inits,
                                  [x.element_type for x in inputs], "to_apply")
    kept = [s for d, s in enumerate(inputs[0].dims) if d not in dims]
    return _tuple_or_single([_array(a.element_type, kept) for a in accumulators])


@_rule(Opcode.REDUCE_WINDOW)
def _reduce_window(ctx: _Context) -> Shape:
    """reduce-window(inputs..., inits...): the window output dims, typed by the init values."""
    inputs, inits = _split_inputs_and_inits(ctx)
    _check_reducer(ctx.computation("to_apply"), inits, [x.element_type for x in inputs],
                   "to_apply")
    window = ctx.attr("window", Window(()))
    dims = _window_output_dims(inputs[0].dims, window, "the input")
    return _tuple_or_single([_array(init.element_type, dims) for init in inits])


@_rule(Opcode.SELECT_AND_SCATTER)
def _select_and_scatter(ctx: _Context) -> Shape:
    """select-and-scatter(operand, source, init): select is (T, T) -> pred[], scatter a reducer,
    source has the window output dims of the operand; the result is the operand's shape."""
    operand, source, init = ctx.array(0), ctx.array(1, "the source"), ctx.array(2)
    select = ctx.computation("select")
    params, result = _program_shape(select)
    if len(params) != 2:
        raise _Invalid(f"select {select.name} must take 2 parameters but takes {len(params)}")
    if not _scalar(ElementType.PRED).compatible(result):
        raise _Invalid(f"select {select.name} must return pred[], not {_fmt(result)}")
    for i, param in enumerate(params):
        if not _compatible_ignoring_fp(_scalar(operand.element_type), param):
            raise _Invalid(f"parameter {i} of select {select.name} is {_fmt(param)} but the "
                           f"operand's element type is {operand.element_type}")
    _check_reducer(ctx.computation("scatter"), [init], [source.element_type], "scatter")
    window_dims = _window_output_dims(operand.dims, ctx.attr("window", Window(())), "the operand")
    if source.dims != window_dims:
        raise _Invalid(f"the source {_fmt(source)} must have the window output dims "
                       f"{list(window_dims)}")
    return _array(operand.element_type, operand.dims)


@_rule(Opcode.SORT)
def _sort(ctx: _Context) -> Shape:
    """Operands share dims; the comparator takes two scalars per operand and returns pred[]."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    for i, shape in enumerate(shapes):
        if shape.dims != shapes[0].dims:
            raise _Invalid(f"sort operand {i} {_fmt(shape)} and operand 0 {_fmt(shapes[0])} have "
                           f"different dimensions")
    dims = ctx.dims_attr("dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < shapes[0].rank:
        raise _Invalid(f"sort dimensions {{{_join(dims)}}} must name one dimension of "
                       f"{_fmt(shapes[0])}")
    comparator = ctx.computation("to_apply")
    params, result = _program_shape(comparator)
    if not _scalar(ElementType.PRED).compatible(result):
        raise _Invalid(f"comparator {comparator.name} must return pred[], not {_fmt(result)}")
    if len(params) != 2 * len(shapes):
        raise _Invalid(f"comparator {comparator.name} must take {2 * len(shapes)} parameters "
                       f"but takes {len(params)}")
    for i, param in enumerate(params):
        expected = _scalar(shapes[i // 2].element_type)
        if not _compatible_ignoring_fp(expected, param):
            raise _Invalid(f"parameter {i} of comparator {comparator.name} is {_fmt(param)} but "
                           f"must be {_fmt(expected)}")
    return _tuple_or_single([_array(s.element_type, s.dims) for s in shapes])


@_rule(Opcode.MAP)
def _map(ctx: _Context) -> Shape:
    """Operands share dims; to_apply takes one scalar per operand; result type from it."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    for i, shape in enumerate(shapes):
        if shape.dims != shapes[0].dims:
            raise _Invalid(f"map operand {i} {_fmt(shape)} and operand 0 {_fmt(shapes[0])} have "
                           f"different dimensions")
    dims = ctx.dims_attr("dimensions", tuple(range(shapes[0].rank)))
    if tuple(dims) != tuple(range(shapes[0].rank)):
        raise _Invalid(f"map dimensions {{{_join(dims)}}} must be every dimension in order")
    comp = ctx.computation("to_apply")
    params, result = _program_shape(comp)
    if len(params) != len(shapes):
        raise _Invalid(f"to_apply {comp.name} takes {len(params)} parameters but map has "
                       f"{len(shapes)} operands")
    for i, (param, shape) in enumerate(zip(params, shapes)):
        if not _compatible_ignoring_fp(_scalar(shape.element_type), param):
            raise _Invalid(f"parameter {i} of to_apply {comp.name} is {_fmt(param)} but operand "
                           f"{i} has element type {shape.element_type}")
    if not _is_scalar_array(result):
        raise _Invalid(f"to_apply {comp.name} must return a scalar, not {_fmt(result)}")
    return _array(result.element_type, shapes[0].dims)


@_rule(Opcode.TOPK)
def _topk(ctx: _Context) -> Shape:
    """(values, s32 indices), both with the last dim replaced by k."""
    x = ctx.array(0)
    k = ctx.int_attr("k")
    if x.rank < 1 or not 0 <= k <= x.dims[-1]:
        raise _Invalid(f"topk k={k} must be within the last dimension of {_fmt(x)}")
    dims = x.dims[:-1] + (k,)
    return TupleShape((_array(x.element_type, dims), _array(ElementType.S32, dims)))


# =============================================================================================
# Linear algebra.


def _result_type(ctx: _Context, lhs: ArrayShape, rhs: ArrayShape) -> ElementType:
    """The declared element type, which may widen but not narrow integer inputs (XLA's
    preferred_element_type rule)."""
    declared = ctx.declared_array().element_type
    widest = max((lhs.element_type, rhs.element_type), key=lambda et: et.bits)
    if declared is not widest and not widest.is_float and declared.bits < widest.bits:
        raise _Invalid(f"{ctx.name} of {widest} operands cannot produce the narrower {declared}")
    return declared


@_rule(Opcode.DOT)
def _dot(ctx: _Context) -> Shape:
    """dot: batch dims, then lhs free dims, then rhs free dims (XLA's DotGeneral)."""
    lhs, rhs = ctx.array(0), ctx.array(1)
    lb, rb = ctx.dims_attr("lhs_batch_dims", ()), ctx.dims_attr("rhs_batch_dims", ())
    lc, rc = ctx.dims_attr("lhs_contracting_dims", ()), ctx.dims_attr("rhs_contracting_dims", ())
    if len(lb) != len(rb):
        raise _Invalid(f"dot has {len(lb)} lhs batch dims but {len(rb)} rhs batch dims")
    if len(lc) != len(rc):
        raise _Invalid(f"dot has {len(lc)} lhs contracting dims but {len(rc)} rhs contracting "
                       f"dims")
    _check_dim_list(lb + lc, lhs.rank, "lhs batch and contracting dims")
    _check_dim_list(rb + rc, rhs.rank, "rhs batch and contracting dims")
    for l, r in zip(lc, rc):
        if lhs.dims[l] != rhs.dims[r]:
            raise _Invalid(f"contracting dimension {l} of lhs {_fmt(lhs)} and {r} of rhs "
                           f"{_fmt(rhs)} have different sizes")
    for l, r in zip(lb, rb):
        if lhs.dims[l] != rhs.dims[r]:
            raise _Invalid(f"batch dimension {l} of lhs {_fmt(lhs)} and {r} of rhs {_fmt(rhs)} "
                           f"have different sizes")
    out = [lhs.dims[d] for d in lb]
    out += [s for d, s in enumerate(lhs.dims) if d not in lb and d not in lc]
    out += [s for d, s in enumerate(rhs.dims) if d not in rb and d not in rc]
    return _array(_result_type(ctx, lhs, rhs), out)


@_rule(Opcode.RAGGED_DOT)
def _ragged_dot(ctx: _Context) -> Shape:
    """ragged-dot(lhs, rhs, group_sizes), XLA's three modes by where the lhs ragged dim is:
    non-contracting (rhs has a group dim, dropped: the dot shape), contracting (a leading group
    dim of size g is added), batch (the dot shape). Only the output shape and the group count
    are checked; group_sizes' other dims are not."""
    lhs, rhs, groups = ctx.array(0), ctx.array(1), ctx.array(2, "group_sizes")
    lb, rb = ctx.dims_attr("lhs_batch_dims", ()), ctx.dims_attr("rhs_batch_dims", ())
    lc, rc = ctx.dims_attr("lhs_contracting_dims", ()), ctx.dims_attr("rhs_contracting_dims", ())
    ragged = ctx.dims_attr("lhs_ragged_dims", ())
    group_dims = ctx.dims_attr("rhs_group_dims", ())
    if len(ragged) != 1:
        raise _Invalid(f"ragged-dot needs exactly one lhs_ragged_dims entry, not "
                       f"{{{_join(ragged)}}}")
    if not groups.element_type.is_integral or groups.rank < 1:
        raise _Invalid(f"group_sizes must be an integral array, not {_fmt(groups)}")
    _check_dim_list(ragged, lhs.rank, "lhs_ragged_dims")
    _check_dim_list(rb + rc + group_dims, rhs.rank, "rhs batch, contracting and group dims")
    _check_dim_list(lb + lc, lhs.rank, "lhs batch and contracting dims")
    non_contracting = ragged[0] not in lc and ragged[0] not in lb
    if non_contracting != (len(group_dims) == 1):
        raise _Invalid("rhs_group_dims must have one entry exactly when the lhs ragged "
                       "dimension is a non-contracting dimension")
    g = rhs.dims[group_dims[0]] if non_contracting else groups.dims[-1]
    if groups.dims[-1] != g:
        raise _Invalid(f"group_sizes {_fmt(groups)} must end in the group count {g}")
    for l, r in list(zip(lc, rc)) + list(zip(lb, rb)):
        if lhs.dims[l] != rhs.dims[r]:
            raise _Invalid(f"lhs dimension {l} and rhs dimension {r} have different sizes")
    out = [lhs.dims[d] for d in lb]
    out += [s for d, s in enumerate(lhs.dims) if d not in lb and d not in lc]
    out += [s for d, s in enumerate(rhs.dims)
            if d not in rb and d not in rc and d not in group_dims]
    if ragged[0] in lc:
        out = [g] + out
    return _array(_result_type(ctx, lhs, rhs), out)


@_rule(Opcode.CONVOLUTION)
def _convolution(ctx: _Context) -> Shape:
    """XLA's ConvolveShape: output batch = input batch / batch_group_count, output feature =
    kernel output features, spatial dims from the window over the input spatial dims."""
    lhs, rhs = ctx.array(0), ctx.array(1)
    labels: ConvDimLabels = ctx.attr("dim_labels")
    window = ctx.attr("window", Window(()))
    fgc = ctx.int_attr("feature_group_count", 1)
    bgc = ctx.int_attr("batch_group_count", 1)
    if fgc <= 0 or bgc <= 0:
        raise _Invalid("feature_group_count and batch_group_count must be positive")
    if fgc > 1 and bgc > 1:
        raise _Invalid("feature_group_count and batch_group_count cannot both exceed 1")
    spatial = len(labels.input_spatial)
    if len(window.dims) != spatial:
        raise _Invalid(f"the window has {len(window.dims)} dimensions but dim_labels has "
                       f"{spatial} spatial dimensions")
    for name, shape in (("lhs", lhs), ("rhs", rhs)):
        if shape.rank != spatial + 2:
            raise _Invalid(f"the {name} {_fmt(shape)} must have rank {spatial + 2} for "
                           f"dim_labels {labels}")
    batch = lhs.dims[labels.input_batch]
    features = lhs.dims[labels.input_feature]
    kernel_in = rhs.dims[labels.kernel_input_feature]
    kernel_out = rhs.dims[labels.kernel_output_feature]
    if kernel_out % bgc:
        raise _Invalid(f"kernel output features {kernel_out} are not a multiple of "
                       f"batch_group_count {bgc}")
    if features % fgc or features // fgc != kernel_in:
        raise _Invalid(f"input features {features} / feature_group_count {fgc} must equal the "
                       f"kernel input features {kernel_in}")
    if kernel_out % fgc:
        raise _Invalid(f"kernel output features {kernel_out} are not a multiple of "
                       f"feature_group_count {fgc}")
    if batch % bgc:
        raise _Invalid(f"input batch {batch} is not a multiple of batch_group_count {bgc}")
    kernel_spatial = [rhs.dims[d] for d in labels.kernel_spatial]
    if kernel_spatial != [w.size for w in window.dims]:
        raise _Invalid(f"window sizes {[w.size for w in window.dims]} do not match the kernel's "
                       f"spatial dimensions {kernel_spatial}")
    spatial_out = _window_output_dims([lhs.dims[d] for d in labels.input_spatial], window,
                                      "the input's spatial dimensions")
    out = [0] * (spatial + 2)
    out[labels.output_batch] = batch // bgc
    out[labels.output_feature] = kernel_out
    for d, size in zip(labels.output_spatial, spatial_out):
        out[d] = size
    return _array(_result_type(ctx, lhs, rhs), out)


@_rule(Opcode.CHOLESKY)
def _cholesky(ctx: _Context) -> Shape:
    a = ctx.array(0)
    if a.rank < 2 or a.dims[-1] != a.dims[-2] or not (a.element_type.is_float
                                                       or a.element_type.is_complex):
        raise _Invalid(f"cholesky needs a float or complex batch of square matrices, not "
                       f"{_fmt(a)}")
    return _array(a.element_type, a.dims)


@_rule(Opcode.TRIANGULAR_SOLVE)
def _triangular_solve(ctx: _Context) -> Shape:
    """triangular-solve(a, b): a is square, batch dims agree; the result is b's shape."""
    a, b = ctx.array(0), ctx.array(1)
    if a.element_type is not b.element_type or a.rank < 2 or b.rank != a.rank:
        raise _Invalid(f"triangular-solve needs a and b of one type and rank >= 2, not "
                       f"{_fmt(a)} and {_fmt(b)}")
    if a.dims[-1] != a.dims[-2]:
        raise _Invalid(f"triangular-solve's a {_fmt(a)} is not square")
    shared = b.dims[-2] if ctx.bool_attr("left_side") else b.dims[-1]
    if shared != a.dims[-1] or a.dims[:-2] != b.dims[:-2]:
        raise _Invalid(f"triangular-solve's a {_fmt(a)} and b {_fmt(b)} do not fit together")
    return _array(b.element_type, b.dims)


@_rule(Opcode.FFT)
def _fft(ctx: _Context) -> Shape:
    """FFT/IFFT keep the shape; RFFT gives complex with last dim n/2+1; IRFFT the inverse."""
    x = ctx.array(0)
    kind = ctx.attr("fft_type")
    length = ctx.dims_attr("fft_length")
    if not 1 <= len(length) <= 3 or x.rank < len(length):
        raise _Invalid(f"fft_length {{{_join(length)}}} needs 1 to 3 entries and an operand of "
                       f"at least that rank")
    if kind in ("FFT", "IFFT"):
        if not x.element_type.is_complex:
            raise _Invalid(f"{kind} needs a complex operand, not {_fmt(x)}")
        return _array(x.element_type, x.dims)
    if kind == "RFFT":
        if x.element_type not in _COMPLEX_OF:
            raise _Invalid(f"RFFT needs an f32 or f64 operand, not {_fmt(x)}")
        if list(x.dims[-len(length):]) != list(length):
            raise _Invalid(f"RFFT needs the innermost dims {list(x.dims[-len(length):])} to "
                           f"equal fft_length {list(length)}")
        last = length[-1] // 2 + 1 if length[-1] else x.dims[-1]
        return _array(_COMPLEX_OF[x.element_type], x.dims[:-1] + (last,))
    if kind == "IRFFT":
        if not x.element_type.is_complex:
            raise _Invalid(f"IRFFT needs a complex operand, not {_fmt(x)}")
        return _array(_COMPLEX_COMPONENT[x.element_type], x.dims[:-1] + (length[-1],))
    raise _Invalid(f"unknown fft_type {kind}")


def _feature_shape(ctx: _Context, x: ArrayShape) -> ArrayShape:
    index = ctx.int_attr("feature_index")
    if not 0 <= index < x.rank or not x.element_type.is_float:
        raise _Invalid(f"feature_index {index} must name a dimension of the float operand "
                       f"{_fmt(x)}")
    return _array(x.element_type, (x.dims[index],))


@_rule(Opcode.BATCH_NORM_TRAINING)
def _batch_norm_training(ctx: _Context) -> Shape:
    x = ctx.array(0)
    feature = _feature_shape(ctx, x)
    return TupleShape((_array(x.element_type, x.dims), feature, feature))


@_rule(Opcode.BATCH_NORM_INFERENCE)
def _batch_norm_inference(ctx: _Context) -> Shape:
    x = ctx.array(0)
    _feature_shape(ctx, x)
    return _array(x.element_type, x.dims)


@_rule(Opcode.BATCH_NORM_GRAD)
def _batch_norm_grad(ctx: _Context) -> Shape:
    x = ctx.array(0)
    feature = _feature_shape(ctx, x)
    return TupleShape((_array(x.element_type, x.dims), feature, feature))


# =============================================================================================
# Control flow.


@_rule(Opcode.FUSION)
def _fusion(ctx: _Context) -> Shape:
    """The fused computation takes the operands and its root is the result."""
    return _check_call_signature(ctx.computation("calls"), ctx.shapes(), "fused computation")


@_rule(Opcode.CALL)
def _call(ctx: _Context) -> Shape:
    key = "to_apply" if "to_apply" in ctx.inst.attrs else "calls"
    return _check_call_signature(ctx.computation(key), ctx.shapes(), "called computation")


@_rule(Opcode.WHILE)
def _while(ctx: _Context) -> Shape:
    """The loop value's shape S: condition S -> pred[], body S -> S; the result is S."""
    state = ctx.shape(0)
    condition = ctx.computation("condition")
    cond_result = _check_call_signature(condition, [state], "condition")
    if not _scalar(ElementType.PRED).compatible(cond_result):
        raise _Invalid(f"condition {condition.name} must return pred[], not {_fmt(cond_result)}")
    body = ctx.computation("body")
    body_result = _check_call_signature(body, [state], "body")
    if not body_result.compatible(state):
        raise _Invalid(f"body {body.name} returns {_fmt(body_result)} but the loop value is "
                       f"{_fmt(state)}")
    return state


@_rule(Opcode.CONDITIONAL)
def _conditional(ctx: _Context) -> Shape:
    """pred form (pred[], true operand, false operand) or branch-index form (s32[], one operand
    per branch); branch i takes operand i + 1 and all branches return one shape."""
    if "branch_computations" in ctx.inst.attrs:
        branches = list(ctx.attr("branch_computations"))
        selector = _scalar(ElementType.S32)
    else:
        branches = [ctx.computation("true_computation"), ctx.computation("false_computation")]
        selector = _scalar(ElementType.PRED)
    if not branches:
        raise _Invalid("conditional needs at least one branch")
    ctx.require_operands(len(branches) + 1)
    if not selector.compatible(ctx.shape(0)):
        raise _Invalid(f"the branch selector must be {_fmt(selector)}, not {_fmt(ctx.shape(0))}")
    results = [_check_call_signature(b, [ctx.shape(i + 1)], f"branch {i}", i + 1)
               for i, b in enumerate(branches)]
    for i, result in enumerate(results):
        if not result.compatible(results[0]):
            raise _Invalid(f"branch {i} ({branches[i].name}) returns {_fmt(result)} but branch 0 "
                           f"({branches[0].name}) returns {_fmt(results[0])}")
    return results[0]


@_rule(Opcode.ASYNC_START)
def _async_start(ctx: _Context) -> Shape:
    """((operands), wrapped result, context...): context elements are taken as declared."""
    result = _check_call_signature(ctx.computation("calls"), ctx.shapes(), "async computation")
    context = _declared_tail(ctx, 2)
    return TupleShape((TupleShape(tuple(ctx.shapes())), result) + context)


@_rule(Opcode.ASYNC_UPDATE)
def _async_update(ctx: _Context) -> Shape:
    return ctx.shape(0)


@_rule(Opcode.ASYNC_DONE, Opcode.ALL_GATHER_DONE, Opcode.COLLECTIVE_PERMUTE_DONE)
def _async_done(ctx: _Context) -> Shape:
    """The value element (index 1) of the matching start's tuple."""
    return _tuple_element(ctx, 1)


@_rule(Opcode.COPY_DONE)
def _copy_done(ctx: _Context) -> Shape:
    return _tuple_element(ctx, 0)


@_rule(Opcode.COPY_START)
def _copy_start(ctx: _Context) -> Shape:
    """(destination, source, u32[] context)."""
    x = ctx.shape(0)
    return TupleShape((x, x, _scalar(ElementType.U32)))


def _tuple_element(ctx: _Context, index: int) -> Shape:
    shape = ctx.shape(0)
    if not isinstance(shape, TupleShape) or len(shape.elements) <= index:
        raise _Invalid(f"{ctx.name} needs the tuple of its -start as operand, not {_fmt(shape)}")
    return shape.elements[index]


def _declared_tail(ctx: _Context, start: int) -> tuple[Shape, ...]:
    """Declared tuple elements from ``start`` on (backend-defined context buffers)."""
    shape = ctx.inst.shape
    return shape.elements[start:] if isinstance(shape, TupleShape) else ()


# =============================================================================================
# Collectives.


def _mode(ctx: _Context, sync_opcode: Opcode | None = None) -> GroupMode:
    try:
        return group_mode((sync_opcode or ctx.opcode).spelling, ctx.inst.channel_id is not None,
                          ctx.inst.use_global_device_ids)
    except ValueError as exc:
        raise _Invalid(str(exc)) from None


def _checked_group_size(ctx: _Context, *, uniform: bool) -> int:
    """Validate replica_groups (SEMANTICS.md §2) and return the participant group size.

    The size is XLA's GetSubgroupSize: the first group's length ({} means all replicas,
    partitions or both), times the partition count in CrossReplicaAndPartition mode.
    """
    mode = _mode(ctx)
    groups = ctx.inst.attrs.get("replica_groups") or ReplicaGroups()
    try:
        validate_replica_groups(mode, groups, ctx.topology, uniform_required=uniform)
    except ReplicaGroupError as exc:
        raise _Invalid(f"{exc} ({mode} mode on {ctx.topology.replica_count} replicas x "
                       f"{ctx.topology.num_partitions} partitions)") from None
    R, P = ctx.topology.replica_count, ctx.topology.num_partitions
    if groups.is_empty:
        return {GroupMode.CROSS_REPLICA: R, GroupMode.CROSS_PARTITION: P,
                GroupMode.CROSS_REPLICA_AND_PARTITION: R * P}[mode]
    size = len(groups.groups[0])
    return size * P if mode is GroupMode.CROSS_REPLICA_AND_PARTITION else size


def _collective_dim(ctx: _Context, shapes: Sequence[ArrayShape]) -> int:
    dims = ctx.dims_attr("dimensions")
    if len(dims) != 1:
        raise _Invalid(f"{ctx.name} needs exactly one dimension, not {{{_join(dims)}}}")
    for i, shape in enumerate(shapes):
        if not 0 <= dims[0] < shape.rank:
            raise _Invalid(f"{ctx.name} dimension {dims[0]} is out of range for operand {i} "
                           f"{_fmt(shape)}")
    return dims[0]


def _declared_result(ctx: _Context, path: Sequence[int]) -> ArrayShape | None:
    """The declared array at a tuple path, or None if the declared shape has no such array."""
    shape: Shape = ctx.inst.shape
    for i in path:
        if not isinstance(shape, TupleShape) or i >= len(shape.elements):
            return None
        shape = shape.elements[i]
    return shape if isinstance(shape, ArrayShape) and shape.is_array else None


def _shard_count(ctx: _Context, group_size: int, operand: ArrayShape, d: int,
                 declared: ArrayShape | None, *, gather: bool) -> int:
    """The shard count the declared result implies, which must equal the group size.

    XLA skips the comparison when the group size is 1 because the replica and partition counts
    were left at their defaults; we skip it only then (a one-device topology), and take the
    declared count, so singleton groups on a larger topology still have to match.
    """
    if declared is None or declared.rank != operand.rank:
        return group_size
    big, small = (declared, operand) if gather else (operand, declared)
    if small.dims[d] == 0:
        return group_size
    shards = -(-big.dims[d] // small.dims[d])
    if shards == group_size:
        return shards
    if group_size == 1 and ctx.topology.num_devices == 1:
        return shards
    direction = "output" if gather else "operand"
    raise _Invalid(f"{ctx.name} shard count {shards} ({direction} dimension {d} is "
                   f"{big.dims[d]}, the {'operand' if gather else 'output'}'s is "
                   f"{small.dims[d]}) does not equal the replica group size {group_size}")


@_rule(Opcode.ALL_REDUCE, Opcode.ALL_REDUCE_START)
def _all_reduce(ctx: _Context) -> Shape:
    """The operands (a tuple if several); groups may differ in size; to_apply is
    (T[], T[]) -> T[] for the operands' element type."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    _checked_group_size(ctx, uniform=False)
    _check_binary_scalar_reducer(ctx, sorted({s.element_type for s in shapes}, key=str))
    return _tuple_or_single(shapes)


@_rule(Opcode.ALL_REDUCE_DONE)
def _all_reduce_done(ctx: _Context) -> Shape:
    return ctx.shape(0)


def _all_gather_shapes(ctx: _Context, declared_path: Callable[[int], list[int]]) -> list[Shape]:
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    n = _checked_group_size(ctx, uniform=True)
    d = _collective_dim(ctx, shapes)
    shards = _shard_count(ctx, n, shapes[0], d, _declared_result(ctx, declared_path(len(shapes))),
                          gather=True)
    return [_array(s.element_type, s.dims[:d] + (s.dims[d] * shards,) + s.dims[d + 1:])
            for s in shapes]


@_rule(Opcode.ALL_GATHER)
def _all_gather(ctx: _Context) -> Shape:
    """Dimension d multiplied by the group size (a tuple if several operands)."""
    results = _all_gather_shapes(ctx, lambda n: [] if n == 1 else [0])
    return _tuple_or_single(results)


@_rule(Opcode.ALL_GATHER_START)
def _all_gather_start(ctx: _Context) -> Shape:
    """(operand(s), all-gather result(s)), each a tuple when there are several operands."""
    results = _all_gather_shapes(ctx, lambda n: [1] if n == 1 else [1, 0])
    return TupleShape((_tuple_or_single(ctx.shapes()), _tuple_or_single(results)))


@_rule(Opcode.REDUCE_SCATTER)
def _reduce_scatter(ctx: _Context) -> Shape:
    """Dimension d divided by the group size, which must divide it."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    n = _checked_group_size(ctx, uniform=True)
    d = _collective_dim(ctx, shapes)
    _check_binary_scalar_reducer(ctx, sorted({s.element_type for s in shapes}, key=str))
    declared = _declared_result(ctx, [] if len(shapes) == 1 else [0])
    shards = _shard_count(ctx, n, shapes[0], d, declared, gather=False)
    results = []
    for s in shapes:
        if s.dims[d] % shards:
            raise _Invalid(f"reduce-scatter dimension {d} of {_fmt(s)} is not divisible by the "
                           f"shard count {shards}")
        results.append(_array(s.element_type, s.dims[:d] + (s.dims[d] // shards,) + s.dims[d + 1:]))
    return _tuple_or_single(results)


@_rule(Opcode.ALL_TO_ALL)
def _all_to_all(ctx: _Context) -> Shape:
    """Array form (dimensions={d}): one operand whose dim d the group size divides; result is
    the operand's shape. Tuple form: one operand per group member, all of one shape."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    n = _checked_group_size(ctx, uniform=True)
    if "dimensions" in ctx.inst.attrs:
        ctx.require_operands(1)
        d = _collective_dim(ctx, shapes)
        if shapes[0].dims[d] % n:
            raise _Invalid(f"all-to-all dimension {d} of {_fmt(shapes[0])} is not divisible by "
                           f"the replica group size {n}")
        return shapes[0]
    if len(shapes) != n:
        raise _Invalid(f"tuple all-to-all has {len(shapes)} operands but the replica group "
                       f"size is {n}")
    for i, s in enumerate(shapes):
        if not s.compatible(shapes[0]):
            raise _Invalid(f"all-to-all operand {i} {_fmt(s)} differs from operand 0 "
                           f"{_fmt(shapes[0])}")
    return TupleShape(tuple(shapes))


@_rule(Opcode.RAGGED_ALL_TO_ALL)
def _ragged_all_to_all(ctx: _Context) -> Shape:
    """The output buffer operand (operand 1) is the result."""
    _checked_group_size(ctx, uniform=True)
    return ctx.array(1, "the output buffer")


@_rule(Opcode.COLLECTIVE_BROADCAST)
def _collective_broadcast(ctx: _Context) -> Shape:
    """The operands (a tuple if several), like all-reduce."""
    ctx.require_operands(at_least=1)
    _checked_group_size(ctx, uniform=True)
    return _tuple_or_single(ctx.arrays())


def _is_inplace_permute(ctx: _Context) -> bool:
    """XLA's in-place collective-permute: (input buffer, output buffer, input offsets, output
    offsets), the offsets being tuples; four plain arrays are a combined permute instead."""
    return ctx.operand_count == 4 and not all(
        isinstance(s, ArrayShape) for s in ctx.shapes())


def _check_source_target_pairs(ctx: _Context, sync_opcode: Opcode) -> None:
    """Ids in range for the mode (replicas or partitions; skipped when there is one, as XLA
    does) and each id at most once as a source and once as a target."""
    mode = _mode(ctx, sync_opcode)
    pairs = ctx.inst.attrs.get("source_target_pairs") or SourceTargetPairs()
    n = ctx.topology.replica_count if mode is GroupMode.CROSS_REPLICA \
        else ctx.topology.num_partitions
    ids = [i for pair in pairs.pairs for i in pair]
    limit = n if n > 1 else max(ids + [0]) + 1
    try:
        if _is_inplace_permute(ctx):
            for i in ids:
                if not 0 <= i < limit:
                    raise ReplicaGroupError(f"source-target id {i} is out of range 0..{limit - 1}")
        else:
            pairs.validate(limit)
    except ReplicaGroupError as exc:
        raise _Invalid(f"{exc} ({mode} mode)") from None


@_rule(Opcode.COLLECTIVE_PERMUTE)
def _collective_permute(ctx: _Context) -> Shape:
    """The operands (a tuple if several); the 4-operand in-place form returns operand 1."""
    ctx.require_operands(at_least=1)
    _check_source_target_pairs(ctx, Opcode.COLLECTIVE_PERMUTE)
    if _is_inplace_permute(ctx):
        return ctx.shape(1)
    return _tuple_or_single(ctx.arrays())


@_rule(Opcode.COLLECTIVE_PERMUTE_START)
def _collective_permute_start(ctx: _Context) -> Shape:
    """(operand, result, context...) with result shaped like the operand; the u32[] context
    elements are backend-defined and taken as declared (XLA does the same)."""
    ctx.require_operands(at_least=1)
    _check_source_target_pairs(ctx, Opcode.COLLECTIVE_PERMUTE)
    if _is_inplace_permute(ctx):
        value = (ctx.shape(0), ctx.shape(1))
    else:
        operand = _tuple_or_single(ctx.arrays())
        value = (operand, operand)
    return TupleShape(value + _declared_tail(ctx, 2))


# =============================================================================================
# Sources and the rest.


@_rule(Opcode.PARAMETER)
def _parameter(ctx: _Context) -> Shape:
    """Whatever is declared; callers check that they pass matching operands."""
    if ctx.inst.parameter_number is None or ctx.inst.parameter_number < 0:
        raise _Invalid("a parameter needs a non-negative parameter number")
    return ctx.inst.shape


@_rule(Opcode.CONSTANT)
def _constant(ctx: _Context) -> Shape:
    if ctx.inst.literal is None:
        raise _Invalid("the constant has no literal")
    return ctx.inst.literal.shape


@_rule(Opcode.IOTA)
def _iota(ctx: _Context) -> Shape:
    out = ctx.declared_array()
    if out.rank == 0:
        raise _Invalid("iota needs a result of rank >= 1")
    d = ctx.int_attr("iota_dimension")
    if not 0 <= d < out.rank:
        raise _Invalid(f"iota_dimension {d} is out of range for {_fmt(out)}")
    return out


@_rule(Opcode.PARTITION_ID, Opcode.REPLICA_ID)
def _device_id(ctx: _Context) -> Shape:
    return _scalar(ElementType.U32)


@_rule(Opcode.AFTER_ALL)
def _after_all(ctx: _Context) -> Shape:
    for i, shape in enumerate(ctx.shapes()):
        if not shape.is_token:
            raise _Invalid(f"after-all operand {i} must be a token, not {_fmt(shape)}")
    return ArrayShape(ElementType.TOKEN, ())


@_rule(Opcode.ADD_DEPENDENCY)
def _add_dependency(ctx: _Context) -> Shape:
    if not ctx.shape(1).is_token:
        raise _Invalid(f"add-dependency's operand 1 must be a token, not {_fmt(ctx.shape(1))}")
    return ctx.shape(0)


@_rule(Opcode.GET_DIMENSION_SIZE)
def _get_dimension_size(ctx: _Context) -> Shape:
    x = ctx.array(0)
    _check_dim_list(ctx.dims_attr("dimensions"), x.rank, "get-dimension-size dimensions")
    return _scalar(ElementType.S32)


@_rule(Opcode.SET_DIMENSION_SIZE)
def _set_dimension_size(ctx: _Context) -> Shape:
    x = ctx.array(0)
    _check_dim_list(ctx.dims_attr("dimensions"), x.rank, "set-dimension-size dimensions")
    if not _scalar(ElementType.S32).compatible(ctx.shape(1)):
        raise _Invalid(f"set-dimension-size's size must be s32[], not {_fmt(ctx.shape(1))}")
    return _array(x.element_type, x.dims)


@_rule(Opcode.RNG)
def _rng(ctx: _Context) -> Shape:
    """rng(a, b): scalar parameters of the declared array's element type."""
    ctx.require_operands(2)
    out = ctx.declared_array()
    for i in range(2):
        shape = ctx.shape(i)
        if not _scalar(out.element_type).compatible(shape):
            raise _Invalid(f"rng parameter {i} must be {out.element_type}[], not {_fmt(shape)}")
    distribution = ctx.attr("distribution")
    if distribution not in ("rng_uniform", "rng_normal"):
        raise _Invalid(f"rng distribution {distribution} is not rng_uniform or rng_normal")
    return out


@_rule(Opcode.RNG_BIT_GENERATOR)
def _rng_bit_generator(ctx: _Context) -> Shape:
    """(new state shaped like the state operand, declared random bits array)."""
    state = ctx.array(0, "the rng state")
    bits = _declared_result(ctx, [1])
    if bits is None or not isinstance(ctx.inst.shape, TupleShape) or len(
            ctx.inst.shape.elements) != 2:
        raise _Invalid("rng-bit-generator must return (state, bits)")
    return TupleShape((state, bits))


@_rule(Opcode.RNG_GET_AND_UPDATE_STATE)
def _rng_state(ctx: _Context) -> Shape:
    return _array(ElementType.U64, (2,))


@_rule(Opcode.CUSTOM_CALL, Opcode.INFEED, Opcode.OUTFEED, Opcode.RECV, Opcode.RECV_DONE,
       Opcode.SEND, Opcode.SEND_DONE)
def _declared(ctx: _Context) -> Shape:
    """Opaque to shape inference: the declared shape is trusted."""
    return ctx.inst.shape


# =============================================================================================
# Public API.


def _default_topology(inst: HloInstruction) -> Topology:
    module = inst.parent.parent if inst.parent is not None else None
    if module is None:
        return Topology()
    return Topology(module.replica_count, module.num_partitions)


def infer_shape(inst: HloInstruction, topology: Topology | None = None) -> Shape:
    """The shape ``inst`` must have (no layouts), per XLA's shape inference.

    Shapes that only the instruction itself can tell (reshape and broadcast dims, convert's
    element type, iota, parameters, custom-calls...) come from its declared shape, checked
    against the operands. Collectives validate their replica groups on ``topology`` (default:
    the module header's replica_count x num_partitions). Raises HloCheckError naming ``inst``.
    """
    rule = _RULES.get(inst.opcode)
    if rule is None:
        raise _error_for(inst, f"no shape rule for {inst.opcode.spelling}")
    ctx = _Context(inst, topology or _default_topology(inst))
    try:
        return rule(ctx)
    except _Invalid as exc:
        raise _error_for(inst, str(exc)) from None


def _check_declared_shape(shape: Shape) -> str | None:
    """What is wrong with a declared shape on its own (negative dims, a bad layout), if anything."""
    for leaf in shape.leaves():
        if not leaf.element_type.is_array_type and leaf.rank:
            return f"{leaf} has dimensions but {leaf.element_type} values cannot"
        for size, dynamic in zip(leaf.dims, leaf.dynamic):
            if size < 0 and not (size == UNBOUNDED and dynamic):
                return f"{leaf} has a negative dimension"
        if leaf.layout is not None and leaf.rank and sorted(
                leaf.layout.minor_to_major) != list(range(leaf.rank)):
            return f"the layout of {leaf} does not list each of its {leaf.rank} dimensions once"
    return None


def check_instruction(inst: HloInstruction, topology: Topology | None = None) -> None:
    """Verify one instruction: operand count, a well-formed declared shape that matches the
    inferred one (layouts ignored), and its opcode's rules (called-computation signatures,
    replica groups). Raises HloCheckError naming the instruction and its computation."""
    arity = inst.opcode.arity
    if arity != VARIADIC and len(inst.operands) != arity:
        raise _error_for(inst, f"{inst.opcode.spelling} expects {arity} operand"
                               f"{'s' * (arity != 1)} but has {len(inst.operands)}")
    problem = _check_declared_shape(inst.shape)
    if problem is not None:
        raise _error_for(inst, problem)
    inferred = infer_shape(inst, topology)
    if not inferred.compatible(inst.shape):
        raise _error_for(inst, f"declared shape {_fmt(inst.shape)} does not match the inferred "
                               f"shape {_fmt(inferred)}")


def _check_structure(comp: HloComputation, module: HloModule) -> None:
    """Root, parameter numbering, unique names, operands defined earlier in the same
    computation. Names may repeat across computations: XLA's text format scopes them."""
    if comp.root is None or comp.root not in comp.instructions:
        raise HloCheckError(f"computation {comp.name} has no root instruction",
                            computation=comp.name)
    numbers = sorted(p.parameter_number for p in comp.instructions
                     if p.opcode is Opcode.PARAMETER)
    if numbers != list(range(len(numbers))):
        raise HloCheckError(f"parameters must be numbered 0..{len(numbers) - 1} without gaps or "
                            f"repeats, but are numbered {numbers}", computation=comp.name)
    seen: set[HloInstruction] = set()
    names: set[str] = set()
    for inst in comp.instructions:
        if inst.name in names:
            raise _error_for(inst, f"the name %{inst.name} is used twice in {comp.name}")
        names.add(inst.name)
        for operand in inst.operands:
            if operand.parent is not comp:
                raise _error_for(inst, f"operand %{operand.name} belongs to another computation")
            if operand not in seen:
                raise _error_for(inst, f"operand %{operand.name} is used before it is defined")
        for called in inst.called_computations:
            if called not in module.computations:
                raise _error_for(inst, f"calls computation {called.name}, which is not in "
                                       f"module {module.name}")
        seen.add(inst)


def check_module(module: HloModule, topology: Topology | None = None) -> None:
    """Verify every computation and instruction of ``module`` (XLA's HloVerifier, layouts
    ignored). ``topology`` defaults to the header's replica_count x num_partitions. Raises
    HloCheckError for the first problem found, in text order."""
    if module.entry is None:
        raise HloCheckError(f"module {module.name} has no entry computation")
    topology = topology or Topology(module.replica_count, module.num_partitions)
    for comp in module.computations:
        _check_structure(comp, module)
        for inst in comp.instructions:
            check_instruction(inst, topology)
