"""An HloModuleProto (or a message wrapping one) to the IR.

The IR is built as the text parser builds it: ``HloInstruction`` / ``HloComputation`` /
``HloModule`` constructors, typed attributes through ``attributes.parse_attribute`` (the same
codecs), the rest as ``Raw`` text in XLA's spelling. Attributes are placed in XLA's printing
order, and only where XLA's printer writes them (a default value is left out, as in the
text). ``ProtoReadError`` is one sentence naming the computation and instruction involved.
"""

from __future__ import annotations

from typing import Any

from neuron_sim.errors import UserError
from neuron_sim.hlo.attributes import COMPUTATION_ATTRIBUTES, Raw, parse_attribute
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.proto import text_forms as tf
from neuron_sim.hlo.proto.values import (literal_from_proto, shape_from_proto)
from neuron_sim.hlo.shapes import ArrayShape


class ProtoReadError(UserError):
    """A protobuf message that does not describe a module the IR can hold."""


# Opcodes whose ``dimensions`` field XLA prints always, and those it prints when non-empty.
_DIMENSIONS_ALWAYS = {Opcode.from_spelling(s) for s in (
    "broadcast", "concatenate", "reduce", "reverse", "transpose", "sort", "all-gather",
    "all-gather-start", "reduce-scatter", "map", "get-dimension-size",
    "set-dimension-size")}
_DIMENSIONS_IF_SET = {Opcode.from_spelling(s) for s in ("all-to-all", "ragged-all-to-all")}
_COLLECTIVES = {Opcode.from_spelling(s) for s in (
    "all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter",
    "all-to-all", "ragged-all-to-all", "collective-broadcast")}
_PERMUTES = {Opcode.from_spelling(s) for s in ("collective-permute", "collective-permute-start")}
_CHANNEL_OPS = _COLLECTIVES | _PERMUTES | {Opcode.from_spelling(s) for s in (
    "send", "recv", "send-done", "recv-done")}
_FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")
_DISTRIBUTIONS = {1: "rng_uniform", 2: "rng_normal"}
_RNG_ALGORITHMS = {0: "rng_default", 1: "rng_three_fry", 2: "rng_philox"}
_API_VERSIONS = {1: "API_VERSION_ORIGINAL", 2: "API_VERSION_STATUS_RETURNING",
                 3: "API_VERSION_STATUS_RETURNING_UNIFIED", 4: "API_VERSION_TYPED_FFI"}
_SCHEDULES = {1: "SCHEDULE_LATEST", 2: "SCHEDULE_EARLIEST"}
_TRANSPOSE = {1: "NO_TRANSPOSE", 2: "TRANSPOSE", 3: "ADJOINT"}
# PrecisionConfig.Algorithm by number (xla_data.proto), printed "dot_" + the name lowercased.
DOT_ALGORITHMS = (
    "unset", "any_f8_any_f8_f32", "any_f8_any_f8_f32_fast_accum", "f16_f16_f16", "f16_f16_f32",
    "bf16_bf16_bf16", "bf16_bf16_f32", "bf16_bf16_f32_x3", "bf16_bf16_f32_x6", "tf32_tf32_f32",
    "tf32_tf32_f32_x3", "f32_f32_f32", "f64_f64_f64", "bf16_bf16_f32_x9")


def _ints(values: Any) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def module_from_proto(proto: Any, config: Any | None = None, *, source: str = "<proto>"
                      ) -> HloModule:
    """The IR module of an HloModuleProto; ``config`` (an HloModuleConfigProto) supplies the
    header values a plain HloModuleProto does not carry (replica_count, num_partitions, ...)."""
    if not proto.computations:
        raise ProtoReadError(f"{source}: the message has no computations: not an "
                             "HloModuleProto (or HloProto / HloModuleProtoWithConfig)")
    module = HloModule(proto.name or "module")
    comps_by_id: dict[int, HloComputation] = {}
    pending: list[tuple[HloComputation, Any]] = []
    names: set[str] = set()
    for cproto in proto.computations:
        if cproto.id in comps_by_id:
            raise ProtoReadError(f"{source}: two computations have id {cproto.id}")
        if not cproto.name or cproto.name in names:
            raise ProtoReadError(f"{source}: computation id {cproto.id} has "
                                 f"{'no name' if not cproto.name else 'a duplicate name'}")
        names.add(cproto.name)
        comp = HloComputation(cproto.name)
        comps_by_id[cproto.id] = comp
        pending.append((comp, cproto))
    entry = comps_by_id.get(proto.entry_computation_id)
    if entry is None:
        entry = next((c for c in comps_by_id.values()
                      if c.name == proto.entry_computation_name), None)
    if entry is None:
        raise ProtoReadError(f"{source}: entry computation id {proto.entry_computation_id} "
                             f"('{proto.entry_computation_name}') is not among the computations")
    by_id: dict[int, HloInstruction] = {}
    for comp, cproto in pending:
        _read_computation(comp, cproto, comps_by_id, by_id, source)
        if cproto.execution_thread and cproto.execution_thread != "main":
            comp.trailing = f', execution_thread="{tf.escape(cproto.execution_thread)}"'
        module.add_computation(comp, entry=comp is entry)
        if comp.name != cproto.name:
            raise ProtoReadError(f"{source}: computation name {cproto.name} is used twice")
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode is Opcode.ASYNC_START and isinstance(inst.get("calls"),
                                                                 HloComputation):
                inst.get("calls").syntax_sugar = True
    _read_header(module, proto, config, source)
    module.style_index_comments = True
    return module


def _read_computation(comp: HloComputation, cproto: Any, comps: dict[int, HloComputation],
                      by_id: dict[int, HloInstruction], source: str) -> None:
    local: dict[int, HloInstruction] = {}
    controls: list[tuple[HloInstruction, Any]] = []
    for iproto in cproto.instructions:
        where = f"{source}: computation {comp.name}, instruction %{iproto.name or iproto.id}"
        if iproto.id in by_id:
            raise ProtoReadError(f"{where}: id {iproto.id} is used twice")
        try:
            inst = _read_instruction(iproto, local, comps, comp)
        except (UserError, ValueError, KeyError, IndexError, TypeError, OverflowError) as exc:
            message = str(exc).strip().rstrip(".") or type(exc).__name__
            raise ProtoReadError(f"{where}: {message}") from None
        inst.parent = comp
        comp.instructions.append(inst)
        local[iproto.id] = inst
        by_id[iproto.id] = inst
        if iproto.control_predecessor_ids:
            controls.append((inst, iproto))
    if not comp.instructions:
        raise ProtoReadError(f"{source}: computation {comp.name} has no instructions")
    root = local.get(cproto.root_id)
    if root is None:
        raise ProtoReadError(f"{source}: computation {comp.name}: root id {cproto.root_id} is "
                             "not one of its instructions")
    comp.root = root
    for inst, iproto in controls:
        missing = [i for i in iproto.control_predecessor_ids if i not in local]
        if missing:
            raise ProtoReadError(f"{source}: computation {comp.name}, instruction "
                                 f"%{inst.name}: control predecessor id {missing[0]} is not in "
                                 "the computation")
        names = ", ".join("%" + local[i].name for i in iproto.control_predecessor_ids)
        inst.set_attr("control-predecessors", Raw("{" + names + "}"))
        _reorder(inst)


def _reorder(inst: HloInstruction) -> None:
    """Attributes in XLA's printing order (set_attr places each new one by its rank)."""
    items = list(inst.attrs.items())
    inst.attrs = {}
    for key, value in items:
        inst.set_attr(key, value)


def _read_instruction(p: Any, local: dict[int, HloInstruction],
                      comps: dict[int, HloComputation], comp: HloComputation) -> HloInstruction:
    try:
        opcode = Opcode.from_spelling(p.opcode)
    except KeyError:
        raise ProtoReadError(f"unknown opcode '{p.opcode}'") from None
    if not p.name:
        raise ProtoReadError("the instruction has no name")
    shape = shape_from_proto(p.shape)
    operands = []
    for i in p.operand_ids:
        if i not in local:
            raise ProtoReadError(f"operand id {i} is not an earlier instruction of "
                                 f"{comp.name}")
        operands.append(local[i])
    called = []
    for i in p.called_computation_ids:
        if i not in comps:
            raise ProtoReadError(f"called computation id {i} is not in the module")
        called.append(comps[i])
    inst = HloInstruction(p.name, opcode, shape, operands)
    if opcode is Opcode.PARAMETER:
        if p.parameter_number < 0:
            raise ProtoReadError(f"parameter number {p.parameter_number} is negative")
        inst.parameter_number = p.parameter_number
    if opcode is Opcode.CONSTANT:
        inst.literal = literal_from_proto(p.literal, shape)
    attrs: list[tuple[str, Any]] = []

    def put(name: str, text: Any) -> None:
        attrs.append((name, text if name in COMPUTATION_ATTRIBUTES
                       else parse_attribute(name, text)))

    def raw(name: str, text: str) -> None:
        attrs.append((name, Raw(text)))

    _read_attributes(p, opcode, shape, operands, called, put, raw)
    for name, value in attrs:
        inst.set_attr(name, value)
    return inst


def _read_attributes(p: Any, opcode: Opcode, shape: Any, operands: list[HloInstruction],
                     called: list[HloComputation], put: Any, raw: Any) -> None:
    spelling = opcode.spelling
    if opcode is Opcode.FUSION:
        put("kind", p.fusion_kind or "kLoop")
    if opcode is Opcode.GET_TUPLE_ELEMENT:
        put("index", str(p.tuple_index))
    if opcode is Opcode.IOTA:
        put("iota_dimension", str(p.dimensions[0] if p.dimensions else 0))
    if p.slice_dimensions:
        strided = any(d.stride != 1 for d in p.slice_dimensions)
        put("slice", "{" + ", ".join(f"[{d.start}:{d.limit}" + (f":{d.stride}]" if strided
                                                                  else "]")
                                     for d in p.slice_dimensions) + "}")
    if opcode in _PERMUTES and p.dynamic_slice_sizes:
        # An in-place collective-permute: one slice-size list per update, flattened.
        rank = _first_rank(operands)
        sizes = list(p.dynamic_slice_sizes)
        if not rank or len(sizes) % rank:
            rank = len(sizes)  # not lists of the operand's rank: kept as one list
        put("slice_sizes", "{" + ",".join(_ints(sizes[i:i + rank])
                                          for i in range(0, len(sizes), rank)) + "}")
    elif p.dynamic_slice_sizes or opcode is Opcode.DYNAMIC_SLICE:
        put("dynamic_slice_sizes", _ints(p.dynamic_slice_sizes))
    if opcode is Opcode.PAD:
        dims = p.padding_config.dimensions
        interior = any(d.interior_padding for d in dims)
        put("padding", "x".join(f"{d.edge_padding_low}_{d.edge_padding_high}"
                                + (f"_{d.interior_padding}" if interior else "")
                                for d in dims) or "{}")
    if opcode in _CHANNEL_OPS and p.channel_id > 0:
        put("channel_id", str(p.channel_id))
    if opcode in _COLLECTIVES:
        put("replica_groups", _replica_groups(p))
    if opcode in _PERMUTES:
        put("source_target_pairs", "{" + ",".join(f"{{{s.source},{s.target}}}"
                                                  for s in p.source_target_pairs) + "}")
    if p.constrain_layout and opcode is not Opcode.CUSTOM_CALL:
        put("constrain_layout", "true")
    if p.use_global_device_ids:
        put("use_global_device_ids", "true")
    if opcode in _DIMENSIONS_ALWAYS or (opcode in _DIMENSIONS_IF_SET and p.dimensions):
        put("dimensions", _ints(p.dimensions))
    if p.HasField("window") and p.window.dimensions:
        put("window", _window(p.window))
    if opcode is Opcode.CONVOLUTION:
        raw_dims = p.convolution_dimension_numbers
        put("dim_labels", _dim_labels(raw_dims, operands, shape))
        if p.feature_group_count > 1:
            put("feature_group_count", str(p.feature_group_count))
        if p.batch_group_count > 1:
            put("batch_group_count", str(p.batch_group_count))
    if opcode in (Opcode.DOT, Opcode.from_spelling("ragged-dot")) or spelling == "scaled-dot":
        d = p.ragged_dot_dimension_numbers.dot_dimension_numbers \
            if spelling == "ragged-dot" else p.dot_dimension_numbers
        for key, field in (("lhs_batch_dims", d.lhs_batch_dimensions),
                           ("lhs_contracting_dims", d.lhs_contracting_dimensions),
                           ("rhs_batch_dims", d.rhs_batch_dimensions),
                           ("rhs_contracting_dims", d.rhs_contracting_dimensions)):
            if field or key.endswith("contracting_dims"):
                put(key, _ints(field))
        if spelling == "ragged-dot":
            r = p.ragged_dot_dimension_numbers
            put("lhs_ragged_dims", _ints(r.lhs_ragged_dimensions))
            if r.rhs_group_dimensions:
                put("rhs_group_dims", _ints(r.rhs_group_dimensions))
    if opcode is Opcode.GATHER:
        g = p.gather_dimension_numbers
        put("offset_dims", _ints(g.offset_dims))
        put("collapsed_slice_dims", _ints(g.collapsed_slice_dims))
        put("start_index_map", _ints(g.start_index_map))
        if g.operand_batching_dims:
            put("operand_batching_dims", _ints(g.operand_batching_dims))
        if g.start_indices_batching_dims:
            put("start_indices_batching_dims", _ints(g.start_indices_batching_dims))
        put("index_vector_dim", str(g.index_vector_dim))
        put("slice_sizes", _ints(p.gather_slice_sizes))
    if opcode is Opcode.SCATTER:
        s = p.scatter_dimension_numbers
        put("update_window_dims", _ints(s.update_window_dims))
        put("inserted_window_dims", _ints(s.inserted_window_dims))
        put("scatter_dims_to_operand_dims", _ints(s.scatter_dims_to_operand_dims))
        if s.input_batching_dims:
            put("input_batching_dims", _ints(s.input_batching_dims))
        if s.scatter_indices_batching_dims:
            put("scatter_indices_batching_dims", _ints(s.scatter_indices_batching_dims))
        put("index_vector_dim", str(s.index_vector_dim))
    if p.indices_are_sorted:
        put("indices_are_sorted", "true")
    if p.unique_indices:
        put("unique_indices", "true")
    if opcode is Opcode.COMPARE:
        put("direction", p.comparison_direction)
        kind = p.comparison_type
        default_order = "PARTIAL" if _default_comparison(operands) == "FLOAT" else "TOTAL"
        order = p.comparison_order if p.comparison_order != default_order else ""
        if order == "TOTAL" and kind in ("", "FLOAT", "TOTALORDER"):
            kind, order = "TOTALORDER", ""  # a newer XLA's order=TOTAL, read as the parser does
        if kind and kind != _default_comparison(operands):
            put("type", kind)
        if order:
            raw("order", order)  # XLA prints a non-default order only
    if p.is_stable:
        put("is_stable", "true")
    if opcode is Opcode.RNG:
        put("distribution", _DISTRIBUTIONS.get(p.distribution, str(p.distribution)))
    if spelling == "rng-bit-generator":
        put("algorithm", _RNG_ALGORITHMS.get(p.rng_algorithm, str(p.rng_algorithm)))
    if opcode is Opcode.REDUCE_PRECISION:
        put("exponent_bits", str(p.exponent_bits))
        put("mantissa_bits", str(p.mantissa_bits))
    if opcode is Opcode.FFT:
        put("fft_type", _FFT_TYPES[p.fft_type] if 0 <= p.fft_type < 4 else str(p.fft_type))
        put("fft_length", _ints(p.fft_length))
    if spelling == "topk":
        put("k", str(p.k))
        put("largest", "true" if p.largest else "false")
    if spelling.startswith("batch-norm"):
        raw("epsilon", _float32(p.epsilon))
        raw("feature_index", str(p.feature_index))
    if opcode is Opcode.CUSTOM_CALL:
        put("custom_call_target", '"' + tf.escape(p.custom_call_target) + '"')
    if p.is_host_transfer:
        put("is_host_transfer", "true")
    if p.is_cross_program_prefetch:
        put("is_cross_program_prefetch", "true")
    if p.HasField("cross_program_prefetch_index"):
        raw("cross_program_prefetch_index", str(p.cross_program_prefetch_index))
    _read_called(opcode, called, operands, put)
    if p.HasField("sharding"):
        raw("sharding", tf.format_sharding(p.sharding))
    if p.HasField("frontend_attributes"):
        text = tf.format_frontend_attributes(p.frontend_attributes)
        if text:
            raw("frontend_attributes", text)
    if p.HasField("metadata"):
        text = tf.format_metadata(p.metadata)
        if text:
            raw("metadata", text)
    if p.backend_config:
        config = p.backend_config.decode("utf-8", errors="replace")
        raw("backend_config", config if config.startswith("{") else
            '"' + tf.escape(config) + '"')
    if opcode is Opcode.CUSTOM_CALL:
        _read_custom_call(p, put, raw)
    if p.HasField("precision_config") and p.precision_config.algorithm:
        number = p.precision_config.algorithm
        put("algorithm", "dot_" + DOT_ALGORITHMS[number] if 0 < number < len(DOT_ALGORITHMS)
            else str(number))
    if p.HasField("precision_config") and any(p.precision_config.operand_precision):
        raw("operand_precision", tf.format_precisions(p.precision_config.operand_precision))
    if p.HasField("parameter_replication") and p.parameter_replication.replicated_at_leaf_buffers:
        raw("parameter_replication", tf.format_bools(
            p.parameter_replication.replicated_at_leaf_buffers))
    if p.output_operand_aliasing and opcode is not Opcode.CUSTOM_CALL:
        raw("output_to_operand_aliasing", tf.format_output_operand_aliasing(
            p.output_operand_aliasing))
    if p.async_execution_thread and p.async_execution_thread != "main" and spelling.startswith(
            "async"):
        raw("async_execution_thread", '"' + tf.escape(p.async_execution_thread) + '"')
    if p.is_composite:
        raw("is_composite", "true")
    if p.HasField("domain_entry_sharding") or p.HasField("domain_exit_sharding"):
        raw("domain", "{kind=\"sharding\", entry=" + tf.format_sharding(p.domain_entry_sharding)
            + ", exit=" + tf.format_sharding(p.domain_exit_sharding) + "}")
    if spelling == "triangular-solve":
        o = p.triangular_solve_options
        raw("left_side", "true" if o.left_side else "false")
        raw("lower", "true" if o.lower else "false")
        raw("unit_diagonal", "true" if o.unit_diagonal else "false")
        raw("transpose_a", _TRANSPOSE.get(o.transpose_a, str(o.transpose_a)))
    if spelling == "cholesky":
        raw("lower", "true" if p.cholesky_options.lower else "false")
    if opcode.spelling == "outfeed" and p.HasField("outfeed_shape"):
        raw("outfeed_shape", str(shape_from_proto(p.outfeed_shape)))
    if spelling == "rng-get-and-update-state":
        raw("delta", str(p.delta))


def _read_custom_call(p: Any, put: Any, raw: Any) -> None:
    if p.constrain_layout:
        raw("operand_layout_constraints", "{" + ", ".join(
            str(shape_from_proto(s)) for s in p.operand_shapes_with_layout) + "}")
    if p.custom_call_has_side_effect:
        raw("custom_call_has_side_effect", "true")
    if p.output_operand_aliasing:
        raw("output_to_operand_aliasing", tf.format_output_operand_aliasing(
            p.output_operand_aliasing))
    if p.custom_call_schedule:
        raw("schedule", _SCHEDULES.get(p.custom_call_schedule, str(p.custom_call_schedule)))
    if p.custom_call_api_version not in (0, 1):
        put("api_version", _API_VERSIONS.get(p.custom_call_api_version,
                                             str(p.custom_call_api_version)))


def _first_rank(operands: list[HloInstruction]) -> int:
    """The rank of the first array leaf of the first operand (0 when there is none)."""
    if not operands:
        return 0
    leaf = next(iter(operands[0].shape.leaves()), None)
    return leaf.rank if leaf is not None else 0


def _float32(value: float) -> str:
    """The shortest text of a float32 (the proto's epsilon is one)."""
    import numpy as np

    text = str(np.float32(value))
    return text[:-2] if text.endswith(".0") else text


def _default_comparison(operands: list[HloInstruction]) -> str:
    """XLA's default comparison type for the operands' element type."""
    if not operands or not isinstance(operands[0].shape, ArrayShape):
        return ""
    et = operands[0].shape.element_type
    if et.is_float or et.is_complex:
        return "FLOAT"
    if et.is_integral and et.is_signed:
        return "SIGNED"
    return "UNSIGNED"


def _read_called(opcode: Opcode, called: list[HloComputation], operands: list[HloInstruction],
                 put: Any) -> None:
    """The computation attributes, named as XLA prints them for the opcode."""
    if not called:
        return
    if opcode is Opcode.WHILE and len(called) == 2:
        put("condition", called[1])
        put("body", called[0])
    elif opcode is Opcode.CONDITIONAL:
        pred = bool(operands) and isinstance(operands[0].shape, ArrayShape) and \
            operands[0].shape.element_type.spelling == "pred"
        if pred and len(called) == 2:
            put("true_computation", called[0])
            put("false_computation", called[1])
        else:
            put("branch_computations", tuple(called))
    elif opcode is Opcode.SELECT_AND_SCATTER and len(called) == 2:
        put("select", called[0])
        put("scatter", called[1])
    elif opcode is Opcode.FUSION or opcode.spelling.startswith("async"):
        put("calls", called[0])
    elif opcode is Opcode.CUSTOM_CALL:
        put("called_computations", tuple(called))
    elif len(called) == 1:
        put("to_apply", called[0])
    else:
        put("called_computations", tuple(called))


def _mesh_replica_groups(mesh_list: Any) -> str:
    """The mesh form's text: ``mesh['x'=4,'y'=2], device_ids=(...) {'x'}``."""
    axes = mesh_list.mesh.axes
    text = "mesh[" + ",".join(f"'{a.name}'={a.size}" for a in axes) + "]"
    if mesh_list.mesh.HasField("iota_transform"):
        iota = mesh_list.mesh.iota_transform
        text += (", device_ids=([" + ",".join(map(str, iota.reshape_dims)) + "]T("
                 + ",".join(map(str, iota.transpose_perm)) + "))")
    elif mesh_list.mesh.device_ids:
        text += ", device_ids=(" + ",".join(map(str, mesh_list.mesh.device_ids)) + ")"
    refs = []
    for ref in mesh_list.axes:
        if not 0 <= ref.mesh_axis_index < len(axes):
            raise ProtoReadError(f"mesh replica groups name axis {ref.mesh_axis_index} of a "
                                 f"mesh of {len(axes)} axes")
        spelled = f"'{axes[ref.mesh_axis_index].name}'"
        if ref.HasField("sub_axis_info"):
            spelled += f":({ref.sub_axis_info.pre_size}){ref.sub_axis_info.size}"
        refs.append(spelled)
    return text + " {" + ",".join(refs) + "}"


def _replica_groups(p: Any) -> str:
    if p.HasField("mesh_axes_replica_group_list"):
        return _mesh_replica_groups(p.mesh_axes_replica_group_list)
    iota = None
    if p.HasField("iota_collective_device_list"):
        iota = p.iota_collective_device_list
    elif p.HasField("collective_device_list") and \
            p.collective_device_list.HasField("iota_replica_group_list"):
        iota = p.collective_device_list.iota_replica_group_list
    if iota is not None:
        perm = list(iota.iota_transpose_perm)
        transpose = "" if perm == sorted(perm) else "T(" + ",".join(map(str, perm)) + ")"
        return (f"[{iota.num_replica_groups},{iota.num_devices_per_group}]"
                f"<=[{','.join(map(str, iota.iota_reshape_dims))}]{transpose}")
    groups = p.collective_device_list.replica_groups if p.HasField(
        "collective_device_list") else p.replica_groups
    return "{" + ",".join(_ints(g.replica_ids) for g in groups) + "}"


def _window(window: Any) -> str:
    dims = window.dimensions
    fields = [("size", lambda d: str(d.size), True)]
    fields += [
        ("stride", lambda d: str(d.stride), any(d.stride != 1 for d in dims)),
        ("pad", lambda d: f"{d.padding_low}_{d.padding_high}",
         any(d.padding_low or d.padding_high for d in dims)),
        ("lhs_dilate", lambda d: str(d.base_dilation), any(d.base_dilation != 1 for d in dims)),
        ("rhs_dilate", lambda d: str(d.window_dilation),
         any(d.window_dilation != 1 for d in dims)),
        ("rhs_reversal", lambda d: str(int(d.window_reversal)),
         any(d.window_reversal for d in dims)),
    ]
    return "{" + " ".join(f"{key}=" + "x".join(fmt(d) for d in dims)
                          for key, fmt, needed in fields if needed) + "}"


def _dim_labels(d: Any, operands: list[HloInstruction], shape: Any) -> str:
    def labels(rank: int, batch: int, feature: int, spatial: Any, a: str, b: str) -> str:
        chars = ["?"] * rank
        if not (0 <= batch < rank and 0 <= feature < rank):
            raise ProtoReadError("convolution dimension numbers are out of range")
        chars[batch], chars[feature] = a, b
        for i, dim in enumerate(spatial):
            if not 0 <= dim < rank:
                raise ProtoReadError("convolution dimension numbers are out of range")
            chars[dim] = str(i)
        return "".join(chars)

    n = len(d.input_spatial_dimensions) + 2

    def rank_of(value: Any) -> int:
        return value.rank if isinstance(value, ArrayShape) else n

    lhs_rank = rank_of(operands[0].shape) if operands else n
    rhs_rank = rank_of(operands[1].shape) if len(operands) > 1 else n
    return (labels(lhs_rank, d.input_batch_dimension, d.input_feature_dimension,
                   d.input_spatial_dimensions, "b", "f") + "_"
            + labels(rhs_rank, d.kernel_input_feature_dimension,
                     d.kernel_output_feature_dimension, d.kernel_spatial_dimensions, "i", "o")
            + "->" + labels(rank_of(shape), d.output_batch_dimension,
                            d.output_feature_dimension, d.output_spatial_dimensions, "b", "f"))


def _read_header(module: HloModule, proto: Any, config: Any | None, source: str) -> None:
    header: dict[str, Any] = {}
    if proto.HasField("schedule") and proto.schedule.sequences:
        header["is_scheduled"] = Raw("true")
    if proto.HasField("input_output_alias") and proto.input_output_alias.entries:
        header["input_output_alias"] = Raw(tf.format_input_output_alias(
            proto.input_output_alias))
    if proto.HasField("buffer_donor") and proto.buffer_donor.entries:
        header["buffer_donor"] = Raw(tf.format_buffer_donor(proto.buffer_donor))
    if config is not None and config.alias_passthrough_params:
        header["alias_passthrough_params"] = Raw("true")
    layout = None
    if config is not None and config.HasField("entry_computation_layout"):
        layout = config.entry_computation_layout
    if layout is not None and layout.HasField("result"):
        params = ", ".join((f"/*index={i}*/" if i and i % 5 == 0 else "")
                           + str(shape_from_proto(s)) for i, s in enumerate(layout.parameters))
        header["entry_computation_layout"] = Raw(
            "{(" + params + ")->" + str(shape_from_proto(layout.result)) + "}")
    if config is not None:
        for key in ("allow_spmd_sharding_propagation_to_parameters",
                    "allow_spmd_sharding_propagation_to_output"):
            values = getattr(config, key)
            if values and not (len(values) == 1 and not values[0]):
                header[key] = Raw(tf.format_bools(values))
        if config.replica_count < 0 or config.num_partitions < 0:
            raise ProtoReadError(f"{source}: the config's replica_count / num_partitions "
                                 "are negative")
        if config.replica_count:
            header["replica_count"] = config.replica_count
        if config.num_partitions:
            header["num_partitions"] = config.num_partitions
    if proto.HasField("frontend_attributes"):
        text = tf.format_frontend_attributes(proto.frontend_attributes)
        if text:
            header["frontend_attributes"] = Raw(text)
    module.header = header
    if proto.HasField("stack_frame_index"):
        module.sections = tf.format_sections(proto.stack_frame_index)
