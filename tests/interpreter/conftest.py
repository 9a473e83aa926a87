"""Fixtures of the interpreter's tests."""

from __future__ import annotations

import pytest

from neuron_sim.interpreter import module_facts


@pytest.fixture
def compiled_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every computation runs its compiled plan from its first evaluation (by default the
    first ``WALKED_EVALUATIONS`` are walked): for the tests of what plans do."""
    monkeypatch.setattr(module_facts, "WALKED_EVALUATIONS", 0)


@pytest.fixture(params=["plan", "walk"])
def either_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test runs twice: once with compiled plans from the first evaluation, once walking
    every computation instruction by instruction."""
    monkeypatch.setattr(module_facts, "WALKED_EVALUATIONS",
                        0 if request.param == "plan" else 1 << 30)
    return request.param
