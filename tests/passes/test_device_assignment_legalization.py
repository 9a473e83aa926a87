"""DeviceAssignmentLegalization: logical groups -> physical device ids, and what reads them.

Expected physical groups are derived by hand from XLA's GetParticipatingDevicesGroups rules
(docs/semantics.md §2; ``xla/service/collective_ops_utils.cc``) in each test's docstring; expected
values of the legalized programs are the logical module's (interpreted) and JAX's outputs.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module, parse_module_file, print_module
from neuron_sim.hlo.checker import check_module
from neuron_sim.io import read_npz
from neuron_sim.physical_groups import groups_are_physical
from neuron_sim.topology import Topology
from neuron_sim.passes import PassError, get_pass
from neuron_sim.verify import Status, VerifyOptions, check_modules, check_pass

from pass_fixtures import JAX_CORPUS, load

KEY = "aws_neuron_device_assignment_legalization"
# 2x2 with the devices scattered: (r0,p0)=3, (r0,p1)=1, (r1,p0)=2, (r1,p1)=0.
SCATTERED_2X2 = Topology(2, 2, ((3, 1), (2, 0)))


def legalized(module, topology):
    get_pass(KEY, topology=topology).run(module)
    return module


def attr_text(module, name: str) -> str:
    inst = next(i for i in module.entry.instructions if i.name == name)
    attr = "source_target_pairs" if inst.has("source_target_pairs") else "replica_groups"
    return inst.get(attr).to_text()


def test_every_group_mode_becomes_xlas_participating_devices():
    """On 2x2 with da={{3,1},{2,0}} (da[r][p]):

    * %ar.cr, CrossReplica {1,0}: per partition p the replicas 1,0 -> p0: da[1][0], da[0][0] =
      2,3; p1: da[1][1], da[0][1] = 0,1 -> {{2,3},{0,1}}.
    * %ar.crp, CrossReplicaAndPartition {{0},{1}}: replica 0 x both partitions = 3,1; replica 1
      = 2,0 -> {{3,1},{2,0}}.
    * %ar.flat, FlattenedID {{3,0},{1,2}}: f3=(1,1)->0, f0=(0,0)->3, f1=(0,1)->1, f2=(1,0)->2
      -> {{0,3},{1,2}}.
    * %rs, CrossReplica {}: {0,1} per partition -> p0: 3,2; p1: 1,0 -> {{3,2},{1,0}}.
    * %a2a, CrossPartition {1,0}: per replica r the partitions 1,0 -> r0: 1,3; r1: 0,2.
    * %cp.cr, CrossReplica {0,1}: per partition -> (3,2) on p0, (1,0) on p1.
    * %cp.cp, CrossPartition {0,1},{1,0}: per replica -> r0: (3,1),(1,3); r1: (2,0),(0,2).
    """
    module = legalized(load("device_assignment/every_mode_2x2.hlo"), SCATTERED_2X2)
    expected = {"ar.cr": "{{2,3},{0,1}}", "ar.crp": "{{3,1},{2,0}}", "ar.flat": "{{0,3},{1,2}}",
                "rs": "{{3,2},{1,0}}", "a2a": "{{1,3},{0,2}}", "cp.cr": "{{3,2},{1,0}}",
                "cp.cp": "{{3,1},{1,3},{2,0},{0,2}}"}
    for name, text in expected.items():
        assert attr_text(module, name) == text, name
    collectives = [i for i in module.entry.instructions if i.opcode.is_collective]
    assert len(collectives) == 9 and all(groups_are_physical(i) for i in collectives)


def test_channel_and_global_ids_are_kept_and_the_marker_round_trips():
    module = legalized(load("device_assignment/every_mode_2x2.hlo"), SCATTERED_2X2)
    text = print_module(module)
    assert 'channel_id=2, replica_groups={{0,3},{1,2}}, use_global_device_ids=true' in text
    assert text.count('frontend_attributes={neuron.groups="physical"}') == 9
    again = parse_module(text)
    assert print_module(again) == text
    assert all(groups_are_physical(i) for i in again.entry.instructions if i.opcode.is_collective)


def test_existing_frontend_attributes_are_kept():
    module = parse_module("""HloModule m, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e { p = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add, frontend_attributes={_xla_k="v"} }""")
    assert not groups_are_physical(module.entry.root)
    legalized(module, Topology(2, 1, ((5,), (4,))))
    root = module.entry.root
    assert str(root.get("frontend_attributes")) == '{_xla_k="v",neuron.groups="physical"}'
    assert root.replica_groups.to_text() == "{{5,4}}"


@pytest.mark.parametrize("topology", [Topology(1, 1), SCATTERED_2X2, Topology(4, 2),
                                      Topology(2, 4, ((10, 11, 12, 13), (20, 21, 22, 23)))],
                         ids=str)
def test_verify_is_correct_on_one_device_and_on_multi_device_assignments(topology):
    module = load("device_assignment/any_topology.hlo")
    result = check_pass(module, KEY, topology, VerifyOptions(trials=3))
    assert result.status is Status.CORRECT, result.detail


def test_verify_is_correct_on_every_mode_under_a_scattered_assignment():
    result = check_pass(load("device_assignment/every_mode_2x2.hlo"), KEY, SCATTERED_2X2,
                        VerifyOptions(trials=3))
    assert result.status is Status.CORRECT, result.detail


def test_legalizing_twice_under_a_reversed_assignment_is_unsound_with_a_witness():
    """1x4, da={{3,2,1,0}}: once, the all-gather group {0,1,2,3} becomes devices {3,2,1,0},
    which read back through the inverse assignment is flattened 0,1,2,3 again. Twice, the pass
    reads {3,2,1,0} as flattened ids and maps them to {0,1,2,3}, which read back is flattened
    3,2,1,0: device 0 sees its own block last, the gather is reversed."""
    module = load("device_assignment/gather_1x4.hlo")
    reversed_1x4 = Topology(1, 4, ((3, 2, 1, 0),))
    twice = check_pass(module, f"{KEY},{KEY}", reversed_1x4,
                       VerifyOptions(trials=2, minimize=False))
    assert twice.status is Status.UNSOUND
    witness = twice.counterexample
    assert witness is not None and witness.device is not None and witness.leaf == 0
    once = check_pass(module, KEY, reversed_1x4, VerifyOptions(trials=2))
    assert once.status is Status.CORRECT


def test_legalizing_twice_under_the_identity_assignment_is_correct():
    """1x4's default assignment maps partition p to device p: a second mapping is the
    identity, so nothing changes."""
    result = check_pass(load("device_assignment/gather_1x4.hlo"), f"{KEY},{KEY}", Topology(1, 4),
                        VerifyOptions(trials=2))
    assert result.status is Status.CORRECT


def test_a_logical_reading_after_legalization_is_unsound():
    """The legalized module read as logical (its marker dropped) on 1x4 da={{3,2,1,0}}: the
    all-gather's physical group {3,2,1,0} read as FlattenedID ids puts device 3's block first
    on every device, so the gather comes out reversed (a pass that reads groups as logical
    after legalization sees exactly this)."""
    source = load("device_assignment/gather_1x4.hlo")
    target = legalized(source.clone(), Topology(1, 4, ((3, 2, 1, 0),)))
    stripped = parse_module(print_module(target).replace(
        ', frontend_attributes={neuron.groups="physical"}', ""))
    result = check_modules(source, stripped, Topology(1, 4, ((3, 2, 1, 0),)),
                           VerifyOptions(trials=2, minimize=False))
    assert result.status is Status.UNSOUND


def test_interpreter_result_equals_the_logical_modules():
    source = load("device_assignment/every_mode_2x2.hlo")
    target = legalized(source.clone(), SCATTERED_2X2)
    rng = np.random.default_rng(7)
    x = rng.integers(-8, 8, size=(4, 4, 2)).astype(np.float32)
    for want, got in zip(interpreter.run(source, [x], SCATTERED_2X2),
                         interpreter.run(target, [x], SCATTERED_2X2)):
        np.testing.assert_array_equal(got, want)


# JAX modules with collectives in every mode, a while body and a mesh-form group.
JAX_CASES = ["spmd_psum_xy_2x4", "spmd_ppermute_y_2x4", "spmd_rs_x_2x4", "spmd_while_psum_1d",
             "spmd_ag_y_2x4", "named_sum_a_2x4", "named_allgather_4x2"]


@pytest.mark.parametrize("name", JAX_CASES)
def test_legalized_jax_module_matches_jax_under_a_reversed_assignment(name):
    module = parse_module_file(JAX_CORPUS / f"{name}.hlo")
    n = module.replica_count * module.num_partitions
    topology = Topology(module.replica_count, module.num_partitions,
                        tuple(tuple(n - 1 - (r * module.num_partitions + p)
                                    for p in range(module.num_partitions))
                              for r in range(module.replica_count)))
    assert get_pass(KEY, topology=topology).run(module)
    check_module(module, topology)
    data = read_npz(JAX_CORPUS / f"{name}.npz")
    outputs = interpreter.run(module, {k: v for k, v in data.items() if k.startswith("arg")},
                              topology)
    for j, got in enumerate(outputs):
        expected = data[f"out{j}"]
        expected = expected.view(got.dtype) if expected.dtype.kind == "V" else expected
        np.testing.assert_array_equal(got, expected, err_msg=f"out{j}")


def test_jax_all_to_all_is_the_tuple_form_the_seed_check_refuses():
    """XLA:CPU compiles ``lax.all_to_all`` over 8 devices to the tuple all-to-all (8 operands):
    the seed's CHECK(operands().size() == 1) fails on it, so the pass raises naming it."""
    module = parse_module_file(JAX_CORPUS / "spmd_all_to_all_1d.hlo")
    with pytest.raises(PassError, match=r"all-to-all %all-to-all in %\S+ has 8 operands"):
        get_pass(KEY).run(module)


UNHANDLED = """HloModule m, replica_count=2
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }}
ENTRY e {{ p = f32[4] parameter(0)  q = f32[4] parameter(1)
  ok = f32[4] all-reduce(p), replica_groups={{{{0,1}}}}, to_apply=add
  {line}
  ROOT t = tuple(ok, bad) }}"""


@pytest.mark.parametrize("line, message", [
    ("start = f32[4] all-reduce-start(p), replica_groups={{0,1}}, to_apply=add\n"
     "  bad = f32[4] all-reduce-done(start)",
     "Unhandled Collective instruction: %start in %e (all-reduce-start)"),
    ("bad = f32[4] collective-broadcast(p), replica_groups={{0,1}}",
     "Unhandled Collective instruction: %bad in %e (collective-broadcast)"),
    ("bad = (f32[4], f32[4]) all-reduce(p, q), replica_groups={{0,1}}, to_apply=add",
     "all-reduce %bad in %e has 2 operands"),
    ("bad = (f32[4], f32[4]) all-to-all(p, q), replica_groups={{0,1}}",
     "all-to-all %bad in %e has 2 operands"),
    ("bad = (f32[4], f32[4]) collective-permute(p, q), source_target_pairs={{0,1}}",
     "collective-permute %bad in %e has 2 operands"),
])
def test_unhandled_and_variadic_collectives_are_errors_naming_them(line, message):
    module = parse_module(UNHANDLED.format(line=line))
    before = print_module(module)
    with pytest.raises(PassError, match=re.escape(message)):
        get_pass(KEY).run(module)
    assert print_module(module) == before


def test_a_module_without_collectives_is_unchanged():
    module = parse_module("HloModule m\nENTRY e { ROOT p = f32[2] parameter(0) }")
    assert get_pass(KEY).run(module) is False


def test_groups_are_physical_reads_only_the_marker():
    module = parse_module("""HloModule m, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e { p = f32[4] parameter(0)
  x = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add, frontend_attributes={neuron.groups="logical"}
  ROOT y = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add, frontend_attributes={a="1",neuron.groups="physical"} }""")
    x, y = module.entry.root.operand(0), module.entry.root
    assert not groups_are_physical(x) and groups_are_physical(y)
