"""Rewrite rules as data: patterns over instructions, and passes made of rule tables.

In the spirit of tinygrad's PatternMatcher and XLA's ``m::`` matchers. A ``Pat`` matches an
instruction by opcode (one, several, or any), by its operands (nested patterns, matched in
order — or in either order for ``commutative`` binary patterns), and by an optional
``where(inst)`` predicate; ``name`` captures the matched instruction. A name used twice must
capture the *same* instruction each time, so ``Pat("add", x, x)`` with ``x = Pat(name="x")``
matches ``add(%a, %a)`` and not ``add(%a, %b)``.

A rule is ``(pattern, fn)``: ``fn`` receives the captures as keyword arguments and returns the
replacement instruction, or None to decline. ``RewriteRules([...]).rewrite(inst)`` tries the
rules in order and returns the first replacement. ``RuleExpanderPass`` is an OpExpanderPass
whose ``matches`` and ``expand`` come from such a table::

    x = Pat(name="x")
    class NegateNegate(RuleExpanderPass):
        rules = RewriteRules([(Pat("negate", Pat("negate", x)), lambda x: x)])

The seed passes' matchers are not written this way on purpose: they mirror the binary's checks
one by one, with its reasons, as numbered if-chains.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar, Iterable, Sequence

from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import OpExpanderPass

Captures = dict[str, HloInstruction]
RewriteFn = Callable[..., "HloInstruction | None"]


def _opcodes(spec: Opcode | str | Iterable[Opcode | str] | None) -> frozenset[Opcode] | None:
    if spec is None:
        return None
    if isinstance(spec, (Opcode, str)):
        spec = (spec,)
    return frozenset(op if isinstance(op, Opcode) else Opcode.from_spelling(op) for op in spec)


@dataclass(frozen=True, init=False)
class Pat:
    """A pattern over one instruction and, through ``operands``, the instructions it uses.

    ``Pat(opcode, *operands, name=None, where=None, commutative=False)``: ``opcode`` is an
    Opcode, its spelling, several of them, or None (any); without operand patterns the
    operands are not looked at, with them their number must match too.
    """

    opcodes: frozenset[Opcode] | None
    operands: tuple[Pat, ...] | None
    name: str | None
    where: Callable[[HloInstruction], bool] | None = field(compare=False)
    commutative: bool

    def __init__(self, opcode: Opcode | str | Iterable[Opcode | str] | None = None,
                 *operands: Pat, name: str | None = None,
                 where: Callable[[HloInstruction], bool] | None = None,
                 commutative: bool = False) -> None:
        if commutative and len(operands) != 2:
            raise ValueError("a commutative pattern needs exactly two operand patterns")
        object.__setattr__(self, "opcodes", _opcodes(opcode))
        object.__setattr__(self, "operands", operands or None)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "where", where)
        object.__setattr__(self, "commutative", commutative)

    def match(self, inst: HloInstruction) -> Captures | None:
        """The captures if ``inst`` matches, else None."""
        captures: Captures = {}
        return captures if self._match(inst, captures) else None

    def _match(self, inst: HloInstruction, captures: Captures) -> bool:
        if self.opcodes is not None and inst.opcode not in self.opcodes:
            return False
        if self.name is not None:
            seen = captures.get(self.name)
            if seen is not None and seen is not inst:
                return False
        if self.operands is not None:
            if len(inst.operands) != len(self.operands):
                return False
            orders = [self.operands]
            if self.commutative:
                orders.append(self.operands[::-1])
            for order in orders:
                trial = dict(captures)
                if all(p._match(o, trial) for p, o in zip(order, inst.operands)):
                    captures.update(trial)
                    break
            else:
                return False
        if self.where is not None and not self.where(inst):
            return False
        if self.name is not None:
            captures[self.name] = inst
        return True


Rule = tuple[Pat, RewriteFn]


class RewriteRules:
    """An ordered table of ``(pattern, fn)`` rules; the first rule that matches and does not
    decline gives the replacement."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)

    def _candidates(self, inst: HloInstruction) -> Iterable[Rule]:
        return (rule for rule in self.rules
                if rule[0].opcodes is None or inst.opcode in rule[0].opcodes)

    def matches(self, inst: HloInstruction) -> bool:
        """Whether some rule's pattern matches ``inst`` (its fn may still decline)."""
        return any(pattern.match(inst) is not None for pattern, _ in self._candidates(inst))

    def rewrite(self, inst: HloInstruction) -> HloInstruction | None:
        """The replacement for ``inst`` from the first rule that matches and does not decline,
        or None."""
        for pattern, fn in self._candidates(inst):
            captures = pattern.match(inst)
            if captures is None:
                continue
            replacement = fn(**captures)
            if replacement is not None:
                return replacement
        return None


class RuleExpanderPass(OpExpanderPass):
    """An OpExpanderPass whose matcher and expander are a rule table (``rules``): it expands
    every instruction some pattern matches, and a rule's fn returning None declines."""

    rules: ClassVar[RewriteRules] = RewriteRules(())

    def matches(self, inst: HloInstruction) -> bool:
        return self.rules.matches(inst)

    def expand(self, inst: HloInstruction) -> HloInstruction | None:
        return self.rules.rewrite(inst)
