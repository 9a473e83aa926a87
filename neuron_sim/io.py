"""Files in and out: atomic writes, and the npz format for per-device inputs and outputs.

Every file neuron-sim writes goes through ``atomic_write_*``: the data lands in a temporary file
in the target's directory and is renamed over the target, so a reader never sees half a file and
a failed run never leaves a truncated output behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Mapping, Sequence

import numpy as np


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


# ---------------------------------------------------------------------------------------------
# The npz format for per-device inputs and outputs (ARCHITECTURE.md, "Interfaces").
#
# Key ``arg{i}`` holds entry parameter i, shaped ``[D, *param_shape]`` (one array per device,
# stacked by flattened id) or ``param_shape`` (the same on every device). Key ``out{j}`` holds
# the j-th leaf of the flattened result, shaped ``[D, *shape]``. numpy has no bf16 or f8 dtypes:
# such arrays are stored as raw bytes (void ``|V2`` / ``|V1``) and read back by the element type
# of the parameter they belong to.

def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of an npz file by key (no pickles)."""
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def storable(array: np.ndarray) -> np.ndarray:
    """``array`` as numpy can save it: ml_dtypes arrays (bf16, f8, int4) as raw void bytes."""
    array = np.asarray(array)
    if array.dtype.kind == "V" and array.dtype.type.__module__.startswith("ml_dtypes"):
        return np.ascontiguousarray(array).view(f"V{array.dtype.itemsize}")
    return array


def write_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to an npz file atomically (ml_dtypes arrays stored as raw bytes)."""
    stored = {key: storable(value) for key, value in arrays.items()}
    atomic_write(path, lambda handle: np.savez(handle, **stored))


def output_arrays(outputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per-device outputs keyed ``out{j}``."""
    return {f"out{j}": array for j, array in enumerate(outputs)}


def fit_arguments(arrays: Mapping[str, Any] | Sequence[Any], parameter_shapes: Sequence[Any],
                  num_devices: int, *, source: str | None = None) -> list[np.ndarray | None]:
    """Check inputs against the entry parameters; return one array (or None) per parameter.

    ``arrays`` maps ``arg{i}`` to an array, or is a sequence with one array per parameter. Each
    array must be shaped ``param_shape`` (same on every device) or ``[num_devices,
    *param_shape]``, with the parameter's dtype (raw void bytes of the same item size are read
    as that dtype; non-array Python values are converted). Token parameters need no input
    (their entry is None). Raises ValueError naming the parameter for anything that does not
    fit; ``source`` (a file name) prefixes the message.
    """
    from neuron_sim.hlo.shapes import ArrayShape

    prefix = f"{source}: " if source else ""
    count = len(parameter_shapes)
    plural = "s" * (count != 1)
    if isinstance(arrays, Mapping):
        expected = {f"arg{i}" for i in range(count)}
        extra = sorted(set(arrays) - expected)
        if extra:
            keys = f"keys arg0..arg{count - 1}" if count > 1 else "key arg0" if count else "no keys"
            raise ValueError(f"{prefix}unexpected key '{extra[0]}': the entry computation has "
                             f"{count} parameter{plural} ({keys})")
        by_index = [arrays.get(f"arg{i}") for i in range(count)]
    else:
        by_index = list(arrays)
        if len(by_index) != count:
            raise ValueError(f"{prefix}{len(by_index)} input arrays given but the entry "
                             f"computation has {count} parameter{plural}")
    fitted = []
    for i, (shape, value) in enumerate(zip(parameter_shapes, by_index)):
        what = f"parameter {i} (arg{i}, {shape.without_layout()})"
        if not isinstance(shape, ArrayShape):
            raise ValueError(f"{prefix}{what} is a tuple; neuron-sim runs modules whose entry "
                             "parameters are arrays or tokens")
        if shape.is_token:
            fitted.append(None)
            continue
        if value is None:
            raise ValueError(f"{prefix}no input array for {what}")
        dtype = shape.element_type.numpy_dtype
        if not isinstance(value, np.ndarray):
            try:
                value = np.asarray(value, dtype=dtype)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ValueError(f"{prefix}{what} cannot be converted: {exc}") from None
        if value.dtype != dtype:
            if value.dtype.kind == "V" and value.dtype.itemsize == dtype.itemsize:
                value = value.view(dtype)
            else:
                raise ValueError(f"{prefix}{what} has dtype {value.dtype}, expected "
                                 f"{shape.element_type.spelling} ({dtype})")
        dims = tuple(shape.dims)
        if value.shape != dims and value.shape != (num_devices, *dims):
            raise ValueError(f"{prefix}{what} has shape {list(value.shape)}; expected "
                             f"{list(dims)} (same on every device) or "
                             f"{[num_devices, *dims]} (one per device)")
        fitted.append(value)
    return fitted
