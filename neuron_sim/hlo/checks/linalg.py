"""Shape rules of linear algebra: dot, ragged-dot, convolution, cholesky, triangular-solve and
fft (the batch norms have their own module, ``batch_norm.py``). The declared result element type
is the preferred element type, narrower or wider than the inputs (XLA's shape_inference_test
DotWithNarrowerPreferredElementType).
"""

from __future__ import annotations

from neuron_sim.hlo.attributes import ConvDimLabels, Window
from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import (COMPLEX_COMPONENT, COMPLEX_OF, array_shape,
                                           check_dim_list, join, window_output_dims)
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape

RULES = RuleTable("linalg")


def _result_type(ctx: Context, lhs: ArrayShape, rhs: ArrayShape) -> ElementType:
    """The declared element type, XLA's preferred_element_type, which may be narrower than
    integer inputs too (XLA removed that rule: shape_inference_test's
    DotWithNarrowerPreferredElementType infers s8 from s8 x s16); with none declared (an
    instruction being built), the wider operand type, as XLA picks without a preferred type."""
    if ctx.inst.shape is None:
        return max((lhs.element_type, rhs.element_type), key=lambda et: et.bits)
    return ctx.declared_array().element_type


@RULES.rule(Opcode.DOT)
def _dot(ctx: Context) -> Shape:
    """dot: batch dims, then lhs free dims, then rhs free dims (XLA's DotGeneral). A sparse dot
    (``sparsity=L.1@2:4``) stores n of every m elements along its sparse contracting dimension
    and takes one metadata operand per descriptor after lhs and rhs (XLA's HandleDot,
    InferDotOpShape, InferSparseDotMetadataShape)."""
    sparsity = ctx.inst.attrs.get("sparsity", ())
    if ctx.operand_count != 2 + len(sparsity):
        raise Invalid(f"dot expects {2 + len(sparsity)} operands but has {ctx.operand_count}")
    return _dot_shape(ctx, ctx.array(0), ctx.array(1), sparsity)


@RULES.rule(Opcode.SCALED_DOT)
def _scaled_dot(ctx: Context) -> Shape:
    """scaled-dot(lhs, rhs, lhs_scale, rhs_scale): the dot of lhs and rhs under the same
    dimension attributes (XLA checks a scaled dot's shape with InferDotOpShape), each scale of
    its operand's rank (ShapeVerifier::HandleScaledDot), e.g. f8e4m3fn[32,256] scaled by
    f8e8m0fnu[32,8] (one scale per block of 32 along the contracting dimension)."""
    if ctx.operand_count != 4:
        raise Invalid(f"scaled-dot expects 4 operands but has {ctx.operand_count}")
    lhs, rhs = ctx.array(0), ctx.array(1)
    for side, operand, scale in (("lhs", lhs, ctx.array(2)), ("rhs", rhs, ctx.array(3))):
        if scale.rank != operand.rank:
            raise Invalid(f"the {side} scale {fmt(scale)} must have the rank of the {side} "
                          f"{fmt(operand)}")
    return _dot_shape(ctx, lhs, rhs, ())


def _dot_shape(ctx: Context, lhs: ArrayShape, rhs: ArrayShape, sparsity) -> Shape:
    """The result of a dot of ``lhs`` and ``rhs`` under the instruction's dimension attributes
    (and sparsity descriptors, whose metadata operands follow lhs and rhs)."""
    lb, rb = ctx.dims_attr("lhs_batch_dims", ()), ctx.dims_attr("rhs_batch_dims", ())
    lc, rc = ctx.dims_attr("lhs_contracting_dims", ()), ctx.dims_attr("rhs_contracting_dims", ())
    if len(lb) != len(rb):
        raise Invalid(f"dot has {len(lb)} lhs batch dims but {len(rb)} rhs batch dims")
    if len(lc) != len(rc):
        raise Invalid(f"dot has {len(lc)} lhs contracting dims but {len(rc)} rhs contracting "
                      f"dims")
    check_dim_list(lb + lc, lhs.rank, "lhs batch and contracting dims")
    check_dim_list(rb + rc, rhs.rank, "rhs batch and contracting dims")
    # (n, m) of the sparse dimension of each side, keyed by (side, dimension).
    ratio = {(d.index, d.dimension): (d.n, d.m) for d in sparsity}
    for l, r in zip(lc, rc):
        lhs_size, rhs_size = lhs.dims[l], rhs.dims[r]
        for side, dim in ((0, l), (1, r)):
            if (side, dim) in ratio:
                n, m = ratio[side, dim]
                lhs_size, rhs_size = ((lhs_size * m, rhs_size * n) if side == 0
                                      else (lhs_size * n, rhs_size * m))
        if lhs_size != rhs_size:
            sparse = (0, l) in ratio or (1, r) in ratio
            raise Invalid(f"contracting dimension {l} of lhs {fmt(lhs)} and {r} of rhs "
                          f"{fmt(rhs)} have different sizes"
                          + (" for the sparsity descriptor's ratio" if sparse else ""))
    for l, r in zip(lb, rb):
        if lhs.dims[l] != rhs.dims[r]:
            raise Invalid(f"batch dimension {l} of lhs {fmt(lhs)} and {r} of rhs {fmt(rhs)} "
                          f"have different sizes")
    for i, descriptor in enumerate(sparsity):
        _check_sparse_metadata(ctx, descriptor, (lhs, rhs)[descriptor.index], (lc, rc)[
            descriptor.index], 2 + i)
    out = [lhs.dims[d] for d in lb]
    out += [s for d, s in enumerate(lhs.dims) if d not in lb and d not in lc]
    out += [s for d, s in enumerate(rhs.dims) if d not in rb and d not in rc]
    return array_shape(_result_type(ctx, lhs, rhs), out)


def _check_sparse_metadata(ctx: Context, descriptor, operand: ArrayShape,
                           contracting: tuple[int, ...], index: int) -> None:
    """The metadata operand of one sparsity descriptor has XLA's InferSparseDotMetadataShape:
    the sparse operand's dims, with the sparse (contracting) dimension replaced by the number of
    u16 words holding the index bits of its groups (log2(m) bits per stored value, n values
    per group of m)."""
    side = "lhs" if descriptor.index == 0 else "rhs"
    if descriptor.dimension not in contracting:
        raise Invalid(f"sparse dimension {descriptor.dimension} of the {side} is not a "
                      f"contracting dimension")
    bits_per_group = descriptor.n * max(1, (descriptor.m - 1).bit_length())
    groups_per_word = -(-16 // bits_per_group)
    groups = -(-operand.dims[descriptor.dimension] // descriptor.n)
    dims = list(operand.dims)
    dims[descriptor.dimension] = -(-groups // groups_per_word)
    expected = ArrayShape(ElementType.U16, tuple(dims))
    actual = ctx.array(index)
    if not expected.compatible(actual):
        raise Invalid(f"the sparse dot metadata must have shape {fmt(expected)}, but operand "
                      f"{index} has shape {fmt(actual)}")


@RULES.rule(Opcode.RAGGED_DOT)
def _ragged_dot(ctx: Context) -> Shape:
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
        raise Invalid(f"ragged-dot needs exactly one lhs_ragged_dims entry, not "
                      f"{{{join(ragged)}}}")
    if not groups.element_type.is_integral or groups.rank < 1:
        raise Invalid(f"group_sizes must be an integral array, not {fmt(groups)}")
    check_dim_list(ragged, lhs.rank, "lhs_ragged_dims")
    check_dim_list(rb + rc + group_dims, rhs.rank, "rhs batch, contracting and group dims")
    check_dim_list(lb + lc, lhs.rank, "lhs batch and contracting dims")
    non_contracting = ragged[0] not in lc and ragged[0] not in lb
    if non_contracting != (len(group_dims) == 1):
        raise Invalid("rhs_group_dims must have one entry exactly when the lhs ragged "
                      "dimension is a non-contracting dimension")
    g = rhs.dims[group_dims[0]] if non_contracting else groups.dims[-1]
    if groups.dims[-1] != g:
        raise Invalid(f"group_sizes {fmt(groups)} must end in the group count {g}")
    for l, r in list(zip(lc, rc)) + list(zip(lb, rb)):
        if lhs.dims[l] != rhs.dims[r]:
            raise Invalid(f"lhs dimension {l} and rhs dimension {r} have different sizes")
    out = [lhs.dims[d] for d in lb]
    out += [s for d, s in enumerate(lhs.dims) if d not in lb and d not in lc]
    out += [s for d, s in enumerate(rhs.dims)
            if d not in rb and d not in rc and d not in group_dims]
    if ragged[0] in lc:
        out = [g] + out
    return array_shape(_result_type(ctx, lhs, rhs), out)


@RULES.rule(Opcode.CONVOLUTION)
def _convolution(ctx: Context) -> Shape:
    """XLA's ConvolveShape: output batch = input batch / batch_group_count, output feature =
    kernel output features, spatial dims from the window over the input spatial dims."""
    lhs, rhs = ctx.array(0), ctx.array(1)
    labels: ConvDimLabels = ctx.attr("dim_labels")
    window = ctx.attr("window", Window(()))
    fgc = ctx.int_attr("feature_group_count", 1)
    bgc = ctx.int_attr("batch_group_count", 1)
    if fgc <= 0 or bgc <= 0:
        raise Invalid("feature_group_count and batch_group_count must be positive")
    if fgc > 1 and bgc > 1:
        raise Invalid("feature_group_count and batch_group_count cannot both exceed 1")
    spatial = len(labels.input_spatial)
    if len(window.dims) != spatial:
        raise Invalid(f"the window has {len(window.dims)} dimensions but dim_labels has "
                      f"{spatial} spatial dimensions")
    for name, shape in (("lhs", lhs), ("rhs", rhs)):
        if shape.rank != spatial + 2:
            raise Invalid(f"the {name} {fmt(shape)} must have rank {spatial + 2} for "
                          f"dim_labels {labels}")
    batch = lhs.dims[labels.input_batch]
    features = lhs.dims[labels.input_feature]
    kernel_in = rhs.dims[labels.kernel_input_feature]
    kernel_out = rhs.dims[labels.kernel_output_feature]
    if kernel_out % bgc:
        raise Invalid(f"kernel output features {kernel_out} are not a multiple of "
                      f"batch_group_count {bgc}")
    if features % fgc or features // fgc != kernel_in:
        raise Invalid(f"input features {features} / feature_group_count {fgc} must equal the "
                      f"kernel input features {kernel_in}")
    if kernel_out % fgc:
        raise Invalid(f"kernel output features {kernel_out} are not a multiple of "
                      f"feature_group_count {fgc}")
    if batch % bgc:
        raise Invalid(f"input batch {batch} is not a multiple of batch_group_count {bgc}")
    kernel_spatial = [rhs.dims[d] for d in labels.kernel_spatial]
    if kernel_spatial != [w.size for w in window.dims]:
        raise Invalid(f"window sizes {[w.size for w in window.dims]} do not match the kernel's "
                      f"spatial dimensions {kernel_spatial}")
    spatial_out = window_output_dims([lhs.dims[d] for d in labels.input_spatial], window,
                                     "the input's spatial dimensions")
    out = [0] * (spatial + 2)
    out[labels.output_batch] = batch // bgc
    out[labels.output_feature] = kernel_out
    for d, size in zip(labels.output_spatial, spatial_out):
        out[d] = size
    return array_shape(_result_type(ctx, lhs, rhs), out)


@RULES.rule(Opcode.CHOLESKY)
def _cholesky(ctx: Context) -> Shape:
    a = ctx.array(0)
    if a.rank < 2 or a.dims[-1] != a.dims[-2] or not (a.element_type.is_float
                                                       or a.element_type.is_complex):
        raise Invalid(f"cholesky needs a float or complex batch of square matrices, not "
                      f"{fmt(a)}")
    return array_shape(a.element_type, a.dims)


@RULES.rule(Opcode.TRIANGULAR_SOLVE)
def _triangular_solve(ctx: Context) -> Shape:
    """triangular-solve(a, b): a is square, batch dims agree; the result is b's shape."""
    a, b = ctx.array(0), ctx.array(1)
    if a.element_type is not b.element_type or a.rank < 2 or b.rank != a.rank:
        raise Invalid(f"triangular-solve needs a and b of one type and rank >= 2, not "
                      f"{fmt(a)} and {fmt(b)}")
    if a.dims[-1] != a.dims[-2]:
        raise Invalid(f"triangular-solve's a {fmt(a)} is not square")
    shared = b.dims[-2] if ctx.bool_attr("left_side") else b.dims[-1]
    if shared != a.dims[-1] or a.dims[:-2] != b.dims[:-2]:
        raise Invalid(f"triangular-solve's a {fmt(a)} and b {fmt(b)} do not fit together")
    return array_shape(b.element_type, b.dims)


@RULES.rule(Opcode.FFT)
def _fft(ctx: Context) -> Shape:
    """FFT/IFFT keep the shape; RFFT gives complex with last dim n/2+1; IRFFT the inverse."""
    x = ctx.array(0)
    kind = ctx.attr("fft_type")
    length = ctx.dims_attr("fft_length")
    if not 1 <= len(length) <= 3 or x.rank < len(length):
        raise Invalid(f"fft_length {{{join(length)}}} needs 1 to 3 entries and an operand of "
                      f"at least that rank")
    if kind in ("FFT", "IFFT"):
        if not x.element_type.is_complex:
            raise Invalid(f"{kind} needs a complex operand, not {fmt(x)}")
        return array_shape(x.element_type, x.dims)
    if kind == "RFFT":
        if x.element_type not in COMPLEX_OF:
            raise Invalid(f"RFFT needs an f32 or f64 operand, not {fmt(x)}")
        if list(x.dims[-len(length):]) != list(length):
            raise Invalid(f"RFFT needs the innermost dims {list(x.dims[-len(length):])} to "
                          f"equal fft_length {list(length)}")
        last = length[-1] // 2 + 1 if length[-1] else x.dims[-1]
        return array_shape(COMPLEX_OF[x.element_type], x.dims[:-1] + (last,))
    if kind == "IRFFT":
        if not x.element_type.is_complex:
            raise Invalid(f"IRFFT needs a complex operand, not {fmt(x)}")
        return array_shape(COMPLEX_COMPONENT[x.element_type], x.dims[:-1] + (length[-1],))
    raise Invalid(f"unknown fft_type {kind}")

