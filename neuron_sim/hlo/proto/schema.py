"""The protobuf schema of the HLO messages neuron-sim reads and writes, built in Python.

The message and field names and numbers are XLA's (``xla/service/hlo.proto``,
``xla/xla_data.proto`` and, for ``HloModuleProtoWithConfig``, ``xla/xla.proto``); only the
fields the IR carries are declared. A field the schema leaves out is kept by protobuf as an
unknown field and ignored, so a newer XLA's extra fields never make a file unreadable. Enum
fields are declared as ``int32`` (the same wire encoding), so a value a newer XLA adds reaches
the reader, which names it in its error, instead of vanishing. No protoc is needed: the
descriptors are built here, once, from the table below.
"""

from __future__ import annotations

import functools
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "xla"

# message -> [(number, field name, type, repeated)]; a type is a scalar name ("int64",
# "string", ...) or another message of the table. "enum" fields are int32 on the wire.
_MESSAGES: dict[str, list[tuple[int, str, str, bool]]] = {
    "LayoutProto": [
        (1, "minor_to_major", "int64", True), (6, "tiles", "TileProto", True),
        (7, "element_size_in_bits", "int64", False), (8, "memory_space", "int64", False),
        (9, "dim_level_types", "enum", True), (11, "index_primitive_type", "enum", False),
        (12, "pointer_primitive_type", "enum", False),
        (16, "tail_padding_alignment_in_elements", "int64", False),
        (15, "dynamic_shape_metadata_prefix_bytes", "int64", False),
        (17, "split_configs", "SplitConfigProto", True)],
    "TileProto": [(1, "dimensions", "int64", True)],
    "SplitConfigProto": [(1, "dimension", "int64", False), (2, "split_indices", "int64", True)],
    "ShapeProto": [
        (2, "element_type", "enum", False), (3, "dimensions", "int64", True),
        (6, "is_dynamic_dimension", "bool", True), (4, "tuple_shapes", "ShapeProto", True),
        (5, "layout", "LayoutProto", False)],
    "ProgramShapeProto": [
        (1, "parameters", "ShapeProto", True), (2, "result", "ShapeProto", False),
        (3, "parameter_names", "string", True)],
    "OpMetadata": [
        (1, "op_type", "string", False), (2, "op_name", "string", False),
        (3, "source_file", "string", False), (4, "source_line", "int32", False),
        (17, "source_end_line", "int32", False), (18, "source_column", "int32", False),
        (19, "source_end_column", "int32", False), (5, "profile_type", "enum", True),
        (12, "deduplicated_name", "string", False), (15, "stack_frame_id", "int32", False),
        (16, "scheduling_name", "string", False)],
    "LiteralProto": [
        (1, "shape", "ShapeProto", False), (2, "preds", "bool", True),
        (30, "s1s", "bytes", False), (26, "s2s", "bytes", False), (21, "s4s", "bytes", False),
        (15, "s8s", "bytes", False), (31, "u1s", "bytes", False), (27, "u2s", "bytes", False),
        (22, "u4s", "bytes", False), (3, "u8s", "bytes", False), (4, "s32s", "int32", True),
        (5, "s64s", "int64", True), (6, "u32s", "uint32", True), (7, "u64s", "uint64", True),
        (8, "f32s", "float", True), (9, "f64s", "double", True), (12, "c64s", "float", True),
        (18, "c128s", "double", True), (10, "tuple_literals", "LiteralProto", True),
        (11, "f16s", "bytes", False), (13, "bf16s", "bytes", False),
        (16, "u16s", "bytes", False), (17, "s16s", "bytes", False),
        (32, "f4e2m1fns", "bytes", False), (29, "f8e3m4s", "bytes", False),
        (23, "f8e4m3b11fnuzs", "bytes", False), (20, "f8e4m3fns", "bytes", False),
        (25, "f8e4m3fnuzs", "bytes", False), (28, "f8e4m3s", "bytes", False),
        (24, "f8e5m2fnuzs", "bytes", False), (19, "f8e5m2s", "bytes", False),
        (33, "f8e8m0fnus", "bytes", False)],
    "WindowDimension": [
        (1, "size", "int64", False), (2, "stride", "int64", False),
        (3, "padding_low", "int64", False), (4, "padding_high", "int64", False),
        (5, "window_dilation", "int64", False), (6, "base_dilation", "int64", False),
        (7, "window_reversal", "bool", False)],
    "Window": [(1, "dimensions", "WindowDimension", True)],
    "PaddingConfigDimension": [
        (1, "edge_padding_low", "int64", False), (2, "edge_padding_high", "int64", False),
        (3, "interior_padding", "int64", False)],
    "PaddingConfig": [(1, "dimensions", "PaddingConfigDimension", True)],
    "GatherDimensionNumbers": [
        (1, "offset_dims", "int64", True), (2, "collapsed_slice_dims", "int64", True),
        (3, "start_index_map", "int64", True), (4, "index_vector_dim", "int64", False),
        (5, "operand_batching_dims", "int64", True),
        (6, "start_indices_batching_dims", "int64", True)],
    "ScatterDimensionNumbers": [
        (1, "update_window_dims", "int64", True), (2, "inserted_window_dims", "int64", True),
        (3, "scatter_dims_to_operand_dims", "int64", True),
        (4, "index_vector_dim", "int64", False), (5, "input_batching_dims", "int64", True),
        (6, "scatter_indices_batching_dims", "int64", True)],
    "ConvolutionDimensionNumbers": [
        (7, "input_batch_dimension", "int64", False),
        (8, "input_feature_dimension", "int64", False),
        (11, "input_spatial_dimensions", "int64", True),
        (3, "kernel_input_feature_dimension", "int64", False),
        (4, "kernel_output_feature_dimension", "int64", False),
        (6, "kernel_spatial_dimensions", "int64", True),
        (9, "output_batch_dimension", "int64", False),
        (10, "output_feature_dimension", "int64", False),
        (12, "output_spatial_dimensions", "int64", True)],
    "DotDimensionNumbers": [
        (1, "lhs_contracting_dimensions", "int64", True),
        (2, "rhs_contracting_dimensions", "int64", True),
        (3, "lhs_batch_dimensions", "int64", True), (4, "rhs_batch_dimensions", "int64", True)],
    "RaggedDotDimensionNumbers": [
        (1, "dot_dimension_numbers", "DotDimensionNumbers", False),
        (2, "lhs_ragged_dimensions", "int64", True), (3, "rhs_group_dimensions", "int64", True)],
    "TriangularSolveOptions": [
        (1, "left_side", "bool", False), (2, "lower", "bool", False),
        (3, "unit_diagonal", "bool", False), (4, "transpose_a", "enum", False)],
    "CholeskyOptions": [(1, "lower", "bool", False)],
    "FrontendAttributes": [(1, "map", "map<string,string>", True)],
    "Statistic": [(1, "stat_name", "string", False), (2, "stat_val", "double", False)],
    "StatisticsViz": [(1, "stat_index_to_visualize", "int64", False),
                      (2, "statistics", "Statistic", True)],
    "OpSharding": [
        (1, "type", "enum", False), (2, "tile_shape", "ShapeProto", False),
        (3, "tile_assignment_dimensions", "int64", True),
        (4, "tile_assignment_devices", "int64", True),
        (5, "tuple_shardings", "OpSharding", True),
        (6, "replicate_on_last_tile_dim", "bool", False), (7, "metadata", "OpMetadata", True),
        (8, "last_tile_dims", "enum", True), (9, "iota_reshape_dims", "int64", True),
        (10, "iota_transpose_perm", "int32", True), (11, "is_shard_group", "bool", False),
        (12, "shard_group_id", "int64", False), (13, "shard_group_type", "enum", False),
        (14, "named_sharding", "bytes", False)],  # a NamedShardingProto, kept as bytes
    "ReplicaGroup": [(1, "replica_ids", "int64", True)],
    "IotaReplicaGroupListProto": [
        (1, "num_replica_groups", "int64", False), (2, "num_devices_per_group", "int64", False),
        (3, "iota_reshape_dims", "int64", True), (4, "iota_transpose_perm", "int32", True)],
    "CollectiveDeviceListProto": [
        (1, "replica_groups", "ReplicaGroup", True),
        (2, "iota_replica_group_list", "IotaReplicaGroupListProto", False)],
    "MeshAxis": [(1, "name", "string", False), (2, "size", "int64", False)],
    "IotaTransform": [(1, "reshape_dims", "int64", True), (2, "transpose_perm", "int64", True)],
    "MeshProto": [(1, "axes", "MeshAxis", True), (2, "device_ids", "int64", True),
                  (3, "iota_transform", "IotaTransform", False)],
    "SubAxis": [(1, "pre_size", "int64", False), (2, "size", "int64", False)],
    "AxisRefProto": [(1, "mesh_axis_index", "int64", False),
                     (2, "sub_axis_info", "SubAxis", False)],
    "MeshAxesReplicaGroupListProto": [(1, "mesh", "MeshProto", False),
                                      (2, "axes", "AxisRefProto", True)],
    "SourceTarget": [(1, "source", "int64", False), (2, "target", "int64", False)],
    "Tolerance": [(1, "atol", "double", False), (2, "rtol", "double", False),
                  (3, "ulps", "int64", False)],
    "ResultAccuracy": [(1, "mode", "enum", False), (2, "tolerance", "Tolerance", False)],
    "PrecisionConfig": [(1, "operand_precision", "enum", True), (2, "algorithm", "enum", False)],
    "ParameterReplication": [(1, "replicated_at_leaf_buffers", "bool", True)],
    "OutputOperandAliasing": [
        (1, "output_shape_index", "int64", True), (2, "operand_index", "int64", False),
        (3, "operand_shape_index", "int64", True)],
    "OriginalArrayProto": [(1, "instruction_name", "string", False),
                           (2, "shape_index", "int64", True)],
    "OriginalValueElementProto": [(1, "shape_index", "int64", True),
                                  (2, "original_array", "OriginalArrayProto", False)],
    "OriginalValueProto": [(1, "elements", "OriginalValueElementProto", True)],
    "SliceDimensions": [(1, "start", "int64", False), (2, "limit", "int64", False),
                        (3, "stride", "int64", False)],
    "HloInstructionProto": [
        (1, "name", "string", False), (2, "opcode", "string", False),
        (3, "shape", "ShapeProto", False), (7, "metadata", "OpMetadata", False),
        (8, "literal", "LiteralProto", False), (9, "parameter_number", "int64", False),
        (11, "fusion_kind", "string", False), (13, "tuple_index", "int64", False),
        (14, "dimensions", "int64", True), (15, "window", "Window", False),
        (16, "convolution_dimension_numbers", "ConvolutionDimensionNumbers", False),
        (50, "feature_group_count", "int64", False), (58, "batch_group_count", "int64", False),
        (17, "slice_dimensions", "SliceDimensions", True), (18, "exponent_bits", "int32", False),
        (19, "mantissa_bits", "int32", False), (20, "dynamic_slice_sizes", "int64", True),
        (21, "padding_config", "PaddingConfig", False), (22, "outfeed_config", "bytes", False),
        (23, "distribution", "enum", False), (24, "epsilon", "float", False),
        (25, "feature_index", "int64", False), (26, "channel_id", "int64", False),
        (27, "infeed_config", "bytes", False), (28, "custom_call_target", "string", False),
        (29, "outfeed_shape", "ShapeProto", False),
        (30, "dot_dimension_numbers", "DotDimensionNumbers", False),
        (90, "ragged_dot_dimension_numbers", "RaggedDotDimensionNumbers", False),
        (31, "fft_type", "enum", False), (32, "fft_length", "int64", True),
        (63, "comparison_direction", "string", False),
        (33, "gather_dimension_numbers", "GatherDimensionNumbers", False),
        (34, "gather_slice_sizes", "int64", True), (35, "id", "int64", False),
        (36, "operand_ids", "int64", True), (37, "control_predecessor_ids", "int64", True),
        (38, "called_computation_ids", "int64", True), (40, "sharding", "OpSharding", False),
        (43, "backend_config", "bytes", False), (49, "replica_groups", "ReplicaGroup", True),
        (71, "use_global_device_ids", "bool", False), (47, "is_host_transfer", "bool", False),
        (60, "is_stable", "bool", False),
        (48, "scatter_dimension_numbers", "ScatterDimensionNumbers", False),
        (51, "precision_config", "PrecisionConfig", False),
        (52, "source_target_pairs", "SourceTarget", True),
        (54, "domain_entry_sharding", "OpSharding", False),
        (55, "domain_exit_sharding", "OpSharding", False),
        (56, "constrain_layout", "bool", False),
        (57, "operand_shapes_with_layout", "ShapeProto", True),
        (59, "triangular_solve_options", "TriangularSolveOptions", False),
        (62, "cholesky_options", "CholeskyOptions", False),
        (61, "parameter_replication", "ParameterReplication", False),
        (65, "custom_call_has_side_effect", "bool", False),
        (74, "output_operand_aliasing", "OutputOperandAliasing", True),
        (76, "custom_call_schedule", "enum", False), (66, "delta", "int64", False),
        (67, "indices_are_sorted", "bool", False),
        (68, "frontend_attributes", "FrontendAttributes", False),
        (69, "unique_indices", "bool", False), (70, "rng_algorithm", "enum", False),
        (72, "comparison_type", "string", False), (102, "comparison_order", "string", False),
        (73, "is_cross_program_prefetch", "bool", False),
        (80, "cross_program_prefetch_index", "int32?", False),
        (75, "padding_type", "enum", False), (77, "custom_call_api_version", "enum", False),
        (79, "async_execution_thread", "string", False), (81, "k", "int64", False),
        (85, "largest", "bool", False), (82, "statistics_viz", "StatisticsViz", False),
        (87, "collective_device_list", "CollectiveDeviceListProto", False),
        (92, "iota_collective_device_list", "IotaReplicaGroupListProto", False),
        (93, "mesh_axes_replica_group_list", "MeshAxesReplicaGroupListProto", False),
        (88, "original_value", "OriginalValueProto", False), (89, "is_composite", "bool", False),
        (91, "result_accuracy", "ResultAccuracy", False)],
    "HloComputationProto": [
        (1, "name", "string", False), (2, "instructions", "HloInstructionProto", True),
        (4, "program_shape", "ProgramShapeProto", False), (5, "id", "int64", False),
        (6, "root_id", "int64", False), (7, "is_fusion_computation", "bool", False),
        (8, "execution_thread", "string", False)],
    "InstructionSequence": [(1, "instruction_ids", "int64", True)],
    "HloScheduleProto": [(1, "sequences", "map<int64,InstructionSequence>", True)],
    "AliasEntryProto": [
        (1, "output_shape_index", "int64", True), (2, "parameter_number", "int64", False),
        (3, "parameter_shape_index", "int64", True), (4, "kind", "enum", False)],
    "HloInputOutputAliasProto": [(1, "entries", "AliasEntryProto", True)],
    "BufferDonorEntryProto": [(1, "parameter_number", "int64", False),
                              (2, "parameter_shape_index", "int64", True)],
    "HloBufferDonorProto": [(1, "entries", "BufferDonorEntryProto", True)],
    "FileLocation": [
        (1, "file_name_id", "int32", False), (2, "function_name_id", "int32", False),
        (3, "line", "int32", False), (5, "end_line", "int32", False),
        (4, "column", "int32", False), (6, "end_column", "int32", False)],
    "StackFrame": [(1, "file_location_id", "int32", False),
                   (2, "parent_frame_id", "int32", False)],
    "StackFrameIndexProto": [
        (1, "file_names", "string", True), (2, "function_names", "string", True),
        (3, "file_locations", "FileLocation", True), (4, "stack_frames", "StackFrame", True)],
    "HloModuleProto": [
        (1, "name", "string", False), (2, "entry_computation_name", "string", False),
        (6, "entry_computation_id", "int64", False),
        (3, "computations", "HloComputationProto", True),
        (4, "host_program_shape", "ProgramShapeProto", False), (5, "id", "int64", False),
        (7, "schedule", "HloScheduleProto", False),
        (8, "input_output_alias", "HloInputOutputAliasProto", False),
        (18, "buffer_donor", "HloBufferDonorProto", False),
        (12, "spmd_output_sharding", "OpSharding", False),
        (14, "spmd_parameters_shardings", "OpSharding", True),
        (17, "stack_frame_index", "StackFrameIndexProto", False),
        (19, "frontend_attributes", "FrontendAttributes", False)],
    "HloProto": [(1, "hlo_module", "HloModuleProto", False)],
    "HloModuleConfigProto": [
        (1, "entry_computation_layout", "ProgramShapeProto", False),
        (4, "replica_count", "int64", False), (5, "num_partitions", "int64", False),
        (7, "use_spmd_partitioning", "bool", False),
        (17, "alias_passthrough_params", "bool", False),
        (33, "allow_spmd_sharding_propagation_to_parameters", "bool", True),
        (27, "allow_spmd_sharding_propagation_to_output", "bool", True)],
    "HloModuleProtoWithConfig": [(1, "hlo_module", "HloModuleProto", False),
                                 (2, "config", "HloModuleConfigProto", False)],
}

_SCALARS = {
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int32?": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,  # proto3 'optional' (presence)
    "uint32": descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    "enum": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
}


def _add_field(message: descriptor_pb2.DescriptorProto, number: int, name: str, kind: str,
               repeated: bool) -> None:
    field = message.field.add(name=name, number=number)
    field.label = (descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED if repeated
                   else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    if kind.startswith("map<"):
        key, value = kind[4:-1].split(",")
        entry = message.nested_type.add(name=name.capitalize() + "Entry")
        entry.options.map_entry = True
        _add_field(entry, 1, "key", key, False)
        _add_field(entry, 2, "value", value, False)
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{message.name}.{entry.name}"
    elif kind in _SCALARS:
        field.type = _SCALARS[kind]
        if kind.endswith("?"):
            field.proto3_optional = True
            field.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name="_" + name)
    else:
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{kind}"


@functools.lru_cache(maxsize=None)
def _pool() -> descriptor_pool.DescriptorPool:
    file = descriptor_pb2.FileDescriptorProto(name="neuron_sim/hlo.proto", package=_PACKAGE,
                                              syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        for number, field_name, kind, repeated in fields:
            _add_field(message, number, field_name, kind, repeated)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


@functools.lru_cache(maxsize=None)
def message_class(name: str) -> Any:
    """The generated class of message ``name`` (``"HloModuleProto"``, ...)."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{_PACKAGE}.{name}"))


def new(name: str) -> Any:
    """An empty message ``name``."""
    return message_class(name)()
