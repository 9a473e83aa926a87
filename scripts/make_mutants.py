"""Positive control for the verifier: mutants of correct targets must be reported UNSOUND.

A verifier that says CORRECT to everything passes every self-check. This script takes pairs whose
target is known to be correct — the corrected golden pairs in tests/data/verify, the seed passes'
sound rewrites of the bundled examples, and every runnable module of the JAX corpus and the
checker fixtures (checked against itself) — and breaks each target in small, meaning-changing
ways:

=====================  =========================================================================
``constant-ulp``       one element of a constant moves by one ulp (integers by one, pred flips)
``swap-operands``      the operands of a non-commutative op trade places (subtract, divide,
                       compare, shifts, select's branches, concatenate, dot, clamp's bounds)
``reorder-group``      the first two members of an all-gather / reduce-scatter / all-to-all
                       group trade places
``drop-pair``          one source-target pair of a collective-permute disappears
``scatter-dimension``  the dimension an all-to-all splits, or a reduce-scatter / all-gather
                       scatters along, changes (the result shape follows)
``flip-comparison``    a compare's direction is mirrored (LT<->GT, LE<->GE, EQ<->NE)
=====================  =========================================================================

Every mutant is verified against the unmutated source. A mutant that is not UNSOUND is either
equivalent — and the script says why (the mutated instruction does not reach the output, the
swapped operands are equal, a convert absorbs the ulp...) — or a miss of the verifier, listed as
unexplained. The fraction caught is printed; ``--json`` gives every mutant's verdict.

    PYTHONPATH=. python scripts/make_mutants.py                 # all mutants (a few minutes)
    PYTHONPATH=. python scripts/make_mutants.py --limit 60      # an evenly spread sample
    PYTHONPATH=. python scripts/make_mutants.py --write DIR     # also write the mutant pairs
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from neuron_sim.hlo import parse_module_file  # noqa: E402
from neuron_sim.hlo.dtypes import ElementType  # noqa: E402
from neuron_sim.hlo.ir import HloInstruction, HloModule  # noqa: E402
from neuron_sim.hlo.literals import Literal  # noqa: E402
from neuron_sim.hlo.opcodes import Opcode  # noqa: E402
from neuron_sim.hlo.replica_groups import ReplicaGroups, SourceTargetPairs  # noqa: E402
from neuron_sim.hlo.shapes import ArrayShape  # noqa: E402
from neuron_sim.topology import GroupMode, Topology, group_mode  # noqa: E402

OPERATORS = ("constant-ulp", "swap-operands", "reorder-group", "drop-pair",
             "scatter-dimension", "flip-comparison")
TIMEOUT = 1.0             # seconds per execution: a mutant may loop forever
PER_OPERATOR = 3          # mutants per operator per base pair (the first sites in post order)

NON_COMMUTATIVE = {Opcode.SUBTRACT, Opcode.DIVIDE, Opcode.REMAINDER, Opcode.POWER,
                   Opcode.ATAN2, Opcode.SHIFT_LEFT, Opcode.SHIFT_RIGHT_ARITHMETIC,
                   Opcode.SHIFT_RIGHT_LOGICAL, Opcode.COMPARE, Opcode.CONCATENATE, Opcode.DOT,
                   Opcode.SELECT, Opcode.CLAMP}
MIRRORED = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "NE", "NE": "EQ"}
_ORDERED = ("LT", "GT", "LE", "GE")   # mirroring these swaps the operands; EQ <-> NE negates
POSITIONAL = {Opcode.ALL_GATHER, Opcode.ALL_GATHER_START, Opcode.REDUCE_SCATTER,
              Opcode.ALL_TO_ALL}
PERMUTES = {Opcode.COLLECTIVE_PERMUTE, Opcode.COLLECTIVE_PERMUTE_START}


@dataclass
class BasePair:
    name: str
    before: HloModule
    after: HloModule
    topologies: list[str] | None = None


@dataclass
class Mutant:
    id: str
    base: str
    operator: str
    instruction: str
    description: str
    before: HloModule
    after: HloModule
    topologies: list[str] | None = None
    base_after: HloModule | None = None      # the unmutated target
    computation: str = ""                     # where the mutated instruction lives


@dataclass
class Verdict:
    mutant: Mutant
    status: str
    error_line: str | None
    reason: str | None = None           # why a surviving mutant is equivalent
    seconds: float = 0.0
    detail: str = ""

    @property
    def caught(self) -> bool:
        return self.status == "UNSOUND"


# --------------------------------------------------------------------------------------------
# Correct pairs.


def correct_pairs(root: Path = ROOT) -> list[BasePair]:
    """Pairs whose target is known to be correct (each is re-verified before mutating)."""
    from neuron_sim.verify.report import read_pair_file

    pairs: list[BasePair] = []
    for path in sorted((root / "tests" / "data" / "verify").glob("*.hlo")):
        before, after, header = read_pair_file(path)
        if header.get("status") == "CORRECT" and header.get("contract", "exact") == "exact":
            pairs.append(BasePair(f"verify/{path.stem}", before, after,
                                  header.get("topologies", "").split() or None))
    pairs.extend(_sound_pass_rewrites(root))
    manifest = json.loads((root / "tests" / "data" / "jax" / "MANIFEST.json").read_text())
    for entry in manifest:
        if entry.get("runnable"):
            module = parse_module_file(str(root / "tests" / "data" / "jax" / f"{entry['name']}.hlo"))
            pairs.append(BasePair(f"jax/{entry['name']}", module, module.clone()))
    for path in sorted((root / "tests" / "data" / "checker").glob("*.hlo")):
        module = parse_module_file(str(path))
        pairs.append(BasePair(f"checker/{path.stem}", module, module.clone()))
    return pairs


def _sound_pass_rewrites(root: Path) -> list[BasePair]:
    from neuron_sim.verify.api import apply_passes, pass_list

    cases = (("ar_ds_single_group_sorted", "aws_neuron_rewrite_all_reduce_dynamic_slice"),
             ("ar_ds_multi_group_contiguous",
              "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups"),
             ("delete_permute_singleton_groups", "aws_neuron_delete_permute"))
    pairs = []
    for example, key in cases:
        module = parse_module_file(str(root / "examples" / f"{example}.hlo"))
        after, changed, _ = apply_passes(module, pass_list(key))
        if changed:
            pairs.append(BasePair(f"examples/{example}+{key}", module, after))
    return pairs


# --------------------------------------------------------------------------------------------
# Mutation operators. Each yields (instruction name, description, edit) where edit mutates a
# clone of the target in place; an edit that raises is skipped.

Edit = Callable[[HloModule], None]


def _instructions(module: HloModule) -> Iterator[HloInstruction]:
    for comp in module.post_order_computations():
        yield from comp.post_order()


def _find(module: HloModule, computation: str, name: str) -> HloInstruction:
    return module.computation(computation).instruction(name)


def _one_ulp(value: np.ndarray, element_type: ElementType) -> np.ndarray | None:
    """``value`` with its first element moved by one ulp (or by one, or flipped)."""
    flat = np.array(value).reshape(-1).copy()
    if flat.size == 0:
        return None
    if flat.dtype == np.bool_:
        flat[0] = not flat[0]
    elif element_type.is_integral:
        info = ml_dtypes.iinfo(flat.dtype)
        flat[0] = flat[0] + 1 if int(flat[0]) < int(info.max) else flat[0] - 1
    elif flat.dtype.kind == "c":
        flat[0] = complex(np.nextafter(flat[0].real, np.inf), flat[0].imag)
    else:
        wide = float(flat[0].astype(np.float64))
        if not np.isfinite(wide):
            return None
        bits = flat[:1].view(np.dtype(f"u{flat.dtype.itemsize}"))
        bits[0] += 1   # one ulp away from zero (or to the smallest subnormal)
    return flat.reshape(np.shape(value))


def constant_ulp(module: HloModule) -> Iterator[tuple[str, str, str, Edit]]:
    for inst in _instructions(module):
        if inst.opcode is not Opcode.CONSTANT or inst.literal is None or inst.literal.is_elided \
                or not isinstance(inst.shape, ArrayShape) or not inst.shape.is_array:
            continue
        try:
            value = np.asarray(inst.literal.value)
        except Exception:  # noqa: BLE001 - a literal we cannot read is not mutated
            continue
        new = _one_ulp(value, inst.shape.element_type)
        if new is None:
            continue
        comp, name, shape = inst.parent.name, inst.name, inst.shape

        def edit(m: HloModule, comp=comp, name=name, shape=shape, new=new) -> None:
            _find(m, comp, name).literal = Literal.from_array(shape, new)

        old_text = inst.literal.text if len(inst.literal.text) < 40 else "..."
        yield comp, name, f"%{name} = constant({old_text}): first element moved by one ulp", edit


def swap_operands(module: HloModule) -> Iterator[tuple[str, str, str, Edit]]:
    for inst in _instructions(module):
        if inst.opcode not in NON_COMMUTATIVE:
            continue
        if inst.opcode is Opcode.COMPARE and inst.get("direction") in ("EQ", "NE"):
            continue
        i, j = (1, 2) if inst.opcode is Opcode.SELECT else (0, 2) \
            if inst.opcode is Opcode.CLAMP else (0, 1)
        if len(inst.operands) <= j or inst.operand(i) is inst.operand(j):
            continue
        if inst.operand(i).shape != inst.operand(j).shape:
            continue
        comp, name = inst.parent.name, inst.name

        def edit(m: HloModule, comp=comp, name=name, i=i, j=j) -> None:
            target = _find(m, comp, name)
            a, b = target.operand(i), target.operand(j)
            target.set_operand(i, b)
            target.set_operand(j, a)

        yield comp, name, f"%{name} ({inst.opcode.spelling}): operands {i} and {j} swapped", edit


def _explicit_groups(inst: HloInstruction, topology: Topology) -> list[list[int]] | None:
    groups = inst.replica_groups
    if groups is not None and groups.groups:
        return [list(g) for g in groups.groups]
    mode = group_mode(inst.opcode.spelling, inst.channel_id is not None,
                      inst.use_global_device_ids)
    count = {GroupMode.CROSS_PARTITION: topology.num_partitions,
             GroupMode.FLATTENED_ID: topology.num_devices}.get(mode, topology.replica_count)
    return [list(range(count))]


def reorder_group(module: HloModule) -> Iterator[tuple[str, str, str, Edit]]:
    topology = Topology(module.replica_count, module.num_partitions)
    for inst in _instructions(module):
        if inst.opcode not in POSITIONAL:
            continue
        groups = _explicit_groups(inst, topology)
        if not groups or len(groups[0]) < 2:
            continue
        groups[0][0], groups[0][1] = groups[0][1], groups[0][0]
        new = ReplicaGroups.explicit(groups)
        comp, name = inst.parent.name, inst.name

        def edit(m: HloModule, comp=comp, name=name, new=new) -> None:
            _find(m, comp, name).set_attr("replica_groups", new)

        yield comp, name, f"%{name}: groups reordered to {new.to_text()}", edit


def drop_pair(module: HloModule) -> Iterator[tuple[str, str, str, Edit]]:
    for inst in _instructions(module):
        if inst.opcode not in PERMUTES:
            continue
        pairs = inst.get("source_target_pairs")
        if pairs is None or not pairs.pairs:
            continue
        for k, pair in enumerate(pairs.pairs):
            new = SourceTargetPairs(pairs.pairs[:k] + pairs.pairs[k + 1:])
            comp, name = inst.parent.name, inst.name

            def edit(m: HloModule, comp=comp, name=name, new=new) -> None:
                _find(m, comp, name).set_attr("source_target_pairs", new)

            yield comp, name, f"%{name}: pair {{{pair[0]},{pair[1]}}} dropped", edit


def scatter_dimension(module: HloModule) -> Iterator[tuple[str, str, str, Edit]]:
    for inst in _instructions(module):
        if inst.opcode not in (Opcode.ALL_TO_ALL, Opcode.REDUCE_SCATTER, Opcode.ALL_GATHER) \
                or len(inst.dimensions) != 1 or inst.shape.is_tuple:
            continue
        operand_dims = list(inst.operand(0).shape.dims)
        d = inst.dimensions[0]
        if operand_dims[d] == inst.shape.dims[d] and inst.opcode is not Opcode.ALL_TO_ALL:
            continue
        factor = (operand_dims[d] // inst.shape.dims[d]) if inst.opcode is Opcode.REDUCE_SCATTER \
            else (inst.shape.dims[d] // max(1, operand_dims[d]))
        for other in range(len(operand_dims)):
            if other == d:
                continue
            dims = list(operand_dims)
            if inst.opcode is Opcode.REDUCE_SCATTER:
                if dims[other] % factor:
                    continue
                dims[other] //= factor
            elif inst.opcode is Opcode.ALL_GATHER:
                dims[other] *= factor
            new_shape = inst.shape.with_dims(tuple(dims))
            comp, name = inst.parent.name, inst.name

            def edit(m: HloModule, comp=comp, name=name, other=other, new_shape=new_shape) -> None:
                target = _find(m, comp, name)
                target.set_attr("dimensions", (other,))
                target.shape = new_shape

            yield comp, name, f"%{name}: dimensions={{{d}}} -> {{{other}}}", edit
            break


def flip_comparison(module: HloModule) -> Iterator[tuple[str, str, str, Edit]]:
    for inst in _instructions(module):
        if inst.opcode is not Opcode.COMPARE or inst.get("direction") not in MIRRORED:
            continue
        new = MIRRORED[inst.get("direction")]
        comp, name = inst.parent.name, inst.name

        def edit(m: HloModule, comp=comp, name=name, new=new) -> None:
            _find(m, comp, name).set_attr("direction", new)

        yield comp, name, f"%{name}: direction={inst.get('direction')} -> {new}", edit


GENERATORS = {"constant-ulp": constant_ulp, "swap-operands": swap_operands,
              "reorder-group": reorder_group, "drop-pair": drop_pair,
              "scatter-dimension": scatter_dimension, "flip-comparison": flip_comparison}


def mutants_of(base: BasePair, per_operator: int = PER_OPERATOR) -> Iterator[Mutant]:
    for operator in OPERATORS:
        made = 0
        sites: dict[str, int] = {}
        for comp, name, description, edit in GENERATORS[operator](base.after):
            if made >= per_operator:
                break
            after = base.after.clone()
            try:
                edit(after)
            except Exception:  # noqa: BLE001 - an edit the IR refuses makes no mutant
                continue
            made += 1
            site = f"{comp}/{name}"
            sites[site] = sites.get(site, 0) + 1
            suffix = f"#{sites[site]}" if sites[site] > 1 else ""
            yield Mutant(f"{base.name}:{operator}:{site}{suffix}", base.name, operator, name,
                         description, base.before, after, base.topologies, base.after, comp)


# --------------------------------------------------------------------------------------------
# Why a surviving mutant is equivalent.


def _reaches_root(module: HloModule, target: HloInstruction) -> bool:
    """Does ``target`` influence the entry's root?"""
    callers = module.callers()
    frontier = [target]
    seen: set[HloInstruction] = set()
    while frontier:
        inst = frontier.pop()
        if inst in seen:
            continue
        seen.add(inst)
        if inst.parent is module.entry and inst is module.entry.root:
            return True
        frontier.extend(inst.users)
        if inst.parent is not None and inst is inst.parent.root:
            frontier.extend(callers.get(inst.parent, []))
    return False


def _same_value(a: HloInstruction, b: HloInstruction) -> bool:
    if a.opcode is Opcode.CONSTANT and b.opcode is Opcode.CONSTANT and a.literal and b.literal:
        try:
            return a.shape == b.shape and np.array_equal(np.asarray(a.literal.value),
                                                         np.asarray(b.literal.value))
        except Exception:  # noqa: BLE001
            return False
    if a.opcode is b.opcode and a.opcode is not Opcode.PARAMETER and \
            len(a.operands) == len(b.operands) and a.attrs == b.attrs and a.shape == b.shape:
        return all(x is y or _same_value(x, y) for x, y in zip(a.operands, b.operands))
    return False


def _device_invariant(inst: HloInstruction, depth: int = 0) -> bool:
    """True if ``inst`` computes the same value on every device (no parameters, ids or
    collectives below it)."""
    if depth > 64:
        return False
    if inst.opcode in (Opcode.PARAMETER, Opcode.PARTITION_ID, Opcode.REPLICA_ID,
                       Opcode.RNG, Opcode.RNG_BIT_GENERATOR) or inst.opcode.is_collective:
        return False
    return all(_device_invariant(o, depth + 1) for o in inst.operands)


def _depends_only_on_ids(inst: HloInstruction, callers: dict, seen: set | None = None) -> bool:
    """True if ``inst`` is a function of constants, iota and device ids alone (through fusion and
    call parameters) — no entry parameter, no collective, no randomness."""
    seen = set() if seen is None else seen
    if inst in seen:
        return True
    seen.add(inst)
    if inst.opcode in (Opcode.RNG, Opcode.RNG_BIT_GENERATOR, Opcode.RNG_GET_AND_UPDATE_STATE) \
            or inst.opcode.is_collective:
        return False
    if inst.opcode is Opcode.PARAMETER:
        comp = inst.parent
        users = callers.get(comp, [])
        if comp is None or not users:
            return False
        for caller in users:
            if caller.opcode not in (Opcode.FUSION, Opcode.CALL) or \
                    caller.parent is None:
                return False
            if not _depends_only_on_ids(caller.operand(inst.parameter_number), callers, seen):
                return False
        return True
    return all(_depends_only_on_ids(o, callers, seen) for o in inst.operands)


def _entry_ancestors(module: HloModule, inst: HloInstruction) -> list[HloInstruction] | None:
    """The entry instructions through which ``inst`` can affect anything (itself if it is in the
    entry computation; the fusions / calls that call its computation otherwise)."""
    callers = module.callers()
    found: list[HloInstruction] = []
    frontier = [inst]
    seen: set[HloInstruction] = set()
    while frontier:
        node = frontier.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.parent is module.entry:
            found.append(node)
            continue
        users = callers.get(node.parent, [])
        if not users or any(u.opcode not in (Opcode.FUSION, Opcode.CALL) for u in users):
            return None
        frontier.extend(users)
    return found


def _same_on_every_device(mutant: Mutant, target: HloInstruction) -> str | None:
    """A proof of equivalence where one exists cheaply: every entry instruction through which
    the mutation acts depends only on constants and device ids, and computes bit for bit the
    same value before and after the mutation on every device (so on its whole domain)."""
    import neuron_sim.interpreter as interpreter
    from neuron_sim.verify.compare import equal_mask
    from neuron_sim.verify.inputs import generate_inputs

    base_after = mutant.base_after
    ancestors = _entry_ancestors(mutant.after, target)
    if not ancestors or base_after is None:
        return None
    callers = mutant.after.callers()
    if not all(_depends_only_on_ids(a, callers) for a in ancestors):
        return None
    topologies = [Topology.parse(t) for t in mutant.topologies] if mutant.topologies else \
        [Topology(mutant.after.replica_count, mutant.after.num_partitions)]
    for topology in topologies:
        inputs = generate_inputs(mutant.after, topology, seed=0)
        for ancestor in ancestors:
            values = []
            for module in (base_after, mutant.after):
                probe = module.clone()
                probe.entry.root = probe.entry.instruction(ancestor.name)
                try:
                    values.append(interpreter.run(probe, inputs, topology=topology, seed=0))
                except Exception:  # noqa: BLE001 - no proof
                    return None
            if len(values[0]) != len(values[1]) or not all(
                    a.shape == b.shape and equal_mask(a, b).all()
                    for a, b in zip(values[0], values[1])):
                return None
    names = ", ".join(f"%{a.name}" for a in ancestors)
    return (f"the mutation acts only through {names}, a function of constants and device ids "
            "alone that computes the same value before and after on every device")


def equivalence_reason(mutant: Mutant) -> str | None:
    """Why the mutant cannot change the result, when the script can tell; None otherwise."""
    module = mutant.after
    try:
        target = module.computation(mutant.computation).instruction(mutant.instruction)
    except KeyError:
        return None
    if not _reaches_root(module, target):
        return f"%{mutant.instruction} does not reach the output (dead code)"
    proof = _same_on_every_device(mutant, target)
    if proof is not None:
        return proof
    if mutant.operator == "swap-operands":
        i, j = (1, 2) if target.opcode is Opcode.SELECT else (0, 2) \
            if target.opcode is Opcode.CLAMP else (0, 1)
        if _same_value(target.operand(i), target.operand(j)):
            return "the swapped operands compute the same value"
        if target.opcode is Opcode.SELECT and _device_invariant(target.operand(0)):
            pred = target.operand(0)
            if pred.opcode is Opcode.BROADCAST and pred.operand(0).opcode is Opcode.CONSTANT \
                    or pred.opcode is Opcode.CONSTANT:
                return None
    if mutant.operator == "flip-comparison" and target.get("direction") in _ORDERED and \
            (target.operand(0) is target.operand(1) or
             _same_value(target.operand(0), target.operand(1))):
        return "mirroring a comparison swaps its operands, which are the same value"
    if mutant.operator == "constant-ulp":
        users = list(target.users)
        if users and all(u.opcode is Opcode.CONVERT and
                         u.shape.element_type.bits < target.shape.element_type.bits
                         for u in users):
            return "every user converts the constant to a narrower type, which absorbs one ulp"
    if mutant.operator in ("reorder-group", "scatter-dimension") and \
            _device_invariant(target.operand(0)) and mutant.operator == "reorder-group":
        return "the operand is the same on every device, so group positions do not matter"
    if mutant.operator == "drop-pair" and _device_invariant(target.operand(0)):
        operand = target.operand(0)
        if operand.opcode is Opcode.CONSTANT and operand.literal is not None and \
                not np.any(np.asarray(operand.literal.value)):
            return "the permuted value is zero, which is what a dropped target receives"
    return None


# --------------------------------------------------------------------------------------------
# Survivors analysed by hand. Each was also run with 900 input sets without a difference
# (KNOWN_EQUIVALENT), or is shown meaning-changing with the input it needs (KNOWN_MISSES).

_CLAMPED_OFFSET = ("the offset is ((partition >> 2) & 1) * 4, i.e. 0 or 4; dynamic-slice clamps "
                   "every start to [0, 8 - 4], so the mutated 0 / 5 / 12 read the same window")
_DOUBLE_WRAP = ("JAX's floor-mod lowering wraps a negative remainder twice (%and/%select_n, then "
                "%lt/%select_n); with the first wrap disabled or its sign test mirrored the second "
                "one (or the two's-complement `& (n-1)` identity) gives the same index")
_INIT_INDEX = ("the reduction's initial index wins only a tie with the initial value, and ties "
               "go to the smaller index: element 0 (index 0) is in every reduced row, so an "
               "initial index of 0 or 1 never shows")
_SUM_INIT_SUBNORMAL = ("a sum's initial 0 becomes the smallest f32 subnormal (2^-149); the sum "
                       "of bf16 values is a multiple of 2^-133, so converting to bf16 rounds the "
                       "2^-149 away")
_SOFTMAX_SUM_INIT = ("the sum of exp(x - max) includes exp(0) = 1 for a finite max, which "
                     "absorbs 2^-149, and is NaN or infinite otherwise")
_TRUNC_ZERO = ("trunc(x) = x < c ? ceil(x) : floor(x) with c = 0 or the smallest subnormal: they "
               "differ only at x = +-0, where ceil and floor agree")

_SELF_COMPARE_SCALE = ("x * 2 becomes x * (2 + 2^-22) before a comparison of the product with "
                       "itself, which depends only on whether the product is NaN; for a finite "
                       "nonzero factor x * c is NaN exactly when x is")
_MAX_BOUND_ROUNDED = ("max(x, 0.5) - 2 becomes max(x, 0.5 + 2^-24) - 2: no float lies between the "
                      "bounds, so they differ only for x <= 0.5, where -1.5 + 2^-24 is a tie "
                      "between -1.5 and -1.5 + 2^-23 and rounds to the even -1.5; NaN propagates "
                      "either way")
_CLAMPED_START = ("a dynamic-(update-)slice start is clamped to [0, dim - size]; the constant "
                  "start and its mutant are both at or past that bound (6, 7 -> 4 = 6 - 2; "
                  "7, 8 and 50, 51 -> 5 = 8 - 3; 1, 2 -> 1 = 3 - 2), so the same window is used")
_UNREAD_ELEMENT = ("element 0 of the constant (1.5) lies outside both slices taken of it ([1:9] "
                   "and [9:16]), its only readers")
_MAX_OF_PLACED = ("the start index only places u in an all -inf buffer of which %fused_computation.1 "
                  "returns the maximum alone: the clamped start writes all of u wherever it lands, "
                  "and max(u, -inf, ...) does not depend on the position")

KNOWN_EQUIVALENT: dict[str, str] = {
    "jax/lowered_argcond_argmax:constant-ulp:argmax.2/constant.2": _INIT_INDEX,
    "jax/lowered_argcond_argmax:constant-ulp:argmax_0.4/constant.6": _INIT_INDEX,
    "jax/lowered_argcond_argmax:constant-ulp:argmin.6/constant.10": _INIT_INDEX,
    "jax/compiled_argcond_argmax:constant-ulp:fused_computation/constant.53": _INIT_INDEX,
    "jax/compiled_argcond_argmax:constant-ulp:fused_computation.1/constant.54": _INIT_INDEX,
    "jax/spmd_argcond_argmax:constant-ulp:fused_computation/constant.9.clone.2": _INIT_INDEX,
    "jax/spmd_argcond_argmax:constant-ulp:fused_computation.1/constant.9.clone.3": _INIT_INDEX,
    "jax/lowered_argcond_switch:constant-ulp:region_2.3/constant.9": _MAX_BOUND_ROUNDED,
    "jax/compiled_argcond_switch:constant-ulp:fused_computation.2/constant.28": _MAX_BOUND_ROUNDED,
    "jax/lowered_canon_self_compare:constant-ulp:main.2/constant.7": _SELF_COMPARE_SCALE,
    "jax/compiled_canon_self_compare:constant-ulp:fused_computation/constant.2":
        _SELF_COMPARE_SCALE,
    "jax/compiled_canon_self_compare:constant-ulp:fused_computation.1/constant.3":
        _SELF_COMPARE_SCALE,
    "jax/compiled_canon_self_compare:constant-ulp:fused_computation.2/constant.8":
        _SELF_COMPARE_SCALE,
    "jax/lowered_canon_dynamic_slice_constant_starts:constant-ulp:main.1/constant.9":
        _CLAMPED_START,
    "jax/compiled_canon_dynamic_slice_constant_starts:constant-ulp:main.1/constant.6":
        _CLAMPED_START,
    "jax/compiled_canon_dynamic_slice_constant_starts:constant-ulp:main.1/constant.7":
        _CLAMPED_START,
    "jax/compiled_canon_reshaped_dynamic_slice:constant-ulp:fused_computation/constant.1":
        _CLAMPED_START,
    "jax/lowered_canon_convert_constant_slice:constant-ulp:main.2/constant.7":
        "the first element -2.5 becomes -2.5000002; its only reader converts it to s32, which "
        "truncates both to -2",
    "jax/lowered_canon_convert_constant_slice:constant-ulp:main.2/constant.6": _UNREAD_ELEMENT,
    "jax/compiled_canon_convert_constant_slice:constant-ulp:main.2/constant.6": _UNREAD_ELEMENT,
    "jax/lowered_rng_uniform_s32:constant-ulp:main.3/constant.9":
        "rng_uniform draws from [3, 9) or [4, 9); the draws are used only through 3 <= r < 9, "
        "true for both, so the outputs are x, x and 16 either way",
    "jax/spmd_scatter_partition_ring_1d:swap-operands:fused_computation/compare.3": _DOUBLE_WRAP,
    "jax/spmd_scatter_partition_ring_1d:flip-comparison:fused_computation/compare.3": _DOUBLE_WRAP,
    "jax/spmd_scatter_partition_ring_1d:flip-comparison:fused_computation/ne.22": _DOUBLE_WRAP,
    "jax/spmd_scatter_partition_ring_y_2x4:swap-operands:fused_computation/compare.3":
        _DOUBLE_WRAP,
    "jax/spmd_scatter_partition_ring_y_2x4:flip-comparison:fused_computation/compare.3":
        _DOUBLE_WRAP,
    "jax/spmd_scatter_partition_ring_y_2x4:flip-comparison:fused_computation/ne.22": _DOUBLE_WRAP,
    "jax/spmd_scatter_partition_psum_1d:constant-ulp:fused_computation/constant.14.clone.2":
        "the index is partition-id & 7 converted to s32, in [0, 7]: the `< 0` wrap that adds "
        "the constant 8 never fires",
    "jax/lowered_rmc_where_max_softmax:constant-ulp:main.5/constant.4": _SOFTMAX_SUM_INIT,
    "jax/compiled_rmc_where_max_softmax:constant-ulp:fused_computation.1/constant.1":
        _SOFTMAX_SUM_INIT,
    "jax/compiled_rmc_dus_neg_inf_buffer:constant-ulp:fused_computation.1/constant.1":
        _MAX_OF_PLACED,
    "jax/compiled_rmc_dus_neg_inf_buffer:constant-ulp:fused_computation.1/constant.0":
        _MAX_OF_PLACED,
    "jax/compiled_rmc_dus_neg_inf_buffer:swap-operands:fused_computation.1/lt.0": _MAX_OF_PLACED,
    "jax/compiled_rmc_dus_neg_inf_buffer:swap-operands:fused_computation.1/select_n.0":
        _MAX_OF_PLACED,
    "jax/compiled_rmc_dus_neg_inf_buffer:flip-comparison:fused_computation.1/lt.0":
        _MAX_OF_PLACED,
    "jax/spmd_ar_ds_x_2x4:constant-ulp:fused_computation/constant.2.clone.2": _CLAMPED_OFFSET,
    "jax/spmd_ar_ds_x_2x4:swap-operands:fused_computation/lt.4": _CLAMPED_OFFSET,
    "jax/spmd_ar_ds_x_2x4:flip-comparison:fused_computation/lt.4": _CLAMPED_OFFSET,
    "jax/compiled_gather_take:flip-comparison:fused_computation/ne.6": _DOUBLE_WRAP,
    "jax/compiled_const_table:swap-operands:fused_computation/compare.1": _DOUBLE_WRAP,
    "jax/compiled_const_table:flip-comparison:fused_computation/compare.1": _DOUBLE_WRAP,
    "jax/compiled_const_table:flip-comparison:fused_computation/ne.6": _DOUBLE_WRAP,
    "jax/lowered_const_table:constant-ulp:remainder.2/constant.10":
        "the divisor is the constant 4: `d == 0` / `d == 1` and `d < 0` / `d < 1` agree for it",
    "jax/lowered_const_table:constant-ulp:remainder.2/constant.9":
        "the fallback divisor (1 -> 2) is used only when the divisor is 0; it is the constant 4",
    "jax/lowered_argmax:constant-ulp:argmax.2/constant.2": _INIT_INDEX,
    "jax/lowered_argmax:constant-ulp:argmin.4/constant.6": _INIT_INDEX,
    "jax/compiled_argmax:constant-ulp:fused_computation/constant.13": _INIT_INDEX,
    "jax/compiled_argmax:constant-ulp:fused_computation.1/constant.15": _INIT_INDEX,
    "jax/lowered_bf16_arith:constant-ulp:main.2/constant.5": _SUM_INIT_SUBNORMAL,
    "jax/compiled_bf16_arith:constant-ulp:fused_computation.2/constant.6": _SUM_INIT_SUBNORMAL,
    "jax/compiled_bf16_arith:constant-ulp:fused_computation.3/constant.7":
        "x * 0.25 is exact for a bf16 x; one more f32 ulp in the factor is rounded away by the "
        "convert to bf16, except below the subnormal midpoint, where exp() returns 1 either way",
    "jax/lowered_cumsum:swap-operands:region_4.9/sub.1":
        "logaddexp uses a - b only through abs() and a NaN test; IEEE b - a is exactly -(a - b)",
    "jax/compiled_cumsum:swap-operands:region_4.9/sub.1":
        "logaddexp uses a - b only through abs() and a NaN test; IEEE b - a is exactly -(a - b)",
    "jax/lowered_softmax:constant-ulp:log_softmax.5/constant.8": _SOFTMAX_SUM_INIT,
    "jax/lowered_softmax:constant-ulp:main.8/constant.10":
        "the fallback shift for a non-finite row maximum (0 -> 2^-149) changes nothing: exp of "
        "x - 2^-149 equals exp(x), and log(sum) is then +-inf or NaN, absorbing the 2^-149",
    "jax/compiled_softmax:constant-ulp:main.8/constant.10": _SOFTMAX_SUM_INIT,
    "jax/lowered_rounding:constant-ulp:trunc.3/constant.1": _TRUNC_ZERO,
    "jax/compiled_rounding:constant-ulp:fused_computation/constant.2": _TRUNC_ZERO,
    "checker/collectives_variants:reorder-group:main/ag_flat":
        "%ag_flat gathers %ar_uneven, which devices 0 and 1 hold equal (both are in its "
        "all-reduce group {0,1,2}): swapping their positions swaps two equal blocks",
    "checker/collectives_variants:drop-pair:main/ring#2":
        "pair {1,2} feeds partition 2, whose value reaches the output only through %cps, which "
        "sends from partitions 0 and 1 only",
    "checker/collectives_variants:drop-pair:main/ring#3":
        "pair {2,3} feeds partition 3, whose value reaches the output only through %cps, which "
        "sends from partitions 0 and 1 only",
    "checker/elementwise_chain:constant-ulp:main/lo":
        "the clamp bound -1 becomes -1.0000001; it reaches the output only through %conv "
        "(convert to s32), which truncates both to -1",
    "checker/elementwise_chain:swap-operands:main/atan2":
        "%exp only reaches the output where %total is false (x >= y), where clamp(x, ., y) "
        "returns y whatever it clamps, or where it is NaN, which atan2 is for the same inputs "
        "in either operand order",
    "checker/elementwise_chain:swap-operands:main/lt":
        "%lt only matters where %total is false (x >= y), where clamp(x, ., y) returns y "
        "whatever it clamps (NaN operands give NaN either way)",
    "checker/elementwise_chain:flip-comparison:main/lt":
        "%lt only matters where %total is false (x >= y), where clamp(x, ., y) returns y "
        "whatever it clamps (NaN operands give NaN either way)",
}

KNOWN_MISSES: dict[str, str] = {
    "jax/compiled_argcond_argmax:constant-ulp:fused_computation.2/constant.56":
        "needs all 15 values INT_MIN or INT_MIN + 1 with the first INT_MIN + 1 after position 0 "
        "(given i = INT_MIN but i[0, 1] = INT_MIN + 1, the index is 1 against 0)",
    "jax/lowered_argcond_cond:constant-ulp:region_6.7/constant.11":
        "needs x[0, 0] < -100, which takes the x + 10 branch (found with 21 input sets; "
        "given x[0, 0] = -101 it is caught)",
    "jax/compiled_argcond_cond:constant-ulp:fused_computation.2/constant.6":
        "needs x[0, 0] < -100, which takes the x + 10 branch (found with 42 input sets; "
        "given x[0, 0] = -101 it is caught)",
    "jax/spmd_argcond_cond_psum:constant-ulp:main.0_spmd/constant.1.clone.1":
        "needs a device whose shard is all zeros while the shards sum to exactly 0 (given "
        "device 0 zeros and the others [[1, -1, 0], [0, 0, 0]], the 2^-149 takes the other "
        "branch: 7 against 0)",
    "jax/spmd_argcond_cond_psum:constant-ulp:fused_computation.1/constant.1.clone.2":
        "needs the shards to sum to exactly 2^-149 (given that, `> 0` and `> 2^-149` take "
        "different branches)",
    "jax/named_sum_1d:constant-ulp:main.0_spmd/constant.0.clone":
        "needs a column that is zero on every device (given all zeros: 8 x 2^-149 against 0)",
    "jax/named_sum_2x2x2_ac:constant-ulp:main.0_spmd/constant.0.clone":
        "needs a column that is zero on every device of a group (given all zeros: "
        "2 x 2^-149 against 0)",
    "jax/named_sum_b_4x2:constant-ulp:main.0_spmd/constant.0.clone":
        "needs a row whose sum stays exactly 0 on both devices of a group (found with 56 input "
        "sets)",
    "jax/compiled_canon_reshaped_dynamic_slice:constant-ulp:fused_computation/constant.2":
        "needs i in [-4, -2] (the verifier draws scalar integers from {-1, 0, 1} half the time); given i = -3 it is caught",
    "jax/lowered_rmc_dus_neg_inf_buffer:constant-ulp:main.3/constant.4":
        "needs start in [-8, -4] (the verifier draws scalar integers from {-1, 0, 1} half the time); given start = -5 it is caught",
    "jax/lowered_rng_uniform_f32:constant-ulp:main.2/constant.9":
        "needs an rng draw in [-1.5 - 2^-23, -1.5), which only the mutant's range holds "
        "(about 3e-8 per element; the draws are not an input)",
    "jax/lowered_rng_uniform_f32:constant-ulp:main.2/constant.10":
        "needs an rng draw in [2, 2 + 2^-22), which only the mutant's range holds (about 7e-8 "
        "per element; the draws are not an input)",
    "jax/lowered_weights_mlp:constant-ulp:main.1/constant.1":
        "relu's 0 becomes 2^-149, which a non-positive hidden unit passes on as 2^-149 x w2 "
        "(found with 42 input sets)",
    "jax/compiled_weights_mlp:constant-ulp:fused_computation.3/constant.0":
        "relu's 0 becomes 2^-149, which a non-positive hidden unit passes on as 2^-149 x w2 "
        "(found with 42 input sets)",
    "jax/lowered_dst_transpose_dynamic_slice:swap-operands:main.1/lt.9":
        "needs starts[1] in [-2, -1] (found with 14 input sets)",
    "jax/lowered_dst_transpose_dynamic_slice:flip-comparison:main.1/lt.9":
        "needs starts[1] in [-2, -1] (found with 14 input sets)",
    "jax/compiled_dst_transpose_dynamic_slice:constant-ulp:fused_computation/constant.2":
        "needs starts[7] in [-4, -3] (found with 14 input sets)",
    "jax/compiled_dst_transpose_dynamic_slice:constant-ulp:fused_computation/constant.1":
        "needs starts[6] = -5 (found with 56 input sets)",
    "jax/compiled_argmax:constant-ulp:fused_computation/constant.12":
        "needs a column whose maximum is INT_MIN + 1, first reached after row 0",
    "jax/lowered_argmax:constant-ulp:argmax_0.6/constant.11":
        "needs a column whose maximum is INT_MIN + 1, first reached after row 0",
    "jax/compiled_sort_multi:constant-ulp:region_0.1/constant.2":
        "needs two negative float keys one ulp apart under equal integer keys",
    "jax/lowered_clamp_select:constant-ulp:main.2/constant.12":
        "needs x equal to the smallest subnormal (found with 21 input sets)",
    "jax/compiled_dynamic_slice_oob:constant-ulp:fused_computation.2/constant.2":
        "needs the start index 0 in one of two scalar positions (found with 14 input sets)",
    "jax/named_max_int_1d:constant-ulp:main.0_spmd/constant.0.clone":
        "needs a column whose 16 values (over all 8 shards) are all INT_MIN",
    "jax/named_sum_all_4x2:constant-ulp:main.0_spmd/constant.0.clone":
        "needs every shard to sum to exactly 0 (all zeros give 8 x 2^-149 instead of 0, which "
        "the free-order-reduction tolerance, 64 ulps of 1, accepts)",
    "jax/named_sum_2x2x2_ca:constant-ulp:main.0_spmd/constant.0.clone":
        "needs shard rows that sum to exactly 0 (all zeros give 2 x 2^-149 instead of 0, which "
        "the free-order-reduction tolerance, 64 ulps of 1, accepts)",
    "checker/elementwise_chain:swap-operands:main/pow":
        "needs x + y > 0 with y < x + y, among others (found with 14 input sets)",
    "checker/elementwise_chain:flip-comparison:main/total":
        "needs x < y in total order with the clamp and truncation keeping the difference "
        "(found with 120 input sets)",
}


# --------------------------------------------------------------------------------------------
# Running.


def verify_mutant(mutant: Mutant, trials: int, runner=None) -> Verdict:
    from neuron_sim.verify.api import VerifyOptions, check_modules

    start = time.perf_counter()
    result = check_modules(mutant.before, mutant.after, mutant.topologies,
                           VerifyOptions(trials=trials, minimize=False, runner=runner,
                                         timeout=TIMEOUT))
    verdict = Verdict(mutant, result.status.value, result.error_line,
                      seconds=time.perf_counter() - start, detail=result.detail)
    if not verdict.caught:
        verdict.reason = equivalence_reason(mutant) or KNOWN_EQUIVALENT.get(mutant.id)
        if verdict.reason is None and mutant.id in KNOWN_MISSES:
            verdict.detail = f"known miss: {KNOWN_MISSES[mutant.id]}"
    return verdict


def verified_bases(pairs: Sequence[BasePair], trials: int, runner=None
                   ) -> tuple[list[BasePair], list[tuple[BasePair, str]]]:
    """The pairs that verify CORRECT (mutating anything else proves nothing), and the rest."""
    from neuron_sim.verify.api import VerifyOptions, check_modules

    good, skipped = [], []
    for pair in pairs:
        result = check_modules(pair.before, pair.after, pair.topologies,
                               VerifyOptions(trials=trials, minimize=False, runner=runner,
                                             timeout=TIMEOUT))
        if result.status.value == "CORRECT":
            good.append(pair)
        else:
            skipped.append((pair, f"{result.status.value}: {result.error_line or ''} "
                                  f"{result.detail}".strip()))
    return good, skipped


def sample(mutants: list[Mutant], limit: int | None) -> list[Mutant]:
    """``limit`` mutants spread evenly over the list: every operator gets an equal share (or
    all it has), taken at evenly spaced positions so that many base pairs appear."""
    if limit is None or limit >= len(mutants):
        return mutants
    by_operator: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_operator.setdefault(m.operator, []).append(m)
    shares = {op: 0 for op in by_operator}
    remaining = limit
    while remaining:
        open_ops = [op for op in by_operator if shares[op] < len(by_operator[op])]
        if not open_ops:
            break
        for op in open_ops:
            if remaining:
                shares[op] += 1
                remaining -= 1
    chosen: list[Mutant] = []
    for op, bucket in by_operator.items():
        count = shares[op]
        if count:
            positions = np.linspace(0, len(bucket) - 1, count).round().astype(int)
            chosen.extend(bucket[i] for i in dict.fromkeys(positions.tolist()))
    return chosen


def summarize(verdicts: Sequence[Verdict]) -> dict:
    caught = [v for v in verdicts if v.caught]
    equivalent = [v for v in verdicts if not v.caught and v.reason]
    missed = [v for v in verdicts if not v.caught and not v.reason]
    unexplained = [v for v in missed if v.mutant.id not in KNOWN_MISSES]
    changing = len(verdicts) - len(equivalent)
    per_operator = {}
    for operator in OPERATORS:
        subset = [v for v in verdicts if v.mutant.operator == operator]
        per_operator[operator] = {"mutants": len(subset),
                                  "caught": sum(v.caught for v in subset)}
    per_check: dict[str, int] = {}
    for v in caught:
        per_check[v.error_line or ""] = per_check.get(v.error_line or "", 0) + 1
    return {
        "mutants": len(verdicts), "caught": len(caught), "equivalent": len(equivalent),
        "missed": len(missed), "unexplained": len(unexplained),
        "fraction_caught_of_meaning_changing": (len(caught) / changing) if changing else 1.0,
        "per_operator": per_operator, "per_check": per_check,
        "equivalent_mutants": [{"id": v.mutant.id, "mutation": v.mutant.description,
                                "status": v.status, "reason": v.reason} for v in equivalent],
        "missed_mutants": [{"id": v.mutant.id, "mutation": v.mutant.description,
                            "status": v.status, "detail": v.detail,
                            "known": v.mutant.id in KNOWN_MISSES} for v in missed],
    }


def write_mutants(verdicts: Sequence[Verdict], out: Path) -> None:
    from neuron_sim.outputs import atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    for k, v in enumerate(verdicts):
        header = (f"// mutant {v.mutant.id}\n// mutation: {v.mutant.description}\n"
                  f"// status: {v.status}\n")
        if v.error_line:
            header += f"// error: {v.error_line}\n"
        atomic_write_text(out / f"mutant_{k:04d}.hlo",
                          header + v.mutant.before.to_text() + v.mutant.after.to_text())


def run_control(limit: int | None = None, trials: int | None = None,
                per_operator: int = PER_OPERATOR,
                skip: Callable[[BasePair], bool] | None = None) -> tuple[dict, list[Verdict]]:
    """Generate the mutants of every base pair (but those ``skip`` rejects), verify ``limit`` of
    them (all by default) and the base pairs they come from; return the summary and the
    verdicts."""
    from neuron_sim.verify.inputs import DEFAULT_TRIALS

    trials = trials or DEFAULT_TRIALS
    started = time.perf_counter()
    pairs = [p for p in correct_pairs() if skip is None or not skip(p)]
    mutants = [m for pair in pairs for m in mutants_of(pair, per_operator)]
    chosen = sample(mutants, limit)
    needed = {m.base for m in chosen}
    bases, skipped = verified_bases([p for p in pairs if p.name in needed], trials)
    good = {p.name for p in bases}
    verdicts = [verify_mutant(m, trials) for m in chosen if m.base in good]
    summary = summarize(verdicts)
    summary["base_pairs"] = len(bases)
    summary["skipped_base_pairs"] = [{"name": p.name, "why": why} for p, why in skipped]
    summary["generated"] = len(mutants)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    return summary, verdicts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, help="verify an evenly spread sample of N mutants")
    parser.add_argument("--trials", type=int, default=None,
                        help="input sets per mutant (default: the verifier's default)")
    parser.add_argument("--per-operator", type=int, default=PER_OPERATOR,
                        help="mutants per operator per base pair")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--write", metavar="DIR", help="also write each mutant pair to DIR")
    args = parser.parse_args(argv)

    summary, verdicts = run_control(args.limit, args.trials, args.per_operator)
    bases = summary["base_pairs"]
    skipped = summary["skipped_base_pairs"]
    mutants = summary["generated"]
    if args.write:
        write_mutants(verdicts, Path(args.write))
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        print(f"{bases} correct base pairs ({len(skipped)} skipped: not CORRECT by "
              f"themselves), {mutants} mutants generated, {len(verdicts)} verified "
              f"in {summary['seconds']} s")
        for operator, counts in summary["per_operator"].items():
            print(f"  {operator:18} {counts['caught']:4} / {counts['mutants']:4} caught")
        print(f"caught {summary['caught']} of {summary['mutants']}; "
              f"{summary['equivalent']} equivalent; {summary['missed']} missed "
              f"({summary['unexplained']} unexplained); "
              f"fraction of meaning-changing mutants caught: "
              f"{summary['fraction_caught_of_meaning_changing']:.3f}")
        for item in summary["equivalent_mutants"]:
            print(f"  equivalent: {item['id']} ({item['mutation']}): {item['reason']}")
        for item in summary["missed_mutants"]:
            print(f"  {'missed' if item['known'] else 'MISSED (unexplained)'}: {item['id']} "
                  f"({item['mutation']}): {item['status']} {item['detail']}")
        for item in summary["skipped_base_pairs"]:
            print(f"  skipped base: {item['name']}: {item['why']}")
    return 0 if summary["unexplained"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
