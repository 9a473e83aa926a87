"""A module's passed checks, kept while the module is as it was when it passed them.

A fuzz campaign checks one drawn module many times over: the builder checks it once made,
then the verifier checks it as the source of every pass that changes it, and the minimizer
checks each candidate again for every input set it tries. ``check_module`` keeps, in the
module's own ``derived`` caches (as the interpreter keeps its facts: see
``neuron_sim.interpreter.module_facts``), the settings it passed under with a snapshot of
everything a check reads; a later check under the same settings is answered from it when the
module still matches the snapshot, and runs in full when anything differs (modules are
mutable: passes and the minimizer edit them in place).

The snapshot holds, by identity or by equality with identity first: the module's fields
(entry, computation list, header, name...), each computation's fields (name, root,
instruction list, trailing text...), and each instruction's name, opcode, shape, literal,
parameter number, parent, operand list, attributes and users. That is every field these
objects have (``tests/neuron_sim/test_checker_kept.py`` holds it to their ``__dict__``), so
an edit that could change a check's answer cannot go unseen. Attribute values are immutable
(tuples, records, computations); a value that cannot be compared as a whole (an array)
counts as a difference. Only passes are kept: a failing check raises each time.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Hashable

from neuron_sim.hlo.ir import HloComputation, HloModule

__all__ = ["INSTRUCTION_FIELDS", "KeptChecks", "passed_before", "remember_passed"]

# Every field of an instruction: the plain ones, and the containers (copied in the snapshot).
_PLAIN = attrgetter("name", "opcode", "shape", "literal", "parameter_number", "parent",
                    "written_as_operand")
_OPERANDS = attrgetter("operands")
_ATTRS = attrgetter("attrs")
_USERS = attrgetter("users")
INSTRUCTION_FIELDS = (*_PLAIN.__reduce__()[1], "operands", "attrs", "users")


def _fields(obj: HloModule | HloComputation) -> dict[str, Any]:
    """A module's or computation's fields (not its ``derived`` caches), containers copied."""
    return {key: value.copy() if isinstance(value, (list, dict)) else value
            for key, value in obj.__dict__.items() if key != "derived"}


class KeptChecks:
    """The settings a module passed ``check_module`` under, valid while ``holds()``."""

    __slots__ = ("module", "passed", "_module_fields", "_computations")

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.passed: set[Hashable] = set()
        self._module_fields = _fields(module)
        self._computations = []
        for computation in module.computations:
            order = list(computation.instructions)
            self._computations.append((
                computation, _fields(computation), list(map(_PLAIN, order)),
                list(map(list, map(_OPERANDS, order))), list(map(dict, map(_ATTRS, order))),
                list(map(dict, map(_USERS, order)))))

    def holds(self) -> bool:
        """Whether the module still has every field it had when the snapshot was taken (the
        live containers compare element by element with their copies)."""
        try:
            if _fields(self.module) != self._module_fields:
                return False
            for computation, fields, plain, operands, attrs, users in self._computations:
                order = computation.instructions
                if _fields(computation) != fields or list(map(_PLAIN, order)) != plain or \
                        list(map(_OPERANDS, order)) != operands or \
                        list(map(_ATTRS, order)) != attrs or list(map(_USERS, order)) != users:
                    return False
        except (ValueError, TypeError):  # a value that compares element-wise (an array)
            return False
        return True


def passed_before(module: HloModule, settings: Hashable) -> bool:
    """Whether ``module``, as it is now, passed ``check_module`` under ``settings``."""
    kept = module.derived.get(KeptChecks)
    return kept is not None and settings in kept.passed and kept.module is module and \
        kept.holds()


def remember_passed(module: HloModule, settings: Hashable) -> None:
    """Keep that ``module``, as it is now, passed ``check_module`` under ``settings``."""
    kept = module.derived.get(KeptChecks)
    if kept is None or kept.module is not module or not kept.holds():
        kept = module.derived[KeptChecks] = KeptChecks(module)
    kept.passed.add(settings)
