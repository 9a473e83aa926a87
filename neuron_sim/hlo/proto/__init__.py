"""HLO modules as protobuf: XLA's HloModuleProto (binary, optionally gzip-compressed) to and
from the IR. See docs/proto.md.

``read_module_file`` is the one place a command reads a module file: it tells a binary
protobuf from HLO text by content and hands text to the text parser.
"""

from __future__ import annotations

import importlib
from typing import Any

# Names resolve on first use (PEP 562), so reading HLO text through read_module_file imports
# neither protobuf nor the writer.
_HOMES = {"ProtoError": "load", "is_protobuf": "load", "module_from_bytes": "load",
          "read_module_file": "load", "ProtoWriteError": "writer", "module_to_bytes": "writer",
          "module_to_proto": "writer"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


__all__ = ["ProtoError", "ProtoWriteError", "is_protobuf", "module_from_bytes",
           "module_to_bytes", "module_to_proto", "read_module_file"]
