"""Typed instruction attributes: how each known attribute's text becomes a value and back.

Once parsed, ``dimensions`` is a tuple of ints, ``replica_groups`` a ReplicaGroups, ``window`` a
Window. Attributes this table does not know (metadata, backend_config, sharding, anything a newer
XLA adds) are kept as ``Raw`` text and printed verbatim, so printing loses nothing.

Each codec's ``parse`` takes the attribute's value text and raises ``AttributeSyntaxError`` with
an offset into that text; the parser turns the offset into file:line:col.

The structured values (``SliceDim``, ``PadDim``, ``Window``, ``WindowDim``, ``ConvDimLabels``,
``SparsityDescriptor``) are defined in ``neuron_sim.hlo.attribute_values`` and replica groups in
``neuron_sim.hlo.replica_groups``; both are imported when such an attribute is first read (the
classes are also read from here, on first use), so that a module without one does not pay for
creating them at start-up.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

from neuron_sim.errors import UserError
from neuron_sim.lazy import lazy_exports
from neuron_sim.records import Record

if TYPE_CHECKING:
    from neuron_sim.hlo.attribute_values import (ConvDimLabels, PadDim, SliceDim,
                                                 SparsityDescriptor, Window)
    from neuron_sim.hlo.replica_groups import ReplicaGroups, SourceTargetPairs


class AttributeSyntaxError(UserError):
    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


class Raw(Record):
    """An attribute value kept exactly as written. (A ``neuron_sim.records.Record``: a frozen
    dataclass's behaviour, without the cost of creating one at every start-up.)"""

    __slots__ = ("text",)

    text: str

    def __init__(self, text: str) -> None:
        self._set(text=text)

    def __str__(self) -> str:
        return self.text


# ---------------------------------------------------------------------------------------------
# Codecs: text -> value and value -> text for each known attribute.

_INT = re.compile(r"\s*-?\d+\s*")


def _parse_int(text: str) -> int:
    if not _INT.fullmatch(text):
        raise AttributeSyntaxError(f"expected an integer, got '{text}'")
    return int(text)


def _parse_bool(text: str) -> bool:
    if text not in ("true", "false"):
        raise AttributeSyntaxError(f"expected true or false, got '{text}'")
    return text == "true"


def _parse_int_list(text: str) -> tuple[int, ...]:
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        raise AttributeSyntaxError(f"expected a list of integers in braces, got '{text}'")
    body = stripped[1:-1].strip()
    if not body:
        return ()
    values = []
    offset = text.index("{") + 1
    for item in body.split(","):
        if not _INT.fullmatch(item):
            raise AttributeSyntaxError(f"expected an integer, got '{item.strip()}'",
                                       offset + text[offset:].find(item.strip()))
        values.append(int(item))
    return tuple(values)


def _format_int_list(values: tuple[int, ...]) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def _parse_int_lists(text: str) -> tuple[int, ...] | tuple[tuple[int, ...], ...]:
    """``{1,2}``, or ``{{1,2},{3,4}}`` (a list per operand: the in-place collective-permute's
    slice_sizes, which XLA parses as a list of lists)."""
    body = text.strip()
    if not re.fullmatch(r"\{\s*\{.*\}\s*\}", body, re.S):
        return _parse_int_list(text)
    inner_start = text.index("{") + 1
    inner = text[inner_start:text.rindex("}")]
    lists = []
    for m in re.finditer(r"\{[^{}]*\}|[^\s,]+", inner):
        if not m.group(0).startswith("{"):
            raise AttributeSyntaxError(f"expected a list in braces, got '{m.group(0)}'",
                                       inner_start + m.start())
        try:
            lists.append(_parse_int_list(m.group(0)))
        except AttributeSyntaxError as exc:
            raise AttributeSyntaxError(str(exc), inner_start + m.start() + exc.offset) from None
    return tuple(lists)


def _format_int_lists(values: tuple) -> str:
    if values and isinstance(values[0], tuple):
        return "{" + ",".join(_format_int_list(v) for v in values) + "}"
    return _format_int_list(values)


def _parse_string(text: str) -> str:
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        raise AttributeSyntaxError(f"expected a quoted string, got {text}")
    return _unescape(text[1:-1])


def _unescape(body: str) -> str:
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _format_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _parse_word(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", text):
        raise AttributeSyntaxError(f"expected a name, got '{text}'")
    return text


# The values of XLA's CustomCallApiVersion enum (xla/service/hlo.proto) but the unspecified one,
# which XLA's parser refuses.
_API_VERSIONS = frozenset({"api_version_original", "api_version_status_returning",
                           "api_version_status_returning_unified", "api_version_typed_ffi"})


def _parse_api_version(text: str) -> str:
    """A custom-call's api_version, read as XLA's StringToCustomCallApiVersion (any case)."""
    if text.lower() == "api_version_unspecified":
        raise AttributeSyntaxError(f"Invalid API version: {text}")
    if text.lower() not in _API_VERSIONS:
        raise AttributeSyntaxError(f"Unknown API version: expects custom-call API version but "
                                   f"sees: {text}")
    return text


# The patterns of attributes few modules have are compiled on first use (re's cache).
_SLICE_DIM = r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]"


def _parse_slice(text: str) -> tuple[SliceDim, ...]:
    from neuron_sim.hlo.attribute_values import SliceDim

    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise AttributeSyntaxError("expected slice={[start:limit:stride], ...}")
    dims = []
    pos = text.index("{") + 1
    inner = text[pos:text.rindex("}")]
    for match in re.finditer(r"[^,\s][^,]*", inner):
        m = re.fullmatch(_SLICE_DIM, match.group(0).strip())
        if not m:
            raise AttributeSyntaxError(f"expected [start:limit] or [start:limit:stride], got "
                                       f"'{match.group(0).strip()}'", pos + match.start())
        dims.append(SliceDim(int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)))
    return tuple(dims)


def _format_slice(dims: tuple[SliceDim, ...]) -> str:
    # XLA writes the stride for every dimension once any dimension has one other than 1.
    strided = any(d.stride != 1 for d in dims)
    return "{" + ", ".join(f"[{d.start}:{d.limit}" + (f":{d.stride}]" if strided else "]")
                           for d in dims) + "}"


def _parse_padding(text: str) -> tuple[PadDim, ...]:
    from neuron_sim.hlo.attribute_values import PadDim

    if text.strip() in ("", "{}"):
        return ()
    dims = []
    for part in text.split("x"):
        numbers = part.split("_")
        if len(numbers) not in (2, 3) or not all(_INT.fullmatch(n) for n in numbers):
            raise AttributeSyntaxError(f"expected low_high or low_high_interior, got '{part}'",
                                       max(text.find(part), 0))
        dims.append(PadDim(*(int(n) for n in numbers)))
    return tuple(dims)


def _format_padding(dims: tuple[PadDim, ...]) -> str:
    # XLA writes the interior amount for every dimension once any dimension has one.
    interior = any(d.interior for d in dims)
    return "x".join(f"{d.low}_{d.high}" + (f"_{d.interior}" if interior else "") for d in dims)


def _parse_window(text: str) -> Window:
    from neuron_sim.hlo.attribute_values import Window, WindowDim

    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise AttributeSyntaxError("expected window={size=... stride=... pad=...}")
    inner = body[1:-1].strip()
    if not inner:
        return Window(())
    fields: dict[str, list[str]] = {}
    for item in inner.split():
        key, _, value = item.partition("=")
        if key not in ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            raise AttributeSyntaxError(f"unknown window field '{key}'", max(text.find(item), 0))
        fields[key] = value.split("x")
    if "size" not in fields:
        raise AttributeSyntaxError("window has no size")
    rank = len(fields["size"])
    for key, values in fields.items():
        if len(values) != rank:
            raise AttributeSyntaxError(f"window {key} has {len(values)} dimensions, size has {rank}")
    try:
        dims = []
        for i in range(rank):
            pad = fields.get("pad", ["0_0"] * rank)[i].split("_")
            dims.append(WindowDim(
                size=int(fields["size"][i]),
                stride=int(fields.get("stride", ["1"] * rank)[i]),
                pad_low=int(pad[0]), pad_high=int(pad[1]),
                lhs_dilation=int(fields.get("lhs_dilate", ["1"] * rank)[i]),
                rhs_dilation=int(fields.get("rhs_dilate", ["1"] * rank)[i]),
                reversal=fields.get("rhs_reversal", ["0"] * rank)[i] == "1"))
    except (ValueError, IndexError) as exc:
        raise AttributeSyntaxError(f"malformed window: {exc}") from None
    return Window(tuple(dims))


def _parse_dim_labels(text: str) -> ConvDimLabels:
    from neuron_sim.hlo.attribute_values import ConvDimLabels

    m = re.fullmatch(r"([0-9bf?]+)_([0-9io?]+)->([0-9bf?]+)", text)
    if not m:
        raise AttributeSyntaxError(f"expected dim_labels like b01f_01io->b01f, got '{text}'")

    def split(labels: str, a: str, b: str) -> tuple[int, int, tuple[int, ...]]:
        if labels.count(a) != 1 or labels.count(b) != 1:
            raise AttributeSyntaxError(f"dim_labels '{labels}' needs exactly one '{a}' and '{b}'")
        spatial = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
        if [s for s, _ in spatial] != list(range(len(spatial))):
            raise AttributeSyntaxError(f"dim_labels '{labels}' spatial dims are not 0..n-1")
        return labels.index(a), labels.index(b), tuple(i for _, i in spatial)

    # As XLA's ParseConvolutionDimensionNumbers: '?' labels a dimension the numbers leave out
    # (there may be several); the three parts must have the same number of spatial dims.
    lhs, rhs, out = m.groups()
    ib, if_, isp = split(lhs, "b", "f")
    ki, ko, ksp = split(rhs, "i", "o")
    ob, of, osp = split(out, "b", "f")
    if not len(isp) == len(ksp) == len(osp):
        raise AttributeSyntaxError(f"dim_labels '{text}': input, kernel and output must have the "
                                   f"same number of spatial dimensions")
    n = len(isp) + 2
    ranks = (len(lhs), len(rhs), len(out))
    return ConvDimLabels(ib, if_, isp, ki, ko, ksp, ob, of, osp,
                         None if ranks == (n, n, n) else ranks)


def _parse_replica_groups(text: str) -> ReplicaGroups:
    from neuron_sim.hlo.replica_groups import ReplicaGroupError, ReplicaGroups

    try:
        return ReplicaGroups.from_text(text)
    except ReplicaGroupError as exc:
        raise AttributeSyntaxError(str(exc), getattr(exc, "offset", 0) or 0) from None


def _parse_pairs(text: str) -> SourceTargetPairs:
    from neuron_sim.hlo.replica_groups import SourceTargetPairs

    try:
        return SourceTargetPairs.from_text(text)
    except ValueError as exc:
        raise AttributeSyntaxError(str(exc), getattr(exc, "offset", 0) or 0) from None


_ALIAS_TOKEN = r"\s*(?:(-?\d+)|([A-Za-z_][A-Za-z0-9_.\-]*)|(.))"  # read with re.S


class _AliasReader:
    """Tokens of an input_output_alias / buffer_donor header value, read as XLA's ParseAliasing
    and ParseBufferDonor read them, with XLA's messages."""

    def __init__(self, text: str) -> None:
        self.tokens = [(m.group(0).strip(), m.start(m.lastindex), m.lastindex)
                       for m in re.finditer(_ALIAS_TOKEN, text, re.S) if m.lastindex]
        self.pos = 0
        self.end = len(text)

    def peek(self) -> str:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else ""

    def fail(self, message: str) -> AttributeSyntaxError:
        offset = self.tokens[self.pos][1] if self.pos < len(self.tokens) else self.end
        return AttributeSyntaxError(message, offset)

    def expect(self, token: str, message: str) -> None:
        if self.peek() != token:
            raise self.fail(message)
        self.pos += 1

    def accept(self, token: str) -> bool:
        if self.peek() == token:
            self.pos += 1
            return True
        return False

    def integer(self) -> int:
        if self.pos >= len(self.tokens) or self.tokens[self.pos][2] != 1:
            raise self.fail("expects integer")
        self.pos += 1
        return int(self.tokens[self.pos - 1][0])

    # shape_index ::= '{' (int (',' int)*)? '}'
    def shape_index(self) -> tuple[int, ...]:
        self.expect("{", "Expects '{' at the start of ShapeIndex")
        index = []
        while self.peek() != "}":
            index.append(self.integer())
            if not self.accept(","):
                break
        self.expect("}", "Expects '}' at the end of ShapeIndex")
        return tuple(index)

    def done(self) -> None:
        if self.pos != len(self.tokens):
            raise self.fail("unexpected text after the description")


def check_input_output_alias(text: str) -> None:
    """``{ {out_index}: (param, {param_index}[, must-alias|may-alias]), ... }`` or an
    AttributeSyntaxError where XLA's ParseAliasing stops."""
    reader = _AliasReader(text)
    usage = ("Expected format: <output_shape_index>: (<input_param>, "
             "<input_param_shape_index>) OR <output_shape_index>: <input_param>")
    reader.expect("{", "Expects '{' at the start of aliasing description")
    while reader.peek() not in ("}", ""):
        reader.shape_index()
        reader.expect(":", usage)
        reader.expect("(", usage)
        reader.integer()
        reader.expect(",", usage)
        reader.shape_index()
        if reader.accept(","):
            if reader.peek() not in ("must-alias", "may-alias"):
                raise reader.fail("Unexpected aliasing kind; expected SYSTEM or USER")
            reader.pos += 1
        reader.expect(")", usage)
        if not reader.accept(","):
            break
    reader.expect("}", "Expects '}' at the end of aliasing description")
    reader.done()


def check_buffer_donor(text: str) -> None:
    """``{ (param, {param_index}), ... }`` or an AttributeSyntaxError where XLA's
    ParseBufferDonor stops."""
    reader = _AliasReader(text)
    usage = "Expected format: (<input_param>, <input_param_shape_index>)"
    reader.expect("{", "Expects '{' at the start of buffer donor description")
    while reader.peek() not in ("}", ""):
        reader.expect("(", usage)
        reader.integer()
        reader.expect(",", usage)
        reader.shape_index()
        reader.expect(")", usage)
        if not reader.accept(","):
            break
    reader.expect("}", "Expects '}' at the end of buffer donor description")
    reader.done()


# Header attributes whose syntax is checked (their text is kept as written).
HEADER_CHECKS: dict[str, Callable[[str], None]] = {
    "input_output_alias": check_input_output_alias,
    "buffer_donor": check_buffer_donor,
}


_SPARSITY = r"(?:[LR]\.[0-9]+@[0-9]+:[0-9]+_?)+"


def _parse_sparsity(text: str) -> tuple[SparsityDescriptor, ...]:
    """``L.1@2:4_R.0@2:4``, as XLA's ParseSparsityDescriptor: a dimension number, and
    1 <= n < m."""
    from neuron_sim.hlo.attribute_values import SparsityDescriptor

    if not re.fullmatch(_SPARSITY, text):
        raise AttributeSyntaxError("expects sparsity descriptor, e.g. L.0@2:4")
    descriptors = []
    for item in filter(None, text.split("_")):
        side, _, rest = item.partition(".")
        dim, _, nm = rest.partition("@")
        n, _, m = nm.partition(":")
        if not (1 <= int(n) < int(m)):
            raise AttributeSyntaxError("Invalid structured sparsity type")
        descriptors.append(SparsityDescriptor("LR".index(side), int(dim), int(n), int(m)))
    return tuple(descriptors)


class Codec:
    """How one attribute's text becomes a value (``parse``) and back (``format``). (A plain
    class: the table is built at every start-up, and a dataclass costs more to create than
    the whole table.)"""

    __slots__ = ("parse", "format")

    def __init__(self, parse: Callable[[str], Any], format: Callable[[Any], str]) -> None:
        self.parse = parse
        self.format = format


_INT_CODEC = Codec(_parse_int, str)
_BOOL_CODEC = Codec(_parse_bool, lambda v: "true" if v else "false")
_INT_LIST_CODEC = Codec(_parse_int_list, _format_int_list)
_WORD_CODEC = Codec(_parse_word, str)
_STRING_CODEC = Codec(_parse_string, _format_string)

CODECS: dict[str, Codec] = {
    "replica_groups": Codec(_parse_replica_groups, lambda v: v.to_text()),
    "source_target_pairs": Codec(_parse_pairs, lambda v: v.to_text()),
    "slice": Codec(_parse_slice, _format_slice),
    "padding": Codec(_parse_padding, _format_padding),
    "window": Codec(_parse_window, str),
    "dim_labels": Codec(_parse_dim_labels, str),
    "custom_call_target": _STRING_CODEC,
    "api_version": Codec(_parse_api_version, str),
    "sparsity": Codec(_parse_sparsity, lambda v: "_".join(str(d) for d in v)),
    "slice_sizes": Codec(_parse_int_lists, _format_int_lists),
    **{name: _INT_CODEC for name in (
        "channel_id", "index", "iota_dimension", "index_vector_dim", "feature_group_count",
        "batch_group_count", "exponent_bits", "mantissa_bits", "k")},
    **{name: _BOOL_CODEC for name in (
        "use_global_device_ids", "constrain_layout", "is_stable", "indices_are_sorted",
        "unique_indices", "largest", "is_host_transfer", "is_cross_program_prefetch")},
    **{name: _INT_LIST_CODEC for name in (
        "dimensions", "dynamic_slice_sizes", "lhs_contracting_dims", "rhs_contracting_dims",
        "lhs_batch_dims", "rhs_batch_dims", "offset_dims", "collapsed_slice_dims",
        "start_index_map", "update_window_dims", "inserted_window_dims",
        "scatter_dims_to_operand_dims", "operand_batching_dims", "start_indices_batching_dims",
        "input_batching_dims", "scatter_indices_batching_dims", "fft_length",
        "lhs_ragged_dims", "rhs_group_dims")},
    **{name: _WORD_CODEC for name in (
        "direction", "type", "kind", "distribution", "algorithm", "fft_type")},
}

# Attributes whose value names computations: '%comp' or '{%a, %b}'.
COMPUTATION_ATTRIBUTES = frozenset({
    "to_apply", "calls", "condition", "body", "true_computation", "false_computation",
    "branch_computations", "called_computations", "select", "scatter", "comparator",
})
# Of those, the ones whose value is a list in braces.
COMPUTATION_LIST_ATTRIBUTES = frozenset({"branch_computations", "called_computations"})

# XLA's printing order, for attributes added by code (parsed attributes keep their order).
ATTRIBUTE_ORDER = (
    "kind", "index", "iota_dimension", "slice", "dynamic_slice_sizes", "padding",
    "channel_id", "replica_groups", "source_target_pairs", "constrain_layout",
    "use_global_device_ids", "dimensions", "window", "dim_labels", "feature_group_count", "batch_group_count",
    "lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims",
    "offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim", "slice_sizes",
    "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
    "indices_are_sorted", "unique_indices", "direction", "type", "is_stable", "distribution",
    "algorithm", "exponent_bits", "mantissa_bits", "custom_call_target",
    "condition", "body", "true_computation", "false_computation", "branch_computations",
    "select", "scatter", "calls", "to_apply", "called_computations",
    "sharding", "frontend_attributes", "control-predecessors", "metadata", "backend_config",
)
_ORDER_RANK = {name: i for i, name in enumerate(ATTRIBUTE_ORDER)}


def attribute_rank(name: str) -> int:
    """Where XLA prints ``name`` among an instruction's attributes (unknown ones go last)."""
    return _ORDER_RANK.get(name, len(ATTRIBUTE_ORDER) - 2)


_MESH_BEFORE_DEVICE_IDS = r"mesh\s*\[[^\]]*\]"


def attribute_value_continues(name: str, value: str) -> bool:
    """True when the ',' after ``value`` is inside the attribute, not before the next one.

    Mesh-form replica groups carry a comma of their own, ``mesh[...], device_ids=(...) {...}``:
    a ``mesh[...]`` not yet followed by its ``{axes}`` goes on past the comma, as XLA's parser
    reads it.
    """
    return name == "replica_groups" and re.fullmatch(_MESH_BEFORE_DEVICE_IDS, value) is not None


class WrittenAs(str):
    """An attribute value the text gave under another name and spelling: JAX 0.12 writes a
    compare's total order ``order=TOTAL`` where XLA wrote ``type=TOTALORDER``. Kept under the
    name every consumer reads, equal to the value they compare with (``"TOTALORDER"``), and
    printed back as written (``key``=``text``)."""

    key: str
    text: str

    def __new__(cls, value: str, key: str, text: str) -> "WrittenAs":
        self = super().__new__(cls, value)
        self.key = key
        self.text = text
        return self


# A compare's ``order=`` values (JAX 0.12), as the ``type=`` each one means.
COMPARE_ORDERS = {"TOTAL": "TOTALORDER"}


def parse_attribute(name: str, text: str) -> Any:
    """The typed value of attribute ``name`` written as ``text`` (Raw when the name is unknown)."""
    codec = CODECS.get(name)
    return codec.parse(text) if codec else Raw(text)


def format_attribute(name: str, value: Any) -> str:
    """The text of a typed attribute value, as XLA prints it."""
    if isinstance(value, Raw):
        return value.text
    codec = CODECS.get(name)
    return codec.format(value) if codec else str(value)


# The structured values' classes, read from here on first use (PEP 562).
_VALUES = {name: "neuron_sim.hlo.attribute_values"
           for name in ("ConvDimLabels", "PadDim", "SliceDim", "SparsityDescriptor", "Window",
                        "WindowDim")}

__getattr__, __dir__ = lazy_exports(__name__, _VALUES, globals())
