"""Documented XLA:CPU runtime differences and known XLA bugs, each recognized by a classifier.

Each classifier looks at a module whose outputs differ (``oracle_compare.Comparison``) and
says whether every mismatch is explained by one difference written in docs/semantics.md
(section "XLA:CPU runtime differences", each with a minimal module) or by one XLA bug kept
under tests/data/xla_oracle/. ``explain`` returns the class of the first classifier that
accepts, or None: an unexplained disagreement. A classifier accepts only mismatches in outputs
that depend on the construct it names (``_depends``), so one construct cannot excuse a
difference elsewhere in the module.
"""

from __future__ import annotations

from typing import Callable

import ml_dtypes
import numpy as np

from neuron_sim.hlo.ir import HloInstruction, HloModule, dependencies
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.topology import Topology
from neuron_sim.verify.fuzz.oracle_compare import (Comparison, OutputMismatch, compare_leaf,
                                                   inexact_opcodes)
from neuron_sim.xla_cpu.batch import meshes

Classifier = Callable[[HloModule, Topology, Comparison, list, list], bool]

NON_IDENTITY_INIT = "xla: reduce init value not an identity"
FUSED_MULTIPLY_ADD = "xla: fused multiply-add"
SEVERAL_MESHES = "xla bug: several meshes in one module"
MESH_DEVICE_IDS = "xla bug: mesh device_ids dropped"
NAN_DROPPED = "xla: max/min all-reduce drops NaN"
DENORMALS_FLUSHED = "xla: denormals flushed to zero"
BF16_PROMOTED = "xla: bf16 all-reduce in f32"
BF16_ULPS = 8  # a group of up to 8 devices: one rounding per addition on our side
_REDUCING_COLLECTIVES = (Opcode.ALL_REDUCE, Opcode.REDUCE_SCATTER)
FMA_ULPS = 4

_REDUCING_WITH_INIT = (Opcode.REDUCE, Opcode.REDUCE_WINDOW)


def _leaf_roots(module: HloModule, leaf: int) -> list[HloInstruction]:
    root = module.entry.root
    if root.opcode is Opcode.TUPLE and leaf < len(root.operands):
        return [root.operands[leaf]]
    return [root]


def _depends(module: HloModule, mismatches: list[OutputMismatch],
             suspect: Callable[[HloInstruction], bool]) -> bool:
    """Every mismatched output depends on an instruction ``suspect`` accepts."""
    for m in mismatches:
        upstream = dependencies(*_leaf_roots(module, m.leaf), into_calls=True)
        if not any(suspect(inst) for inst in upstream):
            return False
    return True


def _identity(opcode: Opcode, dtype: np.dtype) -> list | None:
    """The values that are an identity of ``opcode`` on ``dtype`` (None: not a monoid op)."""
    if opcode in (Opcode.ADD, Opcode.OR, Opcode.XOR):
        return [0]
    if opcode is Opcode.MULTIPLY:
        return [1]
    if opcode is Opcode.AND:
        return [-1, True, np.iinfo(dtype).max if dtype.kind == "u" else -1]
    if opcode in (Opcode.MAXIMUM, Opcode.MINIMUM):
        if dtype.kind == "b":
            return [opcode is Opcode.MINIMUM]
        info = np.iinfo(dtype) if dtype.kind in "iu" else ml_dtypes.finfo(dtype)
        if opcode is Opcode.MAXIMUM:
            return [info.min] + ([-np.inf] if dtype.kind not in "iu" else [])
        return [info.max] + ([np.inf] if dtype.kind not in "iu" else [])
    return None


def non_identity_init(inst: HloInstruction) -> bool:
    """A reduce or reduce-window whose init value is a constant that is not the identity of
    its combiner. XLA assumes it is one: its algebraic simplifier drops the init of a
    reduction over one element (a reshape) and splits reductions, folding the init in more
    than once or not at all (docs/semantics.md)."""
    if inst.opcode not in _REDUCING_WITH_INIT:
        return False
    body = inst.to_apply
    root = body.root
    if root is None or root.opcode.category.name != "BINARY" or any(
            op.opcode is not Opcode.PARAMETER for op in root.operands):
        return True  # a combiner that is not one binary op: its identity is unknown
    half = len(inst.operands) // 2
    for init in inst.operands[half:]:
        if init.opcode is not Opcode.CONSTANT or init.literal is None:
            return True  # a computed init: nothing says it is the identity
        value = np.asarray(init.literal.value)
        identity = _identity(root.opcode, value.dtype)
        if identity is None:
            return True
        if not any(_same(value, i) for i in identity):
            return True
    return False


def _same(value: np.ndarray, identity) -> bool:
    try:
        return bool(np.all(value.astype(np.float64) == float(identity)))
    except (TypeError, ValueError, OverflowError):
        return False


def _is_fma_candidate(inst: HloInstruction) -> bool:
    """A float add or subtract with an operand that is a float multiply (possibly across a
    call, conditional or fusion boundary, which XLA inlines before LLVM contracts them)."""
    if inst.opcode not in (Opcode.ADD, Opcode.SUBTRACT) or not inst.shape.is_array or \
            not inst.shape.element_type.is_float:
        return False
    products = dependencies(*inst.operands, into_calls=True)
    return any(p.opcode in (Opcode.MULTIPLY, Opcode.DOT) for p in products)


def _fma_sized(comparison: Comparison, ours: list, xla: list) -> bool:
    """Every mismatch is a few ulps of its output's largest magnitude (at least 1)."""
    return _within(comparison, ours, xla, FMA_ULPS)


def _within(comparison: Comparison, ours: list, xla: list, ulps: int) -> bool:
    """Every mismatched output is within ``ulps`` ulps of its largest magnitude (at least 1)
    on each device."""
    for m in comparison.mismatches:
        a = np.asarray(ours[m.leaf]).astype(np.float64)
        b = np.asarray(xla[m.leaf]).astype(np.float64)
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            return False
        eps = float(ml_dtypes.finfo(np.asarray(ours[m.leaf]).dtype).eps)
        axes = tuple(range(1, a.ndim))
        scale = np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)).max(axis=axes, keepdims=True)
                           if axes else np.maximum(np.abs(a), np.abs(b)))
        if np.any(np.abs(a - b) > ulps * eps * scale):
            return False
    return True


def _elements(module: HloModule, comparison: Comparison, ours: list, xla: list):
    """Per mismatched output: (ours, xla, the mask of differing elements)."""
    tolerant = bool(inexact_opcodes(module))
    for m in comparison.mismatches:
        a, b = np.asarray(ours[m.leaf]), np.asarray(xla[m.leaf])
        bad, _ = compare_leaf(a, b, tolerant)
        yield m, a, b, bad


def _reducing_collective(combiner: tuple[Opcode, ...]) -> Callable[[HloInstruction], bool]:
    def suspect(inst: HloInstruction) -> bool:
        if inst.opcode not in _REDUCING_COLLECTIVES and not (
                inst.opcode.spelling.endswith("-start") and
                inst.opcode.spelling[:-6] in ("all-reduce", "reduce-scatter")):
            return False
        root = inst.to_apply.root if inst.has("to_apply") else None
        return root is not None and root.opcode in combiner
    return suspect


def nan_dropped(module: HloModule, topology: Topology, comparison: Comparison,
                ours: list, xla: list) -> bool:
    """Every differing element is a NaN of ours that XLA:CPU's max/min all-reduce lost (it
    folds with std::max / std::min, docs/semantics.md)."""
    for _, a, b, bad in _elements(module, comparison, ours, xla):
        if a.dtype.kind not in "fV" or not np.all(np.isnan(a.astype(np.float64))[bad]):
            return False
    return _depends(module, comparison.mismatches,
                    _reducing_collective((Opcode.MAXIMUM, Opcode.MINIMUM)))


def denormals_flushed(module: HloModule, topology: Topology, comparison: Comparison,
                      ours: list, xla: list) -> bool:
    """Every differing element is a subnormal of ours that XLA:CPU flushed to zero."""
    for _, a, b, bad in _elements(module, comparison, ours, xla):
        info = _float_info(a.dtype)
        if info is None:
            return False
        wa, wb = a.astype(np.float64)[bad], b.astype(np.float64)[bad]
        if not (np.all(np.abs(wa) < float(info.tiny)) and np.all(wb == 0)):
            return False
    return True


def bf16_promoted(module: HloModule, topology: Topology, comparison: Comparison,
                  ours: list, xla: list) -> bool:
    """bf16 outputs within BF16_ULPS of their scale, downstream of a sum all-reduce, which
    XLA:CPU computes in f32 and rounds once (we round after every addition, as HLO says):
    4 partitions holding 256, 1, 1, 1 sum to 256 here and to 260 (259 rounded) there."""
    for m, a, b, bad in _elements(module, comparison, ours, xla):
        if a.dtype != ml_dtypes.bfloat16:
            return False
    if not _depends(module, comparison.mismatches, _reducing_collective((Opcode.ADD,))):
        return False
    return _within(comparison, ours, xla, BF16_ULPS)


def _float_info(dtype: np.dtype):
    try:
        return ml_dtypes.finfo(dtype)
    except (TypeError, ValueError):
        return None


def reduce_init(module: HloModule, topology: Topology, comparison: Comparison,
                ours: list, xla: list) -> bool:
    return _depends(module, comparison.mismatches, non_identity_init)


def fused_multiply_add(module: HloModule, topology: Topology, comparison: Comparison,
                       ours: list, xla: list) -> bool:
    return all(m.dtype not in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                               "uint32", "uint64") for m in comparison.mismatches) and \
        _depends(module, comparison.mismatches, _is_fma_candidate) and \
        _fma_sized(comparison, ours, xla)


def several_meshes(module: HloModule, topology: Topology, comparison: Comparison,
                   ours: list, xla: list) -> bool:
    """XLA bug: with two mesh declarations in one module, XLA:CPU reads a collective's
    mesh-form groups on the other mesh (tests/data/xla_oracle/two_meshes)."""
    if len(meshes(module)) < 2:
        return False
    return _depends(module, comparison.mismatches,
                    lambda inst: "replica_groups=mesh[" in inst.to_text())


def mesh_device_ids(module: HloModule, topology: Topology, comparison: Comparison,
                    ours: list, xla: list) -> bool:
    """XLA bug: the HLO -> StableHLO import drops a mesh's device_ids, so the groups are the
    default mesh's (tests/data/xla_oracle/mesh_device_ids)."""
    return _depends(module, comparison.mismatches,
                    lambda inst: "replica_groups=mesh[" in inst.to_text()
                    and "device_ids=" in inst.to_text())


CLASSIFIERS: dict[str, Classifier] = {
    SEVERAL_MESHES: several_meshes,
    MESH_DEVICE_IDS: mesh_device_ids,
    NAN_DROPPED: nan_dropped,
    DENORMALS_FLUSHED: denormals_flushed,
    BF16_PROMOTED: bf16_promoted,
    NON_IDENTITY_INIT: reduce_init,
    FUSED_MULTIPLY_ADD: fused_multiply_add,
}


def explain(module: HloModule, topology: Topology, comparison: Comparison,
            ours: list[np.ndarray], xla: list[np.ndarray]) -> str | None:
    """The documented difference that explains every mismatch, or None. Each differing output
    may be explained by a different one (a module with a non-identity reduce init and two
    meshes differs in two outputs for two reasons): the class is then the explanations joined
    by " + ", in CLASSIFIERS' order; one output no classifier explains leaves it unexplained."""
    for name, classifier in CLASSIFIERS.items():
        if classifier(module, topology, comparison, ours, xla):
            return name
    found: set[str] = set()
    for mismatch in comparison.mismatches:
        alone = Comparison(comparison.verdict, [mismatch])
        name = next((name for name, classifier in CLASSIFIERS.items()
                     if classifier(module, topology, alone, ours, xla)), None)
        if name is None:
            return None
        found.add(name)
    return " + ".join(name for name in CLASSIFIERS if name in found)
