"""EliminateRedundantCompare (key ``aws_neuron_eliminate_redundant_compare``).

Seed: hlo-misc-cleanup-sweep.txt §3.6 names it only, as the pass after PartitionEmbedingOps;
no number, no matcher, no strings. The algorithm is inferred: a small set of rewrites that
remove a compare whose answer another instruction already holds, each sound for every value,
written as the rule table ``RULES``:

1. ``compare(p, true)``, ``EQ`` (either operand order, p a pred) -> ``p``;
2. ``compare(p, false)``, ``NE`` -> ``p``;
3. ``compare(p, true)``, ``NE`` and ``compare(p, false)``, ``EQ`` -> ``not(p)``;
4. ``not(compare(a, b))`` -> ``compare(a, b)`` with the inverse direction, where the inverse is
   exact for every value (``INVERSE``): EQ <-> NE always (IEEE's NE is true for unordered
   operands, so it is exactly not-EQ); LT <-> GE and GT <-> LE only for integers and
   ``type=TOTALORDER`` — for IEEE floats ``not(a < b)`` is true for NaN where ``a >= b`` is false.

"true"/"false" is a pred constant whose every element is that value (a scalar or a broadcast
scalar constant). Duplicate compares are left to CSE. Contract exact. Known unsafety: none
known.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import SeedStatus
from neuron_sim.passes.match import Pat, RewriteRules, RuleExpanderPass
from neuron_sim.passes.neuron.constant_folding import constant_value, with_metadata_of
from neuron_sim.passes.neuron.resolve_self_comparison import comparison_kind

# direction -> (its inverse, the comparison kinds for which not(d) == inverse for every value)
INVERSE: dict[str, tuple[str, frozenset[str]]] = {
    "EQ": ("NE", frozenset({"integer", "totalorder", "ieee", "complex"})),
    "NE": ("EQ", frozenset({"integer", "totalorder", "ieee", "complex"})),
    "LT": ("GE", frozenset({"integer", "totalorder"})),
    "GE": ("LT", frozenset({"integer", "totalorder"})),
    "GT": ("LE", frozenset({"integer", "totalorder"})),
    "LE": ("GT", frozenset({"integer", "totalorder"})),
}


def pred_splat_value(inst: HloInstruction) -> bool | None:
    """True/False if ``inst`` is a pred constant (or a broadcast of a scalar one) holding that
    value everywhere, else None."""
    if inst.opcode is Opcode.BROADCAST and inst.operand(0).shape.rank == 0:
        inst = inst.operand(0)
    value = constant_value(inst)
    if value is None or inst.shape.element_type is not ElementType.PRED or value.size == 0:
        return None
    if bool(np.all(value)):
        return True
    return False if not bool(np.any(value)) else None


def pred_constant(value: bool) -> Pat:
    return Pat(where=lambda inst: pred_splat_value(inst) is value)


def compare_with(direction: str, value: bool) -> Pat:
    """compare(p, constant value) or compare(constant value, p), p a pred, in ``direction``."""
    return Pat("compare", Pat(name="p", where=lambda p: p.shape.element_type is ElementType.PRED),
               pred_constant(value), commutative=True,
               where=lambda inst: str(inst.get("direction")) == direction)


def negation(p: HloInstruction) -> HloInstruction:
    return make_instruction(p.parent, Opcode.NOT, (p,), name="not")


def inverted(inner: HloInstruction) -> HloInstruction | None:
    """compare(a, b) with the inverse direction, where that is not(compare) for every value."""
    inverse, kinds = INVERSE.get(str(inner.get("direction")), (None, frozenset()))
    if inverse is None or comparison_kind(inner) not in kinds:
        return None
    attrs = {k: v for k, v in inner.attrs.items() if k != "metadata"}
    attrs["direction"] = inverse
    return with_metadata_of(make_instruction(inner.parent, Opcode.COMPARE, tuple(inner.operands),
                                             shape=inner.shape, name=inner.name, **attrs), inner)


def _same(p: HloInstruction) -> HloInstruction:
    return p


RULES = RewriteRules([
    (compare_with("EQ", True), _same),
    (compare_with("NE", False), _same),
    (compare_with("NE", True), negation),
    (compare_with("EQ", False), negation),
    (Pat("not", Pat("compare", name="inner")), inverted),
])


class EliminateRedundantCompare(RuleExpanderPass):
    """Compares of a pred with a constant, and not(compare), folded (the table RULES)."""

    name = "aws_neuron_eliminate_redundant_compare"
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §3.6 (named after PartitionEmbedingOps)"
    summary = ("compare(p, true/false) -> p or not(p); not(compare) -> inverse direction where "
               "NaN cannot tell them apart")
    rules = RULES
    pipelines = {"neuron-closer": 24}
    seed_says = "named in §3.6 as the pass after PartitionEmbedingOps; nothing else"
    our_reading = ("rule table: `compare(p, true) EQ` / `compare(p, false) NE` -> p; `compare(p, "
                   "true) NE` / `compare(p, false) EQ` -> `not(p)`; `not(compare)` -> the inverse "
                   "direction where exact (EQ <-> NE always; LT <-> GE, GT <-> LE for integers "
                   "and TOTALORDER only)")
    known_unsafety = "none known"

