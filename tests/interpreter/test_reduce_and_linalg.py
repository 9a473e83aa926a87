"""Reductions (reduce, reduce-window, select-and-scatter, sort) and linear algebra (dot,
convolution), with hand-computed expected values (numpy written out where noted)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from interp_helpers import ADD_F32, run, run1, scalar_computation

BF16 = ml_dtypes.bfloat16

MAX_F32 = scalar_computation("max_f32", "maximum", "f32")
ADD_BF16 = scalar_computation("add_bf16", "add", "bf16")
GE_F32 = scalar_computation("ge_f32", "compare", "f32", direction="GE")


def test_reduce_sums_over_dimensions_from_the_init_value():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    outs = run("""
        x = f32[2,3] parameter(0)
        zero = f32[] constant(0)
        ten = f32[] constant(10)
        r0 = f32[3] reduce(x, zero), dimensions={0}, to_apply=add_f32
        r1 = f32[] reduce(x, ten), dimensions={0,1}, to_apply=add_f32
        ROOT t = (f32[3], f32[]) tuple(r0, r1)
        """, x, computations=ADD_F32)
    assert outs[0][0].tolist() == [5, 7, 9] and outs[1][0] == 31


def test_float_reduce_is_a_left_fold_in_index_order():
    # ((((0 + 1e8) + 1) - 1e8) + 1): the first 1 is lost (ulp(1e8) = 8), the result is 1.
    # A pairwise sum would give (1e8 + 1) + (-1e8 + 1) = 0.
    out = run1("""
        x = f32[4] parameter(0)
        zero = f32[] constant(0)
        ROOT r = f32[] reduce(x, zero), dimensions={0}, to_apply=add_f32
        """, np.array([1e8, 1, -1e8, 1], np.float32), computations=ADD_F32)
    assert out == 1.0


def test_bf16_reduce_accumulates_in_bf16():
    # 1 + 2^-8 is a tie in bf16 and rounds back to 1, four times; an f32 accumulator would
    # reach 1.015625.
    out = run1("""
        x = bf16[5] parameter(0)
        zero = bf16[] constant(0)
        ROOT r = bf16[] reduce(x, zero), dimensions={0}, to_apply=add_bf16
        """, np.array([1] + [2 ** -8] * 4, BF16), computations=ADD_BF16)
    assert float(out) == 1.0


def test_reduce_max_propagates_nan():
    out = run1("""
        x = f32[2,3] parameter(0)
        low = f32[] constant(-inf)
        ROOT r = f32[2] reduce(x, low), dimensions={1}, to_apply=max_f32
        """, np.array([[1, np.nan, 3], [-0.0, 0.0, -1]], np.float32), computations=MAX_F32)
    assert np.isnan(out[0]) and out[1] == 0 and not np.signbit(out[1])


def test_variadic_reduce_argmax_takes_the_first_maximum():
    argmax = """
    argmax {
      v1 = f32[] parameter(0)
      i1 = s32[] parameter(1)
      v2 = f32[] parameter(2)
      i2 = s32[] parameter(3)
      gt = pred[] compare(v1, v2), direction=GT
      eq = pred[] compare(v1, v2), direction=EQ
      lt = pred[] compare(i1, i2), direction=LT
      tie = pred[] and(eq, lt)
      keep = pred[] or(gt, tie)
      v = f32[] select(keep, v1, v2)
      i = s32[] select(keep, i1, i2)
      ROOT r = (f32[], s32[]) tuple(v, i)
    }
    """
    outs = run("""
        x = f32[4] parameter(0)
        idx = s32[4] iota(), iota_dimension=0
        low = f32[] constant(-inf)
        zero = s32[] constant(0)
        ROOT r = (f32[], s32[]) reduce(x, idx, low, zero), dimensions={0}, to_apply=argmax
        """, np.array([3, 7, 7, 1], np.float32), computations=argmax)
    assert outs[0][0] == 7 and outs[1][0] == 1


# ---------------------------------------------------------------------------------------------
# reduce-window / select-and-scatter

def window_sum(x, window: str, n_out: int, init: float = 0) -> list:
    return run1(f"""
        x = f32[{len(x)}] parameter(0)
        z = f32[] constant({init})
        ROOT r = f32[{n_out}] reduce-window(x, z), window={{{window}}}, to_apply=add_f32
        """, np.asarray(x, np.float32), computations=ADD_F32).tolist()


def test_reduce_window_padding_stride_and_dilations():
    # padded [0,1,2,3,4,5,0], windows of 3 at 0, 2, 4.
    assert window_sum([1, 2, 3, 4, 5], "size=3 stride=2 pad=1_1", 3) == [3, 9, 9]
    # base dilation: [1,_,2,_,3]; holes are skipped.
    assert window_sum([1, 2, 3], "size=2 lhs_dilate=2", 4) == [1, 2, 2, 3]
    # window dilation: taps i and i+2.
    assert window_sum([1, 2, 3, 4, 5], "size=2 rhs_dilate=2", 3) == [4, 6, 8]
    # padding positions are skipped, so a non-identity init is folded once per window.
    assert window_sum([1, 2, 3], "size=2 pad=0_1", 3, init=10) == [13, 15, 13]


def test_reduce_window_2d_max_pool():
    out = run1("""
        x = f32[4,4] parameter(0)
        low = f32[] constant(-inf)
        ROOT r = f32[2,2] reduce-window(x, low), window={size=2x2 stride=2x2}, to_apply=max_f32
        """, np.arange(16, dtype=np.float32).reshape(4, 4), computations=MAX_F32)
    assert out.tolist() == [[5, 7], [13, 15]]


def select_and_scatter(operand, source, window: str):
    return run1(f"""
        x = f32[{len(operand)}] parameter(0)
        s = f32[{len(source)}] parameter(1)
        z = f32[] constant(0)
        ROOT r = f32[{len(operand)}] select-and-scatter(x, s, z), window={{{window}}}, select=ge_f32, scatter=add_f32
        """, np.asarray(operand, np.float32), np.asarray(source, np.float32),
        computations=GE_F32 + ADD_F32).tolist()


def test_select_and_scatter_routes_each_source_value_to_its_windows_selection():
    assert select_and_scatter([1, 5, 3, 2], [10, 20], "size=2 stride=2") == [0, 10, 20, 0]
    # Overlapping windows [1,5,3] and [5,3,5]: GE keeps the first of equal values (index 1).
    assert select_and_scatter([1, 5, 3, 5], [1, 2], "size=3") == [0, 3, 0, 0]
    # Padding is never selected: windows [pad, -1] and [-1, -2] both pick element 0.
    assert select_and_scatter([-1, -2], [4, 6], "size=2 pad=1_0") == [10, 0]


# ---------------------------------------------------------------------------------------------
# sort

LT_S32 = """
lt_s32 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}
"""
# Descending by key, then ascending by value: no single compare, so the merge sort runs.
KEY_DESC_VALUE_ASC = """
kdva {
  k1 = s32[] parameter(0)
  k2 = s32[] parameter(1)
  v1 = s32[] parameter(2)
  v2 = s32[] parameter(3)
  gt = pred[] compare(k1, k2), direction=GT
  eq = pred[] compare(k1, k2), direction=EQ
  lt = pred[] compare(v1, v2), direction=LT
  tie = pred[] and(eq, lt)
  ROOT r = pred[] or(gt, tie)
}
"""


def sort2(keys, values, comparator: str, computations: str):
    n = len(keys)
    outs = run(f"""
        k = s32[{n}] parameter(0)
        v = s32[{n}] parameter(1)
        ROOT s = (s32[{n}], s32[{n}]) sort(k, v), dimensions={{0}}, is_stable=true, to_apply={comparator}
        """, np.asarray(keys, np.int32), np.asarray(values, np.int32),
        computations=computations)
    return outs[0][0].tolist(), outs[1][0].tolist()


def test_sort_multi_operand_is_stable():
    assert sort2([3, 1, 2, 1], [0, 1, 2, 3], "lt_s32", LT_S32) == ([1, 1, 2, 3], [1, 3, 2, 0])


def test_sort_with_a_custom_comparator():
    assert sort2([1, 3, 1, 3, 2], [5, 4, 3, 2, 1], "kdva", KEY_DESC_VALUE_ASC) == (
        [3, 3, 2, 1, 1], [2, 4, 1, 3, 5])


def test_sort_floats_in_total_order():
    comparator = """
    total {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT r = pred[] compare(a, b), direction=LT, type=TOTALORDER
    }
    """
    x = np.array([np.nan, 1, np.nan, -0.0, 0.0, -np.inf], np.float32)
    x[2] = -np.abs(x[2])
    out = run1("""
        x = f32[6] parameter(0)
        ROOT s = f32[6] sort(x), dimensions={0}, to_apply=total
        """, x, computations=comparator)
    assert np.signbit(out[0]) and np.isnan(out[0])
    assert out[1:5].tolist() == [-np.inf, 0.0, 0.0, 1] and np.signbit(out[2])
    assert np.isnan(out[5]) and not np.signbit(out[5])


@pytest.mark.parametrize("n", [1, 2, 7, 37, 64])
def test_merge_sort_with_a_comparator_matches_a_stable_argsort(n):
    rng = np.random.default_rng(n)
    keys = rng.integers(0, 5, size=(3, n)).astype(np.int32)  # many ties
    values = np.tile(np.arange(n, dtype=np.int32), (3, 1))
    comparator = """
    lt_via_select {
      a = s32[] parameter(0)
      b = s32[] parameter(1)
      c = s32[] parameter(2)
      d = s32[] parameter(3)
      lt = pred[] compare(a, b), direction=LT
      t = pred[] constant(true)
      ROOT r = pred[] and(lt, t)
    }
    """
    outs = run(f"""
        k = s32[3,{n}] parameter(0)
        v = s32[3,{n}] parameter(1)
        ROOT s = (s32[3,{n}], s32[3,{n}]) sort(k, v), dimensions={{1}}, to_apply=lt_via_select
        """, keys, values, computations=comparator)
    order = np.argsort(keys, axis=1, kind="stable")  # numpy's stable sort as the reference
    assert outs[0][0].tolist() == np.take_along_axis(keys, order, 1).tolist()
    assert outs[1][0].tolist() == order.tolist()


def test_sort_per_device_rows():
    outs = run("""
        x = s32[3] parameter(0)
        ROOT s = s32[3] sort(x), dimensions={0}, to_apply=lt1
        """, np.array([[3, 1, 2], [0, 9, -1]], np.int32), header="num_partitions=2",
        computations="""
        lt1 {
          a = s32[] parameter(0)
          b = s32[] parameter(1)
          ROOT r = pred[] compare(a, b), direction=GT
        }""")
    assert outs[0].tolist() == [[3, 2, 1], [9, 0, -1]]


# ---------------------------------------------------------------------------------------------
# dot

def test_dot_general_with_batch_and_contracting_dims():
    rng = np.random.default_rng(1)
    lhs = rng.integers(-3, 4, size=(2, 2, 3)).astype(np.float32)
    rhs = rng.integers(-3, 4, size=(2, 3, 4)).astype(np.float32)
    out = run1("""
        a = f32[2,2,3] parameter(0)
        b = f32[2,3,4] parameter(1)
        ROOT d = f32[2,2,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
        """, lhs, rhs)
    expected = np.zeros((2, 2, 4))
    for b in range(2):
        for i in range(2):
            for j in range(4):
                expected[b, i, j] = sum(lhs[b, i, k] * rhs[b, k, j] for k in range(3))
    assert out.tolist() == expected.tolist()


def test_dot_widens_integers_to_the_result_type_and_handles_outer_products():
    out = run1("""
        a = s8[1,2] parameter(0)
        b = s8[2,1] parameter(1)
        ROOT d = s32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        """, np.array([[100, 100]], np.int8), np.array([[100], [100]], np.int8))
    assert out.tolist() == [[20000]]
    out = run1("""
        a = f32[2] parameter(0)
        b = f32[3] parameter(1)
        ROOT d = f32[2,3] dot(a, b)
        """, np.array([1, 2], np.float32), np.array([1, 10, 100], np.float32))
    assert out.tolist() == [[1, 10, 100], [2, 20, 200]]


# ---------------------------------------------------------------------------------------------
# convolution

def conv1d(x, kernel, window: str, n_out: int) -> list:
    out = run1(f"""
        x = f32[1,1,{len(x)}] parameter(0)
        k = f32[1,1,{len(kernel)}] parameter(1)
        ROOT c = f32[1,1,{n_out}] convolution(x, k), window={{{window}}}, dim_labels=bf0_oi0->bf0
        """, np.asarray(x, np.float32).reshape(1, 1, -1),
        np.asarray(kernel, np.float32).reshape(1, 1, -1))
    return out.reshape(-1).tolist()


def test_convolution_padding_strides_dilations_reversal():
    x, k = [1, 2, 3, 4, 5], [1, 0, -1]  # y[i] = x[i] - x[i + 2]
    assert conv1d(x, k, "size=3", 3) == [-2, -2, -2]
    assert conv1d(x, k, "size=3 pad=1_1", 5) == [-2, -2, -2, -2, 4]
    assert conv1d(x, k, "size=3 stride=2 pad=1_1", 3) == [-2, -2, 4]
    # lhs dilation: [1,0,2,0,3,0,4,0,5]
    assert conv1d(x, k, "size=3 lhs_dilate=2", 7) == [-1, 0, -1, 0, -1, 0, -1]
    # rhs dilation: taps at 0 and 4 -> x[0] - x[4]
    assert conv1d(x, k, "size=3 rhs_dilate=2", 1) == [-4]
    # reversal: the kernel is applied as [-1, 0, 1]
    assert conv1d(x, k, "size=3 rhs_reversal=1", 3) == [2, 2, 2]
    # negative padding crops the input
    assert conv1d(x, k, "size=3 pad=-1_0", 2) == [-2, -2]


def test_convolution_feature_groups():
    # Features [1,2,3,4] in two groups; output 0 = 1*1 + 1*2, output 1 = 1*3 - 1*4.
    out = run1("""
        x = f32[1,1,1,4] parameter(0)
        k = f32[1,1,2,2] parameter(1)
        ROOT c = f32[1,1,1,2] convolution(x, k), window={size=1x1}, dim_labels=b01f_01io->b01f, feature_group_count=2
        """, np.array([1, 2, 3, 4], np.float32).reshape(1, 1, 1, 4),
        np.array([[1, 1], [1, -1]], np.float32).reshape(1, 1, 2, 2))
    assert out.reshape(-1).tolist() == [3, -1]


def test_convolution_batch_groups():
    # Batch [5, 7] in two groups; output feature g comes from batch g with kernel output g.
    out = run1("""
        x = f32[2,1,1] parameter(0)
        k = f32[2,1,1] parameter(1)
        ROOT c = f32[1,2,1] convolution(x, k), window={size=1}, dim_labels=bf0_oi0->bf0, batch_group_count=2
        """, np.array([5, 7], np.float32).reshape(2, 1, 1),
        np.array([2, 3], np.float32).reshape(2, 1, 1))
    assert out.reshape(-1).tolist() == [10, 21]


def test_convolution_2d_nhwc_matches_a_direct_loop():
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, size=(2, 4, 5, 3)).astype(np.float32)  # N H W C
    k = rng.integers(-2, 3, size=(2, 3, 3, 4)).astype(np.float32)  # H W I O
    out = run1("""
        x = f32[2,4,5,3] parameter(0)
        k = f32[2,3,3,4] parameter(1)
        ROOT c = f32[2,2,2,4] convolution(x, k), window={size=2x3 stride=2x1 pad=0_0x0_-1}, dim_labels=b01f_01io->b01f
        """, x, k)
    expected = np.zeros((2, 2, 2, 4))
    for n in range(2):
        for i in range(2):
            for j in range(2):
                for o in range(4):
                    expected[n, i, j, o] = sum(
                        x[n, 2 * i + a, j + b, c] * k[a, b, c, o]
                        for a in range(2) for b in range(3) for c in range(3))
    assert out.tolist() == expected.tolist()


def test_topk_sorted_with_ties_in_index_order():
    outs = run("""
        x = f32[2,5] parameter(0)
        ROOT t = (f32[2,2], s32[2,2]) topk(x), k=2, largest=true
        """, np.array([[1, 5, 3, 5, 2], [np.nan, 0, -1, 7, 7]], np.float32))
    assert outs[0][0, 0].tolist() == [5, 5] and outs[1][0].tolist() == [[1, 3], [0, 3]]
    assert np.isnan(outs[0][0, 1, 0]) and outs[0][0, 1, 1] == 7
    smallest = run("""
        x = s32[5] parameter(0)
        ROOT t = (s32[3], s32[3]) topk(x), k=3, largest=false
        """, np.array([3, 1, 2, 1, 0], np.int32))
    assert smallest[0][0].tolist() == [0, 1, 1] and smallest[1][0].tolist() == [4, 1, 3]
