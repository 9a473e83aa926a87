"""The IR to an HloModuleProto (XLA's field numbers; see docs/proto.md).

Instruction and computation ids are assigned in order (XLA assigns its own unique ids the
same way when it serializes). Every attribute the IR carries is written to its proto field;
an attribute with no field here (a newer XLA's, or a mesh-form replica group) is a
``ProtoWriteError`` naming the instruction, never dropped silently. With ``with_config`` the
module is wrapped in an HloModuleProtoWithConfig whose config carries the header's device
counts and sharding-propagation flags.
"""

from __future__ import annotations

import re
from typing import Any

from neuron_sim.errors import UserError
from neuron_sim.hlo.attributes import COMPUTATION_ATTRIBUTES, format_attribute
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.proto import text_forms as tf
from neuron_sim.hlo.proto.reader import DOT_ALGORITHMS
from neuron_sim.hlo.proto.schema import new
from neuron_sim.hlo.proto.values import literal_to_proto, shape_to_proto
from neuron_sim.hlo.shapes import ArrayShape


class ProtoWriteError(UserError):
    """A module with something HloModuleProto cannot carry (one sentence naming it)."""


_FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")
_DISTRIBUTIONS = {"rng_uniform": 1, "rng_normal": 2}
_RNG_ALGORITHMS = {"rng_default": 0, "rng_three_fry": 1, "rng_philox": 2}
_API_VERSIONS = {"api_version_original": 1, "api_version_status_returning": 2,
                 "api_version_status_returning_unified": 3, "api_version_typed_ffi": 4}
_SCHEDULES = {"schedule_none": 0, "schedule_latest": 1, "schedule_earliest": 2}
_TRANSPOSE = {"no_transpose": 1, "transpose": 2, "adjoint": 3}
_BOOL_FIELDS = {
    "constrain_layout": "constrain_layout", "use_global_device_ids": "use_global_device_ids",
    "is_stable": "is_stable", "indices_are_sorted": "indices_are_sorted",
    "unique_indices": "unique_indices", "largest": "largest",
    "is_host_transfer": "is_host_transfer",
    "is_cross_program_prefetch": "is_cross_program_prefetch"}
_INT_FIELDS = {"channel_id": "channel_id", "index": "tuple_index",
               "feature_group_count": "feature_group_count",
               "batch_group_count": "batch_group_count", "exponent_bits": "exponent_bits",
               "mantissa_bits": "mantissa_bits", "k": "k"}
_LIST_FIELDS = {"dimensions": "dimensions", "dynamic_slice_sizes": "dynamic_slice_sizes",
                "fft_length": "fft_length"}
_GATHER = {"offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
           "start_indices_batching_dims"}
_SCATTER = {"update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
            "input_batching_dims", "scatter_indices_batching_dims"}
_DOT = {"lhs_contracting_dims": "lhs_contracting_dimensions",
        "rhs_contracting_dims": "rhs_contracting_dimensions",
        "lhs_batch_dims": "lhs_batch_dimensions", "rhs_batch_dims": "rhs_batch_dimensions"}


def _bool(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value) == "true"


def module_to_proto(module: HloModule) -> Any:
    """The HloModuleProto of ``module``."""
    proto = new("HloModuleProto")
    proto.name = module.name
    comp_ids = {}
    order = module.computations
    position = {c: i for i, c in enumerate(order)}
    if any(position.get(callee, -1) > position[comp] for comp in order
           for callee in _callees(comp)):
        order = module.post_order_computations()
    for i, comp in enumerate(order):
        comp_ids[comp] = i
    ids: dict[HloInstruction, int] = {}
    next_id = [len(order)]
    for comp in order:
        cproto = proto.computations.add()
        _write_computation(comp, cproto, comp_ids, ids, next_id)
    proto.entry_computation_name = module.entry.name
    proto.entry_computation_id = comp_ids[module.entry]
    proto.id = 0
    _program_shape(module.entry, proto.host_program_shape)
    _write_header(module, proto, ids)
    if module.sections:
        tf.parse_sections(module.sections, proto.stack_frame_index)
    return proto


def module_to_bytes(module: HloModule, *, with_config: bool = False) -> bytes:
    """Serialized HloModuleProto (or, ``with_config``, HloModuleProtoWithConfig) bytes."""
    try:
        return _module_bytes(module, with_config)
    except tf.ProtoFormError as exc:
        raise ProtoWriteError(f"module {module.name}: {exc}") from None


def _module_bytes(module: HloModule, with_config: bool) -> bytes:
    proto = module_to_proto(module)
    if not with_config:
        return proto.SerializeToString(deterministic=True)
    wrapper = new("HloModuleProtoWithConfig")
    wrapper.hlo_module.CopyFrom(proto)
    config = wrapper.config
    for key in ("replica_count", "num_partitions"):
        if key in module.header:
            setattr(config, key, int(module.header[key]))
    if "entry_computation_layout" in module.header:
        _entry_layout(str(module.header["entry_computation_layout"]),
                      config.entry_computation_layout)
    if str(module.header.get("alias_passthrough_params", "")) == "true":
        config.alias_passthrough_params = True
    for key in ("allow_spmd_sharding_propagation_to_parameters",
                "allow_spmd_sharding_propagation_to_output"):
        if key in module.header:
            getattr(config, key).extend(tf.parse_bools(str(module.header[key]), key))
    return wrapper.SerializeToString(deterministic=True)


def _entry_layout(text: str, message: Any) -> None:
    """``{(p0, p1)->result}`` into a ProgramShapeProto."""
    from neuron_sim.hlo.parser import parse_shape

    body = text.strip()
    if not (body.startswith("{") and body.endswith("}") and ")->" in body):
        raise ProtoWriteError(f"entry_computation_layout {text[:40]} is not (params)->result")
    params, _, result = body[1:-1].rpartition("->")
    for shape in parse_shape(params.strip()).elements:
        shape_to_proto(shape, message.parameters.add())
    shape_to_proto(parse_shape(result.strip()), message.result)


def _callees(comp: HloComputation) -> list[HloComputation]:
    return [c for inst in comp.instructions for c in inst.called_computations]


def _program_shape(comp: HloComputation, message: Any) -> None:
    for param in comp.parameters:
        shape_to_proto(param.shape, message.parameters.add())
        message.parameter_names.append(param.name)
    shape_to_proto(comp.root.shape, message.result)


def _write_computation(comp: HloComputation, cproto: Any, comp_ids: dict, ids: dict,
                       next_id: list[int]) -> None:
    cproto.name = comp.name
    cproto.id = comp_ids[comp]
    instructions = comp.instructions
    seen: set[HloInstruction] = set()
    for inst in instructions:
        if any(op.parent is comp and op not in seen for op in inst.operands):
            instructions = comp.post_order()
            break
        seen.add(inst)
    for inst in instructions:
        ids[inst] = next_id[0]
        next_id[0] += 1
    for inst in instructions:
        try:
            _write_instruction(inst, cproto.instructions.add(), comp_ids, ids)
        except (tf.ProtoFormError, ValueError, KeyError) as exc:
            raise ProtoWriteError(f"computation {comp.name}, instruction %{inst.name}: "
                                  f"{str(exc).strip(chr(39))}") from None
    cproto.root_id = ids[comp.root]
    _program_shape(comp, cproto.program_shape)
    m = re.fullmatch(r'\s*,\s*execution_thread="((?:[^"\\]|\\.)*)"\s*', comp.trailing or "")
    if m:
        cproto.execution_thread = tf.unescape(m.group(1))
    elif comp.trailing:
        raise ProtoWriteError(f"computation {comp.name}: '{comp.trailing.strip(', ')}' has no "
                              "HloComputationProto field")
    cproto.is_fusion_computation = False


def _write_instruction(inst: HloInstruction, p: Any, comp_ids: dict, ids: dict) -> None:
    p.name = inst.name
    p.opcode = inst.opcode.spelling
    p.id = ids[inst]
    shape_to_proto(inst.shape, p.shape)
    p.operand_ids.extend(ids[op] for op in inst.operands)
    if inst.opcode is Opcode.PARAMETER:
        p.parameter_number = inst.parameter_number
    if inst.opcode is Opcode.CONSTANT and inst.literal is not None:
        literal_to_proto(inst.literal, p.literal)
    called = inst.called_computations
    # XLA's order of the called computations, whatever order the text wrote them in.
    for first, second in (("body", "condition"), ("true_computation", "false_computation"),
                          ("select", "scatter")):
        if first in inst.attrs and second in inst.attrs:
            called = [inst.attrs[first], inst.attrs[second]]
    p.called_computation_ids.extend(comp_ids[c] for c in called)
    if inst.opcode is Opcode.COMPARE and "type" not in inst.attrs:
        p.comparison_type = _default_comparison(inst)
    if inst.opcode is Opcode.COMPARE and "order" not in inst.attrs:
        p.comparison_order = "PARTIAL" if _default_comparison(inst) == "FLOAT" and \
            str(inst.attrs.get("type", "")) != "TOTALORDER" else "TOTAL"
    if inst.opcode is Opcode.CUSTOM_CALL:
        p.custom_call_api_version = 1
    for key, value in inst.attrs.items():
        if key in COMPUTATION_ATTRIBUTES:
            continue
        _write_attribute(inst, key, value, p, ids)


def _default_comparison(inst: HloInstruction) -> str:
    shape = inst.operands[0].shape if inst.operands else None
    if not isinstance(shape, ArrayShape):
        return ""
    et = shape.element_type
    if et.is_float or et.is_complex:
        return "FLOAT"
    return "SIGNED" if et.is_integral and et.is_signed else "UNSIGNED"


def _write_attribute(inst: HloInstruction, key: str, value: Any, p: Any, ids: dict) -> None:
    text = format_attribute(key, value)
    if key in _BOOL_FIELDS:
        setattr(p, _BOOL_FIELDS[key], _bool(value))
    elif key in _INT_FIELDS:
        setattr(p, _INT_FIELDS[key], int(value))
    elif key in _LIST_FIELDS:
        getattr(p, _LIST_FIELDS[key]).extend(value)
    elif key == "kind":
        p.fusion_kind = str(value)
    elif key == "iota_dimension":
        p.dimensions.append(int(value))
    elif key == "slice":
        for d in value:
            p.slice_dimensions.add(start=d.start, limit=d.limit, stride=d.stride)
    elif key == "padding":
        p.padding_config.SetInParent()
        for d in value:
            p.padding_config.dimensions.add(edge_padding_low=d.low, edge_padding_high=d.high,
                                            interior_padding=d.interior)
    elif key == "replica_groups":
        _write_replica_groups(value, p)
    elif key == "source_target_pairs":
        for source, target in value.pairs:
            p.source_target_pairs.add(source=source, target=target)
    elif key == "window":
        p.window.SetInParent()
        for d in value.dims:
            p.window.dimensions.add(size=d.size, stride=d.stride, padding_low=d.pad_low,
                                    padding_high=d.pad_high, window_dilation=d.rhs_dilation,
                                    base_dilation=d.lhs_dilation, window_reversal=d.reversal)
    elif key == "dim_labels":
        c = p.convolution_dimension_numbers
        c.input_batch_dimension, c.input_feature_dimension = value.input_batch, \
            value.input_feature
        c.input_spatial_dimensions.extend(value.input_spatial)
        c.kernel_input_feature_dimension = value.kernel_input_feature
        c.kernel_output_feature_dimension = value.kernel_output_feature
        c.kernel_spatial_dimensions.extend(value.kernel_spatial)
        c.output_batch_dimension, c.output_feature_dimension = value.output_batch, \
            value.output_feature
        c.output_spatial_dimensions.extend(value.output_spatial)
    elif key in _DOT:
        numbers = p.ragged_dot_dimension_numbers.dot_dimension_numbers \
            if inst.opcode.spelling == "ragged-dot" else p.dot_dimension_numbers
        numbers.SetInParent()
        getattr(numbers, _DOT[key]).extend(value)
    elif key in ("lhs_ragged_dims", "rhs_group_dims"):
        r = p.ragged_dot_dimension_numbers
        (r.lhs_ragged_dimensions if key == "lhs_ragged_dims" else
         r.rhs_group_dimensions).extend(value)
    elif key in _GATHER:
        getattr(p.gather_dimension_numbers, key).extend(value)
    elif key in _SCATTER:
        getattr(p.scatter_dimension_numbers, key).extend(value)
    elif key == "index_vector_dim":
        target = p.gather_dimension_numbers if inst.opcode is Opcode.GATHER \
            else p.scatter_dimension_numbers
        target.index_vector_dim = int(value)
    elif key == "slice_sizes" and inst.opcode is Opcode.GATHER and (
            not value or not isinstance(value[0], tuple)):
        p.gather_slice_sizes.extend(value)
    elif key == "slice_sizes" and value and isinstance(value[0], tuple):
        for sizes in value:  # an in-place collective-permute's lists, flattened
            p.dynamic_slice_sizes.extend(sizes)
    elif key == "direction":
        p.comparison_direction = str(value)
    elif key == "type":
        p.comparison_type = str(value)
    elif key == "order":  # a newer XLA's compare order (TOTAL, PARTIAL)
        p.comparison_order = str(value)
    elif key == "distribution" and str(value).lower() in _DISTRIBUTIONS:
        p.distribution = _DISTRIBUTIONS[str(value).lower()]
    elif key == "algorithm" and str(value).lower() in _RNG_ALGORITHMS:
        p.rng_algorithm = _RNG_ALGORITHMS[str(value).lower()]
    elif key == "algorithm" and str(value).lower()[4:] in DOT_ALGORITHMS[1:]:
        p.precision_config.algorithm = DOT_ALGORITHMS.index(str(value).lower()[4:])
    elif key == "fft_type" and str(value).upper() in _FFT_TYPES:
        p.fft_type = _FFT_TYPES.index(str(value).upper())
    elif key == "custom_call_target":
        p.custom_call_target = value
    elif key == "api_version":
        p.custom_call_api_version = _API_VERSIONS[str(value).lower()]
    else:
        _write_text_attribute(inst, key, text, p, ids)


def _write_replica_groups(value: Any, p: Any) -> None:
    if value.is_mesh:
        mesh = value.mesh
        target = p.mesh_axes_replica_group_list
        for name, size in zip(mesh.axis_names, mesh.axis_sizes):
            target.mesh.axes.add(name=name, size=size)
        if mesh.device_reshape is not None and mesh.device_perm is not None:
            target.mesh.iota_transform.reshape_dims.extend(mesh.device_reshape)
            target.mesh.iota_transform.transpose_perm.extend(mesh.device_perm)
        elif mesh.device_list is not None:
            target.mesh.device_ids.extend(mesh.device_list)
        for ref in mesh.group_axes:
            axis = target.axes.add(mesh_axis_index=ref.axis)
            if ref.is_sub_axis:
                axis.sub_axis_info.pre_size = ref.pre_size
                axis.sub_axis_info.size = ref.size
        return
    if value.is_iota:
        iota = value.iota
        target = p.collective_device_list.iota_replica_group_list
        target.num_replica_groups = iota.group_count
        target.num_devices_per_group = iota.group_size
        target.iota_reshape_dims.extend(iota.reshape_dims)
        target.iota_transpose_perm.extend(iota.transpose_perm if iota.transpose_perm is not None
                                          else range(len(iota.reshape_dims)))
        return
    p.collective_device_list.SetInParent()
    for group in value.explicit:
        p.collective_device_list.replica_groups.add().replica_ids.extend(group)
        p.replica_groups.add().replica_ids.extend(group)


def _write_text_attribute(inst: HloInstruction, key: str, text: str, p: Any,
                          ids: dict) -> None:
    if key == "metadata":
        tf.parse_metadata(text, p.metadata)
    elif key == "sharding":
        tf.parse_sharding_text(text, p.sharding)
    elif key == "frontend_attributes":
        p.frontend_attributes.SetInParent()
        tf.parse_frontend_attributes(text, p.frontend_attributes)
    elif key == "backend_config":
        p.backend_config = (tf.unescape(text[1:-1]) if text.startswith('"') else
                            text).encode("utf-8")
    elif key == "control-predecessors":
        by_name = {i.name: i for i in inst.parent.instructions} if inst.parent else {}
        for name in tf.parse_names(text):
            if name not in by_name:
                raise tf.ProtoFormError(f"control predecessor %{name} is not in the "
                                        "computation")
            p.control_predecessor_ids.append(ids[by_name[name]])
    elif key == "operand_precision":
        p.precision_config.operand_precision.extend(tf.parse_precisions(text))
    elif key == "parameter_replication":
        p.parameter_replication.replicated_at_leaf_buffers.extend(
            tf.parse_bools(text, "parameter_replication"))
    elif key == "output_to_operand_aliasing":
        tf.parse_output_operand_aliasing(text, p.output_operand_aliasing)
    elif key == "operand_layout_constraints":
        from neuron_sim.hlo.parser import parse_shape

        body = text.strip()[1:-1]
        for part in tf._split_top(body):
            shape_to_proto(parse_shape(part), p.operand_shapes_with_layout.add())
        p.constrain_layout = True
    elif key == "outfeed_shape":
        from neuron_sim.hlo.parser import parse_shape

        shape_to_proto(parse_shape(text), p.outfeed_shape)
    elif key == "custom_call_has_side_effect":
        p.custom_call_has_side_effect = _bool(text)
    elif key == "schedule" and text.lower() in _SCHEDULES:
        p.custom_call_schedule = _SCHEDULES[text.lower()]
    elif key == "async_execution_thread":
        p.async_execution_thread = tf.unescape(text.strip('"'))
    elif key == "is_composite":
        p.is_composite = _bool(text)
    elif key == "epsilon":
        p.epsilon = float(text)
    elif key == "feature_index":
        p.feature_index = int(text)
    elif key in ("left_side", "unit_diagonal") or (
            key == "lower" and inst.opcode.spelling == "triangular-solve"):
        setattr(p.triangular_solve_options, key, _bool(text))
    elif key == "lower":
        p.cholesky_options.lower = _bool(text)
    elif key == "transpose_a" and text.lower() in _TRANSPOSE:
        p.triangular_solve_options.transpose_a = _TRANSPOSE[text.lower()]
    elif key == "delta":
        p.delta = int(text)
    elif key == "cross_program_prefetch_index":
        p.cross_program_prefetch_index = int(text)
    elif key == "domain":
        m = re.fullmatch(r'\{\s*kind="sharding"\s*,\s*entry=(\{.*\})\s*,\s*exit=(\{.*\})\s*\}',
                         text.strip(), re.S)
        if not m:
            raise tf.ProtoFormError(f"domain={text[:40]} is not a sharding domain")
        tf.parse_sharding_text(m.group(1), p.domain_entry_sharding)
        tf.parse_sharding_text(m.group(2), p.domain_exit_sharding)
    else:
        raise tf.ProtoFormError(f"attribute {key}={text[:40]} has no HloInstructionProto "
                                "field here")


def _write_header(module: HloModule, proto: Any, ids: dict) -> None:
    header = module.header
    for key, value in header.items():
        text = str(value)
        if key == "is_scheduled" and text == "true":
            _write_schedule(module, proto, ids)
        elif key == "input_output_alias":
            tf.parse_input_output_alias(text, proto.input_output_alias)
        elif key == "buffer_donor":
            tf.parse_buffer_donor(text, proto.buffer_donor)
        elif key == "frontend_attributes":
            tf.parse_frontend_attributes(text, proto.frontend_attributes)
        elif key in ("entry_computation_layout", "replica_count", "num_partitions",
                     "allow_spmd_sharding_propagation_to_parameters",
                     "allow_spmd_sharding_propagation_to_output", "alias_passthrough_params",
                     "is_scheduled"):
            continue  # the host program shape; the config (with_config)
        else:
            raise ProtoWriteError(f"module {module.name}: header attribute {key} has no "
                                  "HloModuleProto field here")


def _write_schedule(module: HloModule, proto: Any, ids: dict) -> None:
    fusions = module.fusion_computations()
    for index, cproto in enumerate(proto.computations):
        comp = module.computation(cproto.name)
        if comp in fusions:
            continue
        proto.schedule.sequences[cproto.id].instruction_ids.extend(
            ids[i] for i in comp.instructions)
