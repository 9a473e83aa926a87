"""VerifyOptions: one frozen record of the verifier's settings, with the documented defaults
(docs/verify.md), normalized and validated once, when it is made or replaced."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from neuron_sim import parse_module
from neuron_sim.errors import UserError
from neuron_sim.passes.contracts import EXACT, INFINITY_TO_FINITE
from neuron_sim.topology import Topology
from neuron_sim.verify import VerifyOptions, check_modules, check_pass
from neuron_sim.verify.checks import CHECKS

MODULE = parse_module("""HloModule two_by_four, replica_count=2, num_partitions=4

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%x)
}
""")


def test_the_defaults_are_the_documented_ones():
    """docs/verify.md: seven input sets (one per style: distinct, exact, constants, signed,
    nan, boundary, uniform) from seed 0, proof "auto", the exact contract, 30 s per source
    execution, no memory bound, the local backend, minimized, every check, no breaking pass."""
    options = VerifyOptions()
    assert (options.topologies, options.trials, options.seed, options.inputs) == \
        (None, 7, 0, None)
    assert (options.proof, options.contract, dict(options.pass_options)) == ("auto", EXACT, {})
    assert (options.timeout, options.max_memory, options.backend, options.runner) == \
        (30.0, None, "local", None)
    assert (options.minimize, options.name, options.name_breaking_pass) == (True, None, False)
    assert options.checks == CHECKS


def test_topologies_are_parsed_once_duplicates_dropped_in_order():
    options = VerifyOptions(topologies=["2x2", Topology(1, 4), "2x2", "4x1"])
    assert options.topologies == (Topology(2, 2), Topology(1, 4), Topology(4, 1))
    assert VerifyOptions(topologies="1x8").topologies == (Topology(1, 8),)
    with pytest.raises(UserError, match="no topology to verify on"):
        VerifyOptions(topologies=[])


def test_without_topologies_a_module_is_verified_on_its_header():
    assert VerifyOptions().topologies_for(MODULE) == [Topology(2, 4)]
    assert VerifyOptions(topologies="1x2").topologies_for(MODULE) == [Topology(1, 2)]


def test_a_contract_may_be_named():
    """"refinement" is the old name of INFINITY_TO_FINITE (neuron_sim.passes.contracts)."""
    assert VerifyOptions(contract="refinement").contract is INFINITY_TO_FINITE
    with pytest.raises(UserError, match="unknown contract"):
        VerifyOptions(contract="approximately")


@pytest.mark.parametrize("changes, message", [
    ({"trials": 0}, "trials must be at least 1, not 0"),
    ({"proof": "maybe"}, "unknown proof mode 'maybe'"),
    ({"proof": "symbolic", "inputs": [np.zeros(4, np.float32)]}, "give one or the other"),
    ({"timeout": 0}, "timeout must be positive"),
    ({"timeout": -1.0}, "timeout must be positive"),
    ({"max_memory": 0}, "max_memory must be positive"),
    ({"backend": "nccl"}, "unknown backend 'nccl'"),
])
def test_contradictory_or_out_of_range_settings_are_refused_when_made(changes, message):
    with pytest.raises(UserError, match=message):
        VerifyOptions(**changes)
    with pytest.raises(UserError, match=message):
        VerifyOptions().replace(**changes)  # a variant is validated like the original


def test_a_runner_replaces_the_backend_so_the_backend_is_not_judged():
    def runner(module, inputs, topology, seed):
        raise AssertionError("not run")

    assert VerifyOptions(backend="elsewhere", runner=runner).runner is runner


def test_given_inputs_make_the_proof_mode_sampled():
    """Given inputs ask about those inputs only: "auto" does not try a proof for all."""
    assert VerifyOptions().proof_mode == "auto"
    assert VerifyOptions(inputs=[np.zeros(4, np.float32)]).proof_mode == "sampled"
    assert VerifyOptions(proof="symbolic").proof_mode == "symbolic"


def test_the_record_is_frozen_and_keeps_its_own_copy_of_the_pass_options():
    given = {"seed": "3"}
    options = VerifyOptions(pass_options=given)
    given["seed"] = "4"
    assert dict(options.pass_options) == {"seed": "3"}
    with pytest.raises(TypeError):
        options.pass_options["seed"] = "5"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.trials = 1  # type: ignore[misc]


def test_replace_changes_only_what_it_names():
    options = VerifyOptions(trials=3, seed=5, minimize=False)
    variant = options.replace(seed=6)
    assert (variant.trials, variant.seed, variant.minimize) == (3, 6, False)
    assert (options.trials, options.seed, options.minimize) == (3, 5, False)
    with pytest.raises(TypeError):
        options.replace(trails=2)  # a misspelt field is an error, not ignored


def test_the_entry_points_take_at_most_six_parameters():
    for function in (check_pass, check_modules):
        assert len(inspect.signature(function).parameters) <= 6, function.__name__


def test_replace_normalizes_a_variant_as_the_constructor_does():
    """The variant equals the record made from the original's fields and the changes:
    a contract named by its string, pass options copied into a read-only mapping, topologies
    parsed."""
    given = {"seed": "3"}
    variant = VerifyOptions(trials=2).replace(contract="refinement", pass_options=given,
                                              topologies=[Topology(2, 1)])
    assert variant == dataclasses.replace(VerifyOptions(trials=2), contract="refinement",
                                          pass_options=given, topologies=[Topology(2, 1)])
    assert variant.contract is INFINITY_TO_FINITE
    given["seed"] = "4"
    assert dict(variant.pass_options) == {"seed": "3"}
    assert variant.topologies == (Topology(2, 1),)
