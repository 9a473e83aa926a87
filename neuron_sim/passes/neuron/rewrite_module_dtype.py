"""RewriteModuleDtype (key ``aws_neuron_rewrite_module_dtype``): the module's ``from`` floating
values computed in ``to`` instead (default f32 -> bf16), its interface unchanged.

Seed: hlo-misc-cleanup-sweep.txt, Abstract ("the honest gaps: ... RewriteModuleDtype's from/to
dtype pair are not string-anchored") and §4 (the pair is a constructor literal, no strings).
The seed gives the name only; seed status "inferred". The pair is the options ``from`` and
``to``.

Our reading, chosen so that the promise can be stated per op family and checked: in the entry
computation, every array value of type ``from`` is retyped to ``to``; entry parameters and
constants of type ``from`` keep their type and get a ``convert`` to ``to`` (so the signature is
the source's), a ``convert`` producing ``from`` produces ``to`` directly, and every result leaf
of type ``from`` is converted back. The op families and the bound each gets (docs/passes.md):

* value movement and selection (``VALUE_MOVEMENT``: reshape, transpose, broadcast, slice,
  concatenate, copy, pad, reverse, dynamic-slice, dynamic-update-slice, gather, select,
  maximum, minimum, clamp, negate, abs, all-gather, all-to-all, collective-permute): every
  output element is some input element, and round-to-nearest commutes with these (it is
  monotone and odd), so each output is ``RN_to(source value)``: within **half an ulp** of
  ``to`` — at most half a bf16 ulp for ``to`` in bf16, f32, f64 — or an infinity where the
  source's value is beyond ``to``'s range. Rewritten.
* arithmetic (add, multiply, divide, exp, dot, reduce, ...): no output bound exists (a sum can
  cancel to a value smaller than its rounding error; errors compound along a chain). Declined.
* consumers with a discrete result (compare, convert to an integer, sort, ...): a rounding can
  flip the outcome. Declined.

A module whose ``from`` values meet a declined family, live in a called computation or in a
tuple other than the entry's root, is left unchanged (``declined`` says why). Contract:
``BF16_HALF_ULP`` (tolerance: half a bf16 ulp of the source's value, overflow to infinity
beyond bf16's range). ``to`` must be a float type with at least bf16's precision and range
(bf16, f32, f64) and not ``from``; f16 (range 65504) is refused.

Known unsafety: none within the family (the bound is exact: RN once). Through the seed's real
pass, arithmetic would be rewritten too — with no bound at all; that reading is not offered.
"""

from __future__ import annotations

import ml_dtypes

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.contracts import BF16_HALF_ULP
from neuron_sim.passes.options import PassOption

SEED = ("hlo-misc-cleanup-sweep.txt § Abstract (the honest gaps: RewriteModuleDtype's from/to "
        "pair), §4")
VALUE_MOVEMENT = frozenset({
    Opcode.RESHAPE, Opcode.TRANSPOSE, Opcode.BROADCAST, Opcode.SLICE, Opcode.CONCATENATE,
    Opcode.COPY, Opcode.PAD, Opcode.REVERSE, Opcode.DYNAMIC_SLICE, Opcode.DYNAMIC_UPDATE_SLICE,
    Opcode.GATHER, Opcode.SELECT, Opcode.MAXIMUM, Opcode.MINIMUM, Opcode.CLAMP, Opcode.NEGATE,
    Opcode.ABS, Opcode.ALL_GATHER, Opcode.ALL_TO_ALL, Opcode.COLLECTIVE_PERMUTE,
})
KEPT_SOURCES = (Opcode.PARAMETER, Opcode.CONSTANT)


def float_type(text: str) -> ElementType:
    """A floating element type from its spelling (``f32``, ``bf16``)."""
    element_type = ElementType.from_spelling(text.strip())
    if not element_type.is_float:
        raise ValueError(f"{text.strip()} is not a floating-point type")
    return element_type


def _at_least_bf16(element_type: ElementType) -> bool:
    """As precise as bf16 and with at least its range (the contract's unit)."""
    mine, bf16 = ml_dtypes.finfo(element_type.numpy_dtype), ml_dtypes.finfo(ml_dtypes.bfloat16)
    return float(mine.eps) <= float(bf16.eps) and float(mine.max) >= float(bf16.max)


def _is_from(inst: HloInstruction, from_type: ElementType) -> bool:
    return inst.shape.is_array and inst.shape.element_type is from_type


class RewriteModuleDtype(HloPass):
    """Value-movement computations on ``from`` values run in ``to``; the interface is kept."""

    name = "aws_neuron_rewrite_module_dtype"
    contract = BF16_HALF_ULP
    seed_status = SeedStatus.INFERRED
    seed = SEED
    summary = ("from-typed values (default f32) computed in to (default bf16), parameters and "
               "results converted; only value-movement ops (bound: half an ulp of to)")
    options = (
        PassOption("from", float_type, ElementType.F32, "the element type to replace"),
        PassOption("to", float_type, ElementType.BF16,
                   "the element type to compute in: bf16, f32 or f64 (at least bf16's "
                   "precision and range)"),
    )
    pipelines = {"neuron-closer": 20}
    seed_says = "the name; the from/to pair \"not string-anchored\" (abstract, §4)"
    our_reading = ("`from` (f32) values of the entry computed in `to` (bf16), interface kept; "
                   "only value-movement ops (other families declined)")
    known_unsafety = ("none within the family; arithmetic (the seed's pass presumably rewrites "
                      "it) has no output bound and is not offered")

    def __init__(self, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.declined: str | None = None

    def why_not(self, module: HloModule, from_type: ElementType) -> str | None:
        """Why the module's ``from`` values cannot be rewritten with the promised bound."""
        entry = module.entry
        for comp in module.computations:
            if comp is entry:
                continue
            hit = next((i for i in comp.instructions if _is_from(i, from_type)), None)
            if hit is not None:
                return f"%{hit.name} in called computation {comp.name} is {from_type}"
        for inst in entry.instructions:
            if _is_from(inst, from_type):
                if inst.opcode in KEPT_SOURCES or inst.opcode in VALUE_MOVEMENT:
                    continue
                if inst.opcode is Opcode.CONVERT and not _is_from(inst.operand(0), from_type):
                    continue
                return f"%{inst.name} ({inst.opcode.spelling}) is not a value-movement op"
            if any(_is_from(op, from_type) for op in inst.operands) and \
                    not (inst is entry.root and inst.opcode is Opcode.TUPLE):
                return f"%{inst.name} ({inst.opcode.spelling}) consumes a {from_type} value"
            if inst.shape.is_tuple and any(leaf.element_type is from_type
                                           for leaf in inst.shape.leaves()) \
                    and inst is not entry.root:
                return f"%{inst.name} is a tuple holding {from_type} values"
        return None

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        from_type, to_type = self.option("from"), self.option("to")
        if to_type is from_type:
            raise ValueError(f"from and to are both {from_type}")
        if not _at_least_bf16(to_type):
            raise ValueError(f"to={to_type} has less precision or range than bf16, the unit of "
                             "the pass's tolerance contract")
        self.declined = self.why_not(module, from_type)
        entry = module.entry
        targets = [i for i in entry.instructions if _is_from(i, from_type)]
        if self.declined is not None or not targets:
            return False
        narrowed: set[HloInstruction] = set()
        for inst in targets:
            narrow = inst.shape.with_element_type(to_type)
            if inst.opcode not in KEPT_SOURCES:
                inst.shape = narrow
                narrowed.add(inst)
                continue
            users = list(inst.users)
            converted = make_instruction(entry, Opcode.CONVERT, [inst], shape=narrow,
                                         name=f"{inst.name}.{to_type}")
            entry.add_before(converted, inst)
            position = entry.instructions.index(inst)
            entry.instructions[position - 1:position + 1] = [inst, converted]
            for user in users:
                user.replace_operand_with(inst, converted)
            if entry.root is inst:
                entry.root = converted
            narrowed.add(converted)
        self._convert_results_back(module, from_type, narrowed)
        self.record(f"{len(targets)} {from_type} values of entry {entry.name} computed in "
                    f"{to_type}; results converted back to {from_type}")
        return True

    @staticmethod
    def _convert_results_back(module: HloModule, from_type: ElementType,
                              narrowed: set[HloInstruction]) -> None:
        entry = module.entry

        def back(value: HloInstruction) -> HloInstruction:
            wide = value.shape.with_element_type(from_type)
            return entry.add_before(make_instruction(entry, Opcode.CONVERT, [value], shape=wide,
                                                     name=f"{value.name}.{from_type}"),
                                    entry.root)

        root = entry.root
        if root in narrowed:
            converted = back(root)
            entry.instructions.remove(converted)
            entry.instructions.append(converted)
            entry.root = converted
        elif root.opcode is Opcode.TUPLE:
            for index, operand in enumerate(list(root.operands)):
                if operand in narrowed:
                    root.set_operand(index, back(operand))
