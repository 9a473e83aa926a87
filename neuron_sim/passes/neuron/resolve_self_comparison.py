"""ResolveSelfComparison (key ``aws_neuron_resolve_self_comparison``, seed #67).

Seed: hlo-misc-cleanup-sweep.txt §1 (registry row #67, an OpExpander canonicalizer) and §2 (the
matcher/expander split, matcher @0x20028c0). The seed names the pass and its kind only; the
algorithm is inferred.

Our reading: ``compare(x, x)`` (both operands the same instruction) becomes a constant wherever
its value is the same for *every* value x can hold, after XLA's AlgebraicSimplifier, which
folds a self-comparison for integral types only. The decision is the table ``DECIDED``:

* integers and pred: EQ, GE, LE are true, NE, GT, LT false;
* floats compared as IEEE (no ``type=`` or ``type=FLOAT``): only GT and LT are decided (false,
  NaN included: NaN is unordered). EQ, GE, LE are false for NaN and true otherwise; NE is true
  for NaN and false otherwise — those stay;
* floats with ``type=TOTALORDER``: every x equals itself in the total order, so all six
  directions are decided as for integers;
* complex (EQ/NE only, NaN-sensitive): never.

The matcher is the table lookup; the expander builds ``broadcast(constant(pred[] v))`` of the
compare's shape (a rank-0 compare becomes the constant). Contract exact. Known unsafety: none
known — x is dead after the rewrite and is removed with it, which drops an rng's draw (XLA's
DCE does the same).
"""

from __future__ import annotations

from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.neuron.constant_folding import splat

# direction -> compare(x, x) where x equals itself (integers, the total order)
REFLEXIVE = {"EQ": True, "GE": True, "LE": True, "NE": False, "GT": False, "LT": False}

# (how the operands are compared, direction) -> the value of compare(x, x) for every x.
DECIDED: dict[tuple[str, str], bool] = {
    **{(kind, d): v for kind in ("integer", "totalorder") for d, v in REFLEXIVE.items()},
    ("ieee", "GT"): False,
    ("ieee", "LT"): False,
}


def comparison_kind(inst: HloInstruction) -> str:
    """How ``inst`` compares its operands: ``integer``, ``totalorder``, ``ieee`` or
    ``complex``."""
    et = inst.operand(0).shape.element_type
    if et.is_complex:
        return "complex"
    if not et.is_float:
        return "integer"
    return "totalorder" if str(inst.get("type", "")) == "TOTALORDER" else "ieee"


def self_comparison_value(inst: HloInstruction) -> bool | None:
    """The value of ``inst`` if it is a compare of one operand with itself that is decided for
    every value; else None."""
    if inst.opcode is not Opcode.COMPARE or len(inst.operands) != 2:
        return None
    if inst.operand(0) is not inst.operand(1) or not inst.operand(0).shape.is_array:
        return None
    return DECIDED.get((comparison_kind(inst), str(inst.get("direction", ""))))


class ResolveSelfComparison(OpExpanderPass):
    """compare(x, x) -> a pred constant, where the table DECIDED says it is decided."""

    name = "aws_neuron_resolve_self_comparison"
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §1 #67, §2 (OpExpander; matcher @0x20028c0)"
    summary = ("compare(x, x) -> constant where decided for every value: integers always, "
               "IEEE floats only GT/LT, TOTALORDER always")
    pipelines = {"neuron-closer": 67}
    seed_says = "#67, an OpExpander canonicalizer (matcher @0x20028c0); name and kind only"
    our_reading = ("`compare(x, x)` -> a pred constant where decided for every value (table "
                   "`DECIDED`): integers and pred always (EQ/GE/LE true, NE/GT/LT false); IEEE "
                   "floats only GT/LT (false); `type=TOTALORDER` always; complex never")
    known_unsafety = "none known"

    def matches(self, inst: HloInstruction) -> bool:
        return self_comparison_value(inst) is not None

    def expand(self, inst: HloInstruction) -> HloInstruction:
        value = bool(self_comparison_value(inst))
        self._resolved = f"compare(%{inst.operand(0).name}, same) is always {value}"
        return splat(inst, inst.shape, value)

    def describe(self, old: HloInstruction, new: HloInstruction) -> str:
        return f"%{old.name} -> %{new.name} ({self._resolved}, direction={old.get('direction')})"
