"""Shape rules of the indexed ops: dynamic-slice, dynamic-update-slice, gather and scatter
(XLA's GatherShape / ScatterShape, batching dimensions included).
"""

from __future__ import annotations

from typing import Sequence

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.checks.helpers import (array_shape, check_dim_list, check_reducer,
                                           tuple_or_single)
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape, scalar

RULES = RuleTable("indexing")


def _check_start_indices(ctx: Context, first: int, rank: int, op: str) -> None:
    """Start indices from operand ``first`` on: ``rank`` integral scalars of one type (or XLA's
    older single rank-1 index vector)."""
    shapes = [ctx.array(i) for i in range(first, ctx.operand_count)]
    # XLA tells the forms apart by the first index: a rank-1 one is the vector form, whatever
    # the operand's rank (change_op_data_type_test AllTypesMustBeSame: f16[10], s32[1]).
    if len(shapes) == 1 and shapes[0].rank == 1:
        if shapes[0].dims[0] != rank or not shapes[0].element_type.is_integral:
            raise Invalid(f"{op} start index vector {fmt(shapes[0])} must be integral with "
                          f"{rank} entries")
        return
    if len(shapes) != rank:
        raise Invalid(f"{op} has {len(shapes)} start indices but the operand has rank {rank}")
    for shape in shapes:
        if shape.rank != 0 or not shape.element_type.is_integral:
            raise Invalid(f"{op} start indices must be integral scalars, not {fmt(shape)}")
        if shape.element_type is not shapes[0].element_type:
            raise Invalid(f"{op} start indices must all have one type, but they mix "
                          f"{shapes[0].element_type} and {shape.element_type}")


@RULES.rule(Opcode.DYNAMIC_SLICE)
def _dynamic_slice(ctx: Context) -> Shape:
    """dynamic-slice(x, i_0, ...): result dims are dynamic_slice_sizes, each <= the operand's."""
    ctx.require_operands(at_least=1)
    x = ctx.array(0)
    sizes = ctx.dims_attr("dynamic_slice_sizes")
    if len(sizes) != x.rank:
        raise Invalid(f"dynamic_slice_sizes has {len(sizes)} entries but the operand has rank "
                      f"{x.rank}")
    _check_start_indices(ctx, 1, x.rank, "dynamic-slice")
    for i, (size, bound) in enumerate(zip(sizes, x.dims)):
        if not 0 <= size <= bound:
            raise Invalid(f"dynamic_slice_sizes[{i}] = {size} is outside [0, {bound}] (operand "
                          f"{fmt(x)})")
    return array_shape(x.element_type, sizes)


@RULES.rule(Opcode.DYNAMIC_UPDATE_SLICE)
def _dynamic_update_slice(ctx: Context) -> Shape:
    """dynamic-update-slice(x, update, i_0, ...): update fits in x, same type; result is x."""
    ctx.require_operands(at_least=2)
    x, update = ctx.array(0), ctx.array(1)
    if update.rank != x.rank:
        raise Invalid(f"the update {fmt(update)} has rank {update.rank} but the operand "
                      f"{fmt(x)} has rank {x.rank}")
    if update.element_type is not x.element_type:
        raise Invalid(f"the update {fmt(update)} and the operand {fmt(x)} have different "
                      f"element types")
    for i, (u, bound) in enumerate(zip(update.dims, x.dims)):
        if u > bound:
            raise Invalid(f"update dimension {i} is {u}, larger than the operand's {bound}")
    _check_start_indices(ctx, 2, x.rank, "dynamic-update-slice")
    return array_shape(x.element_type, x.dims)


def _expanded_index_dims(indices: ArrayShape, index_vector_dim: int, op: str) -> list[int]:
    """Index dims with the implicit trailing 1 when index_vector_dim == rank (XLA)."""
    if not indices.element_type.is_integral:
        raise Invalid(f"{op} indices must be integral, not {fmt(indices)}")
    if not 0 <= index_vector_dim <= indices.rank:
        raise Invalid(f"index_vector_dim {index_vector_dim} must be in [0, {indices.rank}] for "
                      f"indices {fmt(indices)}")
    dims = list(indices.dims)
    if index_vector_dim == len(dims):
        dims.append(1)
    return dims


def _check_batching_dims(operand: ArrayShape, operand_batching: Sequence[int],
                         index_dims: Sequence[int], index_batching: Sequence[int],
                         names: tuple[str, str]) -> None:
    """XLA's rules for batching dims, no more: the two lists have one length, the operand's
    are sorted, unique dims of the operand, the indices' unique dims of the (expanded)
    indices. XLA checks neither their sizes against each other, nor overlaps with the
    collapsed / inserted dims or the index map, nor index_vector_dim (ValidateGather- and
    ValidateScatterDimensionNumbers)."""
    if len(operand_batching) != len(index_batching):
        raise Invalid(f"{names[0]} and {names[1]} must have the same length, but have "
                      f"{len(operand_batching)} and {len(index_batching)}")
    check_dim_list(operand_batching, operand.rank, names[0], sorted_=True)
    check_dim_list(index_batching, len(index_dims), names[1])


@RULES.rule(Opcode.GATHER)
def _gather(ctx: Context) -> Shape:
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
    check_dim_list(offset_dims, out_rank, "offset_dims", sorted_=True)
    if len(start_index_map) != index_dims[index_vector_dim]:
        raise Invalid(f"start_index_map has {len(start_index_map)} entries but dimension "
                      f"index_vector_dim={index_vector_dim} of the indices has size "
                      f"{index_dims[index_vector_dim]}")
    check_dim_list(start_index_map, operand.rank, "start_index_map")
    check_dim_list(collapsed, operand.rank, "collapsed_slice_dims", sorted_=True)
    _check_batching_dims(operand, operand_batching, index_dims, indices_batching,
                         ("operand_batching_dims", "start_indices_batching_dims"))
    if len(slice_sizes) != operand.rank:
        raise Invalid(f"slice_sizes has {len(slice_sizes)} entries but the operand has rank "
                      f"{operand.rank}")
    if operand.rank != len(offset_dims) + len(collapsed) + len(operand_batching):
        raise Invalid(f"the operand's rank {operand.rank} must equal len(offset_dims) + "
                      f"len(collapsed_slice_dims) + len(operand_batching_dims) = "
                      f"{len(offset_dims) + len(collapsed) + len(operand_batching)}")
    for i, (size, bound) in enumerate(zip(slice_sizes, operand.dims)):
        if not 0 <= size <= bound:
            raise Invalid(f"slice_sizes[{i}] = {size} is outside [0, {bound}]")
    for d in tuple(collapsed) + tuple(operand_batching):
        if slice_sizes[d] > 1:
            raise Invalid(f"collapsed or batching dimension {d} has slice size "
                          f"{slice_sizes[d]}; it must be 0 or 1")

    window_sizes = iter(s for d, s in enumerate(slice_sizes)
                        if d not in collapsed and d not in operand_batching)
    batch_sizes = iter(s for d, s in enumerate(index_dims) if d != index_vector_dim)
    out = [next(window_sizes) if i in offset_dims else next(batch_sizes) for i in range(out_rank)]
    return array_shape(operand.element_type, out)


@RULES.rule(Opcode.SCATTER)
def _scatter(ctx: Context) -> Shape:
    """XLA's ScatterShape: scatter(operands..., indices, updates...) returns the operands.

    Updates have rank len(update_window_dims) + (index rank - 1); their window dims fit in the
    operand dims that are neither inserted nor batching, their other dims equal the index dims
    other than index_vector_dim; to_apply folds (operand types) with (update types).
    """
    n = ctx.operand_count // 2
    if ctx.operand_count < 3 or ctx.operand_count != 2 * n + 1:
        raise Invalid(f"scatter takes N operands, the indices and N updates (an odd count of "
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
            raise Invalid(f"scatter operand {k} {fmt(operand)} and operand 0 "
                          f"{fmt(operands[0])} have different dimensions")
        expected_rank = len(index_dims) - 1 + len(window_dims)
        if update.rank != expected_rank:
            raise Invalid(f"updates {k} {fmt(update)} must have rank {expected_rank} "
                          f"(update_window_dims plus the index batch dims)")
        check_dim_list(window_dims, update.rank, "update_window_dims", sorted_=True)
        check_dim_list(inserted, operand.rank, "inserted_window_dims", sorted_=True)
        if len(window_dims) + len(inserted) + len(input_batching) != operand.rank:
            raise Invalid(f"len(update_window_dims) + len(inserted_window_dims) + "
                          f"len(input_batching_dims) = "
                          f"{len(window_dims) + len(inserted) + len(input_batching)} must equal "
                          f"the operand's rank {operand.rank}")
        if len(to_operand) != index_dims[index_vector_dim]:
            raise Invalid(f"scatter_dims_to_operand_dims has {len(to_operand)} entries but "
                          f"dimension index_vector_dim={index_vector_dim} of the indices has "
                          f"size {index_dims[index_vector_dim]}")
        check_dim_list(to_operand, operand.rank, "scatter_dims_to_operand_dims")
        _check_batching_dims(operand, input_batching, index_dims, indices_batching,
                             ("input_batching_dims", "scatter_indices_batching_dims"))
        window_bounds = [b for d, b in enumerate(operand.dims)
                         if d not in inserted and d not in input_batching]
        for w, d in zip(window_bounds, window_dims):
            if update.dims[d] > w:
                raise Invalid(f"updates {k} window dimension {d} has size {update.dims[d]}, "
                              f"larger than the operand's {w}")
        scatter_sizes = [s for d, s in enumerate(index_dims) if d != index_vector_dim]
        update_scatter_dims = [d for d in range(update.rank) if d not in window_dims]
        for d, size in zip(update_scatter_dims, scatter_sizes):
            if update.dims[d] != size:
                raise Invalid(f"updates {k} scatter dimension {d} has size {update.dims[d]} "
                              f"but the matching indices dimension has size {size}")
    check_reducer(ctx.computation("to_apply"), [scalar(o.element_type) for o in operands],
                  [u.element_type for u in updates], "to_apply")
    return tuple_or_single([array_shape(o.element_type, o.dims) for o in operands])
