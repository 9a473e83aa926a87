"""The messages between ``client.XlaCpu`` and its worker process: length-prefixed pickles on
the worker's stdin and stdout (both ends are this package, run by the same interpreter)."""

from __future__ import annotations

import pickle
import struct
from typing import IO, Any

_LENGTH = struct.Struct("<Q")


def send(stream: IO[bytes], message: Any) -> None:
    """Write one message and flush it."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    """Read one message; EOFError when the other end has gone."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("the other end closed the pipe")
    (size,) = _LENGTH.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other end closed the pipe mid-message")
    return pickle.loads(data)
