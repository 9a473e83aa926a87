"""The model of HLO programs: opcodes, element types, shapes, IR and its text, parser, builder, checker.

The names below are imported on first use (PEP 562), so that importing one submodule — say
``neuron_sim.hlo.replica_groups``, which ``neuron_sim.topology`` needs — does not load the parser
and the checker, which themselves need ``neuron_sim.topology``: any module of the package can be
the first one a program imports.
"""

from __future__ import annotations

from neuron_sim.lazy import lazy_exports

_LAZY = {
    "ElementType": "dtypes",
    "HloComputation": "ir", "HloError": "ir", "HloInstruction": "ir", "HloModule": "ir",
    "print_module": "ir",
    "Category": "opcodes", "Opcode": "opcodes",
    "HloParseError": "parser", "parse_module": "parser", "parse_module_file": "parser",
    "parse_shape": "parser",
    "ArrayShape": "shapes", "Layout": "shapes", "Shape": "shapes", "TupleShape": "shapes",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
