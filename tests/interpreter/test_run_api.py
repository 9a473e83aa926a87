"""interpreter.run / execute: inputs, topology defaults, replicated values, error reporting."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from interp_helpers import module
from neuron_sim.hlo import parse_module
from neuron_sim.interpreter.errors import CollectiveMismatchError
from neuron_sim.interpreter.values import PerDevice, Replicated
from neuron_sim.topology import Topology

TWO_PARAMS = module("""
    a = f32[2] parameter(0)
    b = s32[] parameter(1)
    c = f32[] convert(b)
    cb = f32[2] broadcast(c), dimensions={}
    ROOT r = f32[2] add(a, cb)
    """, header="num_partitions=3")


def test_inputs_per_device_or_shared_by_list_or_dict():
    shared = np.array([1, 2], np.float32)
    per_device = np.array([10, 20, 30], np.int32)
    out = interpreter.run(TWO_PARAMS, [shared, per_device])[0]
    assert out.tolist() == [[11, 12], [21, 22], [31, 32]]
    same = interpreter.run(TWO_PARAMS, {"arg0": shared, "arg1": per_device})[0]
    assert same.tolist() == out.tolist()


def test_values_identical_on_every_device_are_held_once():
    result = interpreter.execute(TWO_PARAMS, [np.zeros((3, 2), np.float32),
                                              np.array(5, np.int32)])
    assert isinstance(result.values[0], Replicated)  # per-device rows that are all equal
    result = interpreter.execute(TWO_PARAMS, [np.zeros(2, np.float32),
                                              np.array([1, 2, 3], np.int32)])
    assert isinstance(result.values[0], PerDevice)


def test_topology_defaults_to_the_header_and_can_be_overridden():
    out = interpreter.run(TWO_PARAMS, [np.zeros(2, np.float32), np.array(1, np.int32)])[0]
    assert out.shape == (3, 2)
    out = interpreter.run(TWO_PARAMS, [np.zeros(2, np.float32), np.array(1, np.int32)],
                          topology=Topology(2, 2))[0]
    assert out.shape == (4, 2)


@pytest.mark.parametrize("inputs, message", [
    ({"arg0": np.zeros(2, np.float32)}, r"no input array for parameter 1 \(arg1, s32\[\]\)"),
    ({"arg0": np.zeros(3, np.float32), "arg1": np.int32(1)},
     r"parameter 0 \(arg0, f32\[2\]\) has shape \[3\]; expected \[2\] \(same on every device\) "
     r"or \[3, 2\] \(one per device\)"),
    ({"arg0": np.zeros(2, np.float64), "arg1": np.int32(1)},
     r"parameter 0 \(arg0, f32\[2\]\) has dtype float64, expected f32"),
    ({"arg0": np.zeros(2, np.float32), "arg1": np.int32(1), "arg7": np.zeros(1)},
     r"unexpected key 'arg7': the entry computation has 2 parameters \(keys arg0..arg1\)"),
    ([np.zeros(2, np.float32)], r"1 input arrays given but the entry computation has 2"),
])
def test_inputs_that_do_not_fit_get_one_clear_error(inputs, message):
    with pytest.raises(interpreter.InputError, match=message):
        interpreter.run(TWO_PARAMS, inputs)


def test_bf16_inputs_may_come_as_raw_bytes():
    m = module("""
        a = bf16[2] parameter(0)
        ROOT r = bf16[2] add(a, a)
        """)
    raw = np.array([1.5, -2], ml_dtypes.bfloat16).view("V2")
    out = interpreter.run(m, [raw])[0]
    assert out.dtype == ml_dtypes.bfloat16 and out.astype(np.float32).tolist() == [[3, -4]]


def test_drawn_inputs_are_distinct_per_device_and_reproducible():
    first = interpreter.draw_inputs(TWO_PARAMS, Topology(1, 3), seed=5)
    again = interpreter.draw_inputs(TWO_PARAMS, Topology(1, 3), seed=5)
    assert first.keys() == {"arg0", "arg1"}
    assert first["arg0"].shape == (3, 2) and first["arg0"].dtype == np.float32
    assert len({row.tobytes() for row in first["arg0"]}) == 3
    assert all(first[k].tobytes() == again[k].tobytes() for k in first)
    with pytest.raises(interpreter.InputError, match="give inputs or a seed"):
        interpreter.run(TWO_PARAMS)
    assert interpreter.run(TWO_PARAMS, seed=1)[0].shape == (3, 2)


def test_errors_name_the_innermost_instruction_and_keep_the_cause():
    computations = """
    inner {
      p = f32[4] parameter(0)
      ROOT bad = f32[5] reshape(p)
    }
    """
    m = module("""
        x = f32[4] parameter(0)
        ROOT f = f32[5] fusion(x), kind=kLoop, calls=inner
        """, computations=computations)
    with pytest.raises(interpreter.ExecutionError) as caught:
        interpreter.run(m, [np.zeros(4, np.float32)])
    assert str(caught.value).startswith("While executing %bad = f32[5] reshape(%p): ")
    assert isinstance(caught.value.__cause__, ValueError)


def test_custom_call_is_unimplemented_and_names_its_target():
    m = module("""
        x = f32[4] parameter(0)
        ROOT c = f32[4] custom-call(x), custom_call_target="MyKernel"
        """)
    with pytest.raises(interpreter.Unimplemented) as caught:
        interpreter.run(m, [np.zeros(4, np.float32)])
    assert str(caught.value) == ('While executing %c = f32[4] custom-call(%x), '
                                 'custom_call_target="MyKernel": the interpreter does not '
                                 'implement \'custom-call\' (unsupported custom-call target: '
                                 'custom_call_target="MyKernel"; supported: TopK)')
    assert caught.value.opcode == "custom-call"


def test_run_counts_device_instructions():
    result = interpreter.execute(TWO_PARAMS, [np.zeros(2, np.float32), np.int32(1)])
    # convert, broadcast, add executed once each for 3 devices (parameters are not counted).
    assert result.instructions_executed == 3 and result.device_instructions == 9


def test_npz_round_trip_stores_ml_dtypes_as_raw_bytes(tmp_path):
    from neuron_sim.io import read_npz, write_npz

    arrays = {"out0": np.array([1.5, -2], ml_dtypes.bfloat16),
              "out1": np.array([0.5], ml_dtypes.float8_e4m3fn),
              "out2": np.array([[1, 2]], np.int32)}
    path = tmp_path / "o.npz"
    write_npz(path, arrays)
    assert [p.name for p in tmp_path.iterdir()] == ["o.npz"]  # no temporary file left behind
    back = read_npz(path)
    assert back["out0"].dtype == np.dtype("V2") and back["out1"].dtype == np.dtype("V1")
    assert back["out0"].view(ml_dtypes.bfloat16).tolist() == arrays["out0"].tolist()
    assert back["out1"].view(ml_dtypes.float8_e4m3fn).tolist() == [0.5]
    assert back["out2"].tolist() == [[1, 2]]


SUBSET_MODULE = """HloModule m, num_partitions=4
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY e {
  p = s32[] partition-id()
  ROOT r = s32[] all-reduce(p), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add
}
"""


def test_execute_on_some_devices_gives_their_rows_of_the_whole_run():
    """Pairs {0,1} and {2,3} sum their partition ids: 1, 1, 5, 5 on the whole topology.
    Devices [3, 2] alone: their rows in that order, [5, 5]. Devices [1, 2] cut both pairs:
    the all-reduce's rendezvous is not met (a collective mismatch), and ids outside the
    topology are refused."""
    m = parse_module(SUBSET_MODULE)
    assert interpreter.execute(m).outputs[0].tolist() == [1, 1, 5, 5]
    assert interpreter.execute(m, devices=[3, 2]).outputs[0].tolist() == [5, 5]
    with pytest.raises(CollectiveMismatchError):
        interpreter.execute(m, devices=[1, 2])
    with pytest.raises(ValueError):
        interpreter.execute(m, devices=[0, 4])
