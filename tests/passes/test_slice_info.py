"""GetSliceInfo1D: exactly one differing dimension gives (slice_dim, slice_size)."""

from __future__ import annotations

import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.proofs.index.slice_info import (GetSliceInfo1D, SliceInfo1D, get_slice_info_1d,
                                      slice_info_1d_of_dims)


@pytest.mark.parametrize("source,sizes,expected", [
    ((8, 3), (2, 3), SliceInfo1D(True, 0, 2)),
    ((8, 3), (8, 1), SliceInfo1D(True, 1, 1)),
    ((4, 6, 5), (4, 6, 0), SliceInfo1D(True, 2, 0)),
    ((8,), (8,), SliceInfo1D(False)),          # no dimension shrinks
    ((8, 3), (2, 1), SliceInfo1D(False)),      # two dimensions shrink
    ((8, 3), (2,), SliceInfo1D(False)),        # rank mismatch
    ((), (), SliceInfo1D(False)),
])
def test_exactly_one_differing_dimension_is_a_1d_shard(source, sizes, expected):
    assert slice_info_1d_of_dims(source, sizes) == expected


def test_reads_the_dynamic_slice_operand_and_its_slice_sizes():
    module = parse_module("""HloModule m
ENTRY %e (x: f32[3,8,5]) -> f32[3,2,5] {
  %x = f32[3,8,5]{2,1,0} parameter(0)
  %i = s32[] constant(0)
  ROOT %ds = f32[3,2,5]{2,1,0} dynamic-slice(%x, %i, %i, %i), dynamic_slice_sizes={3,2,5}
}
""")
    ds = module.entry.root
    assert get_slice_info_1d(ds) == SliceInfo1D(True, 1, 2)
    assert GetSliceInfo1D is get_slice_info_1d
    assert get_slice_info_1d(module.entry.instruction("x")) == SliceInfo1D(False)
