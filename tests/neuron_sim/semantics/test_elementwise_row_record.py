"""``ElementwiseDefinition`` is a plain class (its dataclass cost every start-up more than the
whole table): it keeps a frozen dataclass's contract, which these checks spell out by hand —
fields compared one by one, none assignable or deletable, ``terms`` defaulting to a fresh
empty mapping, a repr naming every field, and no hash for a row holding mappings."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.semantics.element_kinds import Domain
from neuron_sim.semantics.elementwise import DEFINITIONS, ElementwiseDefinition, Form

FIELDS = ("opcode", "form", "kernels", "terms", "commutative", "multiset", "exact_fold",
          "direct", "direct_domains")


def _row(**changes):
    fields = dict(opcode=Opcode.ADD, form=Form.SAME, kernels={Domain.FLOAT: np.add})
    fields.update(changes)
    return ElementwiseDefinition(**fields)


def test_rows_are_equal_field_by_field():
    assert _row() == _row()
    assert _row() != _row(commutative=True)
    assert _row() != _row(opcode=Opcode.SUBTRACT)
    assert _row(terms={}) == _row()  # the default terms are an empty mapping
    assert _row() != "ADD"


def test_a_rows_fields_cannot_change():
    row = _row()
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.commutative = True
    with pytest.raises(dataclasses.FrozenInstanceError):
        del row.form
    with pytest.raises(AttributeError):
        row.extra = 1  # no other attribute either
    assert row.commutative is False


def test_defaults_and_repr():
    row = _row()
    assert (row.terms, row.commutative, row.multiset, row.exact_fold, row.direct,
            row.direct_domains) == ({}, False, False, frozenset(), None, ())
    assert row.terms is not _row().terms  # a fresh mapping per row
    text = repr(row)
    assert text.startswith("ElementwiseDefinition(opcode=<Opcode.ADD")
    assert all(f"{name}=" in text for name in FIELDS)


def test_a_row_holding_mappings_has_no_hash_as_a_frozen_dataclass():
    with pytest.raises(TypeError):
        hash(_row())


def test_every_row_of_the_table_reads_its_fields():
    for opcode, row in DEFINITIONS.items():
        assert row.opcode is opcode and isinstance(row.form, Form)
        assert all(isinstance(domain, Domain) for domain in row.kernels)
