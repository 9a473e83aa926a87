"""The vectorised argmax / argmin fold equals the element-by-element fold of the same comparator
(made unrecognisable by a double negation), with ties, NaN, signed zeros, arbitrary indices and
inits, over one and two reduced dimensions."""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.arg_reducers import recognise_arg_reducer

TEXT = """HloModule m
cmp {{
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction={d}
  ne = pred[] compare(a, a), direction=NE
  pick = pred[] or(gt, ne)
  value = f32[] select(pick, a, b)
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  {tie}
  keep = pred[] or(pick, t)
  index = s32[] select(keep, ai, bi)
  ROOT pair = (f32[], s32[]) tuple(value, index)
}}
ENTRY e {{
  x = f32[5,6] parameter(0)
  i = s32[5,6] parameter(1)
  v0 = f32[] parameter(2)
  i0 = s32[] parameter(3)
  ROOT r = (f32[{out}], s32[{out}]) reduce(x, i, v0, i0), dimensions={{{dims}}}, to_apply=cmp
}}
"""
FAST = "t = pred[] and(lt, eq)"
SLOW = "n = pred[] not(tie)\n  t = pred[] not(n)"


@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("dims,out", [("1", "5"), ("0", "6"), ("0,1", "")])
@pytest.mark.parametrize("seed", range(4))
def test_vectorised_fold_equals_sequential_fold(direction, dims, out, seed):
    rng = np.random.default_rng(seed)
    x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf], np.float32),
                   size=(5, 6))
    i = rng.integers(-4, 4, size=(5, 6)).astype(np.int32)
    init_value = rng.choice(np.array([-np.inf, 0.0, -0.0, np.nan, 1.0], np.float32))
    args = [x, i, init_value, np.int32(rng.integers(-2, 3))]
    fast = parse_module(TEXT.format(d=direction, tie=FAST, dims=dims, out=out))
    slow = parse_module(TEXT.format(d=direction, tie=SLOW, dims=dims, out=out))
    assert recognise_arg_reducer(fast.computation("cmp")) is not None
    assert recognise_arg_reducer(slow.computation("cmp")) is None
    for got, want in zip(interpreter.run(fast, args), interpreter.run(slow, args)):
        assert got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True) \
            and np.array_equal(np.signbit(got), np.signbit(want))


IOTA = TEXT.replace("  i = s32[5,6] parameter(1)\n", "  i = s32[5,6] iota(), iota_dimension={dim}\n") \
    .replace("  v0 = f32[] parameter(2)\n  i0 = s32[] parameter(3)\n",
             "  v0 = f32[] parameter(1)\n  i0 = s32[] parameter(2)\n")


@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("dims,out", [("1", "5"), ("0", "6")])
@pytest.mark.parametrize("seed", range(6))
def test_the_one_pass_fold_over_an_iota_equals_the_sequential_fold(direction, dims, out, seed):
    """JAX's argmax form: the indices are an iota along the reduced dimension, which takes the
    one-pass path (numpy's first extreme / first NaN, then the init); the double-negated
    comparator is folded one element at a time. Values with ties, NaN, signed zeros and
    infinities; inits including NaN, -0 and +-inf; init indices below, inside and above the
    range."""
    rng = np.random.default_rng(100 + seed)
    x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf], np.float32),
                   size=(5, 6), p=[0.2, 0.2, 0.15, 0.15, 0.1, 0.1, 0.1])
    init_value = rng.choice(np.array([-np.inf, np.inf, 0.0, -0.0, np.nan, 1.0], np.float32))
    args = [x, init_value, np.int32(rng.integers(-2, 8))]
    fast = parse_module(IOTA.format(d=direction, tie=FAST, dims=dims, out=out, dim=dims))
    slow = parse_module(IOTA.format(d=direction, tie=SLOW, dims=dims, out=out, dim=dims))
    assert recognise_arg_reducer(fast.computation("cmp")) is not None
    for got, want in zip(interpreter.run(fast, args), interpreter.run(slow, args)):
        assert got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True) \
            and np.array_equal(np.signbit(got), np.signbit(want))



VECTOR = IOTA.replace("f32[5,6]", "f32[12]").replace("s32[5,6]", "s32[12]")


@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("seed", range(8))
def test_the_one_pass_fold_of_one_row_equals_the_sequential_fold(direction, seed):
    """A vector reduced to a scalar (JAX's argmax over a flattened array) is one row of the
    batched operands, which the one-pass fold reads at flat offsets equal to the positions.
    Values with ties, NaN, signed zeros (the last zero's sign is the fold's value) and
    infinities, inits including NaN, -0 and +-inf: the same bits as the double-negated
    comparator folded one element at a time."""
    rng = np.random.default_rng(300 + seed)
    x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf], np.float32),
                   size=12, p=[0.25, 0.25, 0.15, 0.15, 0.06, 0.07, 0.07])
    init_value = rng.choice(np.array([-np.inf, np.inf, 0.0, -0.0, np.nan, 1.0], np.float32))
    args = [x, init_value, np.int32(rng.integers(-2, 14))]
    fast = parse_module(VECTOR.format(d=direction, tie=FAST, dims="0", out="", dim="0"))
    slow = parse_module(VECTOR.format(d=direction, tie=SLOW, dims="0", out="", dim="0"))
    assert recognise_arg_reducer(fast.computation("cmp")) is not None
    assert recognise_arg_reducer(slow.computation("cmp")) is None
    for got, want in zip(interpreter.run(fast, args), interpreter.run(slow, args)):
        assert got.tobytes() == want.tobytes()


JAX_FORM = """HloModule m, num_partitions={devices}
cmp {{
  a = {t}[] parameter(0)
  ai = s32[] parameter(1)
  b = {t}[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction={d}
  {pick}
  value = {t}[] select(pick, a, b)
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(pick, tie)
  index = s32[] select(keep, ai, bi)
  ROOT pair = ({t}[], s32[]) tuple(value, index)
}}
ENTRY e {{
  x = {t}[{shape}] parameter(0)
  i = s32[{shape}] iota(), iota_dimension={dim}
  low = {t}[] constant({low})
  zero = s32[] constant(0)
  ROOT r = ({t}[{out}], s32[{out}]) reduce(x, i, low, zero), dimensions={{{dim}}}, to_apply=cmp
}}
"""
FLOAT_PICK = "ne = pred[] compare(a, a), direction=NE\n  pick = pred[] or(gt, ne)"


def jax_form(shape: str, dim: int, out: str, *, direction: str = "GT", devices: int = 1,
             element_type: str = "f32", low: str | None = None) -> str:
    """JAX's argmax (GT) / argmin (LT) lowering over an iota along ``dim``, init -inf / +inf
    (or ``low``) and 0, returning the (value, index) pair; integers pick on the compare
    alone (JAX's integer form)."""
    is_float = element_type in ("f32", "bf16")
    if low is None:
        low = "-inf" if direction == "GT" else "inf"
    text = JAX_FORM.format(devices=devices, t=element_type, d=direction, shape=shape, dim=dim,
                           out=out, low=low, pick=FLOAT_PICK if is_float else "")
    return text if is_float else text.replace("gt = pred[] compare(a, b)",
                                              "pick = pred[] compare(a, b)")


NAN = np.float32(np.nan)


@pytest.mark.parametrize("rows,argmax,argmin", [
    # ties: the lowest index, for argmax and argmin alike
    ([1, 3, 3, 0, 0], 1, 3),
    # the first NaN wins both, whatever comes before or after it
    ([1, NAN, 5, NAN, -7], 1, 1),
    ([NAN, 2, 2, 2, 2], 0, 0),
    # infinities are values like any other; a row of -inf is won by its first element
    ([-np.inf, -np.inf, -np.inf, -np.inf, -np.inf], 0, 0),
    ([np.inf, 1, np.inf, -np.inf, -np.inf], 0, 3),
])
def test_jax_argmax_ties_and_nan_by_hand(rows, argmax, argmin):
    """Hand-derived: JAX's comparator keeps the accumulator on a NaN and on an equal value with
    a smaller index, so a left fold from (-inf or +inf, 0) ends at the first NaN if there is
    one, else at the first extreme; each row checked along the last axis, along the first (the
    transposed input) and flattened (one row)."""
    x = np.array(rows, np.float32)
    for direction, want in (("GT", argmax), ("LT", argmin)):
        for text, data in ((jax_form("1,5", 1, "1", direction=direction), x[None]),
                           (jax_form("5,1", 0, "1", direction=direction), x[:, None]),
                           (jax_form("5", 0, "", direction=direction), x)):
            value, index = interpreter.run(parse_module(text), [data])
            assert index.reshape(-1).tolist() == [want]
            assert value.reshape(-1).tobytes() == x[want].tobytes()


def test_signed_zeros_keep_the_last_equal_elements_bits():
    """Hand-derived: -0 == +0, so the index is the first zero's, but the fold's value is
    replaced at every equal element (select(pick, a, b) keeps b when a == b): the last
    zero's sign."""
    x = np.array([[-1, -0.0, 0.0, -2], [-1, 0.0, -0.0, -2]], np.float32)
    for direction in ("GT", "LT"):
        text = jax_form("2,4", 1, "2", direction=direction)
        value, index = interpreter.run(parse_module(text), [x if direction == "GT" else -x])
        np.testing.assert_array_equal(index[0], [1, 1])
        np.testing.assert_array_equal(np.signbit(value[0]),
                                      [False, True] if direction == "GT" else [True, False])


def test_a_nan_init_wins_and_an_init_tie_keeps_the_smaller_index():
    """Hand-derived: the init comes first in fold order: a NaN init is kept everywhere; an
    init equal to a row's extreme keeps the smaller of its index (0 here) and the row's."""
    x = np.array([[1, 3, 3], [5, NAN, 1]], np.float32)
    value, index = interpreter.run(parse_module(jax_form("2,3", 1, "2", low="nan")), [x])
    assert np.isnan(value[0]).all() and (index[0] == 0).all()
    value, index = interpreter.run(parse_module(jax_form("2,3", 1, "2", low="3")), [x])
    np.testing.assert_array_equal(index[0], [0, 1])
    np.testing.assert_array_equal(value[0], [3, NAN])


@pytest.mark.parametrize("element_type", ["f32", "bf16", "s32", "u8"])
@pytest.mark.parametrize("direction", ["GT", "LT"])
def test_one_pass_fold_over_read_only_inputs_equals_the_sequential_fold(element_type,
                                                                        direction):
    """Inputs are held as read-only views, which numpy's argmax would copy; the one-pass fold
    reads them through a writable alias instead (bf16 included, whose array interface says
    void). Results equal the double-negated comparator folded one element at a time; the
    caller's array is left as it was."""
    import ml_dtypes

    rng = np.random.default_rng(7)
    dtype = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "s32": np.int32,
             "u8": np.uint8}[element_type]
    pool = np.array([0, 1, 2, 3, 250], np.float64)
    if element_type in ("f32", "bf16"):
        pool = np.array([0.0, -0.0, 1.5, -1.5, np.nan, np.inf, -np.inf])
    x = rng.choice(pool, size=(4, 6, 7)).astype(dtype)
    x.flags.writeable = False
    before = x.copy()
    low = {"f32": None, "bf16": None, "s32": "-2147483648" if direction == "GT" else
           "2147483647", "u8": "0" if direction == "GT" else "255"}[element_type]
    for dim, out in ((0, "6,7"), (1, "4,7"), (2, "4,6")):
        text = jax_form("4,6,7", dim, out, direction=direction, element_type=element_type,
                        low=low)
        slow = text.replace("tie = pred[] and(eq, lt)",
                            "t0 = pred[] and(eq, lt)\n  n = pred[] not(t0)\n  tie = pred[] not(n)")
        assert recognise_arg_reducer(parse_module(text).computation("cmp")) is not None
        assert recognise_arg_reducer(parse_module(slow).computation("cmp")) is None
        for got, want in zip(interpreter.run(parse_module(text), [x]),
                             interpreter.run(parse_module(slow), [x])):
            assert got.tobytes() == want.tobytes()
    assert x.tobytes() == before.tobytes()


def test_a_narrow_iota_that_wraps_is_not_taken_for_positions():
    """An s8 iota of 200 elements wraps past 127, so its values do not increase: the reduce
    must fold the indices it holds (the comparator keeps the smallest index among equal
    values: -128 at position 128), not return numpy's position."""
    text = jax_form("200", 0, "", element_type="f32").replace("s32", "s8")
    x = np.zeros(200, np.float32)
    value, index = interpreter.run(parse_module(text), [x])
    assert index.dtype == np.int8 and index[0] == -128


@pytest.mark.parametrize("replicated", [True, False])
def test_argmax_at_8_devices_per_device_and_replicated(replicated):
    """At 8 devices an input given once (replicated) is searched once; one per device gives
    each device its own result: both equal numpy's argmax / argmin per device (no NaN, so
    numpy's first extreme is JAX's), along each axis and flattened."""
    rng = np.random.default_rng(3)
    x = (rng.integers(-4, 4, size=(8, 16, 32)) / 2).astype(np.float32)
    data = x[0] if replicated else x
    expected = np.broadcast_to(x[0], x.shape) if replicated else x
    for direction, numpy_fn in (("GT", np.argmax), ("LT", np.argmin)):
        for dim, out in ((0, "32"), (1, "16")):
            text = jax_form("16,32", dim, out, direction=direction, devices=8)
            _, index = interpreter.run(parse_module(text), [data])
            np.testing.assert_array_equal(index, numpy_fn(expected, axis=1 + dim))
        text = jax_form("512", 0, "", direction=direction, devices=8)
        flat = data.reshape(*data.shape[:-2], 512)
        _, index = interpreter.run(parse_module(text), [flat])
        np.testing.assert_array_equal(index, numpy_fn(expected.reshape(8, 512), axis=1))


def test_a_kept_plan_follows_the_comparator_and_the_iota_changed_in_place():
    """An execution plan binds the recognised comparator and the iota once; changing them in
    place must rebuild it. x = [[3, 1, 3], [0, 2, 2]] along dimension 1:
    - argmax (init -inf, 0): values [3, 2], indices [0, 1] (ties keep the lower index);
    - the comparator's GT turned into LT in place, the init still -inf: an argmin from -inf,
      whose accumulator -inf is less than every element, so the init is kept: values
      [-inf, -inf], indices [0, 0];
    - back to GT and the iota turned to iota_dimension=0 in place (indices [[0,0,0],[1,1,1]],
      no longer the positions along dimension 1): row 0 ties 3 at indices 0 and 0 -> index 0;
      row 1's maximum 2 is at indices 1 and 1 -> index 1; values [3, 2], indices [0, 1] — and
      with x = [[1, 3, 3], [2, 2, 0]] the positions would give [1, 0] but the indices held
      give [0, 1]. (The iota is also a constant-fed value the plan folds and keeps, whose
      attribute the plan binds too: this half holds without the reduce's own binding.)"""
    module = parse_module(jax_form("2,3", 1, "2"))
    x = np.array([[3, 1, 3], [0, 2, 2]], np.float32)
    value, index = interpreter.run(module, [x])
    assert value.tolist() == [[3, 2]] and index.tolist() == [[0, 1]]
    compare = next(i for i in module.computations[0].instructions if i.name == "gt")
    compare.set_attr("direction", "LT")
    value, index = interpreter.run(module, [x])
    assert value.tolist() == [[-np.inf, -np.inf]] and index.tolist() == [[0, 0]]
    compare.set_attr("direction", "GT")
    iota = next(i for i in module.entry.instructions if i.name == "i")
    iota.set_attr("iota_dimension", 0)
    value, index = interpreter.run(module, [np.array([[1, 3, 3], [2, 2, 0]], np.float32)])
    assert value.tolist() == [[3, 2]] and index.tolist() == [[0, 1]]
