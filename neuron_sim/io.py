"""Files in and out: atomic writes, and the npz format for per-device inputs and outputs.

Every file neuron-sim writes goes through ``atomic_write_*``: the data lands in a temporary file
in the target's directory and is renamed over the target, so a reader never sees half a file and
a failed run never leaves a truncated output behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, IO


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write`` on a temporary file next to ``path``, then rename it to ``path``."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    atomic_write(path, lambda handle: handle.write(data))
