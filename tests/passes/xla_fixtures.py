"""XLA's pass tests as fixtures: ``tests/data/xla_passes/<test file>/<TestName>.hlo`` plus one
``expectations.json`` per test file, transcribing each TEST's assertions.

An expectation holds the test's topology (``replica_count``, ``num_partitions``,
``use_spmd_partitioning``), ``changed`` (its ``expect_change`` / ``ASSERT_TRUE(Run)``), and what
it asserts of the result: ``root`` (a pattern, below), ``root_attributes`` (attribute values on
the root; null = absent), ``counts`` (opcode -> number in the entry computation, XLA's
``CollectiveCount``) and ``root_text_contains``. Patterns are XLA's ``GmockMatch(m::...)`` in
HLO spelling: ``opcode(p, ...)`` matches that opcode with operands matching ``p, ...``;
``parameter(N)`` a parameter number N; ``constant(V)`` a scalar constant of value V;
``multiply_any_order(a, b)`` a multiply in either operand order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode

DATA = Path(__file__).resolve().parents[1] / "data" / "xla_passes"


@dataclass(frozen=True)
class XlaCase:
    """One TEST of an XLA test file: its module file and its transcribed expectation."""

    name: str
    path: Path
    expect: dict[str, Any]

    def __str__(self) -> str:
        return self.name


def load_cases(test_file: str) -> list[XlaCase]:
    """Every TEST of ``tests/data/xla_passes/<test_file>/expectations.json``, by name."""
    folder = DATA / test_file
    spec = json.loads((folder / "expectations.json").read_text(encoding="utf-8"))
    return [XlaCase(name, folder / f"{name}.hlo", expect)
            for name, expect in sorted(spec["tests"].items())]


def _split_arguments(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + [tail] if tail else parts


def _parse(pattern: str) -> tuple[str, list[str]]:
    head, _, rest = pattern.strip().partition("(")
    if not rest.endswith(")"):
        raise ValueError(f"bad pattern {pattern!r}")
    return head.strip(), _split_arguments(rest[:-1])


def matches(inst: HloInstruction, pattern: str) -> bool:
    """Whether ``inst`` matches ``pattern`` (see the module docstring)."""
    head, args = _parse(pattern)
    if head == "parameter":
        return inst.opcode is Opcode.PARAMETER and inst.parameter_number == int(args[0])
    if head == "constant":
        if inst.opcode is not Opcode.CONSTANT:
            return False
        values = np.asarray(inst.literal.value)
        return values.size == 1 and float(values.reshape(-1)[0]) == float(args[0])
    if head == "multiply_any_order":
        if inst.opcode is not Opcode.MULTIPLY:
            return False
        a, b = inst.operands
        return ((matches(a, args[0]) and matches(b, args[1]))
                or (matches(a, args[1]) and matches(b, args[0])))
    if inst.opcode is not Opcode.from_spelling(head) or len(inst.operands) != len(args):
        return False
    return all(matches(op, arg) for op, arg in zip(inst.operands, args))


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def check_result(case: XlaCase, module: HloModule, changed: bool) -> None:
    """Assert everything ``case`` expects of ``module`` after the pass reported ``changed``."""
    expect = case.expect
    assert changed == expect["changed"], f"{case}: changed={changed}, XLA's test says " \
                                         f"{expect['changed']}"
    root = module.entry.root
    if "root" in expect:
        assert matches(root, expect["root"]), \
            f"{case}: root {root.to_text()} does not match {expect['root']}"
    for key, value in expect.get("root_attributes", {}).items():
        assert _plain(root.get(key)) == value, f"{case}: root {key}={root.get(key)}, not {value}"
    for opcode, count in expect.get("counts", {}).items():
        found = sum(1 for inst in module.entry if inst.opcode.spelling == opcode)
        assert found == count, f"{case}: {found} {opcode} in the entry, XLA's test says {count}"
    text = root.to_text()
    for fragment in expect.get("root_text_contains", ()):
        assert fragment in text, f"{case}: {fragment!r} not in {text}"
