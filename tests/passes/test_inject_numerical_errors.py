"""InjectNumericalErrors: the positive control — every injection it makes is detected."""

from __future__ import annotations

import pytest

from neuron_sim.passes import PassError, get_pass
from neuron_sim.verify import VerifyOptions, check_pass

from pass_fixtures import load


@pytest.mark.parametrize("targets", ["root", "maximum", "%t", "reshape,transpose"])
def test_every_injection_is_detected(targets):
    module = load("cleanup_io/movement.hlo")
    result = check_pass(module, get_pass("aws_neuron_inject_numerical_errors"), ["1x1"],
                        VerifyOptions(trials=2, minimize=False, pass_options={"targets": targets}))
    assert result.changed and str(result.status) == "UNSOUND"
    assert any("expected" in note for note in result.notes)


def test_no_targets_is_the_seed_error_and_the_module_is_unchanged():
    module = load("cleanup_io/movement.hlo")
    before = module.to_text()
    with pytest.raises(PassError, match="No targets specified."):
        get_pass("aws_neuron_inject_numerical_errors").run(module)
    assert module.to_text() == before


def test_an_unknown_target_changes_nothing():
    module = load("cleanup_io/movement.hlo")
    assert get_pass("aws_neuron_inject_numerical_errors", targets="nosuch").run(module) is False
