"""HLO modules exercising every collective in all four group modes, on 2 replicas x 4 partitions.

Shared by the MPI backend tests (which run them under mpiexec and compare with the local
backend). Group modes: CrossReplica (no channel_id), CrossPartition (all-to-all, permute and
broadcast with a channel_id), CrossReplicaAndPartition (channel_id, no use_global_device_ids),
FlattenedID (use_global_device_ids=true); unsorted and iota groups, a non-commutative reduction
that pins the fold order, bf16, several operands, async start/done, a tuple entry parameter
(each rank keeps its rows of both leaves), and device-dependent while and conditional whose
collectives stay within the devices that took the path.

``MISMATCH`` is wrong on purpose: devices 0 and 1 take a branch with an all-reduce over all
eight devices, the others skip it.
"""

ADD_F32 = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}
"""
MODULES = {
"ar_tuple_parameter": """HloModule ar_tuple_parameter, replica_count=2, num_partitions=4
""" + ADD_F32 + """
ENTRY %main (p: (f32[4,8], f32[])) -> f32[4,8] {
  %p = (f32[4,8], f32[]) parameter(0)
  %x = f32[4,8] get-tuple-element(%p), index=0
  %s = f32[] get-tuple-element(%p), index=1
  %sb = f32[4,8] broadcast(%s), dimensions={}
  %xs = f32[4,8] multiply(%x, %sb)
  ROOT %ar = f32[4,8] all-reduce(%xs), replica_groups={}, to_apply=%add
}
""",
"ar_cross_replica": """HloModule ar_cross_replica, replica_count=2, num_partitions=4
""" + ADD_F32 + """
ENTRY %main (p: f32[4,8]) -> f32[4,8] {
  %p = f32[4,8] parameter(0)
  ROOT %ar = f32[4,8] all-reduce(%p), replica_groups={}, to_apply=%add
}
""",
"ar_cross_replica_and_partition_shift_add": """HloModule ar_crp, replica_count=2, num_partitions=4

%shift_add (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %two = s32[] constant(2)
  %twice = s32[] multiply(%a, %two)
  %b = s32[] parameter(1)
  ROOT %sum = s32[] add(%twice, %b)
}

ENTRY %main (p: s32[3,5]) -> s32[3,5] {
  %p = s32[3,5] parameter(0)
  ROOT %ar = s32[3,5] all-reduce(%p), channel_id=1, replica_groups={{1,0}}, to_apply=%shift_add
}
""",
"ar_flattened_unsorted": """HloModule ar_flat, replica_count=2, num_partitions=4
""" + ADD_F32 + """
ENTRY %main (p: f32[6,7]) -> f32[6,7] {
  %p = f32[6,7] parameter(0)
  ROOT %ar = f32[6,7] all-reduce(%p), channel_id=2, replica_groups={{0,5,2,7},{4,1,6,3}}, use_global_device_ids=true, to_apply=%add
}
""",
"rs_flattened_iota": """HloModule rs_iota, replica_count=2, num_partitions=4
""" + ADD_F32 + """
ENTRY %main (p: f32[4,8]) -> f32[4,2] {
  %p = f32[4,8] parameter(0)
  ROOT %rs = f32[4,2] reduce-scatter(%p), channel_id=3, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true, dimensions={1}, to_apply=%add
}
""",
"ag_cross_replica_and_partition": """HloModule ag_crp, replica_count=2, num_partitions=4

ENTRY %main (p: f32[4,8]) -> f32[16,8] {
  %p = f32[4,8] parameter(0)
  ROOT %ag = f32[16,8] all-gather(%p), channel_id=4, replica_groups={{0},{1}}, dimensions={0}
}
""",
"a2a_cross_partition": """HloModule a2a_cp, replica_count=2, num_partitions=4

ENTRY %main (p: f32[4,8]) -> f32[4,8] {
  %p = f32[4,8] parameter(0)
  ROOT %a2a = f32[4,8] all-to-all(%p), channel_id=5, replica_groups={{1,0,3,2}}, dimensions={1}
}
""",
"a2a_tuple_cross_replica": """HloModule a2a_tuple, replica_count=2, num_partitions=4

ENTRY %main (p: s32[2,3], q: s32[2,3]) -> (s32[2,3], s32[2,3]) {
  %p = s32[2,3] parameter(0)
  %q = s32[2,3] parameter(1)
  ROOT %a2a = (s32[2,3], s32[2,3]) all-to-all(%p, %q), replica_groups={{1,0}}
}
""",
"permute_cross_partition_ring": """HloModule permute_ring, replica_count=2, num_partitions=4

ENTRY %main (p: f32[5]) -> f32[5] {
  %p = f32[5] parameter(0)
  ROOT %cp = f32[5] collective-permute(%p), channel_id=6, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
}
""",
"permute_cross_replica_partial": """HloModule permute_partial, replica_count=2, num_partitions=4

ENTRY %main (p: u8[5]) -> u8[5] {
  %p = u8[5] parameter(0)
  ROOT %cp = u8[5] collective-permute(%p), source_target_pairs={{0,1}}
}
""",
"broadcast_cross_partition": """HloModule bcast, replica_count=2, num_partitions=4

ENTRY %main (p: f32[3]) -> f32[3] {
  %p = f32[3] parameter(0)
  ROOT %cb = f32[3] collective-broadcast(%p), channel_id=7, replica_groups={{2,0},{1,3}}
}
""",
"ar_bf16_cross_replica": """HloModule ar_bf16, replica_count=2, num_partitions=4

%add_bf16 (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %sum = bf16[] add(%a, %b)
}

ENTRY %main (p: bf16[16]) -> bf16[16] {
  %p = bf16[16] parameter(0)
  ROOT %ar = bf16[16] all-reduce(%p), replica_groups={}, to_apply=%add_bf16
}
""",
"ar_two_operands_max": """HloModule ar_max, replica_count=2, num_partitions=4

%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}

ENTRY %main (p: f32[4], q: f32[2,2]) -> (f32[4], f32[2,2]) {
  %p = f32[4] parameter(0)
  %q = f32[2,2] parameter(1)
  ROOT %ar = (f32[4], f32[2,2]) all-reduce(%p, %q), channel_id=8, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%max
}
""",
"ar_async_start_done": """HloModule ar_async, replica_count=2, num_partitions=4
""" + ADD_F32 + """
ENTRY %main (p: f32[4,8]) -> f32[4,8] {
  %p = f32[4,8] parameter(0)
  %start = f32[4,8] all-reduce-start(%p), channel_id=9, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%add
  ROOT %done = f32[4,8] all-reduce-done(%start)
}
""",
"while_replica_dependent_trips": """HloModule while_dep, replica_count=2, num_partitions=4
""" + ADD_F32 + """
%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %r = u32[] replica-id()
  %rs = s32[] convert(%r)
  %one = s32[] constant(1)
  %limit = s32[] add(%rs, %one)
  ROOT %lt = pred[] compare(%i, %limit), direction=LT
}

%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {
  %s = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %x = f32[4] get-tuple-element(%s), index=1
  %ar = f32[4] all-reduce(%x), channel_id=10, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%add
  ROOT %t = (s32[], f32[4]) tuple(%next, %ar)
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]) tuple(%zero, %p)
  %w = (s32[], f32[4]) while(%init), condition=%cond, body=%body
  ROOT %out = f32[4] get-tuple-element(%w), index=1
}
""",
"cond_partition_dependent_groups": """HloModule cond_dep, replica_count=2, num_partitions=4
""" + ADD_F32 + """
%reduce_pairs (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %ar = f32[4] all-reduce(%x), channel_id=11, replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true, to_apply=%add
}

%gather_pairs (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %half = f32[2] slice(%x), slice={[0:2]}
  ROOT %ag = f32[4] all-gather(%half), channel_id=12, replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true, dimensions={0}
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %pid = u32[] partition-id()
  %two = u32[] constant(2)
  %low = pred[] compare(%pid, %two), direction=LT
  ROOT %c = f32[4] conditional(%low, %p, %p), true_computation=%reduce_pairs, false_computation=%gather_pairs
}
""",
# Without replica_groups: one group of the mode's ids (XLA parses an absent attribute as {}).
"ar_without_replica_groups": """HloModule ar_no_groups, replica_count=2, num_partitions=4
""" + ADD_F32 + """
ENTRY %main (p: f32[3,2]) -> f32[3,2] {
  %p = f32[3,2] parameter(0)
  ROOT %ar = f32[3,2] all-reduce(%p), to_apply=%add
}
""",
"ag_without_replica_groups_every_device": """HloModule ag_no_groups, replica_count=2, num_partitions=4

ENTRY %main (p: s32[2,3]) -> s32[16,3] {
  %p = s32[2,3] parameter(0)
  ROOT %ag = s32[16,3] all-gather(%p), channel_id=4, dimensions={0}
}
""",
# ragged-all-to-all within each replica's 4 partitions (CrossPartition): partition p sends
# 1 + (p + j) % 2 rows to partition j, the offsets and sizes picked by partition-id from
# tables; rows 6 and 7 of the output buffer (-1) are written by nobody.
"ragged_cross_partition": """HloModule ragged_cp, replica_count=2, num_partitions=4

ENTRY %main (p: f32[6,3]) -> f32[8,3] {
  %p = f32[6,3] parameter(0)
  %minus_one = f32[] constant(-1)
  %buffer = f32[8,3] broadcast(%minus_one), dimensions={}
  %pid = u32[] partition-id()
  %zero = u32[] constant(0)
  %io_table = s32[4,4] constant({{0,1,3,4},{0,2,3,5},{0,1,3,4},{0,2,3,5}})
  %io_row = s32[1,4] dynamic-slice(%io_table, %pid, %zero), dynamic_slice_sizes={1,4}
  %io = s32[4] reshape(%io_row)
  %size_table = s32[4,4] constant({{1,2,1,2},{2,1,2,1},{1,2,1,2},{2,1,2,1}})
  %size_row = s32[1,4] dynamic-slice(%size_table, %pid, %zero), dynamic_slice_sizes={1,4}
  %sizes = s32[4] reshape(%size_row)
  %oo_table = s32[4,4] constant({{0,0,0,0},{1,2,1,2},{3,3,3,3},{4,5,4,5}})
  %oo_row = s32[1,4] dynamic-slice(%oo_table, %pid, %zero), dynamic_slice_sizes={1,4}
  %oo = s32[4] reshape(%oo_row)
  ROOT %ra2a = f32[8,3] ragged-all-to-all(%p, %buffer, %io, %sizes, %oo, %sizes), channel_id=13, replica_groups={{0,1,2,3}}
}
""",
# Without source_target_pairs (or with none): nothing moves, every device receives zeros.
"permute_without_pairs": """HloModule cp_no_pairs, replica_count=2, num_partitions=4

ENTRY %main (p: f32[5]) -> f32[5] {
  %p = f32[5] parameter(0)
  ROOT %cp = f32[5] collective-permute(%p), channel_id=5
}
""",
"permute_with_empty_pairs": """HloModule cp_empty_pairs, replica_count=2, num_partitions=4

ENTRY %main (p: f32[5]) -> f32[5] {
  %p = f32[5] parameter(0)
  ROOT %cp = f32[5] collective-permute(%p), source_target_pairs={}
}
""",
}

MISMATCH = """HloModule mismatch, num_partitions=8
""" + ADD_F32 + """
%reduce_all (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %ar = f32[4] all-reduce(%x), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%add
}

%keep (x: f32[4]) -> f32[4] {
  ROOT %x = f32[4] parameter(0)
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %pid = u32[] partition-id()
  %two = u32[] constant(2)
  %low = pred[] compare(%pid, %two), direction=LT
  ROOT %c = f32[4] conditional(%low, %p, %p), true_computation=%reduce_all, false_computation=%keep
}
"""

# Devices 0-3 and 4-7 reach two different all-reduces (equal groups): they must not meet.
DIFFERENT_COLLECTIVES = """HloModule two_all_reduces, num_partitions=8
""" + ADD_F32 + """
%low (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %ar_low = f32[4] all-reduce(%x), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%add
}

%high (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %ar_high = f32[4] all-reduce(%x), channel_id=2, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%add
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %pid = u32[] partition-id()
  %four = u32[] constant(4)
  %below = pred[] compare(%pid, %four), direction=LT
  ROOT %c = f32[4] conditional(%below, %p, %p), true_computation=%low, false_computation=%high
}
"""

# Only devices 0-3 execute an op the interpreter does not implement.
ERROR_ON_SOME_DEVICES = """HloModule error_on_some, num_partitions=8

%unsupported (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %cc = f32[4] custom-call(%x), custom_call_target="SomethingUnknown"
}

%keep (x: f32[4]) -> f32[4] {
  ROOT %x = f32[4] parameter(0)
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %pid = u32[] partition-id()
  %four = u32[] constant(4)
  %below = pred[] compare(%pid, %four), direction=LT
  ROOT %c = f32[4] conditional(%below, %p, %p), true_computation=%unsupported, false_computation=%keep
}
"""
