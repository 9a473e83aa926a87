"""Named pipelines: built from the slots the passes declare, the closer in #NN order, --skip,
--pipeline exclusive with --passes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from neuron_sim.errors import UserError
from neuron_sim.passes.base import HloPass
from neuron_sim.passes.named_pipelines import PIPELINES, pipeline_entries, pipelines_of
from neuron_sim.passes.registry import pass_keys


def test_the_closer_is_in_registration_order_and_complete():
    numbers = [n for n, _ in PIPELINES["neuron-closer"]]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert {k for _, k in PIPELINES["neuron-closer"]} <= set(pass_keys())


def test_skip_leaves_a_pass_out_and_an_unknown_one_is_refused():
    keys = [k for _, k in pipeline_entries("neuron-closer", ["aws_neuron_inject_numerical_errors"])]
    assert "aws_neuron_inject_numerical_errors" not in keys
    once = iter(["aws_neuron_inject_numerical_errors"])
    assert [k for _, k in pipeline_entries("neuron-closer", once)] == keys
    with pytest.raises(UserError):
        pipeline_entries("neuron-closer", ["dce"])
    with pytest.raises(UserError):
        pipeline_entries("nosuch")


def test_pipeline_and_passes_are_mutually_exclusive():
    done = subprocess.run([sys.executable, "-m", "neuron_sim.cli", "opt", "x.hlo", "--passes",
                           "dce", "--pipeline", "neuron-closer"], capture_output=True, text=True)
    assert done.returncode == 2 and "not allowed with" in done.stderr


def _toy(key: str, pipelines: dict[str, int]) -> type[HloPass]:
    return type(key.title(), (HloPass,), {"name": key, "pipelines": pipelines})


def test_a_pipeline_is_the_passes_that_name_it_in_slot_order():
    """Declared out of order, listed by slot; a pass in two pipelines is in both; a pass that
    names none is in none."""
    late, early, both, none = (_toy("late", {"p": 30}), _toy("early", {"p": 7}),
                               _toy("both", {"q": 1, "p": 12}), _toy("none", {}))
    assert pipelines_of([late, early, both, none]) == {
        "p": ((7, "early"), (12, "both"), (30, "late")), "q": ((1, "both"),)}


def test_two_passes_in_one_slot_is_an_error_naming_both():
    with pytest.raises(ValueError, match="passes first and second both take #5 of pipeline p"):
        pipelines_of([_toy("first", {"p": 5}), _toy("second", {"p": 5})])



def test_a_pass_that_needs_an_option_joins_the_pipeline_only_when_it_is_given():
    """InjectNumericalErrors declares ``pipeline_only_with = "targets"``: absent from the closer
    without targets (and named by ``left_out``), present when targets are given under any of
    the three spellings of an option (NAME, key.NAME, ClassName.NAME); an empty value is not
    given."""
    from neuron_sim.passes.named_pipelines import left_out, named_pipeline

    inject = "aws_neuron_inject_numerical_errors"
    assert inject not in [p.name for p in named_pipeline("neuron-closer")]
    assert [line.split(":")[0] for line in left_out("neuron-closer", {})] == [inject]
    assert left_out("neuron-closer", {}, skip=[inject]) == []
    for given in ({"targets": "root"}, {f"{inject}.targets": "add"},
                  {"InjectNumericalErrors.targets": "root"}):
        assert inject in [p.name for p in named_pipeline("neuron-closer", (), given)]
        assert left_out("neuron-closer", given) == []
    assert inject not in [p.name for p in named_pipeline("neuron-closer", (), {"targets": " "})]
