"""How a shape rule is written: the context it reads, the error it raises, the table it joins.

A rule is a function of a ``Context`` that returns the shape its instruction must have, or
raises ``Invalid(reason)``; ``error_for`` turns the reason into the ``HloCheckError`` users see,
naming the computation and the instruction, e.g.::

    in computation main: %ds = f32[2,4]{1,0} dynamic-slice(%p, %i, %j): dynamic_slice_sizes
    has 3 entries but the operand has rank 2

Each op-family module has one ``RuleTable``; ``registry.py`` lists the families.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from neuron_sim.errors import UserError
from neuron_sim.hlo.attributes import Raw
from neuron_sim.hlo.ir import HloComputation, HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape

if TYPE_CHECKING:  # topology imports the checker through neuron_sim.hlo
    from neuron_sim.topology import Topology


class HloCheckError(UserError):
    """A module, computation or instruction that breaks an HLO rule.

    ``reason`` is the rule that was broken; ``computation`` and ``instruction`` are the names
    involved (None when the problem is not about one of them). ``str()`` gives the full sentence.
    """

    def __init__(self, reason: str, *, computation: str | None = None,
                 instruction: str | None = None, instruction_text: str | None = None) -> None:
        self.reason = reason
        self.computation = computation
        self.instruction = instruction
        parts = []
        if computation is not None:
            parts.append(f"in computation {computation}")
        if instruction_text is not None:
            parts.append(instruction_text)
        parts.append(reason)
        super().__init__(": ".join(parts))


class Invalid(Exception):
    """Raised by a rule; the caller adds which instruction and computation it is about."""


def instruction_head(inst: HloInstruction) -> str:
    """The head of an instruction's line, without attributes: ``%x = f32[2]{0} add(%a, %b)``."""
    if inst.opcode is Opcode.PARAMETER:
        inside = str(inst.parameter_number)
    elif inst.opcode is Opcode.CONSTANT:
        text = inst.literal.text if inst.literal is not None else ""
        inside = text if len(text) <= 40 else text[:37] + "..."
    else:
        names = ["%" + op.name for op in inst.operands[:6]]
        if len(inst.operands) > 6:
            names.append(f"... {len(inst.operands) - 6} more")
        inside = ", ".join(names)
    return f"%{inst.name} = {inst.shape} {inst.opcode.spelling}({inside})"


def error_for(inst: HloInstruction, reason: str) -> HloCheckError:
    """The HloCheckError for ``reason``, naming ``inst`` and its computation."""
    computation = inst.parent.name if inst.parent is not None else None
    return HloCheckError(reason, computation=computation, instruction=inst.name,
                         instruction_text=instruction_head(inst))


def fmt(shape: Shape) -> str:
    """A shape as messages spell it: without its layout."""
    return str(shape.without_layout())


_MISSING = object()


class Context:
    """What a rule may look at: the instruction, the topology its collectives run on, and
    whether floating-point types of different precisions may meet (XLA's HloVerifier option
    ``allow_mixed_precision``, off by default there and here). (A plain class: one is made per
    instruction checked, and a dataclass costs every start-up its creation.)"""

    __slots__ = ("inst", "topology", "allow_mixed_precision")

    def __init__(self, inst: HloInstruction, topology: Topology,
                 allow_mixed_precision: bool = False) -> None:
        self.inst = inst
        self.topology = topology
        self.allow_mixed_precision = allow_mixed_precision

    @property
    def opcode(self) -> Opcode:
        return self.inst.opcode

    @property
    def name(self) -> str:
        return self.opcode.spelling

    @property
    def operand_count(self) -> int:
        return len(self.inst.operands)

    def shape(self, i: int) -> Shape:
        """Operand ``i``'s shape; a missing operand is the rule's Invalid, not an IndexError
        (shape inference runs on instructions whose operand count is not checked yet)."""
        if not 0 <= i < len(self.inst.operands):
            raise Invalid(f"{self.name} needs an operand {i} but has {len(self.inst.operands)} "
                          f"operand{'s' * (len(self.inst.operands) != 1)}")
        return self.inst.operands[i].shape

    def shapes(self) -> list[Shape]:
        return [op.shape for op in self.inst.operands]

    def array(self, i: int, what: str | None = None) -> ArrayShape:
        """Operand ``i``'s shape, which must be an array (not a tuple or token)."""
        shape = self.shape(i)
        if not isinstance(shape, ArrayShape) or not shape.is_array:
            raise Invalid(f"{what or f'operand {i}'} must be an array, but %"
                          f"{self.inst.operands[i].name} has shape {fmt(shape)}")
        return shape

    def arrays(self, indices: Sequence[int] | None = None) -> list[ArrayShape]:
        indices = range(self.operand_count) if indices is None else indices
        return [self.array(i) for i in indices]

    def declared(self) -> Shape:
        """The declared shape, for ops whose result only the instruction can tell (parameters,
        custom-calls); an instruction being built without one is told to give it."""
        if self.inst.shape is None:
            raise Invalid(f"{self.name} needs its result shape given")
        return self.inst.shape

    def declared_array(self) -> ArrayShape:
        """The declared shape, for ops whose result dims or type come from it."""
        shape = self.declared()
        if not isinstance(shape, ArrayShape) or not shape.is_array:
            raise Invalid(f"the result of {self.name} must be an array, not {fmt(shape)}")
        return shape

    def require_operands(self, count: int | None = None, *, at_least: int | None = None) -> None:
        n = self.operand_count
        if count is not None and n != count:
            raise Invalid(f"{self.name} expects {count} operand{'s' * (count != 1)} but has {n}")
        if at_least is not None and n < at_least:
            raise Invalid(f"{self.name} expects at least {at_least} operand"
                          f"{'s' * (at_least != 1)} but has {n}")

    def attr(self, name: str, default: Any = _MISSING) -> Any:
        value = self.inst.attrs.get(name, default)
        if value is _MISSING:
            raise Invalid(f"{self.name} needs the attribute {name}")
        return value

    def int_attr(self, name: str, default: Any = _MISSING) -> int:
        value = self.attr(name, default)
        if isinstance(value, Raw):
            try:
                return int(value.text)
            except ValueError:
                raise Invalid(f"attribute {name}={value.text} is not an integer") from None
        return value

    def bool_attr(self, name: str, default: bool = False) -> bool:
        value = self.attr(name, default)
        if isinstance(value, Raw):
            if value.text not in ("true", "false"):
                raise Invalid(f"attribute {name}={value.text} is not true or false")
            return value.text == "true"
        return bool(value)

    def dims_attr(self, name: str, default: Any = _MISSING) -> tuple[int, ...]:
        return tuple(self.attr(name, default))

    def computation(self, name: str) -> HloComputation:
        comp = self.attr(name)
        if not isinstance(comp, HloComputation):
            raise Invalid(f"attribute {name} must name one computation")
        return comp


Rule = Callable[[Context], Shape]


class RuleTable:
    """The shape rules of one op family: ``@RULES.rule(Opcode.X, ...)`` adds the decorated
    function as the rule of each opcode (one rule per opcode). ``registry.py`` merges the
    families' tables into the one table the checker and the builder use."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.rules: dict[Opcode, Rule] = {}

    def rule(self, *opcodes: Opcode) -> Callable[[Rule], Rule]:
        def register(fn: Rule) -> Rule:
            for opcode in opcodes:
                if opcode in self.rules:
                    raise AssertionError(f"two {self.family} shape rules for {opcode.spelling}")
                self.rules[opcode] = fn
            return fn
        return register
