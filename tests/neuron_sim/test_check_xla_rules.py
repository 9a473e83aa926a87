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


# --- verifier rules beyond shapes (hlo_verifier.cc; the tests named are hlo_verifier_test.cc's)


@pytest.mark.parametrize("kind,distribution,ok", [
    ("f32", "rng_normal", True), ("s32", "rng_normal", False), ("s32", "rng_uniform", True),
    ("pred", "rng_uniform", True), ("pred", "rng_normal", False),
])
def test_rng_element_type_depends_on_the_distribution(kind: str, distribution: str, ok: bool):
    """HandleRng: rng_uniform takes floating-point, integral or pred values, rng_normal only
    floating-point ones (RngElementTypeNotSupported: s32 rng_normal, "Element type not
    supported")."""
    text = module(f"""  a = {kind}[] parameter(0)
  b = {kind}[] parameter(1)
  ROOT r = {kind}[10] rng(a, b), distribution={distribution}""")
    if ok:
        accepted(text)
    else:
        rejected(text, f"not {kind}")


def test_rng_result_may_differ_in_precision_only_with_mixed_precision():
    """HasCompatibleElementTypes: the operands share a type; the result has it, or another
    floating-point type when allow_mixed_precision."""
    text = module("""  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT r = f32[4] rng(a, b), distribution=rng_uniform""")
    rejected(text, "rng parameter 0 must be f32[]")
    accepted(text, allow_mixed_precision=True)


@pytest.mark.parametrize("kind,ok", [("pred", False), ("s32", True), ("bf16", True),
                                     ("c64", True)])
def test_iota_takes_integral_floating_point_or_complex_types(kind: str, ok: bool):
    """HandleIota: "Only support iota of integral, floating point or complex primitive types,
    got PRED" (IotaPredResultNotAllowed)."""
    text = module(f"  ROOT i = {kind}[128] iota(), iota_dimension=0")
    if ok:
        accepted(text)
    else:
        rejected(text, "not pred")


def test_select_branches_of_two_precisions_need_mixed_precision():
    """InferSelectShape compares the branches with CompatibleIgnoringFpPrecision; without
    allow_mixed_precision CheckMixedPrecisionOperands rejects them (SelectMixedPrecisionAllowed,
    SelectMixedPrecisionNotAllowed)."""
    text = module("""  p = pred[32] parameter(0)
  a = f32[32] parameter(1)
  b = bf16[32] parameter(2)
  ROOT s = f32[32] select(p, a, b)""")
    accepted(text, allow_mixed_precision=True)
    rejected(text, "bf16[32]")


def test_fusion_may_have_more_operands_than_parameters_but_not_fewer():
    """HandleFusion: "Fused parameter count (%d) is greater than the number of operands" only
    (FusionMoreOperandsThanParameters accepted), each parameter matching its operand."""
    fused = """fused {
  ROOT p0 = f32[10] parameter(0)
}
"""
    accepted(module("""  a = f32[10] parameter(0)
  b = f32[10] parameter(1)
  ROOT f = f32[10] fusion(a, b), kind=kLoop, calls=fused""", fused))
    rejected(module("""  a = s32[10] parameter(0)
  b = f32[10] parameter(1)
  ROOT f = f32[10] fusion(a, b), kind=kLoop, calls=fused""", fused), "parameter 0 of fused")


def test_tuple_all_to_all_operands_must_share_their_layout():
    """InferAllToAllTupleShape compares operands with Shape::Equal (layouts seen, memory space
    ignored): {0,1} and {1,0} differ (AllToAll_LayoutConstrained); S(1) against none does
    not."""
    rejected(module("""  a = f32[128,4]{0,1} parameter(0)
  b = f32[128,4]{1,0} parameter(1)
  ROOT t = (f32[128,4]{0,1}, f32[128,4]{1,0}) all-to-all(a, b), replica_groups={{0,1}}"""),
             "in its layout", Topology(2, 1))
    accepted(module("""  a = f32[128,4]{1,0:S(1)} parameter(0)
  b = f32[128,4] parameter(1)
  ROOT t = (f32[128,4], f32[128,4]) all-to-all(a, b), replica_groups={{0,1}}"""),
             Topology(2, 1))


_OFFSETS = """  z = s32[] constant(0)
  o1 = (s32[], s32[]) tuple(z, z)
  o2 = ((s32[], s32[]), (s32[], s32[])) tuple(o1, o1)"""


def test_in_place_collective_permute_buffers_match_their_offsets():
    """CheckInplaceCollectivePermute: buffers both arrays with one index per dimension in each
    offset (or a tuple of such per slice), or both tuples of one length
    (CollectivePermuteUnmatchingSourceTarget: an array input and a tuple output, "Unmatching
    input buffers and output buffers"; ...UnmatchingOutputAndOutputOffset)."""
    accepted(module(_OFFSETS + """
  a = f32[2,4] parameter(0)
  b = f32[2,4] parameter(1)
  ROOT c = f32[2,4] collective-permute(a, b, o1, o2), source_target_pairs={{0,1},{1,0}}, slice_sizes={{1,4},{1,4}}"""),
             Topology(2, 1))
    rejected(module(_OFFSETS + """
  a = f32[2,4] parameter(0)
  b = (f32[2,4], f32[2,4]) parameter(1)
  ROOT c = (f32[2,4], f32[2,4]) collective-permute(a, b, o1, o2), source_target_pairs={{0,1},{1,0}}, slice_sizes={{1,4},{1,4}}"""),
             "do not match", Topology(2, 1))
    rejected(module(_OFFSETS + """
  a = f32[2,4] parameter(0)
  b = f32[2,4,1] parameter(1)
  ROOT c = f32[2,4,1] collective-permute(a, b, o1, o1), source_target_pairs={{0,1},{1,0}}, slice_sizes={{1,4},{1,4}}"""),
             "one index per dimension of the output buffer", Topology(2, 1))


@pytest.mark.parametrize("body,phrase", [
    ("""  cs = (f32[2,3], f32[2,3], u32[]) copy-start(p0)
  d1 = f32[2,3] copy-done(cs)
  d2 = f32[2,3] copy-done(cs)
  ROOT t = (f32[2,3], f32[2,3]) tuple(d1, d2)""", "needs exactly one user, but has 2"),
    ("""  u = u32[] constant(0)
  t = (f32[2,3], f32[2,3], u32[]) tuple(p0, p0, u)
  ROOT cd = f32[2,3] copy-done(t)""", "must be a copy-start, not %t"),
    ("""  ROOT s = ((f32[2,3]), f32[2,3], u32[]) custom-call-start(p0), custom_call_target="foo\"""",
     "needs exactly one user, but has 0"),
    ("""  s = ((f32[2,3]), f32[2,3], u32[]) custom-call-start(p0), custom_call_target="foo"
  ROOT u = ((f32[2,3]), f32[2,3], u32[]) custom-call-update(s)""", "async-update needs exactly"),
    ("""  s = (f32[2,3], f32[2,3], u32[], u32[]) collective-permute-start(p0), source_target_pairs={{0,1},{1,0}}, channel_id=1
  d1 = f32[2,3] collective-permute-done(s)
  ROOT d2 = f32[2,3] collective-permute-done(s)""", "collective-permute-start needs exactly"),
])
def test_async_starts_and_dones_pair_one_to_one(body: str, phrase: str):
    """VerifyAsynchronousInstructionPairs (CopyStartMultipleCopyDone, CopyDoneNoCopyStart,
    AsyncStartNoAsyncDone, AsyncStartAndAsyncUpdateNoAsyncDone,
    CollectivePermuteStartAndMultipleDone)."""
    rejected(module("  p0 = f32[2,3] parameter(0)\n" + body), phrase, Topology(2, 1))


def test_async_start_update_done_chain_is_accepted():
    """AsyncStartAndAsyncUpdateAndAsyncDone: start -> update -> update -> done."""
    accepted(module("""  p0 = f32[2,3] parameter(0)
  s = ((f32[2,3]), f32[2,3], u32[]) custom-call-start(p0), custom_call_target="foo"
  u1 = ((f32[2,3]), f32[2,3], u32[]) custom-call-update(s)
  u2 = ((f32[2,3]), f32[2,3], u32[]) custom-call-update(u1)
  ROOT d = f32[2,3] custom-call-done(u2)"""))


def test_async_computation_wraps_one_instruction():
    """VerifyAsyncComputation: "expected to contain only the root and parameter instructions"
    (AsyncOpComputationNotTrivial)."""
    rejected(module("""  p0 = f32[2,3] parameter(0)
  s = ((f32[2,3]), f32[3,2], u32[]) async-start(p0), calls=wrapped
  ROOT d = f32[3,2] async-done(s), calls=wrapped""", """wrapped {
  p = f32[2,3] parameter(0)
  c = f32[2,3] copy(p)
  ROOT r = f32[3,2] custom-call(c), custom_call_target="foo"
}
"""), "must hold only its parameters and its root")


ALL_REDUCES = """  x = f32[8] parameter(0)
  a = f32[8] all-reduce(x), replica_groups={}, to_apply=add FIRST
  b = f32[8] all-reduce(x), replica_groups={}, to_apply=add SECOND
  ROOT t = (f32[8], f32[8]) tuple(a, b)"""


def test_layout_constrained_and_unconstrained_all_reduces_do_not_mix():
    """VerifyLayoutConstrainedAllReduce (AllReduceVerifier)."""
    both = ", constrain_layout=true"
    rejected(module(ALL_REDUCES.replace(" FIRST", "").replace(" SECOND", both), ADD_F32),
             "mixes")
    accepted(module(ALL_REDUCES.replace(" FIRST", both).replace(" SECOND", both), ADD_F32))


def test_a_channel_id_names_one_kind_of_channel_instruction():
    """VerifyChannels: a channel first used by a send names only sends and recvs
    (ChannelVerifier); one first used by a collective names one opcode only under
    verify_unique_channel_ids (CollectiveChannelVerifier), which XLA's compilers leave off."""
    send_then_all_reduce = module("""  x = f32[8] parameter(0)
  t0 = token[] after-all()
  s = (f32[8], u32[], token[]) send(x, t0), channel_id=1
  sd = token[] send-done(s), channel_id=1
  ROOT ar = f32[8] all-reduce(x), replica_groups={}, to_apply=add, channel_id=1""", ADD_F32)
    rejected(send_then_all_reduce, "channel 1 is used by both send %s and all-reduce")
    two_collectives = module("""  x = f32[8] parameter(0)
  cp = f32[8] collective-permute(x), source_target_pairs={{0,1},{1,0}}, channel_id=1
  ROOT ar = f32[8] all-reduce(cp), replica_groups={}, to_apply=add, channel_id=1""", ADD_F32)
    accepted(two_collectives)
    rejected(two_collectives, "different kinds of channel instructions", unique_channel_ids=True)


PARALLEL_CALLEE = """callee {
  ROOT p = f32[4] parameter(0)
}, execution_thread="parallel_thread"
"""


@pytest.mark.parametrize("caller", [
    "ROOT c = f32[4] call(x), to_apply=callee",
    "ROOT c = f32[4] fusion(x), kind=kLoop, calls=callee",
])
def test_called_computations_run_on_the_callers_thread(caller: str):
    """InstructionVerifier::Preprocess ("top_apply computation execution thread does not
    match", CheckCallThreadMismatch) and CheckCallableInstructionThreadName (FusionThreadVerifier,
    CheckWhileThread, CheckConditionalBranchThread)."""
    rejected(module(f"  x = f32[4] parameter(0)\n  {caller}", PARALLEL_CALLEE),
             "parallel_thread")


def test_an_async_op_may_start_work_on_another_thread():
    """CheckConditionalBranchContainsAsyncThread and
    AsyncStartAndAsyncUpdateAndAsyncDoneWithThreadName: the wrapped computation runs on the
    thread the async op names."""
    accepted(module("""  x = f32[4] parameter(0)
  s = ((f32[4]), f32[4], u32[]) custom-call-start(x), async_execution_thread="parallel_thread", custom_call_target="foo"
  ROOT d = f32[4] custom-call-done(s)"""))


def test_nested_computations_share_the_fusions_thread():
    """CheckNestedComputationThreadNameEqual through a fusion's computation
    (FusionNestedComputationThreadVerifier: an all-reduce whose to_apply is on another
    thread)."""
    rejected(module("""  x = f32[4] parameter(0)
  ROOT f = f32[4] fusion(x), kind=kLoop, calls=fused""", """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}, execution_thread="parallel_thread"

fused {
  p = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(p), replica_groups={}, to_apply=add
}
"""), "parallel_thread")


COMPOSITE = """  c = f32[] constant(42)
  ROOT r = f32[] call(c), is_composite=true, to_apply=add_n{attributes}"""
ADD_N = """add_n {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
"""


@pytest.mark.parametrize("attributes,phrase", [
    ("", "needs frontend attributes"),
    (', frontend_attributes={composite.attributes={n = 1 : i32},composite.version="1"}',
     "non-empty composite.name"),
    (', frontend_attributes={composite.name="foo.bar",composite.version="-1"}',
     "non-negative integer"),
    (', frontend_attributes={composite.name="foo.bar",composite.attributes=""}',
     "composite.attributes"),
    (', frontend_attributes={composite.name="foo.bar",composite.version="1"}', None),
])
def test_composite_calls_name_their_composite(attributes: str, phrase):
    """HandleCall for is_composite (CompositeCallMissingFrontendAttributes,
    CompositeCallMissingName, CompositeCallNonNegativeVersion; CompositeCall accepted)."""
    text = module(COMPOSITE.replace("{attributes}", attributes), ADD_N)
    if phrase is None:
        accepted(text)
    else:
        rejected(text, phrase)


@pytest.mark.parametrize("sharding,ok", [
    ("{devices=[1,2,2,1]0,1,2,3}", False),
    ("{devices=[2,2]0,1,2,3}", True),
    ("{devices=[2,1,2]<=[4] last_tile_dim_replicate}", True),
    ("{devices=[2,1,2]<=[4] last_tile_dims={manual}}", True),
    ("{devices=[1,1,4]<=[4] last_tile_dim_replicate}", True),
    ("{devices=[2,2]0,1,1,3}", False),
    ("{{replicated}}", False),
    ("{maximal device=3}", True),
])
def test_a_sharding_tiles_each_dimension_of_its_shape(sharding: str, ok: bool):
    """HloSharding::Validate: one tile dimension per array dimension besides subgroups
    (InvalidShardingRank: [1,2,2,1] on f32[4,2]); a subgroup sharding tiling no data
    dimension is replicated (HloSharding::Subgroup); devices unique; a tuple sharding only on
    a tuple."""
    text = module(f"""  p = f32[4,2] parameter(0), sharding={sharding}
  ROOT r = f32[4,2] copy(p)""")
    if ok:
        accepted(text)
    else:
        rejected(text, "does not fit its shape")


WHILE = """body {
  b = s32[] parameter(0) BODY
  one = s32[] constant(1)
  ROOT n = s32[] add(b, one)
}

cond {
  c = s32[] parameter(0) COND
  five = s32[] constant(5)
  ROOT lt = pred[] compare(c, five), direction=LT
}
"""


@pytest.mark.parametrize("body,cond,ok", [
    (", sharding={replicated}", ", sharding={maximal device=0}", False),
    (", sharding={maximal device=0}", ", sharding={maximal device=0 metadata={op_name=\"x\"}}",
     True),
    (", sharding={replicated}", "", True),
])
def test_a_while_has_one_sharding_for_its_state(body: str, cond: str, ok: bool):
    """VerifyConsistentSharding over the while, its body's root and parameter and its
    condition's parameter (InconsistentWhileSharding), metadata not compared."""
    text = module("""  z = s32[] constant(0)
  ROOT w = s32[] while(z), condition=cond, body=body""",
                  WHILE.replace(" BODY", body).replace(" COND", cond))
    if ok:
        accepted(text)
    else:
        rejected(text, "needs one sharding")


def test_original_value_leaves_name_values():
    """VerifyOriginalValue (EmptyLeafInOriginalValue: a {} leaf); every leaf given is fine."""
    rejected(module("""  ROOT p = ((f32[], f32[3]), f32[2,3]) parameter(0), origin={(({}, {"v2"}), {"v3"})}"""),
             "names no value")
    accepted(module("""  ROOT p = ((f32[], f32[3]), f32[2,3]) parameter(0), origin={(({"v1"}, {"v2"}), {"v3"})}"""))
