"""The one shape-rule table: every op family's rules, merged in one table.

Adding an op means adding its rule to its family's module and its name to that family's entry
in ``FAMILIES``; adding a family means one entry there. Each family is imported on the first
lookup of one of its opcodes (``RULES`` is a ``neuron_sim.lazy.LazyTable``), so that parsing
and checking a module loads only the rules it uses. A family whose table holds an opcode listed
under another family, or not listed, is a programming error raised when it loads; a test holds
``FAMILIES`` equal to the families' tables.
"""

from __future__ import annotations

import importlib

from neuron_sim.hlo.checks.core import RuleTable
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.lazy import LazyTable

_PACKAGE = "neuron_sim.hlo.checks"

# Each family (a module of this package with a RuleTable named RULES) and its opcodes, by
# Opcode name.
FAMILIES: dict[str, tuple[str, ...]] = {
    "elementwise": (
        "FLOOR", "CEIL", "ROUND_NEAREST_AFZ", "ROUND_NEAREST_EVEN", "IS_FINITE", "ERF",
        "REDUCE_PRECISION", "COS", "SIN", "TAN", "EXP", "EXPM1", "LOG", "LOG1P", "LOGISTIC",
        "RSQRT", "SQRT", "CBRT", "TANH", "REAL", "IMAG", "ACOS", "ACOSH", "ASIN", "ASINH",
        "ATAN", "ATANH", "COSH", "SINH", "CLZ", "POPCNT", "NOT", "NEGATE", "SIGN", "ABS", "ADD",
        "SUBTRACT", "MULTIPLY", "DIVIDE", "REMAINDER", "MAXIMUM", "MINIMUM", "POWER", "ATAN2",
        "AND", "OR", "XOR", "SHIFT_LEFT", "SHIFT_RIGHT_ARITHMETIC", "SHIFT_RIGHT_LOGICAL",
        "COMPARE", "COMPLEX", "MULHI", "SELECT", "CLAMP", "CONVERT", "BITCAST_CONVERT",
        "STOCHASTIC_CONVERT"),
    "shape": (
        "PARAMETER", "CONSTANT", "IOTA", "BROADCAST", "RESHAPE", "DYNAMIC_RESHAPE", "TRANSPOSE",
        "SLICE", "CONCATENATE", "PAD", "REVERSE", "COPY", "DOMAIN", "OPTIMIZATION_BARRIER",
        "BITCAST", "TUPLE", "GET_TUPLE_ELEMENT", "AFTER_ALL", "ADD_DEPENDENCY",
        "GET_DIMENSION_SIZE", "SET_DIMENSION_SIZE"),
    "indexing": ("DYNAMIC_SLICE", "DYNAMIC_UPDATE_SLICE", "GATHER", "SCATTER"),
    "reduce": ("REDUCE", "REDUCE_WINDOW", "SELECT_AND_SCATTER", "SORT", "TOPK"),
    "linalg": ("DOT", "SCALED_DOT", "RAGGED_DOT", "CONVOLUTION", "CHOLESKY",
               "TRIANGULAR_SOLVE", "FFT"),
    "control": ("FUSION", "CALL", "MAP", "WHILE", "CONDITIONAL", "ASYNC_START", "ASYNC_UPDATE",
                "ASYNC_DONE", "COPY_START", "COPY_DONE", "CUSTOM_CALL", "INFEED", "OUTFEED",
                "COLLECTIVE_REDUCE", "SCAN", "SHUFFLE"),
    "random": ("RNG", "RNG_BIT_GENERATOR", "RNG_GET_AND_UPDATE_STATE"),
    "collective": (
        "PARTITION_ID", "REPLICA_ID", "ALL_REDUCE", "ALL_REDUCE_START", "ALL_REDUCE_DONE",
        "ALL_GATHER", "ALL_GATHER_START", "ALL_GATHER_DONE", "REDUCE_SCATTER", "ALL_TO_ALL",
        "RAGGED_ALL_TO_ALL", "COLLECTIVE_PERMUTE", "COLLECTIVE_PERMUTE_START",
        "COLLECTIVE_PERMUTE_DONE", "COLLECTIVE_BROADCAST"),
    "batch_norm": ("BATCH_NORM_TRAINING", "BATCH_NORM_INFERENCE", "BATCH_NORM_GRAD"),
    "send_recv": ("SEND", "SEND_DONE", "RECV_DONE", "RECV"),
}


def family_table(family: str) -> RuleTable:
    """The RuleTable of ``family`` (its module imported)."""
    return importlib.import_module(f"{_PACKAGE}.{family}").RULES


def _load_family(module: str) -> None:
    """Copy the rules of the family module ``module`` into RULES, refusing an opcode it does
    not own (the owner table and the family's rules must agree)."""
    table: RuleTable = importlib.import_module(module).RULES
    for opcode, rule in table.rules.items():
        owner = RULES.owner_of(opcode)
        if owner != module:
            raise AssertionError(f"{opcode.spelling} has a shape rule in {table.family}, but "
                                 f"checks/registry.py lists it under {owner}")
        dict.__setitem__(RULES, opcode, rule)


RULES: LazyTable = LazyTable(
    {Opcode[name]: f"{_PACKAGE}.{family}" for family, names in FAMILIES.items()
     for name in names},
    _load_family)
"""Opcode -> Rule; an opcode's family is imported on its first lookup."""

