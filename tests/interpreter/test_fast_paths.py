"""The interpreter's fast paths compute exactly what the general paths compute: the direct
ufunc calls against the op table's implementations, the local backend's held-once group results
(all-gather, all-reduce, collective-broadcast) against the per-row data functions, the cached
iota line against ``arange``, the plan cache against a
module changed between executes, and the blockwise f64 path against one f64 evaluation."""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.interpreter.backends.local import LocalTransport
from neuron_sim.interpreter.transport import CollectiveCall
from neuron_sim.semantics.collectives import movement, reductions
from neuron_sim.interpreter.evaluator import Frame, OpContext
from neuron_sim.interpreter.ops import REGISTRY
from neuron_sim.interpreter.ops.elementwise import _DIRECT, _float_math, direct_ufunc
from neuron_sim.interpreter.ops.shape import iota_line
from neuron_sim.interpreter.values import PerDevice, Replicated, collapse_if_uniform
from neuron_sim.hlo import Opcode, parse_module

pytestmark = pytest.mark.usefixtures("either_path")

SPECIALS = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-45, 3e38, -7.0])


def _operands(dtype, rows=4):
    rng = np.random.default_rng(0)
    if np.dtype(dtype).kind == "f":
        values = np.concatenate([SPECIALS, rng.standard_normal(54) * 100]).astype(dtype)
    else:
        info = np.iinfo(dtype)
        values = np.concatenate([[info.min, info.max, 0, -1 if info.min < 0 else 1],
                                 rng.integers(info.min, info.max, 60, dtype=dtype)]
                                ).astype(dtype)
    return [np.stack([rng.permutation(values) for _ in range(rows)]) for _ in range(2)]


@pytest.mark.parametrize("opcode", sorted(_DIRECT, key=lambda o: o.spelling))
def test_direct_ufuncs_are_bit_identical_to_the_op_table(opcode):
    ufunc, dtypes = _DIRECT[opcode]
    for dtype in dtypes:
        spelling = {np.float32: "f32", np.float64: "f64"}.get(dtype.type) or \
            f"{'s' if dtype.kind == 'i' else 'u'}{dtype.itemsize * 8}"
        args = ", ".join(f"{spelling}[64] a{i}" for i in range(ufunc.nin))
        text = ("HloModule m\nENTRY main {\n" +
                "".join(f"  a{i} = {spelling}[64] parameter({i})\n" for i in range(ufunc.nin)) +
                f"  ROOT r = {spelling}[64] {opcode.spelling}({args})\n}}\n")
        module = parse_module(text)
        root = module.entry.root
        assert direct_ufunc(root) is ufunc
        arrays = _operands(dtype)[:ufunc.nin]
        with np.errstate(all="ignore"):
            general = REGISTRY[opcode].fn(OpContext(None, root, Frame(None, 4)), *arrays)
            direct = ufunc(*arrays)
        assert np.asarray(general).astype(dtype).tobytes() == direct.tobytes(), dtype


def test_no_direct_ufunc_for_mixed_or_narrow_types():
    module = parse_module("""HloModule m
ENTRY main {
  a = bf16[4] parameter(0)
  b = bf16[4] parameter(1)
  c = s32[4] parameter(2)
  d = s32[4] divide(c, c)
  ROOT r = bf16[4] add(a, b)
}""")
    assert direct_ufunc(module.entry.root) is None
    assert direct_ufunc(module.entry.root.operand(0)) is None
    divide = [i for i in module.entry.instructions if i.opcode is Opcode.DIVIDE][0]
    assert direct_ufunc(divide) is None


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_all_gather_held_once_equals_the_per_row_all_gather(dim):
    x = np.random.default_rng(1).standard_normal((6, 2, 3, 4)).astype(np.float32)
    group = np.array([4, 1, 0, 5, 3, 2])
    expected = movement.all_gather(x, [tuple(group)], dim)
    call = CollectiveCall(kind=Opcode.ALL_GATHER, operands=[x], active=tuple(range(6)),
                          groups=(tuple(int(d) for d in group),), dim=dim)
    (got,) = LocalTransport(6).collective(call)
    assert got.strides[0] == 0
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("replicated", [False, True])
def test_all_reduce_and_broadcast_held_once_equal_the_per_row_results(replicated):
    """One group of every row, or the same operand on every row: the value is computed once
    and shared, and its bits are those of the per-row data function."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((6, 5)) * 10.0 ** rng.integers(-3, 4, (6, 1))).astype(np.float32)
    if replicated:
        x = np.broadcast_to(x[0], x.shape)
    group = (4, 1, 0, 5, 3, 2)
    transport = LocalTransport(6)
    reduce_call = CollectiveCall(kind=Opcode.ALL_REDUCE, operands=[x], active=tuple(range(6)),
                                 groups=(group,), combine=np.add)
    (reduced,) = transport.collective(reduce_call)
    assert reduced.strides[0] == 0
    assert reduced.tobytes() == reductions.all_reduce(x, [group], np.add).tobytes()
    broadcast_call = CollectiveCall(kind=Opcode.COLLECTIVE_BROADCAST, operands=[x],
                                    active=tuple(range(6)), groups=(group,))
    (sent,) = transport.collective(broadcast_call)
    assert sent.strides[0] == 0
    assert np.array_equal(sent, movement.collective_broadcast(x, [group]))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float32, np.float64,
                                   np.int64])
def test_iota_line_is_arange_in_the_type_and_read_only(dtype):
    for size in (0, 1, 200, 300, 1 << 23):
        line = iota_line(size, np.dtype(dtype))
        assert line.dtype == dtype and not line.flags.writeable
        assert line.tobytes() == np.arange(size).astype(dtype).tobytes()


def test_a_module_changed_between_executes_gets_a_new_plan():
    module = parse_module("""HloModule m
ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] negate(a)
  ROOT r = f32[3] add(a, b)
}""")
    x = np.array([1.0, 2.0, 3.0], np.float32)
    assert interpreter.run(module, [x])[0][0].tolist() == [0.0, 0.0, 0.0]
    root = module.entry.root
    root.replace_operand_with(root.operand(1), root.operand(0))   # a + a
    assert interpreter.run(module, [x])[0][0].tolist() == [2.0, 4.0, 6.0]


def test_a_constant_kept_between_executes_follows_its_literal():
    """The value of a constant is kept for the next execute only while the instruction keeps
    the same literal and shape: a literal replaced between executes (as a pass does) is read
    again; outputs of a kept constant are copies the caller may write to."""
    from neuron_sim.hlo.literals import Literal

    module = parse_module("""HloModule m
ENTRY main {
  c = f32[3] constant({1, 2, 3})
  ROOT r = f32[3] negate(c)
}""")
    assert interpreter.run(module)[0][0].tolist() == [-1.0, -2.0, -3.0]
    constant = module.entry.instruction("c")
    constant.literal = Literal.from_array(constant.shape, np.array([4, 5, 6], np.float32))
    assert interpreter.run(module)[0][0].tolist() == [-4.0, -5.0, -6.0]
    module.entry.root.replace_all_uses_with(constant)
    module.entry.remove(module.entry.instruction("r"))
    first = interpreter.run(module)[0]
    first[0, 0] = 99
    assert interpreter.run(module)[0][0].tolist() == [4.0, 5.0, 6.0]


@pytest.mark.parametrize("dims,dim", [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 70000), 1)])
def test_iota_views_kept_between_executes_are_read_only_iotas(dims, dim):
    """Hand-derived: element (i, j) of an iota along ``dim`` is its index along ``dim``; the
    batched view kept for short lines (and the one built for long ones) says so on every
    call and cannot be written."""
    from neuron_sim.interpreter.ops.shape import iota_array

    want = np.indices(dims)[dim].astype(np.int32)[None]
    for _ in range(2):
        got = iota_array(dims, dim, np.dtype(np.int32))
        assert got.tobytes() == want.tobytes() if got.flags.c_contiguous else \
            np.array_equal(got, want)
        assert got.shape == want.shape and not got.flags.writeable


def test_blockwise_f64_path_equals_one_f64_evaluation():
    x = np.random.default_rng(2).standard_normal(100_003).astype(np.float32) * 30
    with np.errstate(over="ignore"):
        assert _float_math(np.exp, x).tobytes() == np.exp(x.astype(np.float64)).astype(
            np.float32).tobytes()


def test_uniformity_is_decided_by_bits_in_blocks():
    rows = np.zeros((5, 300_000), np.float32)
    assert isinstance(collapse_if_uniform(rows), Replicated)
    rows[4, -1] = -0.0
    assert isinstance(collapse_if_uniform(rows), PerDevice)
    view = collapse_if_uniform(np.broadcast_to(np.float32(2.5), (7,))).array
    assert view.shape == () and not view.flags.writeable


def test_outputs_do_not_alias_inputs_or_each_other():
    module = parse_module("""HloModule m, num_partitions=2
ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] negate(a)
  ROOT r = (f32[3], f32[3], f32[3]) tuple(a, b, b)
}""")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = interpreter.run(module, [x])
    out[0][0, 0] = 99
    out[1][0, 0] = 99
    assert x[0, 0] == 0 and out[2][0, 0] == -0.0



def test_a_value_held_once_is_written_out_as_independent_rows():
    """A result held once (a constant's value, replicated over 2 devices, and an input given
    once) comes out as rows the caller owns: writing one row changes neither the other row,
    nor the input, nor the next run's output."""
    module = parse_module("""HloModule m, num_partitions=2
ENTRY main {
  a = f32[3] parameter(0)
  c = f32[3] constant({1, 2, 3})
  ROOT r = (f32[3], f32[3]) tuple(c, a)
}""")
    x = np.array([7, 8, 9], np.float32)
    constant, given = interpreter.run(module, [x])
    for out, row in ((constant, [1, 2, 3]), (given, [7, 8, 9])):
        assert out.shape == (2, 3) and out.flags.writeable
        out[0, 0] = 99
        assert out[1].tolist() == row
    assert x.tolist() == [7, 8, 9]
    assert interpreter.run(module, [x])[0].tolist() == [[1, 2, 3], [1, 2, 3]]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
def test_all_reduce_by_accumulate_is_the_position_by_position_left_fold(dtype):
    """Magnitudes from 1e-3 to 1e4 (and wrapping int8 sums): any other order than the left
    fold of positions 0..n-1 (pairwise, reversed) changes the float bits."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3000, 5)) * 10.0 ** rng.integers(-3, 4, (3000, 1)))
    x = x.astype(dtype) if np.dtype(dtype).kind == "f" else rng.integers(-128, 128, (3000, 5)
                                                                         ).astype(dtype)
    groups = [tuple(range(0, 3000, 2)), tuple(range(1, 3000, 2))]
    got = reductions.all_reduce(x, groups, np.add)
    for group in groups:
        expected = x[group[0]].copy()
        for d in group[1:]:
            expected = np.add(expected, x[d])
        assert got[group[0]].tobytes() == expected.tobytes()
        assert got[group[-1]].tobytes() == expected.tobytes()
