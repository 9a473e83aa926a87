"""The one argument preparer: tuple parameters, the fitter's errors, a rank's subset of rows.

Expected values are derived by hand in each test's docstring.
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from interp_helpers import module
from neuron_sim.interpreter.arguments import argument_values, draw_inputs, needs_inputs, prepare_arguments
from neuron_sim.interpreter.values import TOKEN, PerDevice, Replicated, TupleValue
from neuron_sim.cli import main
from neuron_sim.hlo import parse_module as parse_text
from neuron_sim.io import fit_arguments, read_npz, write_npz
from neuron_sim.topology import Topology

# Parameter 0 is ((x f32[2], n s32[]), token[]): leaves 0 = x, 1 = n, 2 = the token.
# The result is x + q + n on every device.
TUPLE_PARAM = module("""
    p = ((f32[2], s32[]), token[]) parameter(0)
    q = f32[2] parameter(1)
    inner = (f32[2], s32[]) get-tuple-element(p), index=0
    x = f32[2] get-tuple-element(inner), index=0
    n = s32[] get-tuple-element(inner), index=1
    c = f32[] convert(n)
    cb = f32[2] broadcast(c), dimensions={}
    xq = f32[2] add(x, q)
    ROOT r = f32[2] add(xq, cb)
    """, header="num_partitions=2")


def test_a_tuple_parameter_takes_a_nested_sequence():
    """x = [1, 2] on both devices, n = 10 on device 0 and 20 on device 1, q = [100, 200]:
    device 0 computes [1+100+10, 2+200+10] = [111, 212], device 1 [121, 222]."""
    x = np.array([1, 2], np.float32)
    n = np.array([10, 20], np.int32)
    q = np.array([100, 200], np.float32)
    out = interpreter.run(TUPLE_PARAM, [((x, n), None), q])[0]
    assert out.tolist() == [[111, 212], [121, 222]]


def test_a_tuple_parameter_takes_one_key_per_leaf():
    """The same inputs as leaf keys: leaves of parameter 0 are 0 = x, 1 = n, 2 = the token
    (which takes no key): the same [[111, 212], [121, 222]]."""
    inputs = {"arg0.0": np.array([1, 2], np.float32), "arg0.1": np.array([10, 20], np.int32),
              "arg1": np.array([100, 200], np.float32)}
    assert interpreter.run(TUPLE_PARAM, inputs)[0].tolist() == [[111, 212], [121, 222]]


def test_run_accepts_tuple_parameters_from_an_npz_file(tmp_path):
    """``neuron-sim run --inputs`` with keys arg0.0, arg0.1, arg1: out0 as derived above."""
    hlo = tmp_path / "tuple.hlo"
    hlo.write_text(TUPLE_PARAM.to_text())
    write_npz(tmp_path / "in.npz", {"arg0.0": np.array([1, 2], np.float32),
                                    "arg0.1": np.array([10, 20], np.int32),
                                    "arg1": np.array([100, 200], np.float32)})
    out = tmp_path / "out.npz"
    assert main(["run", str(hlo), "--inputs", str(tmp_path / "in.npz"), "-o", str(out)]) == 0
    assert read_npz(out)["out0"].tolist() == [[111, 212], [121, 222]]


def test_run_seed_draws_tuple_leaves_under_their_npz_keys(tmp_path):
    """Drawn inputs use the file's keys: arg0.0 f32 [2, 2] and arg0.1 s32 [2] (no key for the
    token), arg1 f32 [2, 2]; running on them gives what ``--seed`` gives."""
    drawn = draw_inputs(TUPLE_PARAM, Topology(1, 2), 3)
    assert {k: (v.dtype.name, v.shape) for k, v in drawn.items()} == {
        "arg0.0": ("float32", (2, 2)), "arg0.1": ("int32", (2,)), "arg1": ("float32", (2, 2))}
    hlo = tmp_path / "tuple.hlo"
    hlo.write_text(TUPLE_PARAM.to_text())
    assert main(["run", str(hlo), "--seed", "3", "-o", str(tmp_path / "out.npz")]) == 0
    expected = interpreter.run(TUPLE_PARAM, drawn)[0]
    assert np.array_equal(read_npz(tmp_path / "out.npz")["out0"], expected)


def test_drawn_inputs_are_distinct_per_device_in_range_and_follow_the_seed():
    """What draw_inputs promises, checked without it: every device's row differs, integers lie
    in [-100, 100), the same seed gives the same arrays and another seed others."""
    drawn = draw_inputs(TUPLE_PARAM, Topology(1, 4), 3)
    floats, ints = drawn["arg0.0"], drawn["arg0.1"]
    assert len({row.tobytes() for row in floats}) == 4
    assert ints.min() >= -100 and ints.max() < 100
    again, other = draw_inputs(TUPLE_PARAM, Topology(1, 4), 3), draw_inputs(TUPLE_PARAM,
                                                                             Topology(1, 4), 4)
    assert all(np.array_equal(drawn[k], again[k]) for k in drawn)
    assert not np.array_equal(drawn["arg0.0"], other["arg0.0"])


@pytest.mark.parametrize("inputs, message", [
    ({"arg0.0": np.zeros(2, np.float32), "arg1": np.zeros(2, np.float32)},
     r"no input array for parameter 0 leaf 1 \(arg0.1, s32\[\]\)"),
    ({"arg0": ((np.zeros(2, np.float32), np.int32(1)), None), "arg0.0": np.zeros(2, np.float32),
      "arg1": np.zeros(2, np.float32)},
     r"parameter 0 \(arg0, \(\(f32\[2\], s32\[\]\), token\[\]\)\) is given both as arg0 and as "
     r"leaf keys"),
    ({"arg0.2": np.zeros(1), "arg0.3": np.zeros(1)},
     r"unexpected key 'arg0.3': .* tuple parameter i as arg\{i\}.\{j\}"),
    ({"arg1.0": np.zeros(1)}, r"unexpected key 'arg1.0'"),
    ([np.zeros(2, np.float32), np.zeros(2, np.float32)],
     r"parameter 0 \(arg0, .*\) is a tuple: give a sequence of 2 inputs"),
    ([[np.zeros(2, np.float32)], np.zeros(2, np.float32)],
     r"parameter 0 \(arg0, .*\) is a tuple of 2 elements but 1 inputs were given"),
    ([((np.zeros(3, np.float32), np.int32(1)), None), np.zeros(2, np.float32)],
     r"parameter 0 leaf 0 \(arg0.0, f32\[2\]\) has shape \[3\]; expected \[2\] \(same on every "
     r"device\) or \[2, 2\] \(one per device\)"),
    ([((np.zeros(2, np.float32), np.array(1, np.float32)), None), np.zeros(2, np.float32)],
     r"parameter 0 leaf 1 \(arg0.1, s32\[\]\) has dtype float32, expected s32"),
])
def test_tuple_inputs_that_do_not_fit_get_one_error_naming_the_leaf(inputs, message):
    with pytest.raises(interpreter.InputError, match=message):
        interpreter.run(TUPLE_PARAM, inputs)


def test_the_fitter_names_the_file_and_mirrors_the_shapes():
    """``source`` prefixes every message; a fitted tuple parameter is a nested tuple, its
    token None."""
    shapes = [p.shape for p in TUPLE_PARAM.entry.parameters]
    x, n, q = np.zeros(2, np.float32), np.array([1, 2], np.int32), np.zeros(2, np.float32)
    fitted = fit_arguments({"arg0.0": x, "arg0.1": n, "arg1": q}, shapes, 2)
    assert fitted[0][0][0] is x and fitted[0][0][1] is n and fitted[0][1] is None
    assert fitted[1] is q
    with pytest.raises(ValueError, match=r"^in.npz: no input array for parameter 1 \(arg1, "):
        fit_arguments({"arg0.0": x, "arg0.1": n}, shapes, 2, source="in.npz")


def test_a_ranks_rows_are_its_devices_rows_only():
    """Four devices, a rank hosting devices (1, 3). x per device [[0,1],[2,3],[4,5],[6,7]] keeps
    rows 1 and 3: [[2,3],[6,7]]; n per device [5, 7, 9, 7] keeps [7, 7], equal, so held once
    (7); q given once stays held once."""
    shapes = [p.shape for p in TUPLE_PARAM.entry.parameters]
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    n = np.array([5, 7, 9, 7], np.int32)
    q = np.array([1, 1], np.float32)
    fitted = fit_arguments([((x, n), None), q], shapes, 4)
    (param, shared) = argument_values(fitted, shapes, devices=[1, 3])
    assert isinstance(param, TupleValue) and param.elements[1] is TOKEN
    xs, ns = param.elements[0].elements
    assert isinstance(xs, PerDevice) and xs.array.tolist() == [[2, 3], [6, 7]]
    assert isinstance(ns, Replicated) and ns.array.tolist() == 7
    assert isinstance(shared, Replicated) and shared.array.tolist() == [1, 1]
    x[1, 0] = -1  # the values own their data
    assert xs.array.tolist() == [[2, 3], [6, 7]]


def test_a_rank_subset_matches_the_same_rows_of_the_whole():
    """Preparing rows (2, 0) of drawn inputs gives rows 2 and 0 of the all-device values."""
    topology = Topology(1, 4)
    everything = prepare_arguments(TUPLE_PARAM, topology, None, seed=1)
    subset = prepare_arguments(TUPLE_PARAM, topology, None, seed=1, devices=[2, 0])
    whole = everything[0].elements[0].elements[0].array
    assert subset[0].elements[0].elements[0].array.tolist() == whole[[2, 0]].tolist()
    assert subset[1].array.tolist() == everything[1].array[[2, 0]].tolist()


def test_a_module_needs_inputs_unless_every_parameter_leaf_is_a_token():
    tokens = module("""
        t = (token[], token[]) parameter(0)
        ROOT c = f32[] constant(1)
        """)
    assert not needs_inputs(tokens) and needs_inputs(TUPLE_PARAM)
    assert interpreter.run(tokens)[0].tolist() == [1.0]
    with pytest.raises(interpreter.InputError, match="give inputs or a seed"):
        interpreter.run(TUPLE_PARAM)


SIGNATURE_MODULE = """HloModule m, num_partitions=2
ENTRY e {
  x = f32[3] parameter(0)
  k = s32[] parameter(1)
  c = f32[] convert(k)
  b = f32[3] broadcast(c), dimensions={}
  ROOT r = f32[3] add(x, b)
}
"""


def test_exact_arrays_are_taken_as_the_fitter_takes_them():
    """The common call (``given_arrays``: arrays of the parameters' own dtypes and shapes) gives
    what the general fitter gives. x given once is held once; k per device [5, 5] (equal rows)
    is held once too; x per device [[1,2,3],[4,5,6]] with k = [1, 2] per device gives
    [[2,3,4],[6,7,8]] (x + k on each device)."""
    m = parse_text(SIGNATURE_MODULE)
    topology = Topology(1, 2)
    x = np.array([1, 2, 3], np.float32)
    signature = [(np.dtype(np.float32), (3,)), (np.dtype(np.int32), ())]
    values = prepare_arguments(m, topology, [x, np.array([5, 5], np.int32)], None,
                               signature=signature)
    assert [type(v) for v in values] == [Replicated, Replicated]
    assert values[1].array.tolist() == 5
    assert not values[0].array.flags.writeable and x.flags.writeable
    per_device = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    out = interpreter.run(m, [per_device, np.array([1, 2], np.int32)], topology)[0]
    assert out.tolist() == [[2, 3, 4], [6, 7, 8]]


@pytest.mark.parametrize("inputs, message", [
    # a float64 x is not converted: the fitter names the parameter and the dtype
    ([np.zeros(3), np.int32(0)], "parameter 0 (arg0, f32[3]) has dtype float64, expected f32"),
    # three rows for two devices
    ([np.zeros((3, 3), np.float32), np.int32(0)], "parameter 0 (arg0, f32[3]) has shape [3, 3]"),
    # one input for two parameters
    ([np.zeros(3, np.float32)], "1 input arrays given but the entry computation has 2"),
])
def test_arrays_that_do_not_fit_exactly_get_the_fitters_message(inputs, message):
    """Inputs outside the common call take the general path, which refuses them with its
    one sentence naming the parameter (as before the fast path existed)."""
    m = parse_text(SIGNATURE_MODULE)
    with pytest.raises(interpreter.InputError) as caught:
        interpreter.run(m, inputs, Topology(1, 2))
    assert message in str(caught.value)


def test_python_values_are_still_converted():
    """Not numpy arrays: the general path converts them. [1, 2, 3] + 2 = [3, 4, 5]."""
    m = parse_text(SIGNATURE_MODULE)
    out = interpreter.run(m, [[1, 2, 3], 2], Topology(1, 2))[0]
    assert out.tolist() == [[3, 4, 5], [3, 4, 5]]


def test_npz_style_keys_are_taken_by_position_as_the_fitter_takes_them():
    """A mapping ``arg0``, ``arg1`` (an npz file's keys), in any order, of exact arrays: x per
    device [[1,2,3],[4,5,6]] with k = [1, 2] per device gives [[2,3,4],[6,7,8]] (x + k on each
    device), and the values are what the list of the same arrays gives (types, bits,
    read-only views of the caller's arrays)."""
    m = parse_text(SIGNATURE_MODULE)
    topology = Topology(1, 2)
    per_device = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    k = np.array([1, 2], np.int32)
    signature = [(np.dtype(np.float32), (3,)), (np.dtype(np.int32), ())]
    by_key = prepare_arguments(m, topology, {"arg1": k, "arg0": per_device}, None,
                               signature=signature)
    by_list = prepare_arguments(m, topology, [per_device, k], None, signature=signature)
    assert [type(v) for v in by_key] == [type(v) for v in by_list]
    assert [v.array.tobytes() for v in by_key] == [v.array.tobytes() for v in by_list]
    assert not by_key[0].array.flags.writeable and per_device.flags.writeable
    out = interpreter.run(m, {"arg0": per_device, "arg1": k}, topology)[0]
    assert out.tolist() == [[2, 3, 4], [6, 7, 8]]


@pytest.mark.parametrize("inputs, message", [
    # a key that names no parameter, beside one missing
    ({"arg0": np.zeros(3, np.float32), "argument1": np.int32(0)}, "unexpected key 'argument1'"),
    # a key missing
    ({"arg0": np.zeros(3, np.float32)}, "no input array for parameter 1 (arg1, s32[])"),
    # the right keys, a float64 x
    ({"arg0": np.zeros(3), "arg1": np.int32(0)},
     "parameter 0 (arg0, f32[3]) has dtype float64, expected f32"),
])
def test_keys_that_do_not_fit_exactly_get_the_fitters_message(inputs, message):
    """Mappings outside the common call take the general path and its one sentence."""
    m = parse_text(SIGNATURE_MODULE)
    with pytest.raises(interpreter.InputError) as caught:
        interpreter.run(m, inputs, Topology(1, 2))
    assert message in str(caught.value)
