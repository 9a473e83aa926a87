"""Attributes the IR keeps as text (``Raw``), to and from their protobuf messages.

metadata (OpMetadata), sharding (OpSharding), frontend_attributes, backend_config,
control-predecessors, parameter_replication, operand_precision, output_to_operand_aliasing,
the module's stack-frame sections and its input_output_alias / buffer_donor header values:
each has a ``parse_*`` (the text as XLA prints it -> message fields) and a ``format_*``
(message -> the text XLA prints). ``ProtoFormError`` names what could not be read.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from neuron_sim.errors import UserError


class ProtoFormError(UserError):
    """A value that has no protobuf form here, or a message with no text form (one sentence)."""


# -- strings ----------------------------------------------------------------------------------

def escape(text: str) -> str:
    """A C-escaped string body, as XLA quotes names and values (absl::CEscape)."""
    out = []
    for char in text:
        code = ord(char)
        if char in "\\\"'":
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7f:
            out.append(f"\\{code:03o}")
        else:
            out.append(char)
    return "".join(out)


def unescape(body: str) -> str:
    """The inverse of ``escape`` (also octal and hex escapes)."""
    def one(m: re.Match) -> str:
        s = m.group(1)
        simple = {"n": "\n", "r": "\r", "t": "\t"}
        if s in simple:
            return simple[s]
        if s[0] in "01234567":
            return chr(int(s, 8))
        if s[0] == "x":
            return chr(int(s[1:], 16))
        return s
    return re.sub(r"\\([0-7]{1,3}|x[0-9a-fA-F]{1,2}|.)", one, body, flags=re.S)


_ITEM = re.compile(r'[\s,]*([A-Za-z_][\w.\-]*)=("(?:[^"\\]|\\.)*"|\{[^{}]*\}|[^\s,{}]+)', re.S)


def _items(body: str, what: str) -> Iterator[tuple[str, str]]:
    """``key=value`` pairs of a braced body (values quoted, braced or bare)."""
    pos = 0
    body = body.strip()
    while pos < len(body):
        m = _ITEM.match(body, pos)
        if not m:
            rest = body[pos:].strip(" ,")
            if not rest:
                return
            raise ProtoFormError(f"{what}: cannot read '{rest[:40]}'")
        yield m.group(1), m.group(2)
        pos = m.end()


def _braced(text: str, what: str) -> str:
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ProtoFormError(f"{what} is not in braces: {text[:40]}")
    return text[1:-1]


def _quoted(value: str, what: str) -> str:
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        raise ProtoFormError(f"{what} must be a quoted string, got {value[:40]}")
    return unescape(value[1:-1])


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ProtoFormError(f"{what} must be an integer, got {value[:40]}") from None


# -- metadata ---------------------------------------------------------------------------------

_METADATA_STRINGS = ("op_type", "op_name", "source_file")
_METADATA_INTS = ("source_line", "source_end_line", "source_column", "source_end_column")


def parse_metadata(text: str, message: Any) -> None:
    """``{op_type="..." op_name="..." source_line=3 ...}`` into an OpMetadata."""
    for key, value in _items(_braced(text, "metadata"), "metadata"):
        if key in _METADATA_STRINGS or key in ("deduplicated_name", "scheduling_name"):
            setattr(message, key, _quoted(value, f"metadata {key}"))
        elif key in _METADATA_INTS or key == "stack_frame_id":
            setattr(message, key, _int(value, f"metadata {key}"))
        elif key == "profile_type":
            message.profile_type.extend(_PROFILE_TYPES.index(v.strip().upper())
                                        if v.strip().upper() in _PROFILE_TYPES
                                        else _int(v, "metadata profile_type")
                                        for v in _braced(value, "profile_type").split(",")
                                        if v.strip())
        else:
            raise ProtoFormError(f"metadata field {key} has no OpMetadata form")


_PROFILE_TYPES = ("INVALID", "WINDOW", "FLAG", "INTEGER")


def format_metadata(message: Any) -> str | None:
    """The OpMetadata as XLA prints it; None when it is empty (XLA prints none)."""
    parts = [f'{key}="{escape(getattr(message, key))}"' for key in _METADATA_STRINGS
             if getattr(message, key)]
    parts += [f"{key}={getattr(message, key)}" for key in _METADATA_INTS
              if getattr(message, key)]
    if message.profile_type:
        parts.append("profile_type={" + ",".join(
            _PROFILE_TYPES[v].lower() if 0 <= v < len(_PROFILE_TYPES) else str(v)
            for v in message.profile_type) + "}")
    for key in ("deduplicated_name", "scheduling_name"):
        if getattr(message, key):
            parts.append(f'{key}="{escape(getattr(message, key))}"')
    if message.stack_frame_id:
        parts.append(f"stack_frame_id={message.stack_frame_id}")
    return "{" + " ".join(parts) + "}" if parts else None


# -- frontend attributes ----------------------------------------------------------------------

def parse_frontend_attributes(text: str, message: Any) -> None:
    """``{key="value",...}`` into a FrontendAttributes map (a value may also be bare or a
    braced list, ``_xla_send_recv_source_target_pairs={{0,1},{1,0}}``)."""
    for item in _split_top(_braced(text, "frontend_attributes")):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not re.fullmatch(r'[A-Za-z_][\w.\-]*|"(?:[^"\\]|\\.)*"', key):
            raise ProtoFormError(f"frontend_attributes: cannot read '{item[:40]}'")
        key = _quoted(key, "frontend attribute name") if key.startswith('"') else key
        message.map[key] = _quoted(value, f"frontend attribute {key}") \
            if value.startswith('"') else value


def format_frontend_attributes(message: Any) -> str | None:
    if not message.map:
        return None
    return "{" + ",".join(f'{key}="{escape(message.map[key])}"'
                          for key in sorted(message.map)) + "}"


# -- sharding ---------------------------------------------------------------------------------

_SHARDING_TYPES = ("replicated", "maximal", "tuple", "other", "manual", "unknown", "unreduced")
REPLICATED, MAXIMAL, TUPLE, OTHER, MANUAL, UNKNOWN, UNREDUCED = range(7)


def _split_top(body: str, sep: str = ",") -> list[str]:
    """``body`` split at ``sep`` outside braces, brackets, parentheses and quotes."""
    parts, depth, start, quoted, i = [], 0, 0, False, 0
    while i < len(body):
        ch = body[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_sharding_text(text: str, message: Any) -> None:
    """XLA's sharding text (``{replicated}``, ``{devices=[2,1]0,1}``, ``{{...}, {...}}``, ...)
    into an OpSharding."""
    body = _braced(text, "sharding").strip()
    if body.startswith("{") or body == "":
        message.type = TUPLE
        for element in _split_top(body):
            parse_sharding_text(element, message.tuple_shardings.add())
        return
    message.type = OTHER
    pos = 0
    saw_type = False
    while pos < len(body):
        m = re.compile(r"\s*(replicated|maximal|manual|unknown|unreduced|device=(\d+)|"
                       r"devices=\[([\d,\s]*)\]|last_tile_dim_replicate|last_tile_dims=\{([^}]*)\}|"
                       r"metadata=\{|shard_as\s+(\d+)|shard_like\s+(\d+))").match(body, pos)
        if not m:
            raise ProtoFormError(f"sharding: cannot read '{body[pos:pos + 40]}'")
        word = m.group(1)
        pos = m.end()
        if word in ("replicated", "maximal", "manual", "unknown", "unreduced"):
            message.type = _SHARDING_TYPES.index(word)
            saw_type = True
        elif word.startswith("device="):
            message.tile_assignment_devices.append(int(m.group(2)))
        elif word.startswith("devices="):
            message.tile_assignment_dimensions.extend(_ints(m.group(3)))
            pos = _parse_tile_devices(body, pos, message)
        elif word == "last_tile_dim_replicate":
            message.replicate_on_last_tile_dim = True
        elif word.startswith("last_tile_dims="):
            for name in m.group(4).split(","):
                name = name.strip()
                if name not in _SHARDING_TYPES:
                    raise ProtoFormError(f"sharding: unknown last_tile_dims type '{name}'")
                message.last_tile_dims.append(_SHARDING_TYPES.index(name))
        elif word.startswith("metadata="):
            end = _matching_brace(body, pos - 1)
            for item in _split_top(body[pos:end]):
                parse_metadata(item if item.startswith("{") else "{" + item + "}",
                               message.metadata.add())
            pos = end + 1
        else:
            message.is_shard_group = True
            message.shard_group_id = int(m.group(5) or m.group(6))
            message.shard_group_type = 0 if m.group(5) else 1
    if not saw_type and not message.tile_assignment_dimensions:
        raise ProtoFormError(f"sharding: no sharding type in '{body[:40]}'")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.replace(" ", "").split(",") if v]


def _matching_brace(text: str, open_at: int) -> int:
    depth = 0
    quoted = False
    i = open_at
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ProtoFormError("sharding: unbalanced braces")


def _parse_tile_devices(body: str, pos: int, message: Any) -> int:
    m = re.compile(r"<=\[([\d,\s]*)\](?:T\(([\d,\s]*)\))?").match(body, pos)
    if m:
        dims = _ints(m.group(1))
        message.iota_reshape_dims.extend(dims)
        message.iota_transpose_perm.extend(_ints(m.group(2)) if m.group(2)
                                           else range(len(dims)))
        return m.end()
    m = re.compile(r"[\d,\s]*\d").match(body, pos)
    if not m:
        raise ProtoFormError(f"sharding: no devices after devices=[...] in '{body[:40]}'")
    message.tile_assignment_devices.extend(_ints(m.group(0)))
    return m.end()


def format_sharding(message: Any) -> str:
    """The OpSharding as XLA prints it."""
    if message.named_sharding:
        raise ProtoFormError("a named (mesh) sharding is not modelled; only OpSharding's own "
                             "forms are read")
    if message.type == TUPLE:
        return "{" + ", ".join(format_sharding(s) for s in message.tuple_shardings) + "}"
    parts: list[str] = []
    if message.type == MAXIMAL:
        parts.append(f"maximal device={message.tile_assignment_devices[0]}"
                     if message.tile_assignment_devices else "maximal")
    elif message.type == OTHER:
        dims = ",".join(map(str, message.tile_assignment_dimensions))
        if message.iota_reshape_dims:
            reshape = ",".join(map(str, message.iota_reshape_dims))
            perm = list(message.iota_transpose_perm)
            transpose = "" if perm == sorted(perm) else "T(" + ",".join(map(str, perm)) + ")"
            parts.append(f"devices=[{dims}]<=[{reshape}]{transpose}")
        else:
            parts.append(f"devices=[{dims}]" + ",".join(map(str,
                                                              message.tile_assignment_devices)))
        if message.replicate_on_last_tile_dim:
            parts.append("last_tile_dim_replicate")
        elif message.last_tile_dims:
            parts.append("last_tile_dims={" + ", ".join(
                _SHARDING_TYPES[t] if 0 <= t < len(_SHARDING_TYPES) else str(t)
                for t in message.last_tile_dims) + "}")
    elif 0 <= message.type < len(_SHARDING_TYPES):
        parts.append(_SHARDING_TYPES[message.type])
    else:
        raise ProtoFormError(f"sharding type {message.type} is not one XLA defines")
    if message.is_shard_group:
        parts.append(f"shard_{'as' if message.shard_group_type == 0 else 'like'} "
                     f"{message.shard_group_id}")
    if message.metadata:
        parts.append("metadata={" + ", ".join(format_metadata(m) or "{}"
                                               for m in message.metadata) + "}")
    return "{" + " ".join(parts) + "}"


# -- small braced lists -----------------------------------------------------------------------

def parse_names(text: str) -> list[str]:
    """``{%a, %b}`` -> ``['a', 'b']`` (control-predecessors)."""
    return [name.lstrip("%") for name in _split_top(_braced(text, "control-predecessors"))]


def parse_bools(text: str, what: str) -> list[bool]:
    """``{true,false}`` (or a bare ``true``) -> ``[True, False]``."""
    body = text.strip()
    values = _split_top(_braced(body, what)) if body.startswith("{") else [body]
    if any(v not in ("true", "false") for v in values):
        raise ProtoFormError(f"{what} must be a list of true/false, got {text[:40]}")
    return [v == "true" for v in values]


def format_bools(values: Any) -> str:
    return "{" + ",".join("true" if v else "false" for v in values) + "}"


PRECISIONS = ("default", "high", "highest")


def parse_precisions(text: str) -> list[int]:
    values = _split_top(_braced(text, "operand_precision"))
    if any(v.lower() not in PRECISIONS for v in values):
        raise ProtoFormError(f"operand_precision has a value XLA does not define: {text[:40]}")
    return [PRECISIONS.index(v.lower()) for v in values]


def format_precisions(values: Any) -> str:
    return "{" + ",".join(PRECISIONS[v] if 0 <= v < 3 else str(v) for v in values) + "}"


_ALIAS = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(-?\d+)\s*,\s*\{([\d,\s]*)\}\s*\)")


def parse_output_operand_aliasing(text: str, field: Any) -> None:
    """``{{0}: (1, {})}`` into repeated OutputOperandAliasing."""
    body = _braced(text, "output_to_operand_aliasing")
    for part in _split_top(body):
        m = _ALIAS.fullmatch(part)
        if not m:
            raise ProtoFormError(f"output_to_operand_aliasing: cannot read '{part[:40]}'")
        entry = field.add()
        entry.output_shape_index.extend(_ints(m.group(1)))
        entry.operand_index = int(m.group(2))
        entry.operand_shape_index.extend(_ints(m.group(3)))


def _index(values: Any) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def format_output_operand_aliasing(entries: Any) -> str:
    return "{" + ", ".join(f"{_index(e.output_shape_index)}: ({e.operand_index}, "
                           f"{_index(e.operand_shape_index)})" for e in entries) + "}"


# -- module header values -----------------------------------------------------------------------

_IO_ALIAS = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*"
                       r"(?:,\s*(must-alias|may-alias)\s*)?\)")


def parse_input_output_alias(text: str, message: Any) -> None:
    for part in _split_top(_braced(text, "input_output_alias")):
        m = _IO_ALIAS.fullmatch(part)
        if not m:
            raise ProtoFormError(f"input_output_alias: cannot read '{part[:40]}'")
        entry = message.entries.add()
        entry.output_shape_index.extend(_ints(m.group(1)))
        entry.parameter_number = int(m.group(2))
        entry.parameter_shape_index.extend(_ints(m.group(3)))
        entry.kind = 2 if m.group(4) == "must-alias" else 1


def format_input_output_alias(message: Any) -> str:
    parts = []
    for e in message.entries:
        kind = ", must-alias" if e.kind == 2 else ""
        parts.append(f"{_index(e.output_shape_index)}: ({e.parameter_number}, "
                     f"{_index(e.parameter_shape_index)}{kind})")
    return "{ " + ", ".join(parts) + " }"


_DONOR = re.compile(r"\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*\)")


def parse_buffer_donor(text: str, message: Any) -> None:
    for part in _split_top(_braced(text, "buffer_donor")):
        m = _DONOR.fullmatch(part)
        if not m:
            raise ProtoFormError(f"buffer_donor: cannot read '{part[:40]}'")
        entry = message.entries.add()
        entry.parameter_number = int(m.group(1))
        entry.parameter_shape_index.extend(_ints(m.group(2)))


def format_buffer_donor(message: Any) -> str:
    return "{ " + ", ".join(f"({e.parameter_number}, {_index(e.parameter_shape_index)})"
                            for e in message.entries) + " }"


# -- stack frame sections ---------------------------------------------------------------------

def parse_sections(text: str, message: Any) -> None:
    """The ``FileNames`` / ``FunctionNames`` / ``FileLocations`` / ``StackFrames`` sections
    into a StackFrameIndexProto."""
    section = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = line
            continue
        number, _, rest = line.partition(" ")
        rest = rest.strip()
        if section in ("FileNames", "FunctionNames"):
            target = message.file_names if section == "FileNames" else message.function_names
            target.append(_quoted(rest, f"{section} entry {number}"))
        elif section == "FileLocations":
            entry = message.file_locations.add()
            for key, value in _items(_braced(rest, "file location"), "file location"):
                if key not in ("file_name_id", "function_name_id", "line", "end_line",
                               "column", "end_column"):
                    raise ProtoFormError(f"FileLocations: unknown field {key}")
                setattr(entry, key, _int(value, key))
        elif section == "StackFrames":
            entry = message.stack_frames.add()
            for key, value in _items(_braced(rest, "stack frame"), "stack frame"):
                if key not in ("file_location_id", "parent_frame_id"):
                    raise ProtoFormError(f"StackFrames: unknown field {key}")
                # XLA's text writes a frame's parent one higher than its proto holds (1: no
                # parent); its parser takes the 1 back off.
                setattr(entry, key, _int(value, key) - (key == "parent_frame_id"))
        else:
            raise ProtoFormError(f"a line outside any stack-frame section: {line[:40]}")


def format_sections(message: Any) -> str:
    """The sections as XLA prints them (empty string when there are none)."""
    blocks = []
    if message.file_names:
        blocks.append("FileNames\n" + "\n".join(f'{i} "{escape(n)}"' for i, n in
                                               enumerate(message.file_names, 1)))
    if message.function_names:
        blocks.append("FunctionNames\n" + "\n".join(f'{i} "{escape(n)}"' for i, n in
                                                   enumerate(message.function_names, 1)))
    if message.file_locations:
        lines = []
        for i, loc in enumerate(message.file_locations, 1):
            fields = ("file_name_id", "function_name_id", "line", "end_line", "column",
                      "end_column")
            lines.append(f"{i} {{" + " ".join(f"{k}={getattr(loc, k)}" for k in fields) + "}")
        blocks.append("FileLocations\n" + "\n".join(lines))
    if message.stack_frames:
        blocks.append("StackFrames\n" + "\n".join(
            f"{i} {{file_location_id={f.file_location_id} "
            f"parent_frame_id={f.parent_frame_id + 1}}}"
            for i, f in enumerate(message.stack_frames, 1)))
    return "\n\n".join(blocks) + "\n" if blocks else ""
