"""Reading a module file: HLO text or a binary HloModuleProto, told apart by content.

A file is gzip-compressed when it starts with gzip's magic bytes; it is HLO text when it is
UTF-8 without control characters other than whitespace (the protobuf wire format has a field
tag of 0x12 or 0x1a in its first bytes: every HloModuleProto, HloProto and
HloModuleProtoWithConfig does); otherwise it is read as protobuf. Three messages are accepted:
HloModuleProto, and the two that wrap one in field 1 — HloProto and HloModuleProtoWithConfig
(whose config then gives replica_count and num_partitions).
"""

from __future__ import annotations

import os
import zlib
from typing import Any

from typing import TYPE_CHECKING

from neuron_sim.errors import UserError

if TYPE_CHECKING:
    from neuron_sim.hlo.ir import HloModule

# protobuf, the schema and the reader are imported by module_from_bytes, when a file is binary:
# reading HLO text (every command's start-up) never pays for them.

GZIP_MAGIC = b"\x1f\x8b"
# The most a gzip-compressed module may expand to (a bomb is refused, not unpacked).
MAX_UNPACKED = 4 << 30


class ProtoError(UserError):
    """A file that is neither HLO text nor a readable HloModuleProto (one sentence)."""


def is_protobuf(data: bytes) -> bool:
    """True when ``data`` (a file's first bytes, unpacked) is not HLO text."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(data) - 3 and exc.reason == "unexpected end of data":
            text = data[:exc.start].decode("utf-8")
        else:
            return True
    return any(ord(ch) < 0x20 and ch not in "\t\n\r\f\v" for ch in text)


def _unpack(data: bytes, path: str) -> bytes:
    if not data.startswith(GZIP_MAGIC):
        return data
    try:
        unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = unpacker.decompress(data, MAX_UNPACKED)
        if unpacker.unconsumed_tail:
            raise ProtoError(f"{path}: gzip data unpacks to more than "
                             f"{MAX_UNPACKED >> 30} GiB; refused")
        if not unpacker.eof:
            raise ProtoError(f"{path}: the gzip data is truncated")
        return out
    except zlib.error as exc:
        raise ProtoError(f"{path}: not readable gzip data ({exc})") from None


def _parse(cls_name: str, data: bytes) -> Any:
    from neuron_sim.hlo.proto.schema import message_class

    message = message_class(cls_name)()
    message.ParseFromString(data)
    return message


def module_from_bytes(data: bytes, path: str = "<bytes>") -> HloModule:
    """The IR module of serialized HloModuleProto / HloProto / HloModuleProtoWithConfig bytes
    (gzip-compressed or not). Raises ProtoError naming ``path``."""
    from google.protobuf.message import DecodeError

    from neuron_sim.hlo.proto.reader import ProtoReadError, module_from_proto
    from neuron_sim.hlo.proto.text_forms import ProtoFormError

    data = _unpack(data, path)
    if not data:
        raise ProtoError(f"{path}: the file is empty")
    try:
        config = None
        try:
            module = _parse("HloModuleProto", data)
        except DecodeError:  # field 1 is a message, not a name: a wrapper
            module = None
        if module is None or not module.computations:
            wrapper = _parse("HloModuleProtoWithConfig", data)
            module = wrapper.hlo_module
            config = wrapper.config if wrapper.HasField("config") else None
    except DecodeError as exc:
        raise ProtoError(f"{path}: not a valid HloModuleProto: the protobuf data is corrupt "
                         f"or truncated ({str(exc).rstrip('.') or 'cannot decode'})") from None
    except (RecursionError, ValueError, OverflowError, MemoryError) as exc:
        raise ProtoError(f"{path}: not a valid HloModuleProto ({type(exc).__name__})") from None
    if not module.computations:
        raise ProtoError(f"{path}: a protobuf message but not an HloModuleProto, HloProto or "
                         "HloModuleProtoWithConfig (it has no computations)")
    try:
        return module_from_proto(module, config, source=path)
    except ProtoReadError as exc:
        raise ProtoError(str(exc)) from None
    except ProtoFormError as exc:
        raise ProtoError(f"{path}: {exc}") from None
    except RecursionError:
        raise ProtoError(f"{path}: the module nests too deeply to read") from None


def read_module_file(path: str | os.PathLike) -> HloModule:
    """The module in ``path``: HLO text (parsed by the text parser) or a binary HloModuleProto
    (``.pb``; ``.pb.gz`` or any gzip-compressed file), told apart by content."""
    from neuron_sim.hlo.parser import parse_module

    with open(path, "rb") as handle:
        data = handle.read()
    name = str(path)
    head = data[:4096]
    if data.startswith(GZIP_MAGIC):
        data = _unpack(data, name)
        head = data[:4096]
        if not is_protobuf(head):
            return parse_module(data.decode("utf-8"), filename=name)
    if is_protobuf(head):
        return module_from_bytes(data, name)
    return parse_module(data.decode("utf-8"), filename=name)
