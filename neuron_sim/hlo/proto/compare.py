"""What "the same IR" means for a module read from text and one read from protobuf.

The protobuf form has no attribute order, no spelling and no text style, so two modules are
the same when their computations hold the same instructions (by name: opcode, shape, operands,
attributes, constant values, parameter numbers, root) — attributes compared as values, the
ones kept as text compared through their protobuf message (so ``{op_name="a"}`` and
``{ op_name="a" }`` are the same), a shape written without a layout compared as XLA reads it
(the default layout). ``module_key`` is that comparison as a value.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import numpy as np

from neuron_sim.hlo.attributes import COMPUTATION_ATTRIBUTES, Raw
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.proto import text_forms as tf
from neuron_sim.hlo.proto.schema import new
from neuron_sim.hlo.shapes import map_leaves

# Raw attributes compared through their message: name -> (message, parse).
_RAW_FORMS = {
    "metadata": ("OpMetadata", tf.parse_metadata),
    "sharding": ("OpSharding", tf.parse_sharding_text),
    "frontend_attributes": ("FrontendAttributes", tf.parse_frontend_attributes),
    "input_output_alias": ("HloInputOutputAliasProto", tf.parse_input_output_alias),
    "buffer_donor": ("HloBufferDonorProto", tf.parse_buffer_donor),
}

# Header values a plain HloModuleProto carries (the rest are the config's).
PROTO_HEADER_KEYS = frozenset({"is_scheduled", "input_output_alias", "buffer_donor",
                               "frontend_attributes"})


def _frames(sections: str) -> Any:
    """stack_frame_id -> the frame chain it names, as (file, function, line, end line,
    column, end column) tuples innermost first: the numbering is the writer's choice (XLA's
    parser renumbers the frames it reads), the frames are not."""
    message = new("StackFrameIndexProto")
    try:
        tf.parse_sections(sections, message)
    except tf.ProtoFormError:
        return None

    def name(names: Any, i: int) -> str:
        return names[i - 1] if 0 < i <= len(names) else f"#{i}"

    def chain(frame_id: int) -> tuple:
        out = []
        seen = set()
        while 0 < frame_id <= len(message.stack_frames) and frame_id not in seen:
            seen.add(frame_id)
            frame = message.stack_frames[frame_id - 1]
            loc_id = frame.file_location_id
            if 0 < loc_id <= len(message.file_locations):
                loc = message.file_locations[loc_id - 1]
                out.append((name(message.file_names, loc.file_name_id),
                            name(message.function_names, loc.function_name_id), loc.line,
                            loc.end_line, loc.column, loc.end_column))
            frame_id = frame.parent_frame_id
        return tuple(out)

    return chain


def _raw_key(name: str, text: str, frames: Any = None) -> Any:
    form = _RAW_FORMS.get(name)
    if form is None:
        if name == "control-predecessors":
            return tuple(sorted(tf.parse_names(text)))
        if name == "epsilon":
            try:
                return float(np.float32(float(text)))
            except ValueError:
                pass
        if name == "operand_precision":
            return "".join(text.split()).lower()
        if name == "backend_config" and text.startswith('"') and text.endswith('"'):
            return tf.unescape(text[1:-1])  # the same bytes, written as a quoted string
        if name == "backend_config":
            return text
        if name == "operand_layout_constraints":
            from neuron_sim.hlo.parser import parse_shape

            try:
                body = text.strip()[1:-1]
                return tuple(_shape_key(parse_shape(part)) for part in tf._split_top(body))
            except Exception:  # noqa: BLE001 - not shapes: compared as text
                pass
        return "".join(re.sub(r"/\*.*?\*/", "", text).split())
    message = new(form[0])
    try:
        form[1](text, message)
    except tf.ProtoFormError:
        return "".join(text.split())
    if name == "metadata" and frames is not None and message.stack_frame_id:
        chain = frames(message.stack_frame_id)
        message.stack_frame_id = 0
        return (message.SerializeToString(deterministic=True), chain)
    return message.SerializeToString(deterministic=True)


def _shape_key(shape: Any) -> str:
    def leaf_key(leaf: Any) -> Any:
        if leaf.layout is None or (not leaf.dims and not leaf.layout.extra):
            return leaf.with_default_layout()
        return leaf
    return str(map_leaves(shape, leaf_key))


def _value_key(name: str, value: Any, frames: Any) -> Any:
    if name in COMPUTATION_ATTRIBUTES:
        return tuple(c.name for c in value) if isinstance(value, tuple) else value.name
    if isinstance(value, Raw):
        return _raw_key(name, value.text, frames)
    if name == "replica_groups" and value.is_mesh:
        # The device order is a value: XLA's MeshProto lists it, the text may write it as iota.
        mesh = value.mesh
        return ("mesh", mesh.axis_names, mesh.axis_sizes,
                tuple((r.axis, r.pre_size, r.size) for r in mesh.group_axes),
                tuple(mesh.devices().reshape(-1).tolist()))
    return value


def _is_default(name: str, value: Any) -> bool:
    """A value the protobuf form cannot tell from no attribute: an empty list of dimensions
    (XLA prints ``dimensions={}`` on a scalar broadcast, ``lhs_batch_dims`` only when set),
    empty replica groups (all devices, printed ``{}`` or left out), group counts of 1, empty
    metadata or frontend attributes."""
    if isinstance(value, tuple) and not value and name not in COMPUTATION_ATTRIBUTES:
        return True
    if name in ("feature_group_count", "batch_group_count") and value == 1:
        return True
    if name in ("metadata", "frontend_attributes") and isinstance(value, Raw):
        return "".join(value.text.split()) == "{}"
    return name == "replica_groups" and getattr(value, "is_empty", False)


def _literal_key(literal: Any) -> Any:
    if literal is None:
        return None
    if literal.is_elided:
        return literal.structural_key()
    value = literal.value
    if isinstance(value, np.ndarray):  # a broadcast view and its copy are the same values
        return (str(value.dtype), value.shape, np.ascontiguousarray(value).tobytes())
    return literal.structural_key()


def structural_names(comp: HloComputation) -> dict[HloInstruction, str]:
    """A name for each instruction that does not depend on how it was spelled: its place in
    the post order from the root (operands in order), ``#param<n>`` for parameters; an
    instruction the root does not reach keeps its own name."""
    names: dict[HloInstruction, str] = {}
    stack = [(comp.root, iter(comp.root.operands))] if comp.root is not None else []
    seen = {comp.root}
    while stack:
        node, operands = stack[-1]
        for operand in operands:
            if operand not in seen and operand.parent is comp:
                seen.add(operand)
                stack.append((operand, iter(operand.operands)))
                break
        else:
            stack.pop()
            names[node] = (f"#param{node.parameter_number}" if node.parameter_number is not None
                           else f"#{len(names)}")
    for inst in comp.instructions:
        if inst not in names:
            names[inst] = (f"#param{inst.parameter_number}" if inst.parameter_number is not None
                           else inst.name)
    return names


def instruction_key(inst: HloInstruction, frames: Any = None,
                    names: dict[HloInstruction, str] | None = None) -> tuple:
    attrs = tuple(sorted(((k, _value_key(k, v, frames)) for k, v in inst.attrs.items()
                          if not _is_default(k, v)), key=lambda item: item[0]))
    if names is not None:
        by_name = {i.name: label for i, label in names.items()}
        attrs = tuple((k, tuple(sorted(by_name.get(n, n) for n in v))
                       if k == "control-predecessors" else v) for k, v in attrs)
        operands = tuple(names.get(o, o.name) for o in inst.operands)
    else:
        operands = tuple(o.name for o in inst.operands)
    return (inst.opcode.spelling, _shape_key(inst.shape), operands,
            attrs, _literal_key(inst.literal),
            inst.parameter_number, inst.is_root)


def computation_key(comp: HloComputation, frames: Any = None, by_structure: bool = False
                    ) -> tuple:
    names = structural_names(comp) if by_structure else None
    return (comp.is_entry, "".join((comp.trailing or "").split()),
            tuple(sorted((names[i] if names else i.name, instruction_key(i, frames, names))
                         for i in comp.instructions)))


def module_key(module: HloModule, header_keys: Iterable[str] | None = None, *,
               by_structure: bool = False) -> tuple:
    """The module as a comparable value (see the module docstring); ``header_keys`` limits
    the header values compared (default: all); ``by_structure``: instructions are named by
    their place in the graph (``structural_names``), not by their names — XLA's parser
    renames an instruction whose name another computation already uses."""
    keys = set(module.header) if header_keys is None else set(header_keys)
    header = tuple(sorted((k, _raw_key(k, str(v)) if isinstance(v, Raw) else v)
                          for k, v in module.header.items() if k in keys))
    frames = _frames(module.sections) if module.sections else None
    sections = module.sections if module.sections and frames is None else ""
    return (module.name, header, sections,
            tuple(sorted((c.name, computation_key(c, frames, by_structure))
                         for c in module.computations)))


def first_difference(a: HloModule, b: HloModule, header_keys: Iterable[str] | None = None,
                     *, by_structure: bool = False) -> str | None:
    """A sentence naming the first place ``a`` and ``b`` differ, or None when they are the
    same by ``module_key``."""
    ka = module_key(a, header_keys, by_structure=by_structure)
    kb = module_key(b, header_keys, by_structure=by_structure)
    if ka == kb:
        return None
    if ka[0] != kb[0]:
        return f"module name {ka[0]!r} != {kb[0]!r}"
    if ka[1] != kb[1]:
        return f"header {ka[1]} != {kb[1]}"
    if ka[2] != kb[2]:
        return "stack-frame sections differ"
    ca, cb = dict(ka[3]), dict(kb[3])
    if set(ca) != set(cb):
        return f"computations {sorted(set(ca) ^ set(cb))} are in one module only"
    for name in ca:
        if ca[name] != cb[name]:
            ia, ib = dict(ca[name][2]), dict(cb[name][2])
            if set(ia) != set(ib):
                return (f"computation {name}: instructions {sorted(set(ia) ^ set(ib))[:4]} "
                        "are in one module only")
            for iname in ia:
                if ia[iname] != ib[iname]:
                    return f"computation {name}, %{iname}: {_describe(ia[iname], ib[iname])}"
            return f"computation {name}: {ca[name][:2]} != {cb[name][:2]}"
    return "modules differ"


_PARTS = ("opcode", "shape", "operands", "attributes", "constant", "parameter number", "root")


def _describe(a: tuple, b: tuple) -> str:
    for part, x, y in zip(_PARTS, a, b):
        if x == y:
            continue
        if part == "attributes":
            dx, dy = dict(x), dict(y)
            for key in sorted(set(dx) | set(dy)):
                if dx.get(key) != dy.get(key):
                    return f"attribute {key}: {dx.get(key)!r} != {dy.get(key)!r}"
        return f"{part}: {x!r} != {y!r}"
    return "differ"
