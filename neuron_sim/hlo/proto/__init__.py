"""HLO modules as protobuf: XLA's HloModuleProto (binary, optionally gzip-compressed) to and
from the IR. See docs/proto.md.

``read_module_file`` is the one place a command reads a module file: it tells a binary
protobuf from HLO text by content and hands text to the text parser.
"""

from neuron_sim.hlo.proto.load import (ProtoError, is_protobuf, module_from_bytes,
                                       read_module_file)
from neuron_sim.hlo.proto.writer import ProtoWriteError, module_to_bytes, module_to_proto

__all__ = ["ProtoError", "ProtoWriteError", "is_protobuf", "module_from_bytes",
           "module_to_bytes", "module_to_proto", "read_module_file"]
