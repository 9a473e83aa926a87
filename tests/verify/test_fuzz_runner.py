"""neuron_sim.verify.fuzz: the seeded driver of the strategies, crash minimization, kinds and signatures."""

from __future__ import annotations

import json

import pytest
from hypothesis import strategies as st

from neuron_sim.hlo import parse_module_file
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes import HloPass
from neuron_sim.verify.fuzz.generator import fuzz_modules, module_at
from neuron_sim.verify.fuzz.runner import crash_line, run_campaign
from neuron_sim.verify.strategies import RandomDraw, collective_idioms, draw_example, topologies


class CrashOnMultiply(HloPass):
    """A pass that raises on every module with a multiply in its entry (and changes nothing
    otherwise): a crash the fuzzer must find, minimize and save."""

    name = "test_crash_on_multiply"

    def run_on_module(self, module, context) -> bool:
        for inst in module.entry.instructions:
            if inst.opcode is Opcode.MULTIPLY:
                raise NotImplementedError(f"multiply is not supported here, sorry: %{inst.name}")
        return False


def test_the_same_seed_draws_the_same_module_and_another_seed_another():
    strategy = fuzz_modules(devices=8)
    assert module_at(strategy, 3, 7).to_text() == module_at(strategy, 3, 7).to_text()
    texts = {module_at(strategy, seed, 0).to_text() for seed in range(6)}
    assert len(texts) > 1


def test_random_draw_runs_the_strategies_and_refuses_foreign_ones():
    topology = draw_example(topologies(devices=8), "x")
    assert topology.num_devices == 8
    module = draw_example(collective_idioms(topology=topology, kinds=("ar_ds_fused",)), 1)
    assert any(i.opcode is Opcode.FUSION for i in module.entry.instructions)
    with pytest.raises(TypeError):
        RandomDraw(0)(st.integers())


def test_crash_line_reads_through_the_pass_error():
    try:
        try:
            raise KeyError("k")
        except KeyError as inner:
            raise RuntimeError("pass x failed on module m") from inner
    except RuntimeError as outer:
        assert crash_line(outer) == "KeyError: 'k'"


def test_a_crash_is_minimized_and_saved_with_its_command(tmp_path):
    """Hand derivation: the smallest well-formed entry holding a multiply is a parameter and
    multiply(p, p) (2 instructions). Where the multiply only computes a slice offset the
    minimizer cannot drop the dynamic-slice root (no edit of its keeps the shape), so those
    stay larger, but every crash shrinks and keeps its exception."""
    corpus = tmp_path / "corpus"
    campaign = run_campaign([CrashOnMultiply()], examples=30, seed=0, corpus=corpus)
    crashes = [f for f in campaign.failures if f.klass == "crashed"]
    assert crashes and campaign.counts[CrashOnMultiply.name]["crashed"] >= len(crashes)
    for failure in crashes:
        assert failure.minimized and failure.size < failure.original_size
        assert failure.detail.startswith("NotImplementedError: multiply is not supported here")
        case = corpus / failure.key
        before = parse_module_file(case / "before.hlo")
        assert any(i.opcode is Opcode.MULTIPLY for i in before.entry.instructions)
        record = json.loads((case / "fuzz.json").read_text())
        assert record["class"] == "crashed" and "--passes test_crash_on_multiply" in \
            record["reproduce"]
        assert record["reproduce"] in (case / "reproduce.sh").read_text()
    assert min(f.size for f in crashes) == 2
