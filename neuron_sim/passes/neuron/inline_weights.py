"""InlineWeights (key ``aws_neuron_inline_weights``): fold weight parameters into constants.

Seed: hlo-misc-cleanup-sweep.txt §3.1 (InlineWeights::Run, CERTAIN). The binary parses
``DIR/metadata.json`` with nlohmann::json, takes the map ``model_files`` (or ``weights``) from a
parameter — by name, or by number (``strtol``) — to an ``.npy`` file, and for each entry
parameter with an entry: loads the file (``npy2literal``), requires a compatible shape (else
``NCC_INL001`` "mismatching layout for parameter") and the numpy dtype equal to the parameter's
element type (else ``NCC_INL002`` "numpy file type mismatch"), replaces the parameter's uses by
a constant and calls ``RemoveParameter``; finally it re-derives the entry computation layout.
A missing file is "Corrupted input dir, model file does not exist!"; a JSON value of the wrong
type is nlohmann's "type must be string, but is number".

The seed's warning: ``RemoveParameter`` renumbers every later parameter, so the loop resolves
the numbers once and removes the highest first (``removal_order``): removing in increasing order
with numbers resolved up front deletes the wrong parameter (the tests show which).

Our reading (seed status "our reading"):
* Without the ``dir`` option the pass does nothing (the closer's pipeline runs it with no
  options; the binary gets DIR from its driver).
* Only one of ``model_files`` / ``weights`` may be present. A key that names no entry
  parameter is an error (the binary silently ignores it); so is a parameter named twice (by name
  and by number).
* Security, which the binary does not have: a path is relative to DIR and may not leave it
  (no ``..``, not absolute, no symlink resolving outside DIR; metadata.json included); a file
  larger than the parameter's bytes plus the largest ``.npy`` header is refused before it is
  opened, and its header must describe exactly the parameter's shape, dtype and the file's size
  before the data is read; ``.npy`` is loaded with ``allow_pickle=False`` (object arrays and
  pickles are refused).
* ``entry_computation_layout`` is re-derived from the remaining parameters and the root when the
  header has one (none is added). A module with ``input_output_alias`` is refused (its
  parameter numbers would need renumbering, which the seed does not do).

Every error is an ``InlineWeightsError`` (a UserError: exit 2) and leaves the module unchanged.

Known unsafety: the result is correct only for the weights in DIR: the rewrite changes the
program's signature (the verifier compares it with the source given those weights, through
``source_binding``). The binary's ``ShapeUtil::Compatible`` check ignores layout, so a weight
saved in another physical order would be read in logical order (we do the same: ``.npy`` is
logical order; a Fortran-order file is transposed by numpy to logical order).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape
from neuron_sim.passes.base import HloPass, SeedStatus, SourceBinding
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.neuron.pattern_helpers import rederive_entry_layout
from neuron_sim.passes.options import PassOption

SEED = "hlo-misc-cleanup-sweep.txt §3.1 InlineWeights"
METADATA = "metadata.json"
MAP_KEYS = ("model_files", "weights")
# The largest header numpy writes (format 2.0/3.0: 4-byte length) is unbounded in principle;
# numpy itself refuses headers over 10,000 bytes unless told otherwise.
MAX_NPY_HEADER = 10_000 + 64


class InlineWeightsError(UserError):
    """A weights directory InlineWeights cannot use; the module is unchanged."""


class LayoutMismatchError(InlineWeightsError):
    """NCC_INL001: the .npy array's shape is not the parameter's."""


class DtypeMismatchError(InlineWeightsError):
    """NCC_INL002: the .npy array's dtype is not the parameter's element type."""


class CorruptedDirError(InlineWeightsError):
    """A file metadata.json names does not exist."""


class UnsafeWeightsPathError(InlineWeightsError):
    """A path that leaves DIR, a file too large for its parameter, or a pickle."""


class MetadataError(InlineWeightsError):
    """metadata.json is not valid JSON or holds a value of the wrong type."""


def json_type_name(value: Any) -> str:
    """nlohmann::json's name of a JSON value's type (for its "type must be ..." errors)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array"}[type(value)]


def contained_path(directory: Path, relative: str, what: str) -> Path:
    """``directory / relative`` resolved, refusing an absolute path, ``..`` and a symlink that
    resolves outside ``directory``."""
    if os.path.isabs(relative) or Path(relative).is_absolute():
        raise UnsafeWeightsPathError(f"{what}: path {relative!r} is absolute; paths in "
                                     f"{METADATA} must be relative to {directory}")
    if ".." in Path(relative).parts:
        raise UnsafeWeightsPathError(f"{what}: path {relative!r} contains '..'; paths in "
                                     f"{METADATA} may not leave {directory}")
    root = directory.resolve()
    resolved = (directory / relative).resolve()
    if resolved != root and root not in resolved.parents:
        raise UnsafeWeightsPathError(f"{what}: path {relative!r} resolves to {resolved}, "
                                     f"outside {directory} (a symlink leaving the directory)")
    return resolved


def read_metadata(directory: Path) -> dict[str, str]:
    """The parameter -> .npy path map of ``directory/metadata.json``."""
    path = contained_path(directory, METADATA, str(directory))
    if not path.is_file():
        raise CorruptedDirError(f"{directory / METADATA}: Corrupted input dir, {METADATA} does "
                                "not exist!")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise MetadataError(f"{path}: malformed JSON ({exc})") from None
    if not isinstance(config, dict):
        raise MetadataError(f"{path}: type must be object, but is {json_type_name(config)}")
    present = [key for key in MAP_KEYS if key in config]
    if not present:
        raise MetadataError(f"{path}: has neither {MAP_KEYS[0]!r} nor {MAP_KEYS[1]!r}")
    if len(present) > 1:
        raise MetadataError(f"{path}: has both {MAP_KEYS[0]!r} and {MAP_KEYS[1]!r}; give one")
    weights = config[present[0]]
    if not isinstance(weights, dict):
        raise MetadataError(f"{path}: {present[0]}: type must be object, but is "
                            f"{json_type_name(weights)}")
    for key, value in weights.items():
        if not isinstance(value, str):
            raise MetadataError(f"{path}: {present[0]}[{key!r}]: type must be string, but is "
                                f"{json_type_name(value)}")
    return dict(weights)


def resolve_parameters(entry: HloComputation, keys: Sequence[str]) -> dict[str, HloInstruction]:
    """Each key's entry parameter: by name (with or without ``%``), else by decimal number."""
    by_name = {p.name: p for p in entry.parameters}
    found: dict[str, HloInstruction] = {}
    for key in keys:
        name = key[1:] if key.startswith("%") else key
        if name in by_name:
            found[key] = by_name[name]
        elif name.strip().lstrip("+-").isdigit():
            number = int(name)
            if not 0 <= number < len(entry.parameters):
                raise InlineWeightsError(f"Computation {entry.name} has no parameter number "
                                         f"{number} ({METADATA} key {key!r})")
            found[key] = entry.parameter(number)
        else:
            raise InlineWeightsError(f"Computation {entry.name} has no parameter named {key!r} "
                                     f"({METADATA} key)")
    seen: dict[HloInstruction, str] = {}
    for key, param in found.items():
        if param in seen:
            raise InlineWeightsError(f"{METADATA} names parameter %{param.name} twice "
                                     f"({seen[param]!r} and {key!r})")
        seen[param] = key
    return found


def parameter_bytes(shape: ArrayShape) -> int:
    """The bytes the parameter's array holds (numpy's itemsize per element)."""
    return shape.element_count * np.dtype(shape.element_type.numpy_dtype).itemsize


def load_weight(path: Path, param: HloInstruction, relative: str) -> np.ndarray:
    """The array in ``path`` for ``param``, checked before its data is read: size, then the
    header's dtype and shape, then allow_pickle=False."""
    where = f"{relative} (parameter %{param.name})"
    if not path.is_file():
        raise CorruptedDirError(f"{where}: Corrupted input dir, model file does not exist!")
    shape = param.shape
    if not isinstance(shape, ArrayShape) or not shape.is_array:
        raise LayoutMismatchError(f"NCC_INL001: mismatching layout for parameter %{param.name}: "
                                  f"it is {shape}, not an array")
    expected = parameter_bytes(shape)
    size = path.stat().st_size
    if size > expected + MAX_NPY_HEADER:
        raise UnsafeWeightsPathError(f"{where}: the file is {size} bytes, larger than the "
                                     f"parameter's {expected} bytes plus an .npy header; refused "
                                     "before reading it")
    with open(path, "rb") as handle:
        try:
            version = np.lib.format.read_magic(handle)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            header = read_header(handle)
        except ValueError as exc:
            raise UnsafeWeightsPathError(f"{where}: not an .npy file ({exc}); pickles and other "
                                         "formats are refused") from None
        data_start = handle.tell()
    dims, fortran_order, dtype = header
    if dtype.hasobject:
        raise UnsafeWeightsPathError(f"{where}: holds Python objects (a pickle); refused "
                                     "(allow_pickle=False)")
    if tuple(dims) != tuple(shape.dims):
        raise LayoutMismatchError(f"NCC_INL001: mismatching layout for parameter %{param.name}: "
                                  f"{relative} holds shape {tuple(dims)}, the parameter is "
                                  f"{shape.without_layout()}")
    want = np.dtype(shape.element_type.numpy_dtype)
    if dtype.newbyteorder("=") != want.newbyteorder("="):
        raise DtypeMismatchError(f"NCC_INL002: numpy file type mismatch for parameter "
                                 f"%{param.name}: {relative} holds {dtype}, the parameter is "
                                 f"{shape.element_type.spelling} ({want})")
    if size != data_start + expected:
        raise UnsafeWeightsPathError(f"{where}: the file is {size} bytes, its header and the "
                                     f"parameter's data make {data_start + expected}")
    array = np.load(path, allow_pickle=False)
    return np.ascontiguousarray(array.astype(want, copy=False))


def remove_parameter(computation: HloComputation, number: int) -> None:
    """XLA's RemoveParameter: remove unused parameter ``number``, renumbering the later ones."""
    computation.remove(computation.parameter(number))
    for param in computation.parameters:
        if param.parameter_number > number:
            param.parameter_number -= 1


def with_parameters_inserted(module: HloModule, shapes: Mapping[int, Shape]) -> HloModule:
    """A clone of ``module`` whose entry has unused parameters of ``shapes`` at those numbers,
    the others renumbered around them (the final numbering is 0..n-1)."""
    clone = module.clone()
    entry = clone.entry
    total = len(entry.parameters) + len(shapes)
    free = iter(n for n in range(total) if n not in shapes)
    for param in entry.parameters:
        param.parameter_number = next(free)
    anchor = entry.instructions[0]
    for number, shape in sorted(shapes.items()):
        param = make_instruction(entry, Opcode.PARAMETER, shape=shape, name=f"bound.{number}",
                                 parameter_number=number)
        entry.add_before(param, anchor)
    rederive_entry_layout(clone)
    return clone


class InlineWeights(HloPass):
    """Entry parameters named in DIR/metadata.json -> constants of their .npy files."""

    name = "aws_neuron_inline_weights"
    seed_status = SeedStatus.OUR_READING
    seed = SEED
    summary = ("entry parameters named in DIR/metadata.json become constants of their .npy "
               "files (highest number first); no dir: no change")
    options = (PassOption("dir", str, None,
                          "the model directory holding metadata.json (model_files / weights: "
                          "parameter name or number -> .npy path inside the directory); unset: "
                          "the pass does nothing"),)
    pipelines = {"neuron-closer": 15}
    seed_says = ("read `DIR/metadata.json` (`model_files` / `weights`: parameter name or number "
                 "-> `.npy`), each named entry parameter -> a constant (`npy2literal`, "
                 "`NCC_INL001` shape, `NCC_INL002` dtype), `RemoveParameter`, re-derive the entry "
                 "layout")
    our_reading = ("removes highest number first; no `dir`: no change; an unknown or repeated key "
                   "is an error; paths confined to DIR, size and header checked before the data "
                   "is read, `allow_pickle=False`")
    known_unsafety = ("only for the weights in DIR (the verifier feeds them to the source's "
                      "parameters); the binary has no path or size checks")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inlined: dict[int, np.ndarray] = {}   # original parameter number -> weight

    @staticmethod
    def removal_order(numbers: Sequence[int]) -> list[int]:
        """Highest first: RemoveParameter renumbers only the parameters after the removed one."""
        return sorted(numbers, reverse=True)

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        self.inlined = {}
        directory = self.option("dir")
        if not directory:
            return False
        directory = Path(directory)
        if not directory.is_dir():
            raise CorruptedDirError(f"{directory}: Corrupted input dir, it is not a directory")
        weights = read_metadata(directory)
        if not weights:
            return False
        if "input_output_alias" in module.header:
            raise InlineWeightsError(f"module {module.name} has input_output_alias, whose "
                                     "parameter numbers InlineWeights does not renumber")
        entry = module.entry
        params = resolve_parameters(entry, list(weights))
        arrays: dict[int, np.ndarray] = {}
        for key, param in params.items():
            path = contained_path(directory, weights[key], f"{METADATA} key {key!r}")
            arrays[param.parameter_number] = load_weight(path, param, weights[key])
        for number in self.removal_order(list(arrays)):
            param = entry.parameter(number)
            constant = make_instruction(entry, Opcode.CONSTANT, shape=param.shape,
                                        name="constant", literal=Literal.from_array(
                                            param.shape, arrays[number]))
            entry.add_before(constant, param)
            param.replace_all_uses_with(constant)
            remove_parameter(entry, number)
            self.record(f"parameter {number} %{param.name} -> %{constant.name} "
                        f"(constant {param.shape.without_layout()})")
        rederive_entry_layout(module)
        self.inlined = arrays
        return True

    def source_binding(self, source: HloModule, target: HloModule) -> SourceBinding | None:
        """The source with the weights fed to its parameters; the target given them back as
        unused parameters, so both take the same inputs."""
        if not self.inlined:
            return None
        params = {n: source.entry.parameter(n).shape for n in self.inlined}
        return SourceBinding(source, with_parameters_inserted(target, params),
                             dict(self.inlined))
