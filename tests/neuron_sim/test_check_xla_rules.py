"""The checker's rules held to XLA's, no stricter and no laxer.

Each test names the XLA source or test its expectation comes from (``hlo_verifier.cc``,
``shape_inference.cc`` / ``shape_inference_test.cc``, ``hlo_parser.cc``, ``xla_data.proto`` in
openxla/xla); the modules are written by hand for the one rule they exercise.
"""

from __future__ import annotations

import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.hlo.checker import HloCheckError, check_module, smallest_topology
from neuron_sim.topology import Topology

ADD_F32 = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

ADD_S32 = """add_s32 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
"""


def module(entry: str, *computations: str, header: str = "HloModule m") -> str:
    return header + "\n\n" + "\n".join(computations) + "\nENTRY main {\n" + entry + "\n}\n"


def accepted(text: str, topology: Topology | None = None, **options) -> None:
    check_module(parse_module(text), topology, **options)


def rejected(text: str, phrase: str, topology: Topology | None = None, **options) -> str:
    with pytest.raises(HloCheckError) as info:
        check_module(parse_module(text), topology, **options)
    assert phrase in str(info.value), str(info.value)
    return str(info.value)


# --- stricter than XLA: now accepted ----------------------------------------------------------


def test_all_reduce_and_reduce_scatter_reducers_are_not_held_to_the_operand_type():
    """HandleAllReduce / HandleReduceScatter infer the shape from the operands only
    (InferAllReduceShape, InferReduceScatterShape take no to_apply): an s32 reducer on f32
    operands passes XLA's verifier."""
    accepted(module("""  x = f32[8] parameter(0)
  ar = f32[8] all-reduce(x), replica_groups={{0,1}}, to_apply=add_s32
  ROOT rs = f32[4] reduce-scatter(ar), replica_groups={{0,1}}, dimensions={0}, to_apply=add_s32""",
                    ADD_S32), Topology(2, 1))


def test_bitcast_may_change_the_byte_size_when_layouts_are_ignored():
    """HandleBitcast compares shape sizes only if opts_.layout_sensitive; this checker is
    layout-insensitive, like XLA's default HloVerifier."""
    accepted(module("""  x = s32[6] parameter(0)
  ROOT b = s32[5] bitcast(x)"""))


def test_gather_batching_dims_are_checked_as_xla_does_and_no_further():
    """ValidateGatherDimensionNumbers: equal lengths, operand_batching_dims sorted/unique/in
    range, start_indices_batching_dims unique and in range of the expanded indices. It does not
    compare their sizes, nor forbid index_vector_dim or overlaps with collapsed_slice_dims or
    start_index_map. Output: offset dim 1 (size 3 of operand dim 1), batch dims 0 and 2 from
    indices dims 0 and 1 ([4,2] with index_vector_dim=2 expanded to [4,2,1])."""
    accepted(module("""  x = f32[2,3] parameter(0)
  i = s32[4,2] parameter(1)
  ROOT g = f32[4,3,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0},
    operand_batching_dims={0}, start_indices_batching_dims={1}, index_vector_dim=2,
    slice_sizes={1,3}"""))
    rejected(module("""  x = f32[2,3] parameter(0)
  i = s32[4,2] parameter(1)
  ROOT g = f32[4,3,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0},
    operand_batching_dims={0}, start_indices_batching_dims={3}, index_vector_dim=2,
    slice_sizes={1,3}"""), "start_indices_batching_dims")


def test_after_all_takes_any_operands():
    """HandleAfterAll returns CheckShape(token, MakeTokenShape()) without looking at the
    operands."""
    accepted(module("""  x = f32[2] parameter(0)
  ROOT t = token[] after-all(x)"""))


def test_integer_dot_may_narrow_to_the_preferred_type():
    """shape_inference_test.cc DotWithNarrowerPreferredElementType: s8[32,32] x s16[32,32]
    with preferred s8 infers s8[32,32]."""
    accepted(module("""  a = s8[32,32] parameter(0)
  b = s16[32,32] parameter(1)
  ROOT d = s8[32,32] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"""))


def test_map_dimensions_attribute_is_not_read():
    """HandleMap passes iota(max operand rank) as the map dimensions, whatever the attribute
    says (TODO b/65689298)."""
    accepted(module("""  x = f32[2,3] parameter(0)
  ROOT m = f32[2,3] map(x, x), dimensions={1,0}, to_apply=add""", ADD_F32))


def test_collective_permute_start_tuples_several_operands_as_they_are():
    """InferCollectivePermuteStartShape checks ExpectArray only for a single operand; several
    are tupled as given, tuple operands included: (T, T) with T = (f32[2], (s32[], f32[3]))."""
    accepted(module("""  a = f32[2] parameter(0)
  b = (s32[], f32[3]) parameter(1)
  s = ((f32[2], (s32[], f32[3])), (f32[2], (s32[], f32[3]))) collective-permute-start(a, b), source_target_pairs={{0,1},{1,0}}
  ROOT d = (f32[2], (s32[], f32[3])) collective-permute-done(s)"""), Topology(2, 1))


def test_rng_bit_generator_may_return_an_array():
    """HandleRngBitGenerator returns OK when the result is not a tuple."""
    accepted(module("""  key = u64[2] parameter(0)
  ROOT r = u32[2,3] rng-bit-generator(key), algorithm=rng_default"""))


def test_while_shape_is_the_body_result_not_the_operand():
    """HandleWhile checks body and condition parameters against the operand, the condition
    result against pred[], and the while's shape against the body's root only."""
    accepted(module("""  x = s32[] parameter(0)
  ROOT w = (s32[], s32[]) while(x), condition=cond, body=body""", """cond {
  p = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}
""", """body {
  p = s32[] parameter(0)
  ROOT t = (s32[], s32[]) tuple(p, p)
}
"""))


def test_broadcast_of_a_scalar_without_dimensions():
    """XLA's parser defaults a missing broadcast ``dimensions`` to {} (a scalar operand
    needs none); HandleBroadcast then checks operand rank 0 == 0 entries."""
    accepted(module("""  x = f32[] parameter(0)
  ROOT b = f32[2,3] broadcast(x)"""))


# --- laxer than XLA: now rejected -------------------------------------------------------------


def test_undefined_control_predecessor_is_rejected():
    """hlo_parser.cc resolves every control-predecessors name in the computation and fails on
    one that is not defined."""
    text = module("""  x = f32[2] parameter(0)
  y = f32[2] negate(x)
  ROOT z = f32[2] abs(x), control-predecessors={y, nope}""")
    message = rejected(text, "control predecessor %nope is not defined in computation main")
    assert "%z = " in message
    accepted(text.replace(", nope", ""))


def test_operand_layout_constraints_count_and_shapes():
    """HandleCustomCall (layout_constrained): operand_count() ==
    operand_shapes_with_layout().size(), and each constraint is Compatible with its operand."""
    base = """  x = f32[2,3] parameter(0)
  ROOT c = f32[2] custom-call(x), custom_call_target="t", operand_layout_constraints={CONS}"""
    accepted(module(base.replace("CONS", "f32[2,3]{0,1}")))
    rejected(module(base.replace("CONS", "f32[2,3]{0,1}, f32[2]{0}")),
             "operand_layout_constraints gives 2 shapes but there are 1 operands")
    rejected(module(base.replace("CONS", "f32[3,2]{0,1}")), "does not fit operand %x")


@pytest.mark.parametrize("accuracy,ok", [
    ("{mode=highest}", True),
    ("{tolerance={atol=0.5,rtol=0.1,ulps=2}}", True),
    ("{tolerance={atol=0.5,bogus=1}}", False),
    ("{speed=fast}", False),
    ("{mode=fastest}", False),
])
def test_result_accuracy_fields(accuracy: str, ok: bool):
    """xla_data.proto's ResultAccuracy is a Mode (DEFAULT, HIGHEST) or a Tolerance with atol,
    rtol and ulps; XLA's parser refuses any other field."""
    text = module(f"""  x = f32[2] parameter(0)
  ROOT e = f32[2] exponential(x), result_accuracy={accuracy}""")
    if ok:
        accepted(text)
    else:
        rejected(text, "result_accuracy")


@pytest.mark.parametrize("element_type,kind,ok", [
    ("f32", "FLOAT", True), ("f32", "TOTALORDER", True), ("f32", "SIGNED", False),
    ("s32", "SIGNED", True), ("s32", "TOTALORDER", False), ("s32", "UNSIGNED", False),
    ("u8", "UNSIGNED", True), ("pred", "UNSIGNED", True), ("pred", "SIGNED", False),
    ("c64", "FLOAT", True), ("c64", "TOTALORDER", False),
])
def test_comparison_type_fits_the_element_type(element_type: str, kind: str, ok: bool):
    """CheckElementwiseInstruction: floating point compares as FLOAT or TOTALORDER, any other
    type as Comparison::DefaultComparisonType (FLOAT for complex, SIGNED for signed integers,
    UNSIGNED for unsigned integers and pred)."""
    direction = "EQ" if element_type == "c64" else "LT"
    text = module(f"""  x = {element_type}[2] parameter(0)
  ROOT c = pred[2] compare(x, x), direction={direction}, type={kind}""")
    if ok:
        accepted(text)
    else:
        rejected(text, f"compare type {kind} does not fit {element_type}")


INPLACE = """  in = f32[4,4] parameter(0)
  out = f32[4,4] parameter(1)
  z = s32[] constant(0)
  two = s32[] constant(2)
  t0 = (s32[], s32[]) tuple(z, z)
  t2 = (s32[], s32[]) tuple(two, z)
  io = ((s32[], s32[]), (s32[], s32[])) tuple(t0, t2)
  ROOT cp = f32[4,4] collective-permute(in, out, io, io), source_target_pairs=PAIRS"""


def _inplace(pairs: str) -> str:
    return module(INPLACE.replace("PAIRS", pairs))


def test_inplace_collective_permute_allows_one_use_per_offset():
    """CheckDuplicatedSourceOrTarget: with 4 operands and an array buffer, an id may appear as
    often as operand 2 (the input offsets) has tuple elements, here 2; a third time fails."""
    accepted(_inplace("{{0,1},{0,1},{1,0},{1,0}}"), Topology(2, 1))
    rejected(_inplace("{{0,1},{0,1},{0,1}}"), "source 0 appears more than 2 times",
             Topology(2, 1))


def test_computations_that_call_themselves_are_rejected():
    """XLA's CallGraph is acyclic: a computation reaching itself through calls fails. The
    sentence names the computations."""
    rejected(module("""  x = f32[] parameter(0)
  ROOT c = f32[] call(x), to_apply=f""", """f {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=f
}
"""), "computation f calls itself")
    rejected(module("""  x = f32[] parameter(0)
  ROOT c = f32[] call(x), to_apply=f""", """f {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=g
}
""", """g {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=f
}
"""), "computations call each other in a cycle: f -> g -> f")


def test_a_long_acyclic_call_chain_is_accepted():
    """No recursion limit: 3,000 computations each calling the next."""
    comps = [f"c{i} {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{i + 1}\n}}\n"
             for i in range(3000)]
    comps.append("c3000 {\n  ROOT p = f32[] parameter(0)\n}\n")
    accepted(module("""  x = f32[] parameter(0)
  ROOT c = f32[] call(x), to_apply=c0""", *reversed(comps)))


# --- allow_mixed_precision --------------------------------------------------------------------


def test_mixed_precision_is_an_option_off_by_default():
    """ShapeVerifier with allow_mixed_precision=false rejects floating-point operands of
    different precisions (CheckMixedPrecisionOperands) and to_apply parameters whose type is
    not the operand's (SameElementTypesForOperandsAndToApplyParameters); with it, both pass
    and shapes compare ignoring fp precision (CompatibleIgnoringFpPrecision)."""
    binary = module("""  a = f32[2] parameter(0)
  b = bf16[2] parameter(1)
  ROOT s = f32[2] add(a, b)""")
    rejected(binary, "different element types")
    accepted(binary, allow_mixed_precision=True)
    reduce = module("""  a = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=add_bf16""", """add_bf16 {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
""")
    rejected(reduce, "mixed precision is not allowed")
    accepted(reduce, allow_mixed_precision=True)


# --- the topology a header leaves out ---------------------------------------------------------


@pytest.mark.parametrize("collective,expected", [
    ("ar = f32[8] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add", (4, 1)),
    ("ar = f32[8] all-reduce(x), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, "
     "use_global_device_ids=true, to_apply=add", (1, 8)),
    ("ar = f32[8] all-to-all(x), channel_id=1, replica_groups={{0,1}}, dimensions={0}", (1, 2)),
    ("ar = f32[8] collective-permute(x), source_target_pairs={{0,3},{3,0}}", (4, 1)),
    ("ar = f32[8] all-reduce(x), replica_groups={}, to_apply=add", None),
])
def test_smallest_topology_the_groups_are_valid_on(collective: str, expected):
    """Without replica_count / num_partitions the counts are the smallest the groups name
    (CheckReplicaGroups: ids are exactly 0..n-1 for the mode's n; FlattenedID's n is R*P, read
    as one replica of n partitions); {} constrains nothing."""
    text = module(f"""  x = f32[8] parameter(0)
  {collective}
  ROOT r = f32[8] negate(ar)""", ADD_F32)
    topology = smallest_topology(parse_module(text))
    assert (None if topology is None else (topology.replica_count, topology.num_partitions)) \
        == expected
    if topology is not None:
        accepted(text, topology)
