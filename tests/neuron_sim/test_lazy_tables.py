"""The op table and the shape-rule table load their families on first use (``LazyTable``):
each table's owner list must say exactly which family registers which opcode, and a lookup
must see what it would have seen with every family imported up front.

The expected registrations are read from the families themselves (each family module's own
decorators / RuleTable), in a fresh process so that nothing this test session imported
earlier decides the result.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.lazy import LazyTable

# In a fresh process: import every family module directly (not through the tables) and report
# which module registered each opcode, for the op table and for the shape rules.
_REGISTRATIONS = """
import importlib, json
from neuron_sim.interpreter.ops.registry import FAMILIES as OPS, REGISTRY
from neuron_sim.hlo.checks.registry import FAMILIES as CHECKS
for family in OPS:
    importlib.import_module(f"neuron_sim.interpreter.ops.{family}")
ops = {op.name: impl.fn.__module__.rsplit(".", 1)[1] for op, impl in dict.items(REGISTRY)}
checks = {}
for family in CHECKS:
    table = importlib.import_module(f"neuron_sim.hlo.checks.{family}").RULES
    for op in table.rules:
        assert op.name not in checks, op
        checks[op.name] = family
print(json.dumps({"ops": ops, "checks": checks}))
"""


@pytest.fixture(scope="module")
def registrations() -> dict:
    done = subprocess.run([sys.executable, "-c", _REGISTRATIONS], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def _listed(families: dict[str, tuple[str, ...]]) -> dict[str, str]:
    listed: dict[str, str] = {}
    for family, names in families.items():
        for name in names:
            assert name not in listed, f"{name} listed under {listed[name]} and {family}"
            listed[name] = family
    return listed


def test_the_op_table_lists_each_opcode_under_the_family_that_registers_it(registrations):
    from neuron_sim.interpreter.ops.registry import FAMILIES

    assert _listed(FAMILIES) == registrations["ops"]


def test_the_rule_table_lists_each_opcode_under_the_family_that_has_its_rule(registrations):
    from neuron_sim.hlo.checks.registry import FAMILIES

    assert _listed(FAMILIES) == registrations["checks"]
    assert sorted(registrations["checks"]) == sorted(op.name for op in Opcode)


def test_a_lookup_loads_only_the_family_of_the_opcode():
    """In a fresh process: looking up negate imports the elementwise family and not reduce;
    then sort's lookup imports reduce."""
    code = """
import sys
from neuron_sim.interpreter.ops import REGISTRY
from neuron_sim.hlo.opcodes import Opcode
before = "neuron_sim.interpreter.ops.reduce" in sys.modules
negate = REGISTRY.get(Opcode.NEGATE).fn.__module__
after_negate = "neuron_sim.interpreter.ops.reduce" in sys.modules
sort = REGISTRY[Opcode.SORT].fn.__module__
print(before, negate, after_negate, sort)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["False", "neuron_sim.interpreter.ops.elementwise", "False",
                                   "neuron_sim.interpreter.ops.reduce"]


def test_lazy_table_reads_as_the_full_table():
    """A small table with two owners: reads load what they need; an unlisted key loads every
    owner; walking the table sees every entry."""
    loads: list[str] = []
    entries = {"a": {1: "one", 2: "two"}, "b": {3: "three", 4: "four"}}

    def load(owner: str) -> None:
        loads.append(owner)
        for key, value in entries[owner].items():
            dict.__setitem__(table, key, value)

    table = LazyTable({1: "a", 2: "a", 3: "b"}, load)  # 4 is registered by b but not listed
    assert table.get(1) == "one" and loads == ["a"]
    assert table[2] == "two" and 3 in table and loads == ["a", "b"]
    assert table.get(5, "none") == "none" and loads == ["a", "b"]
    with pytest.raises(KeyError):
        table[5]
    assert dict(table.items()) == {1: "one", 2: "two", 3: "three", 4: "four"}

    fresh: list[str] = []
    table = LazyTable({1: "a", 3: "b"}, lambda owner: (fresh.append(owner), [
        dict.__setitem__(table, k, v) for k, v in entries[owner].items()]))
    assert table.get(4) == "four" and fresh == ["a", "b"]  # unlisted: every owner loaded
    assert len(table) == 4 and fresh == ["a", "b"]


def test_registering_an_opcode_outside_its_listed_family_is_refused():
    from neuron_sim.interpreter.ops.registry import implements

    def imposter(ctx, x):
        return x

    imposter.__module__ = "neuron_sim.interpreter.ops.imposter"
    with pytest.raises(RuntimeError, match="lists it under neuron_sim.interpreter.ops.elementwise"):
        implements(Opcode.NEGATE)(imposter)


def test_an_owner_that_fails_to_load_fails_again_on_the_next_lookup():
    """A family whose import raises is not marked loaded: the next lookup raises again
    instead of answering from a table that lacks its entries."""
    attempts: list[str] = []

    def load(owner: str) -> None:
        attempts.append(owner)
        raise ImportError(f"no module {owner}")

    table = LazyTable({1: "broken"}, load)
    for _ in range(2):
        with pytest.raises(ImportError):
            table.get(1)
    assert attempts == ["broken", "broken"]


def test_lazy_exports_load_a_name_on_first_read_and_refuse_unknown_ones():
    """``lazy_exports``: a name's module (a dotted name is absolute, a bare one is relative to
    the package) is imported when the name is first read, the value is kept in the namespace,
    ``dir`` lists the names not yet read, and an unknown name is an AttributeError naming the
    package."""
    import json.decoder
    import pytest
    from neuron_sim.lazy import lazy_exports

    namespace: dict = {}
    getattr_, dir_ = lazy_exports("json", {"JSONDecoder": "json.decoder", "dumps": "encoder"},
                                  namespace)
    assert "JSONDecoder" in dir_() and "JSONDecoder" not in namespace
    assert getattr_("JSONDecoder") is json.decoder.JSONDecoder
    assert namespace["JSONDecoder"] is json.decoder.JSONDecoder
    with pytest.raises(AttributeError):  # json.encoder has no ``dumps``: read there, not in json
        getattr_("dumps")
    with pytest.raises(AttributeError, match="module 'json' has no attribute 'nothing'"):
        getattr_("nothing")
