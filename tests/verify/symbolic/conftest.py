"""The pool table takes z3 tens of seconds: build it once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def pool_rows():
    from neuron_sim.proofs.pools import pool_table
    return {(row.pool, str(row.layout)): row for row in pool_table()}
