"""The op table: ``@implements(Opcode.X, ...)`` registers the function that executes an opcode.

Two calling conventions, chosen per registration:

- array ops (the default): ``fn(ctx, *operands)`` receives each operand as a *batched* numpy
  array (leading row axis of size 1 for a replicated value, n for a per-device one) and returns a
  batched array (a list of them for a tuple-shaped result). The evaluator decides whether the
  result is replicated (all operands were) and checks its shape and dtype against the HLO shape.
- value ops (``values=True``): ``fn(ctx, *operands)`` receives and returns ``Value`` objects;
  for control flow, tuples, collectives and the device-identity ops.

The op families register themselves when imported, and each is imported on the first lookup
of one of its opcodes (``REGISTRY`` is a ``neuron_sim.lazy.LazyTable``): a run of an
elementwise module does not import the collectives, the convolutions or the sort. ``FAMILIES``
says which family module executes which opcodes; registering an opcode from another module is
an error raised at import, and a test holds the table equal to the registrations.
"""

from __future__ import annotations

import importlib
from typing import Callable

from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.lazy import LazyTable

_PACKAGE = "neuron_sim.interpreter.ops"

# Each op family (a module of this package) and the opcodes it executes, by Opcode name.
FAMILIES: dict[str, tuple[str, ...]] = {
    "elementwise": (
        "ABS", "NEGATE", "SIGN", "FLOOR", "CEIL", "ROUND_NEAREST_AFZ", "ROUND_NEAREST_EVEN",
        "SQRT", "RSQRT", "CBRT", "EXP", "EXPM1", "LOG", "LOG1P", "LOGISTIC", "TANH", "SIN",
        "COS", "TAN", "ERF", "ACOS", "ACOSH", "ASIN", "ASINH", "ATAN", "ATANH", "COSH", "SINH",
        "NOT", "POPCNT", "CLZ", "IS_FINITE", "REAL", "IMAG", "COMPLEX", "ADD", "SUBTRACT",
        "MULTIPLY", "DIVIDE", "REMAINDER", "POWER", "MAXIMUM", "MINIMUM", "ATAN2", "MULHI", "AND",
        "OR", "XOR", "SHIFT_LEFT", "SHIFT_RIGHT_LOGICAL", "SHIFT_RIGHT_ARITHMETIC", "COMPARE",
        "SELECT", "CLAMP", "CONVERT", "BITCAST_CONVERT", "REDUCE_PRECISION"),
    "shape": (
        "CONSTANT", "IOTA", "BROADCAST", "RESHAPE", "DYNAMIC_RESHAPE", "TRANSPOSE", "SLICE",
        "CONCATENATE", "REVERSE", "PAD", "COPY", "DOMAIN", "BITCAST", "TUPLE",
        "GET_TUPLE_ELEMENT", "OPTIMIZATION_BARRIER", "ADD_DEPENDENCY", "AFTER_ALL",
        "GET_DIMENSION_SIZE", "SET_DIMENSION_SIZE"),
    "indexing": ("DYNAMIC_SLICE", "DYNAMIC_UPDATE_SLICE", "GATHER", "SCATTER"),
    "reduce": ("REDUCE", "REDUCE_WINDOW", "SELECT_AND_SCATTER", "SORT", "TOPK"),
    "linalg": ("DOT", "CONVOLUTION"),
    "control": ("FUSION", "CALL", "MAP", "WHILE", "CONDITIONAL", "ASYNC_START", "ASYNC_UPDATE",
                "ASYNC_DONE", "COPY_START", "COPY_DONE"),
    "random": ("RNG_BIT_GENERATOR", "RNG", "RNG_GET_AND_UPDATE_STATE"),
    "collective": (
        "PARTITION_ID", "REPLICA_ID", "ALL_REDUCE", "ALL_REDUCE_START", "ALL_REDUCE_DONE",
        "ALL_GATHER", "ALL_GATHER_START", "ALL_GATHER_DONE", "REDUCE_SCATTER", "ALL_TO_ALL",
        "RAGGED_ALL_TO_ALL", "COLLECTIVE_PERMUTE", "COLLECTIVE_PERMUTE_START",
        "COLLECTIVE_PERMUTE_DONE", "COLLECTIVE_BROADCAST"),
    "custom_call": ("CUSTOM_CALL",),
    "batch_norm": ("BATCH_NORM_TRAINING", "BATCH_NORM_INFERENCE", "BATCH_NORM_GRAD"),
    "send_recv": ("SEND", "RECV", "SEND_DONE", "RECV_DONE"),
}


class BoundOp:
    """An op bound once for an execution plan (``neuron_sim.interpreter.plan``): ``fn`` takes
    the operands as batched arrays and returns the result's batched arrays (a list, one per
    element, for a tuple-shaped result), computing what the registered function computes with
    every per-call decision made when it was bound. ``attributes`` are the
    ``(instruction, name, value)`` it read, ``computations`` the computations whose structure
    it read: the plan is rebuilt when any of them changes."""

    __slots__ = ("fn", "attributes", "computations")

    def __init__(self, fn: Callable, attributes: list, computations: list) -> None:
        self.fn = fn
        self.attributes = attributes
        self.computations = computations


class OpImplementation:
    """An opcode's registered function, its calling convention (``values``: value op) and
    its binder (``bind(inst) -> BoundOp | None``: the op bound once for a plan, where the
    instruction allows). Immutable; equal when its fields are. A plain class, not a
    dataclass: building a frozen dataclass compiles six methods, which every start-up would
    pay for."""

    __slots__ = ("opcode", "fn", "values", "bind")

    def __init__(self, opcode: Opcode, fn: Callable, values: bool,
                 bind: Callable | None = None) -> None:
        object.__setattr__(self, "opcode", opcode)
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "bind", bind)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"OpImplementation is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not OpImplementation:
            return NotImplemented
        return (self.opcode, self.fn, self.values, self.bind) == \
            (other.opcode, other.fn, other.values, other.bind)

    def __hash__(self) -> int:
        return hash((self.opcode, self.fn, self.values, self.bind))

    def __repr__(self) -> str:
        return (f"OpImplementation(opcode={self.opcode!r}, fn={self.fn!r}, "
                f"values={self.values!r}, bind={self.bind!r})")


def _import_family(module: str) -> None:
    importlib.import_module(module)


REGISTRY: LazyTable = LazyTable(
    {Opcode[name]: f"{_PACKAGE}.{family}" for family, names in FAMILIES.items()
     for name in names},
    _import_family)
"""Opcode -> OpImplementation; an opcode's family is imported on its first lookup."""


def implements(*opcodes: Opcode, values: bool = False, bind: Callable | None = None
               ) -> Callable[[Callable], Callable]:
    """Register the decorated function as the implementation of ``opcodes`` (``bind``: its
    binder for execution plans, ``OpImplementation``)."""

    def register(fn: Callable) -> Callable:
        for opcode in opcodes:
            owner = REGISTRY.owner_of(opcode)
            if owner is not None and owner != fn.__module__:
                raise RuntimeError(f"{opcode.spelling} is implemented in {fn.__module__}, but "
                                   f"the op table lists it under {owner} (ops/registry.py)")
            if dict.__contains__(REGISTRY, opcode):
                raise RuntimeError(f"{opcode.spelling} is implemented twice: "
                                   f"{dict.__getitem__(REGISTRY, opcode).fn.__module__} and "
                                   f"{fn.__module__}")
            dict.__setitem__(REGISTRY, opcode, OpImplementation(opcode, fn, values, bind))
        return fn

    return register
