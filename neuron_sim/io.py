"""Files in and out: the npz format for per-device inputs and outputs.

Every file neuron-sim writes goes through ``atomic_write_*`` (``neuron_sim.outputs``, which
holds the output path policy): the data lands in a temporary file in the target's directory and
is renamed over the target, so a reader never sees half a file and a failed run never leaves a
truncated output behind.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import zipfile
import zlib
from collections.abc import Mapping
from typing import IO, Any, Iterator, Sequence, Union

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.sizes import default_memory_limit, format_bytes
from neuron_sim.outputs import atomic_write


class ArgumentError(UserError):
    """Inputs that do not fit the entry parameters (one sentence naming the parameter)."""


# ---------------------------------------------------------------------------------------------
# The npz format for per-device inputs and outputs (docs/run.md, "The npz format").
#
# Key ``arg{i}`` holds entry parameter i, shaped ``[D, *param_shape]`` (one array per device,
# stacked by flattened id) or ``param_shape`` (the same on every device); a tuple parameter i
# is held leaf by leaf, key ``arg{i}.{j}`` for leaf j of its flattened leaves. Key ``out{j}``
# holds the j-th leaf of the flattened result, shaped ``[D, *shape]``. numpy has no bf16 or f8
# dtypes: such arrays are stored as raw bytes (void ``|V2`` / ``|V1``) and read back by the
# element type of the parameter they belong to.

class NpzError(UserError):
    """An inputs file that is not an npz archive of plain numeric arrays (one sentence naming
    the file and, where there is one, the array)."""


NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a member first, or an empty archive


def read_npz(path: str | os.PathLike, *, max_bytes: int | None = None) -> dict[str, np.ndarray]:
    """Every array of an npz file by key, after checking it is one (no pickles).

    An npz file is a zip archive of ``.npy`` members. Each member's header (shape and dtype) is
    read and judged before its data: an object dtype (pickled Python objects) is refused, and
    so is a header whose shape needs more bytes than the member holds or, summed over the
    members, more than ``max_bytes`` (default ``sizes.default_memory_limit()``) — so that a bad header is an
    error naming the array, not a MemoryError. Raises NpzError naming the file (and the array).
    """
    limit = (default_memory_limit() or 8 << 30) if max_bytes is None else max_bytes
    with open(path, "rb") as handle:
        head = handle.read(len(NPY_MAGIC))
    if head.startswith(NPY_MAGIC):
        raise NpzError(f"{path}: is a .npy file (one array), not an npz archive of arrays; "
                       "write inputs with numpy.savez(path, arg0=..., arg1=...)")
    if not head.startswith(ZIP_MAGICS):
        what = "a text file" if _looks_like_text(path) else "not a zip archive"
        raise NpzError(f"{path}: is {what}, not an npz archive of arrays (numpy.savez's "
                       "format)")
    try:
        with zipfile.ZipFile(path) as archive:
            members = [(info, _member_key(path, info)) for info in archive.infolist()]
            total = 0
            for info, key in members:
                total += _judge_header(path, archive, info, key)
                if total > limit:
                    raise NpzError(f"{path}: its arrays need {format_bytes(total)} or more once "
                                   f"loaded, more than the limit of {format_bytes(limit)}")
            return {key: _read_member(path, archive, info, key) for info, key in members}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError,
            zlib.error, RuntimeError) as exc:
        raise NpzError(f"{path}: is not a readable npz archive ({_reason(exc)})") from None


def _looks_like_text(path: str | os.PathLike) -> bool:
    with open(path, "rb") as handle:
        sample = handle.read(4096)
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(sample) - 4  # only a character cut at the sample's end
    return b"\0" not in sample


def _member_key(path: str | os.PathLike, info: zipfile.ZipInfo) -> str:
    if not info.filename.endswith(".npy"):
        raise NpzError(f"{path}: archive member '{info.filename}' is not a numpy array (.npy)")
    return info.filename[:-len(".npy")]


def _array_name(key: str) -> str:
    """``arg3`` -> ``array 'arg3' (entry parameter 3)``; other keys by name."""
    stem = key[3:].split(".", 1)
    if key.startswith("arg") and all(part.isdigit() for part in stem):
        leaf = f" leaf {stem[1]}" if len(stem) == 2 else ""
        return f"array '{key}' (entry parameter {stem[0]}{leaf})"
    return f"array '{key}'"


def _header(path: str | os.PathLike, handle: IO[bytes], key: str
            ) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype a ``.npy`` member's header declares."""
    try:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            raise ValueError(f"unknown .npy format version {version}")
    except (ValueError, SyntaxError, TypeError, EOFError) as exc:
        raise NpzError(f"{path}: {_array_name(key)} has no valid .npy header "
                       f"({_reason(exc)})") from None
    return tuple(shape), dtype


def _judge_header(path: str | os.PathLike, archive: zipfile.ZipFile, info: zipfile.ZipInfo,
                  key: str) -> int:
    """The bytes member ``key`` needs loaded; NpzError for pickles and impossible shapes."""
    with archive.open(info) as handle:
        shape, dtype = _header(path, handle, key)
        header_bytes = handle.tell()
    if dtype.hasobject:
        raise NpzError(f"{path}: {_array_name(key)} holds pickled Python objects (dtype "
                       f"{dtype}); only numeric arrays are read, never pickles")
    needed = math.prod(shape) * dtype.itemsize
    held = info.file_size - header_bytes
    if needed > held:
        raise NpzError(f"{path}: {_array_name(key)} claims shape {list(shape)} of {dtype} "
                       f"({format_bytes(needed)}) but holds only {format_bytes(max(held, 0))}")
    return needed


def _read_member(path: str | os.PathLike, archive: zipfile.ZipFile, info: zipfile.ZipInfo,
                 key: str) -> np.ndarray:
    with archive.open(info) as handle:
        try:
            return np.lib.format.read_array(handle, allow_pickle=False)
        except (ValueError, EOFError, OSError) as exc:
            raise NpzError(f"{path}: {_array_name(key)} cannot be read ({_reason(exc)})"
                           ) from None


def _reason(exc: BaseException) -> str:
    return str(exc).rstrip(".") or type(exc).__name__


def read_inputs(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The input arrays of an npz file, for ``fit_arguments``: ``out{j}`` keys (a previous
    run's outputs, as in the JAX corpus files) are left out; any other key is the fitter's to
    judge."""
    return {key: value for key, value in read_npz(path).items()
            if not (key.startswith("out") and key[3:].isdigit())}


def storable(array: np.ndarray) -> np.ndarray:
    """``array`` as numpy can save it: ml_dtypes arrays (bf16, f8, int4) as raw void bytes."""
    array = np.asarray(array)
    if array.dtype.kind == "V" and array.dtype.type.__module__.startswith("ml_dtypes"):
        return np.ascontiguousarray(array).view(f"V{array.dtype.itemsize}")
    return array


def write_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray], *,
              exclusive: bool = False) -> None:
    """Write ``arrays`` to an npz file atomically (ml_dtypes arrays stored as raw bytes);
    ``exclusive``: never replace a file already at ``path``."""
    stored = {key: storable(value) for key, value in arrays.items()}
    atomic_write(path, lambda handle: np.savez(handle, **stored), exclusive=exclusive)


def output_arrays(outputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per-device outputs keyed ``out{j}``."""
    return {f"out{j}": array for j, array in enumerate(outputs)}


Fitted = Union[np.ndarray, None, tuple["Fitted", ...]]
"""One entry parameter's input: an array, None for a token, a tuple for a tuple parameter."""


def fit_arguments(arrays: Mapping[str, Any] | Sequence[Any], parameter_shapes: Sequence[Any],
                  num_devices: int, *, source: str | None = None) -> list[Fitted]:
    """Check inputs against the entry parameters; return one fitted input per parameter.

    ``arrays`` maps ``arg{i}`` to parameter i's input, or is a sequence with one input per
    parameter. An array parameter takes an array shaped ``param_shape`` (same on every device)
    or ``[num_devices, *param_shape]``, with the parameter's dtype (raw void bytes of the same
    item size are read as that dtype; non-array Python values are converted). A tuple parameter
    takes a sequence with one input per tuple element (nested for nested tuples), or, in a
    mapping (how an npz file holds it), one key ``arg{i}.{j}`` per leaf j of its flattened
    leaves; each leaf is fitted like an array parameter on its own. Tokens need no input.

    The result mirrors the shapes: an array, None for a token, a tuple for a tuple parameter.
    Raises ArgumentError naming the parameter (and leaf) for anything that does not fit;
    ``source`` (a file name) prefixes the message.
    """
    prefix = f"{source}: " if source else ""
    count = len(parameter_shapes)
    if isinstance(arrays, Mapping):
        by_index = _inputs_by_index(arrays, parameter_shapes, prefix)
    else:
        by_index = list(arrays)
        if len(by_index) != count:
            raise ArgumentError(f"{prefix}{len(by_index)} input arrays given but the entry "
                             f"computation has {count} parameter{'s' * (count != 1)}")
    return [_fit(value, shape, i, itertools.count() if shape.is_tuple else None, num_devices,
                 prefix)
            for i, (shape, value) in enumerate(zip(parameter_shapes, by_index))]


def _parameter_name(i: int, shape: Any, leaf: int | None = None) -> str:
    key = f"arg{i}" if leaf is None else f"arg{i}.{leaf}"
    return (f"parameter {i}{'' if leaf is None else f' leaf {leaf}'} "
            f"({key}, {shape.without_layout()})")


def _inputs_by_index(arrays: Mapping[str, Any], parameter_shapes: Sequence[Any],
                     prefix: str) -> list[Any]:
    """Parameter i's input from ``arg{i}``, or nested from its ``arg{i}.{j}`` leaf keys."""
    count = len(parameter_shapes)
    leaf_counts = [sum(1 for _ in s.leaves()) if s.is_tuple else 0 for s in parameter_shapes]
    expected = {f"arg{i}" for i in range(count)}
    expected |= {f"arg{i}.{j}" for i in range(count) for j in range(leaf_counts[i])}
    extra = sorted(set(arrays) - expected)
    if extra:
        keys = f"keys arg0..arg{count - 1}" if count > 1 else "key arg0" if count else "no keys"
        if any(leaf_counts):
            keys += "; tuple parameter i as arg{i}.{j}, one key per leaf j"
        raise ArgumentError(f"{prefix}unexpected key '{extra[0]}': the entry computation has "
                         f"{count} parameter{'s' * (count != 1)} ({keys})")
    by_index = []
    for i, shape in enumerate(parameter_shapes):
        leaf_keys = [f"arg{i}.{j}" for j in range(leaf_counts[i])]
        if not any(key in arrays for key in leaf_keys):
            by_index.append(arrays.get(f"arg{i}"))
            continue
        if f"arg{i}" in arrays:
            raise ArgumentError(f"{prefix}{_parameter_name(i, shape)} is given both as arg{i} and "
                             f"as leaf keys arg{i}.{{j}}; give one of the two")
        by_index.append(_nest(shape, iter([arrays.get(key) for key in leaf_keys])))
    return by_index


def _nest(shape: Any, leaves: Iterator[Any]) -> Any:
    """The flat ``leaves`` of a tuple shape, nested as the shape is."""
    if shape.is_tuple:
        return tuple(_nest(element, leaves) for element in shape.elements)
    return next(leaves)


@functools.lru_cache(maxsize=None)
def _numpy_dtype(element_type: Any) -> np.dtype:
    """``element_type.numpy_dtype``, looked up once per type (every input is fitted)."""
    return element_type.numpy_dtype


def _fit(value: Any, shape: Any, i: int, leaf_numbers: Iterator[int] | None, num_devices: int,
         prefix: str) -> Fitted:
    """Parameter i's input (or, with ``leaf_numbers``, the part of it at ``shape``) fitted."""
    if shape.is_tuple:
        what = _parameter_name(i, shape)
        if value is None and not any(leaf.is_array for leaf in shape.leaves()):
            value = (None,) * len(shape.elements)
        if value is None:
            raise ArgumentError(f"{prefix}no input for {what}")
        if not isinstance(value, (list, tuple)):
            raise ArgumentError(f"{prefix}{what} is a tuple: give a sequence of "
                             f"{len(shape.elements)} inputs, one per element (or the npz keys "
                             f"arg{i}.{{j}}, one per leaf)")
        if len(value) != len(shape.elements):
            raise ArgumentError(f"{prefix}{what} is a tuple of {len(shape.elements)} elements but "
                             f"{len(value)} inputs were given for it")
        return tuple(_fit(v, element, i, leaf_numbers, num_devices, prefix)
                     for element, v in zip(shape.elements, value))
    leaf = next(leaf_numbers) if leaf_numbers is not None else None
    if shape.is_token:
        return None
    # The parameter's name is only spelled out for a message (an execute fits every input).
    what = lambda: _parameter_name(i, shape, leaf)  # noqa: E731
    if value is None:
        raise ArgumentError(f"{prefix}no input array for {what()}")
    dtype = _numpy_dtype(shape.element_type)
    if not isinstance(value, np.ndarray):
        try:
            value = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ArgumentError(f"{prefix}{what()} cannot be converted: {exc}") from None
    if value.dtype != dtype:
        if value.dtype.kind == "V" and value.dtype.itemsize == dtype.itemsize:
            value = value.view(dtype)
        else:
            raise ArgumentError(f"{prefix}{what()} has dtype {value.dtype}, expected "
                             f"{shape.element_type.spelling} ({dtype})")
    dims = tuple(shape.dims)
    if value.shape != dims and value.shape != (num_devices, *dims):
        raise ArgumentError(f"{prefix}{what()} has shape {list(value.shape)}; expected "
                         f"{list(dims)} (same on every device) or "
                         f"{[num_devices, *dims]} (one per device)")
    return value
