"""Shape rules of the ops that make, move or regroup data without computing on it: parameter,
constant, iota, broadcast, reshape, transpose, slice, concatenate, pad, reverse, bitcast, tuples,
tokens and dimension sizes.
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import array_shape, check_dim_list, join
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape, scalar

RULES = RuleTable("shape")


@RULES.rule(Opcode.PARAMETER)
def _parameter(ctx: Context) -> Shape:
    """Whatever is declared; callers check that they pass matching operands."""
    if ctx.inst.parameter_number is None or ctx.inst.parameter_number < 0:
        raise Invalid("a parameter needs a non-negative parameter number")
    return ctx.declared()


@RULES.rule(Opcode.CONSTANT)
def _constant(ctx: Context) -> Shape:
    if ctx.inst.literal is None:
        raise Invalid("the constant has no literal")
    return ctx.inst.literal.shape


@RULES.rule(Opcode.IOTA)
def _iota(ctx: Context) -> Shape:
    """The declared array: rank >= 1, iota_dimension in range, an integral, floating-point or
    complex element type (XLA's HandleIota: "got PRED")."""
    out = ctx.declared_array()
    if out.rank == 0:
        raise Invalid("iota needs a result of rank >= 1")
    d = ctx.int_attr("iota_dimension")
    if not 0 <= d < out.rank:
        raise Invalid(f"iota_dimension {d} is out of range for {fmt(out)}")
    kind = out.element_type
    if not (kind.is_integral or kind.is_float or kind.is_complex):
        raise Invalid(f"iota supports integral, floating-point or complex element types, not "
                      f"{kind}")
    return out


@RULES.rule(Opcode.BROADCAST)
def _broadcast(ctx: Context) -> Shape:
    """Output dims are declared; ``dimensions[i]`` is the output dim operand dim i becomes, and
    the two sizes must be equal (XLA's verifier; no degenerate-dim stretching in HLO). Without
    ``dimensions=`` the mapping is empty, as XLA's parser defaults it (a scalar broadcast)."""
    x = ctx.array(0)
    out = ctx.declared_array()
    mapping = ctx.dims_attr("dimensions", ())
    if len(mapping) != x.rank:
        raise Invalid(f"broadcast dimensions {{{join(mapping)}}} has {len(mapping)} entries "
                      f"but the operand has rank {x.rank}")
    check_dim_list(mapping, out.rank, "broadcast dimensions")
    for i, d in enumerate(mapping):
        if out.dims[d] != x.dims[i]:
            raise Invalid(f"broadcast maps operand dimension {i} (size {x.dims[i]}) to output "
                          f"dimension {d} of size {out.dims[d]}")
    return array_shape(x.element_type, out.dims)


@RULES.rule(Opcode.RESHAPE)
def _reshape(ctx: Context) -> Shape:
    """Declared dims holding the operand's element count."""
    x = ctx.array(0)
    out = ctx.declared_array()
    if out.element_count != x.element_count:
        raise Invalid(f"reshape from {fmt(x)} ({x.element_count} elements) to "
                      f"{list(out.dims)} ({out.element_count} elements) changes the element "
                      f"count")
    return array_shape(x.element_type, out.dims)


@RULES.rule(Opcode.DYNAMIC_RESHAPE)
def _dynamic_reshape(ctx: Context) -> Shape:
    """dynamic-reshape(x, size_0, ...): one s32[] size per output dim; declared dims are bounds."""
    ctx.require_operands(at_least=1)
    x = ctx.array(0)
    out = ctx.declared_array()
    if ctx.operand_count - 1 != out.rank:
        raise Invalid(f"dynamic-reshape to rank {out.rank} needs {out.rank} size operands but "
                      f"has {ctx.operand_count - 1}")
    for i in range(1, ctx.operand_count):
        if not scalar(ElementType.S32).compatible(ctx.shape(i)):
            raise Invalid(f"dynamic-reshape size operand {i} must be s32[], not "
                          f"{fmt(ctx.shape(i))}")
    return array_shape(x.element_type, out.dims)


@RULES.rule(Opcode.TRANSPOSE)
def _transpose(ctx: Context) -> Shape:
    """Output dim i is operand dim ``dimensions[i]``."""
    x = ctx.array(0)
    perm = ctx.dims_attr("dimensions")
    if sorted(perm) != list(range(x.rank)):
        raise Invalid(f"transpose dimensions {{{join(perm)}}} are not a permutation of the "
                      f"operand's {x.rank} dimensions")
    return array_shape(x.element_type, [x.dims[p] for p in perm])


@RULES.rule(Opcode.SLICE)
def _slice(ctx: Context) -> Shape:
    """Per dim: 0 <= start <= limit <= size, stride >= 1; size ceil((limit - start) / stride)."""
    x = ctx.array(0)
    spec = ctx.attr("slice")
    if len(spec) != x.rank:
        raise Invalid(f"slice has {len(spec)} entries but the operand has rank {x.rank}")
    out = []
    for i, (s, size) in enumerate(zip(spec, x.dims)):
        if s.stride < 1:
            raise Invalid(f"slice dimension {i} has stride {s.stride}; strides must be >= 1")
        if not 0 <= s.start <= s.limit <= size:
            raise Invalid(f"slice dimension {i} is [{s.start}:{s.limit}], outside [0:{size}] or "
                          f"with start after limit")
        out.append(-(-(s.limit - s.start) // s.stride))
    return array_shape(x.element_type, out)


@RULES.rule(Opcode.CONCATENATE)
def _concatenate(ctx: Context) -> Shape:
    """Operands agree on type, rank and every dim but ``dimensions={d}``, which is summed."""
    ctx.require_operands(at_least=1)
    shapes = ctx.arrays()
    dims = ctx.dims_attr("dimensions")
    if len(dims) != 1:
        raise Invalid(f"concatenate needs exactly one dimension, not {{{join(dims)}}}")
    d = dims[0]
    first = shapes[0]
    if not 0 <= d < first.rank:
        raise Invalid(f"concatenate dimension {d} is out of range for rank {first.rank}")
    for i, shape in enumerate(shapes[1:], 1):
        if shape.rank != first.rank or shape.element_type is not first.element_type or any(
                a != b for k, (a, b) in enumerate(zip(shape.dims, first.dims)) if k != d):
            raise Invalid(f"concatenate operand {i} {fmt(shape)} does not match operand 0 "
                          f"{fmt(first)} outside dimension {d}")
    out = list(first.dims)
    out[d] = sum(s.dims[d] for s in shapes)
    return array_shape(first.element_type, out)


@RULES.rule(Opcode.PAD)
def _pad(ctx: Context) -> Shape:
    """pad(x, v): size low + high + n + (n - 1) * interior per dim; low/high may be negative,
    interior may not, and no dim may end up negative."""
    x, value = ctx.array(0), ctx.array(1)
    if value.rank != 0 or value.element_type is not x.element_type:
        raise Invalid(f"the padding value must be a {x.element_type} scalar, not {fmt(value)}")
    padding = ctx.attr("padding")
    if len(padding) != x.rank:
        raise Invalid(f"padding has {len(padding)} entries but the operand has rank {x.rank}")
    out = []
    for i, (p, n) in enumerate(zip(padding, x.dims)):
        if p.interior < 0:
            raise Invalid(f"padding dimension {i} has negative interior padding {p.interior}")
        size = p.low + p.high + n + max(n - 1, 0) * p.interior
        if size < 0:
            raise Invalid(f"padding dimension {i} ({p.low}_{p.high}_{p.interior}) makes size "
                          f"{n} negative ({size})")
        out.append(size)
    return array_shape(x.element_type, out)


@RULES.rule(Opcode.REVERSE)
def _reverse(ctx: Context) -> Shape:
    x = ctx.array(0)
    check_dim_list(ctx.dims_attr("dimensions"), x.rank, "reverse dimensions")
    return array_shape(x.element_type, x.dims)


@RULES.rule(Opcode.COPY, Opcode.DOMAIN, Opcode.OPTIMIZATION_BARRIER)
def _same_as_operand(ctx: Context) -> Shape:
    return ctx.shape(0)


@RULES.rule(Opcode.BITCAST)
def _bitcast(ctx: Context) -> Shape:
    """The declared shape. XLA's HandleBitcast compares byte sizes only when the verifier is
    layout-sensitive; this checker ignores layouts, so any declared shape is accepted."""
    return ctx.declared()


@RULES.rule(Opcode.TUPLE)
def _tuple(ctx: Context) -> Shape:
    return TupleShape(tuple(ctx.shapes()))


@RULES.rule(Opcode.GET_TUPLE_ELEMENT)
def _get_tuple_element(ctx: Context) -> Shape:
    shape = ctx.shape(0)
    index = ctx.int_attr("index")
    if not isinstance(shape, TupleShape):
        raise Invalid(f"get-tuple-element needs a tuple operand, not {fmt(shape)}")
    if not 0 <= index < len(shape.elements):
        raise Invalid(f"index {index} is out of range for a tuple of {len(shape.elements)} "
                      f"elements")
    return shape.elements[index]


@RULES.rule(Opcode.AFTER_ALL)
def _after_all(ctx: Context) -> Shape:
    """A token, whatever the operands are: XLA's HandleAfterAll does not look at them."""
    return ArrayShape(ElementType.TOKEN, ())


@RULES.rule(Opcode.ADD_DEPENDENCY)
def _add_dependency(ctx: Context) -> Shape:
    if not ctx.shape(1).is_token:
        raise Invalid(f"add-dependency's operand 1 must be a token, not {fmt(ctx.shape(1))}")
    return ctx.shape(0)


@RULES.rule(Opcode.GET_DIMENSION_SIZE)
def _get_dimension_size(ctx: Context) -> Shape:
    x = ctx.array(0)
    check_dim_list(ctx.dims_attr("dimensions"), x.rank, "get-dimension-size dimensions")
    return scalar(ElementType.S32)


@RULES.rule(Opcode.SET_DIMENSION_SIZE)
def _set_dimension_size(ctx: Context) -> Shape:
    x = ctx.array(0)
    check_dim_list(ctx.dims_attr("dimensions"), x.rank, "set-dimension-size dimensions")
    if not scalar(ElementType.S32).compatible(ctx.shape(1)):
        raise Invalid(f"set-dimension-size's size must be s32[], not {fmt(ctx.shape(1))}")
    return array_shape(x.element_type, x.dims)
