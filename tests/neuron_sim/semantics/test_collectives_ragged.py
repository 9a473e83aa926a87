"""ragged-all-to-all: its data function, its execution on the local backend, the checker and the
symbolic evaluator. Every expected value is derived by hand in the test's docstring from XLA's
definition (docs/semantics.md §3): member i sends rows ``input_offsets[e] : + send_sizes[e]``
(``e = j * k + u``, update u for peer j) of its input to member j, which receives them at rows
``output_offsets[e] ...`` (the sender's offsets) of its output buffer.
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.checker import HloCheckError, check_module
from neuron_sim.proofs.symbolic.evaluator import SymbolicEvaluator, SymbolicUnsupported
from neuron_sim.semantics.collectives.ragged import ragged_all_to_all
from neuron_sim.topology import Topology


def a(*rows) -> np.ndarray:
    return np.array(rows, np.int32)


def test_the_example_of_xlas_operation_semantics():
    """Replica 0 holds [1, 2, 2], offsets [0, 1], sizes [1, 2], output offsets [0, 0]; replica
    1 holds [3, 4, 0], offsets [0, 1], sizes [1, 1], output offsets [1, 2]. Replica 0 keeps
    [1] at row 0 and sends [2, 2] to row 0 of replica 1; replica 1 sends [3] to row 1 of
    replica 0 and keeps [4] at row 2: [1, 3, 0, 0] and [2, 2, 4, 0]."""
    out = ragged_all_to_all([a([1, 2, 2], [3, 4, 0]), np.zeros((2, 4), np.int32),
                             a([0, 1], [0, 1]), a([1, 2], [1, 1]), a([0, 0], [1, 2]),
                             a([1, 1], [2, 1])], [(0, 1)])
    assert out.tolist() == [[1, 3, 0, 0], [2, 2, 4, 0]]


# Two updates per peer (k = 2), entries ordered (peer 0: u0, u1; peer 1: u0, u1).
TWO_UPDATES = dict(
    data=a([10, 11, 12, 13, 14], [20, 21, 22, 23, 24]),
    buffer=np.full((2, 6), -1, np.int32),
    starts=a([0, 3, 1, 0], [2, 0, 0, 4]),
    sizes=a([1, 2, 2, 0], [1, 0, 2, 1]),
    lands=a([0, 4, 1, 0], [1, 0, 3, 5]),
    expected=a([1, 2, 1, 0], [2, 0, 2, 1]),
)


def test_several_updates_per_peer():
    """Device 0 sends itself [10] to row 0 and [13, 14] to rows 4-5, and device 1 [11, 12] to
    rows 1-2 (its second update to device 1 is empty). Device 1 sends device 0 [22] to row 1
    (second update empty), and itself [20, 21] to rows 3-4 and [24] to row 5. Rows nobody
    writes keep -1: [10, 22, -1, -1, 13, 14] and [-1, 11, 12, 20, 21, 24]."""
    t = TWO_UPDATES
    out = ragged_all_to_all([t["data"], t["buffer"], t["starts"], t["sizes"], t["lands"],
                             t["expected"]], [(0, 1)])
    assert out.tolist() == [[10, 22, -1, -1, 13, 14], [-1, 11, 12, 20, 21, 24]]
    # The same entries as [2, 2] arrays (one row per peer) are read row-major: the same result.
    square = [x.reshape(2, 2, 2) for x in (t["starts"], t["sizes"], t["lands"], t["expected"])]
    again = ragged_all_to_all([t["data"], t["buffer"], *square], [(0, 1)])
    assert again.tolist() == out.tolist()


@pytest.mark.parametrize("change, words", [
    (("expected", 0, 1, 3), "whose recv_sizes expect 3"),
    (("starts", 0, 1, 4), "does not fit the 5 rows of the input"),
    (("lands", 1, 3, 6), "does not fit the 6 rows of the output"),
    (("lands", 1, 0, 4), "two slices land on row 4 of device 0's output"),
    (("starts", 0, 0, -1), "input offset -1"),
])
def test_undefined_exchanges_are_refused(change, words):
    """Device 0 expecting 3 rows where it sends itself 2; device 0's [13, 14] read from row 4
    of 5; device 1's [24] written at row 6 of 6; device 1's slice for device 0 moved onto row
    4, where device 0's own [13, 14] lands; a negative offset."""
    t = {k: v.copy() for k, v in TWO_UPDATES.items()}
    name, device, entry, value = change
    t[name][device, entry] = value
    with pytest.raises(ValueError, match=words):
        ragged_all_to_all([t["data"], t["buffer"], t["starts"], t["sizes"], t["lands"],
                           t["expected"]], [(0, 1)])


def test_input_and_output_must_share_the_element_type():
    with pytest.raises(ValueError, match="must share the element type"):
        ragged_all_to_all([a([1], [2]).astype(np.float32), np.zeros((2, 2), np.int32),
                           *[a([0, 0], [0, 0])] * 4], [(0, 1)])


MODULE = """HloModule ragged, replica_count=2

ENTRY main {
  input = s32[3] parameter(0)
  output = s32[4] parameter(1)
  input_offsets = s32[2] parameter(2)
  send_sizes = s32[2] parameter(3)
  output_offsets = s32[2] parameter(4)
  recv_sizes = s32[2] parameter(5)
  ROOT r = s32[4] ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets, recv_sizes), replica_groups={{1,0}}
}
"""


def test_runs_on_the_local_backend_by_group_position():
    """Group {1, 0}: device 1 is position 0, device 0 position 1, and entry j of the offsets
    names the peer at position j. Device 0 (position 1) sends [1] to position 0 (device 1) at
    row 0 and keeps [2, 2] at row 0; device 1 (position 0) keeps [3] at row 1 and sends [4] to
    device 0 at row 2: device 0 ends [2, 2, 4, 0], device 1 [1, 3, 0, 0]."""
    module = parse_module(MODULE)
    check_module(module)
    inputs = [a([1, 2, 2], [3, 4, 0]), np.zeros((2, 4), np.int32), a([0, 1], [0, 1]),
              a([1, 2], [1, 1]), a([0, 0], [1, 2]), a([1, 2], [1, 1])]
    (out,) = interpreter.run(module, inputs, Topology(2, 1))
    assert out.tolist() == [[2, 2, 4, 0], [1, 3, 0, 0]]


def test_the_checker_takes_the_output_buffer_shape_and_uniform_groups():
    module = parse_module(MODULE.replace("ROOT r = s32[4]", "ROOT r = s32[3]"))
    with pytest.raises(HloCheckError, match="s32\\[4\\]"):
        check_module(module)
    uneven = parse_module(MODULE.replace("replica_count=2", "replica_count=3").replace(
        "replica_groups={{1,0}}", "replica_groups={{1,0},{2}}"))
    with pytest.raises(HloCheckError, match="same size"):
        check_module(uneven)


SYMBOLIC = """HloModule ragged_symbolic, replica_count=2

ENTRY main {
  input = f32[3] parameter(0)
  zero = f32[] constant(0)
  output = f32[4] broadcast(zero), dimensions={}
  r = u32[] replica-id()
  z = u32[] constant(0)
  io_table = s32[2,2] constant({{0,1},{0,1}})
  io_row = s32[1,2] dynamic-slice(io_table, r, z), dynamic_slice_sizes={1,2}
  io = s32[2] reshape(io_row)
  ss_table = s32[2,2] constant({{1,2},{1,1}})
  ss_row = s32[1,2] dynamic-slice(ss_table, r, z), dynamic_slice_sizes={1,2}
  ss = s32[2] reshape(ss_row)
  oo_table = s32[2,2] constant({{0,0},{1,2}})
  oo_row = s32[1,2] dynamic-slice(oo_table, r, z), dynamic_slice_sizes={1,2}
  oo = s32[2] reshape(oo_row)
  rs_table = s32[2,2] constant({{1,1},{2,1}})
  rs_row = s32[1,2] dynamic-slice(rs_table, r, z), dynamic_slice_sizes={1,2}
  rs = s32[2] reshape(rs_row)
  ROOT a2a = f32[4] ragged-all-to-all(input, output, io, ss, oo, rs), replica_groups={{0,1}}
}
"""


def test_symbolic_execution_moves_the_input_terms():
    """The docs example with concrete offsets (rows of constant tables picked by replica-id) and
    an input of variables x_d[i]: device 0 ends [x_0[0], x_1[0], 0, 0] and device 1
    [x_0[1], x_0[2], x_1[1], 0]; the untouched rows are the constant 0 of the buffer."""
    module = parse_module(SYMBOLIC)
    check_module(module)
    evaluator = SymbolicEvaluator(module, Topology(2, 1))
    (x,) = evaluator.arguments("x", [[False]])
    result = evaluator.run_entry([x])
    handles = np.broadcast_to(result.handles if not result.replicated else result.handles[None],
                              (2, 4))
    zero = evaluator.table.constants(np.zeros(1, np.float32))[0]
    inputs = x.handles
    assert handles[0].tolist() == [inputs[0, 0], inputs[1, 0], zero, zero]
    assert handles[1].tolist() == [inputs[0, 1], inputs[0, 2], inputs[1, 1], zero]


def test_symbolic_offsets_that_depend_on_the_inputs_are_unsupported():
    module = parse_module(MODULE)
    evaluator = SymbolicEvaluator(module, Topology(2, 1))
    args = evaluator.arguments("x", [[False]] * 6)
    with pytest.raises(SymbolicUnsupported, match="decides indexing"):
        evaluator.run_entry(args)
