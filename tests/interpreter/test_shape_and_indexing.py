"""Data movement and indexing ops, with hand-computed expected values.

Covers the index semantics of docs/semantics.md §4 (dynamic-slice / dynamic-update-slice / gather
clamping, scatter order) and the layout-aware bitcast of §5.
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from interp_helpers import ADD_S32, run, run1

IOTA6 = np.arange(6, dtype=np.float32).reshape(2, 3)  # [[0, 1, 2], [3, 4, 5]]


def test_broadcast_reshape_transpose_reverse():
    outs = run("""
        v = f32[2] parameter(0)
        m = f32[2,3] parameter(1)
        b0 = f32[2,3] broadcast(v), dimensions={0}
        b1 = f32[3,2] broadcast(v), dimensions={1}
        r = f32[3,2] reshape(m)
        t = f32[3,2] transpose(m), dimensions={1,0}
        rev = f32[2,3] reverse(m), dimensions={0,1}
        ROOT out = (f32[2,3], f32[3,2], f32[3,2], f32[3,2], f32[2,3]) tuple(b0, b1, r, t, rev)
        """, np.array([7, 8], np.float32), IOTA6)
    assert outs[0][0].tolist() == [[7, 7, 7], [8, 8, 8]]
    assert outs[1][0].tolist() == [[7, 8], [7, 8], [7, 8]]
    assert outs[2][0].tolist() == [[0, 1], [2, 3], [4, 5]]
    assert outs[3][0].tolist() == [[0, 3], [1, 4], [2, 5]]
    assert outs[4][0].tolist() == [[5, 4, 3], [2, 1, 0]]


def test_strided_slice_concatenate_iota():
    outs = run("""
        i = s32[10] iota(), iota_dimension=0
        s = s32[3] slice(i), slice={[1:8:3]}
        m = s32[2,3] iota(), iota_dimension=1
        c = s32[2,6] concatenate(m, m), dimensions={1}
        ROOT out = (s32[3], s32[2,6]) tuple(s, c)
        """)
    assert outs[0][0].tolist() == [1, 4, 7]
    assert outs[1][0].tolist() == [[0, 1, 2, 0, 1, 2], [0, 1, 2, 0, 1, 2]]


def test_pad_with_negative_and_interior_padding():
    # [1,2,3] interior 1 -> [1,0,2,0,3]; low -1 drops the first; high 2 appends two.
    out = run1("""
        x = f32[3] parameter(0)
        z = f32[] constant(0)
        ROOT p = f32[6] pad(x, z), padding=-1_2_1
        """, np.array([1, 2, 3], np.float32))
    assert out.tolist() == [0, 2, 0, 3, 0, 0]
    # dim 0: one row of padding before; dim 1: [a, 9, b] then the last column cropped.
    out = run1("""
        x = f32[2,2] parameter(0)
        z = f32[] constant(9)
        ROOT p = f32[3,2] pad(x, z), padding=1_0_0x0_-1_1
        """, np.array([[1, 2], [3, 4]], np.float32))
    assert out.tolist() == [[9, 9], [1, 9], [3, 9]]


def test_bitcast_reads_physical_order_by_layouts():
    # Column-major f32[2,3]{0,1}: memory holds x[0,0], x[1,0], x[0,1], x[1,1], x[0,2], x[1,2].
    out = run1("""
        x = f32[2,3]{0,1} parameter(0)
        ROOT b = f32[6]{0} bitcast(x)
        """, IOTA6)
    assert out.tolist() == [0, 3, 1, 4, 2, 5]
    # f32[3,2]{0,1}: logical [i, j] is memory element i + 3 j.
    out = run1("""
        x = f32[6]{0} parameter(0)
        ROOT b = f32[3,2]{0,1} bitcast(x)
        """, np.arange(6, dtype=np.float32))
    assert out.tolist() == [[0, 3], [1, 4], [2, 5]]
    out = run1("""
        x = f32[2,3]{1,0} parameter(0)
        ROOT c = f32[2,3]{0,1} copy(x)
        """, IOTA6)
    assert out.tolist() == IOTA6.tolist()  # a copy between layouts changes no value


def test_tuples_and_constants():
    outs = run("""
        c = (s32[], f32[2]) constant((3, {1.5, -2}))
        a = s32[] get-tuple-element(c), index=0
        b = f32[2] get-tuple-element(c), index=1
        ROOT t = (f32[2], s32[]) tuple(b, a)
        """)
    assert outs[0][0].tolist() == [1.5, -2] and outs[1][0] == 3


def test_elided_constant_cannot_execute():
    with pytest.raises(interpreter.InterpreterError, match=r"While executing %c = .*elided"):
        run("c = f32[4] constant({...})")


# ---------------------------------------------------------------------------------------------
# dynamic-slice / dynamic-update-slice

@pytest.mark.parametrize("start, expected", [
    (-5, [0, 1, 2]), (0, [0, 1, 2]), (4, [4, 5, 6]), (7, [7, 8, 9]), (8, [7, 8, 9]),
    (100, [7, 8, 9]),
])
def test_dynamic_slice_clamps_the_start(start, expected):
    out = run1("""
        x = s32[10] iota(), iota_dimension=0
        s = s32[] parameter(0)
        ROOT d = s32[3] dynamic-slice(x, s), dynamic_slice_sizes={3}
        """, np.array(start, np.int32))
    assert out.tolist() == expected


def test_dynamic_slice_unsigned_start_is_not_negative():
    # u32 4000000000 is a huge start (clamped to the last window), not -294967296.
    out = run1("""
        x = s32[10] iota(), iota_dimension=0
        s = u32[] parameter(0)
        ROOT d = s32[3] dynamic-slice(x, s), dynamic_slice_sizes={3}
        """, np.array(4000000000, np.uint32))
    assert out.tolist() == [7, 8, 9]


def test_dynamic_slice_with_a_start_per_device():
    outs = run("""
        x = s32[8] iota(), iota_dimension=0
        pid = u32[] partition-id()
        p = s32[] convert(pid)
        two = s32[] constant(2)
        s = s32[] multiply(p, two)
        ROOT d = s32[3] dynamic-slice(x, s), dynamic_slice_sizes={3}
        """, header="num_partitions=4")
    # Starts 0, 2, 4, 6; 6 is clamped to 8 - 3 = 5.
    assert outs[0].tolist() == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [5, 6, 7]]


def test_dynamic_slice_2d():
    out = run1("""
        x = f32[2,3] parameter(0)
        i = s32[] constant(1)
        j = s32[] constant(2)
        ROOT d = f32[1,2] dynamic-slice(x, i, j), dynamic_slice_sizes={1,2}
        """, IOTA6)
    assert out.tolist() == [[4, 5]]  # column start 2 clamped to 3 - 2 = 1


@pytest.mark.parametrize("start, expected", [
    (4, [0, 0, 0, 1, 2]), (-3, [1, 2, 0, 0, 0]), (1, [0, 1, 2, 0, 0]),
])
def test_dynamic_update_slice_clamps_the_start(start, expected):
    out = run1("""
        x = s32[5] parameter(0)
        u = s32[2] parameter(1)
        s = s32[] parameter(2)
        ROOT d = s32[5] dynamic-update-slice(x, u, s)
        """, np.zeros(5, np.int32), np.array([1, 2], np.int32), np.array(start, np.int32))
    assert out.tolist() == expected


def test_dynamic_update_slice_per_device():
    outs = run("""
        x = s32[4] parameter(0)
        u = s32[1] constant({9})
        pid = u32[] partition-id()
        s = s32[] convert(pid)
        ROOT d = s32[4] dynamic-update-slice(x, u, s)
        """, np.zeros(4, np.int32), header="num_partitions=3")
    assert outs[0].tolist() == [[9, 0, 0, 0], [0, 9, 0, 0], [0, 0, 9, 0]]


# ---------------------------------------------------------------------------------------------
# gather / scatter

ROWS = np.array([[0, 1], [10, 11], [20, 21]], np.float32)


def test_gather_rows_with_clamped_indices():
    out = run1("""
        x = f32[3,2] parameter(0)
        i = s32[4] parameter(1)
        ROOT g = f32[4,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}
        """, ROWS, np.array([2, 0, 5, -1], np.int32))
    assert out.tolist() == [[20, 21], [0, 1], [20, 21], [0, 1]]


def test_gather_window_is_clamped_to_fit():
    out = run1("""
        x = s32[10] iota(), iota_dimension=0
        i = s32[1,1] constant({{8}})
        ROOT g = s32[1,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={3}
        """)
    assert out.tolist() == [[7, 8, 9]]


def test_gather_with_batching_dims():
    # result[b] = x[b, i[b]]
    out = run1("""
        x = f32[2,3] parameter(0)
        i = s32[2] parameter(1)
        ROOT g = f32[2] gather(x, i), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,1}
        """, np.array([[0, 1, 2], [10, 11, 12]], np.float32), np.array([2, 1], np.int32))
    assert out.tolist() == [2, 11]


def test_gather_2d_index_vectors_in_dim_0():
    # index_vector_dim=0: column k of i is the index vector (row, col) of output k.
    out = run1("""
        x = f32[2,3] parameter(0)
        i = s32[2,2] parameter(1)
        ROOT g = f32[2] gather(x, i), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,1}
        """, IOTA6, np.array([[1, 0], [2, 1]], np.int32))
    assert out.tolist() == [5, 1]  # x[1, 2] and x[0, 1]


SCATTER_1D = ("ROOT s = s32[4] scatter(x, i, u), update_window_dims={}, "
              "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
              "to_apply=COMBINER")


def test_scatter_add_combines_repeated_indices_and_skips_out_of_bounds():
    out = run1(f"""
        x = s32[4] parameter(0)
        i = s32[5,1] parameter(1)
        u = s32[5] parameter(2)
        {SCATTER_1D.replace('COMBINER', 'add_s32')}
        """, np.zeros(4, np.int32), np.array([[1], [1], [3], [5], [-1]], np.int32),
        np.array([1, 2, 3, 4, 5], np.int32), computations=ADD_S32)
    assert out.tolist() == [0, 3, 0, 3]


def test_scatter_applies_updates_in_index_order():
    # combine(old, new) = old * 10 + new is order-sensitive: ((0*10+1)*10+2)*10+3 = 123.
    combiner = """
    shift_in {
      a = s32[] parameter(0)
      b = s32[] parameter(1)
      ten = s32[] constant(10)
      m = s32[] multiply(a, ten)
      ROOT r = s32[] add(m, b)
    }
    """
    out = run1(f"""
        x = s32[4] parameter(0)
        i = s32[3,1] parameter(1)
        u = s32[3] parameter(2)
        {SCATTER_1D.replace('COMBINER', 'shift_in')}
        """, np.zeros(4, np.int32), np.array([[0], [2], [0]], np.int32),
        np.array([1, 5, 3], np.int32), computations=combiner)
    assert out.tolist() == [13, 0, 5, 0]


def test_scatter_window_that_does_not_fit_is_skipped_not_clamped():
    out = run1("""
        x = s32[4] parameter(0)
        i = s32[2,1] parameter(1)
        u = s32[2,2] parameter(2)
        ROOT s = s32[4] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_s32
        """, np.zeros(4, np.int32), np.array([[3], [1]], np.int32),
        np.array([[1, 1], [5, 6]], np.int32), computations=ADD_S32)
    assert out.tolist() == [0, 5, 6, 0]


def test_scatter_per_device_indices():
    outs = run("""
        x = s32[3] parameter(0)
        pid = u32[] partition-id()
        p = s32[] convert(pid)
        i = s32[1,1] reshape(p)
        u = s32[1] constant({7})
        ROOT s = s32[3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_s32
        """, np.ones(3, np.int32), header="num_partitions=3", computations=ADD_S32)
    assert outs[0].tolist() == [[8, 1, 1], [1, 8, 1], [1, 1, 8]]
