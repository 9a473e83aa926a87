"""What can go wrong while executing a module, each error naming the instruction it happened in.

Every error raised while an instruction executes reaches the caller as an ``InterpreterError``
whose message starts with ``While executing %x = f32[2]{0} add(%a, %b): ...`` — the innermost
instruction, so an error inside a fusion inside a while names the instruction in the fusion.
Errors of our own kinds keep their class (so ``except Unimplemented`` and ``except
CollectiveMismatchError`` work at any depth); anything else (a numpy error, a bug) is wrapped in
an ``ExecutionError`` whose ``__cause__`` is the original exception.
"""

from __future__ import annotations

from typing import Sequence

from neuron_sim.errors import UserError
from neuron_sim.hlo import HloInstruction

# Attributes that say nothing about what an instruction computes; left out of error messages.
NOISE_ATTRIBUTES = ("metadata", "backend_config", "frontend_attributes", "sharding",
                    "statistics", "statistics_viz", "control-predecessors", "origin")


class InterpreterError(Exception):
    """An error while executing a module; ``instruction`` is where it happened (once known)."""

    def __init__(self, reason: str, instruction: HloInstruction | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.instruction: HloInstruction | None = None
        self.instruction_text = ""
        if instruction is not None:
            self.attach(instruction)

    def attach(self, instruction: HloInstruction) -> None:
        """Name the instruction the error happened in (the first, innermost, call wins)."""
        if self.instruction is None:
            self.instruction = instruction
            self.instruction_text = describe(instruction)

    def __str__(self) -> str:
        if self.instruction is None:
            return self.reason
        return f"While executing {self.instruction_text}: {self.reason}"


class ExecutionError(InterpreterError):
    """An unexpected exception raised by an op; the original is ``__cause__``."""

    @classmethod
    def wrapping(cls, exc: BaseException, instruction: HloInstruction) -> "ExecutionError":
        reason = str(exc) or type(exc).__name__
        if not isinstance(exc, (ValueError, ArithmeticError)):
            reason = f"{type(exc).__name__}: {reason}"
        return cls(reason, instruction)


class Unimplemented(InterpreterError):
    """The interpreter has no implementation for this opcode (or this form of it)."""

    def __init__(self, opcode: str, detail: str = "",
                 instruction: HloInstruction | None = None) -> None:
        self.opcode = opcode
        reason = f"the interpreter does not implement '{opcode}'"
        super().__init__(reason + (f" ({detail})" if detail else ""), instruction)


class CollectiveMismatchError(InterpreterError):
    """A collective was reached by only part of one of its participant groups.

    On hardware the devices that arrived would wait forever for the others; the interpreter
    reports which group it was and which of its devices arrived instead of hanging or guessing.
    """

    def __init__(self, opcode: str, group: Sequence[int], arrived: Sequence[int],
                 instruction: HloInstruction | None = None) -> None:
        self.opcode = opcode
        self.group = tuple(int(d) for d in group)
        self.arrived = tuple(int(d) for d in arrived)
        missing = [d for d in self.group if d not in set(self.arrived)]
        reason = (f"collective mismatch: {opcode} over participant group "
                  f"{{{','.join(map(str, self.group))}}} (flattened device ids) was reached by "
                  f"devices {{{','.join(map(str, self.arrived))}}} only; devices "
                  f"{{{','.join(map(str, missing))}}} went elsewhere (on hardware this hangs)")
        super().__init__(reason, instruction)


class InputError(UserError):
    """Inputs that do not fit the entry computation's parameters (names the parameter)."""


_DESCRIPTION_LIMIT = 400


def describe(instruction: HloInstruction) -> str:
    """The instruction as XLA prints it, without metadata and other non-semantic attributes
    (shortened past a few hundred characters: a large constant's literal, say)."""
    text = instruction.to_text(omit=NOISE_ATTRIBUTES)
    if len(text) > _DESCRIPTION_LIMIT:
        text = text[:_DESCRIPTION_LIMIT - 3] + "..."
    return text


class ExecutionTimeout(InterpreterError):
    """The run did not finish within its time limit (a loop that may never end)."""


class LoopNeverEnds(ExecutionTimeout):
    """A while loop that can never end: its state came back to an earlier state, and its
    condition and body compute nothing but a function of the state (no random numbers, I/O,
    collectives or custom calls), so it would repeat the same states forever. Raised at once
    instead of running until the time limit, and a timeout to every caller (``run`` exits 1
    and ``verify`` reports a timeout, as when the limit ends the loop)."""
