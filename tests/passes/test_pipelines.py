"""Named pipelines: the closer in #NN order, --skip, --pipeline exclusive with --passes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from neuron_sim.errors import UserError
from neuron_sim.passes.named_pipelines import PIPELINES, pipeline_entries
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
