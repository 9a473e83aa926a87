"""Replaying one element term on concrete inputs: the check that a position where the proof
on symbolic positions fails is a real difference.

Input element ``e`` (row-major position) of parameter ``p``'s leaf ``l`` on device ``d`` is a
small integer in [-64, 64] given by a hash of ``(seed, p, l, d, e)`` (``d`` is -1 for a leaf
declared replicated), converted to the element type: the value can be recomputed for any
element without materialising the tensor, so a witness on a 5 GB module costs a few reads,
and the same values fill whole input arrays (``witness_inputs``) when the module is small
enough to run, so the interpreter confirms the witness.
Elementwise ops run the interpreter's own op implementation on one element; a reduction adds
its members' values in float64 (exact for these small integers) and rounds once, so it is
judged up to reassociation, as the proof is.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from neuron_sim.hlo import ElementType, Opcode
from neuron_sim.interpreter.evaluator import Frame, OpContext
from neuron_sim.interpreter.ops import REGISTRY
from neuron_sim.interpreter.values import numpy_dtype
from neuron_sim.lazy import LazyModule
from neuron_sim.proofs.uniform.positions import Term

z3 = LazyModule("z3")

__all__ = ["Replayer", "replayed_text", "input_element", "input_values", "same_value",
           "witness_inputs"]

_TYPES = {t.spelling: t for t in ElementType}
INPUT_RANGE = 64  # inputs are integers in [-64, 64] (unsigned: [0, 64]; pred: 0 or 1)


_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
        np.uint64(0x94D049BB133111EB), np.uint64(0xD6E8FEB86659FD93))


def _hash(seed: int, param: int, leaf: int, device: np.ndarray, linear: np.ndarray) -> np.ndarray:
    """A splitmix64-style hash of (seed, param, leaf, device, linear), elementwise."""
    with np.errstate(over="ignore"):
        x = (linear.astype(np.uint64) + _MIX[0] * (device.astype(np.uint64) + np.uint64(1))
             + _MIX[3] * np.uint64((seed * 1_000_003 + param * 1_009 + leaf) & (2**63 - 1)))
        x = (x ^ (x >> np.uint64(30))) * _MIX[1]
        x = (x ^ (x >> np.uint64(27))) * _MIX[2]
        return x ^ (x >> np.uint64(31))


def input_values(seed: int, param: int, leaf: int, device: np.ndarray, linear: np.ndarray,
                 spelling: str) -> np.ndarray:
    """Replayed input values (module docstring) at row-major positions ``linear`` of devices
    ``device`` (-1 for a leaf declared replicated), broadcast together."""
    et = _TYPES[spelling]
    draw = (_hash(seed, param, leaf, device, linear) % np.uint64(2 * INPUT_RANGE + 1)
            ).astype(np.int64) - INPUT_RANGE
    if et is ElementType.PRED:
        draw = draw & 1
    elif spelling.startswith("u"):
        draw = np.abs(draw)
    return draw.astype(numpy_dtype(et))


def input_element(seed: int, param: int, leaf: int, device: int | None,
                  linear: int, spelling: str) -> np.ndarray:
    """One replayed input value, as a 0-d array."""
    return input_values(seed, param, leaf, np.asarray(-1 if device is None else device),
                        np.asarray(linear), spelling).reshape(())


def same_value(a: np.ndarray, b: np.ndarray) -> bool:
    """The verifier's exact rule on one element: the same bits, any NaN equal to any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc" or a.dtype.name in ("bfloat16",) or "float" in a.dtype.name:
        with np.errstate(all="ignore"):
            if bool(np.isnan(a.astype(np.float64))) and bool(np.isnan(b.astype(np.float64))):
                return True
    return a.tobytes() == b.tobytes()


def replayed_text(value: np.ndarray) -> str:
    return str(np.asarray(value).item() if np.asarray(value).dtype.kind in "biuf"
               else np.asarray(value))


def witness_inputs(module: Any, num_devices: int, replicated: Sequence[Sequence[bool]],
                   seed: int) -> list[Any]:
    """Whole input arrays holding the replayed values, in the verifier's input layout
    (``[D, *shape]`` per leaf, ``shape`` for a leaf declared replicated)."""
    values: list[Any] = []
    for param, flags in zip(module.entry.parameters, replicated):
        shapes = list(param.shape.leaves()) if param.shape.is_tuple else [param.shape]
        made = []
        for leaf, shape in enumerate(shapes):
            dims = tuple(shape.dims) if shape.is_array else (0,)
            spelling = shape.element_type.spelling if shape.is_array else "pred"
            linear = np.arange(int(np.prod(dims, dtype=np.int64))).reshape(dims)
            if leaf < len(flags) and flags[leaf]:
                made.append(input_values(seed, param.parameter_number, leaf, np.asarray(-1),
                                         linear, spelling))
            else:
                devices = np.arange(num_devices).reshape((num_devices,) + (1,) * len(dims))
                made.append(input_values(seed, param.parameter_number, leaf, devices,
                                         linear[None], spelling))
        values.append(tuple(made) if param.shape.is_tuple else made[0])
    return values


class Replayer:
    """Evaluates element terms at a concrete position on the replayed inputs."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def value(self, term: Term, device: int, position: Sequence[int]) -> np.ndarray | None:
        """The term's value at ``position`` (values of the ``position{k}`` variables); None
        where replay has no model of a construct."""
        pairs = [(z3.Int(f"position{k}"), z3.IntVal(p)) for k, p in enumerate(position)]
        try:
            with np.errstate(all="ignore"):
                return self._value(term, device, pairs)
        except Exception:  # noqa: BLE001 - a construct replay cannot evaluate: no witness
            return None

    def _int(self, expr: Any, pairs: list) -> int:
        simple = z3.simplify(z3.substitute(expr, *pairs) if pairs else expr)
        if not z3.is_int_value(simple):
            raise _NoReplay
        return simple.as_long()

    def _true(self, condition: Any, pairs: list) -> bool:
        simple = z3.simplify(z3.substitute(condition, *pairs) if pairs else condition)
        if z3.is_true(simple):
            return True
        if z3.is_false(simple):
            return False
        raise _NoReplay

    def _value(self, term: Term, device: int, pairs: list) -> np.ndarray:
        kind = term[0]
        if kind == "read":
            _, param, leaf, on, index, spelling, dims = term
            linear = 0
            for i, size in zip(index, dims):
                linear = linear * size + self._int(i, pairs)
            return input_element(self.seed, param, leaf, on, linear, spelling)
        if kind == "const":
            return np.asarray(term[2])
        if kind == "index":
            return np.asarray(self._int(term[1], pairs)).astype(numpy_dtype(_TYPES[term[2]]))
        if kind == "cases":
            for condition, inner in term[1]:
                if self._true(condition, pairs):
                    return self._value(inner, device, pairs)
            raise _NoReplay
        if kind == "reduce":
            _, opcode, spelling, members = term
            values = [self._value(m, device, pairs) for m in members]
            dtype = numpy_dtype(_TYPES[spelling])
            if opcode is Opcode.ADD and dtype.kind not in "iub":
                return np.asarray(sum(float(v) for v in values)).astype(dtype)
            if opcode is Opcode.ADD:
                return np.asarray(sum(int(v) for v in values)).astype(np.int64).astype(dtype)
            inst_free = REGISTRY.get(opcode)
            if inst_free is None:
                raise _NoReplay
            result = values[0]
            for value in values[1:]:
                result = np.asarray(inst_free.fn(None, result[None], value[None])).reshape(())
            return result.astype(dtype)
        if kind == "op":
            _, opcode, _, _, operands, inst = term
            implementation = REGISTRY.get(opcode)
            if implementation is None or implementation.values:
                raise _NoReplay
            values = [self._value(o, device, pairs)[None] for o in operands]
            context = OpContext(None, inst, Frame(np.asarray([device], dtype=np.int64)))
            return np.asarray(implementation.fn(context, *values)).reshape(-1)[0:1].reshape(())
        raise _NoReplay


class _NoReplay(Exception):
    """A construct the replay has no model of."""
