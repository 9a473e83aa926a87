"""The one shape-rule table: every op family's rules, merged in one fixed list.

Adding an op means adding its rule to its family's module; adding a family means one entry in
``FAMILIES``. An opcode claimed by two families is a programming error raised at import.
"""

from __future__ import annotations

from neuron_sim.hlo.checks import (batch_norm, collective, control, elementwise, indexing,
                                   linalg, random, reduce, send_recv, shape)
from neuron_sim.hlo.checks.core import Rule, RuleTable
from neuron_sim.hlo.opcodes import Opcode

FAMILIES: tuple[RuleTable, ...] = (
    elementwise.RULES, shape.RULES, indexing.RULES, reduce.RULES, linalg.RULES, control.RULES,
    random.RULES, collective.RULES, batch_norm.RULES, send_recv.RULES,
)


def merge_rule_tables(tables: tuple[RuleTable, ...]) -> dict[Opcode, Rule]:
    """One table from the families' tables; each opcode may appear in one family only."""
    merged: dict[Opcode, Rule] = {}
    owner: dict[Opcode, str] = {}
    for table in tables:
        for opcode, rule in table.rules.items():
            if opcode in merged:
                raise AssertionError(f"{opcode.spelling} has shape rules in both {owner[opcode]} "
                                     f"and {table.family}")
            merged[opcode] = rule
            owner[opcode] = table.family
    return merged


RULES: dict[Opcode, Rule] = merge_rule_tables(FAMILIES)
