"""InjectNumericalErrors (key ``aws_neuron_inject_numerical_errors``): the verifier's positive
control — a wrong value planted at each target.

Seed: hlo-misc-cleanup-sweep.txt, §4 ("InjectNumericalErrors target-source flag/env key (only
'No targets specified.' located)"). The seed gives the name and that one error; seed status
"inferred". Option ``targets``: a comma-separated list of entry instruction names (``%`` may be
written), opcode spellings (every entry instruction with that opcode), or ``root`` (the entry's
result, leaf by leaf). An empty list fails with the seed's sentence, "No targets specified.";
in a named pipeline the pass is present only when ``targets`` is given, so the default closer
does not fail on a debug pass nobody asked for.

Our reading: each target's value x (an array of floats, integers or pred) is replaced by one
that differs from it in **every** element, whatever x is — ``select(x == 1, 2, 1)`` for numbers
(also for NaN, which equals nothing, and for infinities), ``not(x)`` for pred — so that an
injection at an output can never go unseen, as a positive control must not. A tuple target is
injected leaf by leaf; tokens and complex values are left alone. Contract: changes-results —
every change is expected to be detected (the verifier reports UNSOUND with the note that the
difference is expected). A target whose value does not reach an output unchanged (dead, or
masked by a later select or comparison) may be invisible: that is a statement about the program,
which is why ``root`` exists.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import scalar
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.contracts import CHANGES_RESULTS
from neuron_sim.passes.options import PassOption

SEED = "hlo-misc-cleanup-sweep.txt § 4 (InjectNumericalErrors: 'No targets specified.')"
NO_TARGETS = "No targets specified."


def target_list(text: str) -> tuple[str, ...]:
    """``"%add, dot,root"`` -> ("add", "dot", "root")."""
    return tuple(name.strip().lstrip("%") for name in text.split(",") if name.strip())


class _Inserter:
    """Adds instructions to ``comp`` one after another, right after ``anchor``."""

    def __init__(self, comp: HloComputation, anchor: HloInstruction) -> None:
        self.comp, self.last = comp, anchor

    def __call__(self, opcode: Opcode, operands: list[HloInstruction],
                 **attrs: object) -> HloInstruction:
        inst = make_instruction(self.comp, opcode, operands, name="injected", **attrs)
        self.comp.add(inst)
        self.comp.instructions.remove(inst)
        self.comp.instructions.insert(self.comp.instructions.index(self.last) + 1, inst)
        self.last = inst
        return inst


def differing_value(add: _Inserter, x: HloInstruction) -> HloInstruction | None:
    """A new value of ``x``'s shape that differs from it in every element, or None for a value
    it cannot perturb (token, complex, a tuple with no such leaf)."""
    shape = x.shape
    if shape.is_tuple:
        leaves = [add(Opcode.GET_TUPLE_ELEMENT, [x], index=i) for i in range(len(shape.elements))]
        new = [differing_value(add, leaf) for leaf in leaves]
        if all(n is None for n in new):
            return None
        return add(Opcode.TUPLE, [n or leaf for n, leaf in zip(new, leaves)])
    if not shape.is_array or shape.element_type.is_complex:
        return None
    if shape.element_type is ElementType.PRED:
        return add(Opcode.NOT, [x])
    element = scalar(shape.element_type)
    one, two = (add(Opcode.CONSTANT, [], shape=element,
                    literal=Literal.from_array(element, np.asarray(v))) for v in (1, 2))
    ones = add(Opcode.BROADCAST, [one], shape=shape, dimensions=())
    twos = add(Opcode.BROADCAST, [two], shape=shape, dimensions=())
    return add(Opcode.SELECT, [add(Opcode.COMPARE, [x, ones], direction="EQ"), twos, ones])


class InjectNumericalErrors(HloPass):
    """Each target's value -> a value different in every element (the positive control)."""

    name = "aws_neuron_inject_numerical_errors"
    contract = CHANGES_RESULTS
    seed_status = SeedStatus.INFERRED
    seed = SEED
    summary = ("each target (instruction name, opcode or root) -> a value differing in every "
               "element; the verifier's positive control")
    options = (PassOption("targets", target_list, (), "comma-separated entry instruction "
                          "names, opcode spellings, or root (the entry's result)"),)
    pipelines = {"neuron-closer": 22}
    pipeline_only_with = "targets"    # a debug pass: in a named pipeline only when asked
    seed_says = "only \"No targets specified.\" (§4)"
    our_reading = ("each target (name, opcode, `root`) replaced by a value differing in every "
                   "element; the verifier's positive control")
    known_unsafety = "an injection masked downstream is invisible; `root` never is"

    def is_target(self, inst: HloInstruction, targets: tuple[str, ...]) -> bool:
        """Named, of a named opcode, or the entry's root when ``root`` is given."""
        return (inst.name in targets or inst.opcode.spelling in targets
                or (inst.is_root and "root" in targets))

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        targets = self.option("targets")
        if not targets:
            raise ValueError(NO_TARGETS)
        entry = module.entry
        changed = False
        for inst in [i for i in entry.post_order() if self.is_target(i, targets)]:
            users = list(inst.users)
            was_root = inst is entry.root
            new = differing_value(_Inserter(entry, inst), inst)
            if new is None:
                continue
            for user in users:
                user.replace_operand_with(inst, new)
            if was_root:
                entry.root = new
            self.record(f"%{inst.name} -> %{new.name} (injected: differs in every element)")
            changed = True
        return changed
