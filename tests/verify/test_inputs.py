"""Bug-finding inputs: distinct per device, ties, signed zeros, NaN, infinities, extremes,
replicated parameters, exactly representable values; deterministic in the seed."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.topology import Topology
from neuron_sim.verify.inputs import STYLES, generate_inputs, parameter_replication

MODULE = """
HloModule m, num_partitions=4

ENTRY %main (x: f32[16], i: s32[16], r: f32[8], b: bf16[16], t: (u8[4], pred[4])) -> f32[16] {
  %x = f32[16]{0} parameter(0)
  %i = s32[16]{0} parameter(1)
  %r = f32[8]{0} parameter(2), sharding={replicated}
  %b = bf16[16]{0} parameter(3)
  %t = (u8[4]{0}, pred[4]{0}) parameter(4)
  ROOT %n = f32[16]{0} negate(%x)
}
"""
TOPOLOGY = Topology(1, 4)


@pytest.fixture(scope="module")
def module():
    return parse_module(MODULE)


def by_style(module, style, seed=0):
    return generate_inputs(module, TOPOLOGY, seed=seed, style=style)


@pytest.mark.parametrize("style", STYLES)
def test_inputs_are_stacked_per_device_with_the_parameter_dtypes(module, style):
    x, i, r, b, (u, p) = by_style(module, style)
    assert x.shape == (4, 16) and x.dtype == np.float32
    assert i.shape == (4, 16) and i.dtype == np.int32
    assert r.shape == (4, 8)
    assert b.dtype.name == "bfloat16"
    assert u.shape == (4, 4) and u.dtype == np.uint8 and p.dtype == np.bool_


@pytest.mark.parametrize("style", STYLES)
def test_every_device_gets_its_own_values(module, style):
    x, i, _, b, _ = by_style(module, style)
    for array in (x, i, b):
        rows = {array[f].tobytes() for f in range(4)}
        assert len(rows) == 4


@pytest.mark.parametrize("style", STYLES)
def test_a_replicated_parameter_is_the_same_on_every_device(module, style):
    r = by_style(module, style)[2]
    assert all(r[f].tobytes() == r[0].tobytes() for f in range(4))


def test_replication_is_read_per_leaf_as_xla_reads_it(module):
    """One replica, four partitions (an SPMD program): the sharding declares it; on replicas
    (4x1) only parameter_replication would (neuron_sim.hlo.replication)."""
    assert parameter_replication(module.entry.parameter(2), TOPOLOGY) == (True,)
    assert parameter_replication(module.entry.parameter(2), Topology(4, 1)) == (False,)
    assert parameter_replication(module.entry.parameter(4), TOPOLOGY) == (False, False)
    marked = parse_module(MODULE.replace("sharding={replicated}", "parameter_replication={true}"))
    assert parameter_replication(marked.entry.parameter(2), Topology(4, 1)) == (True,)
    assert parameter_replication(marked.entry.parameter(2), TOPOLOGY) == (False,)


def test_distinct_inputs_have_ties_within_a_device(module):
    x, i = by_style(module, "distinct")[:2]
    assert any(len(set(x[f].tolist())) < 16 for f in range(4))
    assert any(len(set(i[f].tolist())) < 16 for f in range(4))


def test_signed_style_has_negative_zero_and_infinities(module):
    x = by_style(module, "signed")[0]
    assert np.any((x == 0) & np.signbit(x))
    assert np.any(np.isinf(x))
    assert not np.any(np.isnan(x))


def test_nan_style_has_a_nan_per_array_and_row_stays_finite_elsewhere(module):
    x = by_style(module, "nan")[0]
    assert np.isnan(x).sum() >= 1


def test_boundary_style_has_integer_extremes(module):
    i = by_style(module, "boundary")[1]
    values = set(i.reshape(-1).tolist())
    assert {-2**31, 2**31 - 1} & values


def test_exact_style_values_are_multiples_of_a_quarter_in_a_small_range(module):
    x, _, _, b, _ = by_style(module, "exact")
    assert np.all(x * 4 == np.round(x * 4)) and np.all(np.abs(x) <= 4)
    wide = b.astype(np.float32)
    assert np.all(wide == np.round(wide)) and np.all(np.abs(wide) <= 4)


def test_inputs_are_deterministic_in_the_seed_and_differ_across_seeds(module):
    a = by_style(module, "distinct", seed=3)[0]
    assert a.tobytes() == by_style(module, "distinct", seed=3)[0].tobytes()
    assert a.tobytes() != by_style(module, "distinct", seed=4)[0].tobytes()


def test_trials_cycle_through_the_styles(module):
    signed = generate_inputs(module, TOPOLOGY, seed=0, trial=STYLES.index("signed"))[0]
    assert np.any(np.isinf(signed))


def test_uniform_style_fills_each_device_with_one_value_starting_at_minus_infinity(module):
    x = by_style(module, "uniform")[0]
    for f in range(4):
        assert len({v.tobytes() for v in x[f]}) == 1
    assert np.all(np.isneginf(x[0]))


def test_exact_counterpart_keeps_equal_values_equal():
    """A parameter marked replicated holds one row on every device, and ties tie: the exact
    replacement maps each distinct value to one exact value (an elementwise independent draw
    made the replicated all-reduce of XLA's AllReduceSimplifier test ReplicatedParameters look
    like a miscompile: 8 different rows summed against 8 x one row)."""
    import numpy as np

    from neuron_sim.verify.inputs import exact_counterpart

    row = np.array([0.1, -3.7, 0.1, 2.2, 0.0, np.inf], dtype=np.float32)
    replicated = np.stack([row] * 8)
    (out,) = exact_counterpart([replicated], seed=3)
    assert (out == out[0]).all()
    assert out[0, 0] == out[0, 2] and out[0, 0] != out[0, 1]
    assert out[0, 4] == 0 and out[0, 5] == np.inf
    assert not np.array_equal(out[0, :4], row[:4])
