"""The 1-D shard invariant both AllReduce+DynamicSlice passes hinge on (the seed's
``hlo_utils::GetSliceInfo1D``).

A dynamic-slice that differs from its source in exactly one dimension carves out a shard along
that dimension: ``slice_dim`` becomes the reduce-scatter's scatter dimension and ``slice_size``
the per-rank extent. Zero or several differing dimensions: not a 1-D shard.

Seed: allreduce-reducescatter-dynamicslice-rewrites.txt, "The 1-D Shard Invariant". Faithful;
two cases the seed leaves to a CHECK or to well-typed input (rank mismatch between the operand
and ``dynamic_slice_sizes``, a non-array operand) are answered "not a 1-D shard" here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape


@dataclass(frozen=True)
class SliceInfo1D:
    """The seed's 24-byte POD ``{valid, slice_dim, slice_size}``."""

    valid: bool
    slice_dim: int = 0
    slice_size: int = 0


INVALID = SliceInfo1D(False)


def slice_info_1d_of_dims(source_dims: Sequence[int], slice_sizes: Sequence[int]) -> SliceInfo1D:
    """The core comparison: exactly one index where the two extents differ."""
    if len(source_dims) != len(slice_sizes):
        return INVALID
    differing = [i for i, (a, b) in enumerate(zip(source_dims, slice_sizes)) if a != b]
    if len(differing) != 1:
        return INVALID
    dim = differing[0]
    return SliceInfo1D(True, dim, int(slice_sizes[dim]))


def get_slice_info_1d(ds: HloInstruction) -> SliceInfo1D:
    """``GetSliceInfo1D`` of a dynamic-slice: its operand's dims against ``dynamic_slice_sizes``."""
    if ds.opcode is not Opcode.DYNAMIC_SLICE or not ds.operands:
        return INVALID
    source = ds.operand(0).shape
    if not isinstance(source, ArrayShape):
        return INVALID
    return slice_info_1d_of_dims(source.dims, tuple(ds.get("dynamic_slice_sizes", ())))


GetSliceInfo1D = get_slice_info_1d  # the seed's name
