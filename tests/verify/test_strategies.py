"""neuron_sim.verify.strategies: valid by construction, printable and parseable, self-verifying, reaching
the seed passes, and the same on the local and the MPI backend.

Properties run a bounded number of examples (hypothesis, no deadline) to stay fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module, parse_module_file
from neuron_sim.hlo.checker import check_module
from neuron_sim.io import read_npz, storable
from neuron_sim.topology import Topology, group_mode, validate_replica_groups
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.passes import PassContext
from neuron_sim.verify.api import VerifyOptions, apply_passes, check_modules, pass_list
from neuron_sim.verify.fuzz.generator import StopDrawing, draw_modules
from neuron_sim.verify.result import Status
from neuron_sim.verify.strategies import (GROUP_MODES, collective_idioms, compact_forms,
                               composite,
                               draw_example, hlo_modules, layout_groups, module_inputs,
                               replica_groups, sampled, topologies)

FAST = settings(max_examples=20, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
REPO = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
RUNNER = REPO / "tests" / "interpreter" / "mpi" / "run_modules.py"
FOLD_PASSES = ("aws_neuron_rewrite_all_reduce_dynamic_slice",
               "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups")
MODE_OPCODE = {"cross_replica": ("all-reduce", False), "cross_partition": ("all-to-all", True),
               "cross_replica_and_partition": ("all-reduce", True),
               "flattened": ("all-reduce", True)}


def test_layouts_match_semantics_iota_examples():
    """docs/semantics.md §2: [2,4]<=[4,2]T(1,0) -> {{0,2,4,6},{1,3,5,7}} (strided), [2,4]<=[8]
    -> {{0,1,2,3},{4,5,6,7}} (contiguous)."""
    assert layout_groups("strided", 8, 4) == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert layout_groups("contiguous", 8, 4) == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert layout_groups("one_unsorted", 4, 4, [1, 0, 2, 3]) == ((1, 0, 2, 3),)
    assert layout_groups("singletons", 3, 1) == ((0,), (1,), (2,))


@FAST
@given(st.data())
def test_replica_groups_are_valid_for_their_mode_and_topology(data):
    topology = data.draw(topologies(max_devices=8))
    mode = data.draw(st.sampled_from(sorted(GROUP_MODES)))
    groups = data.draw(replica_groups(topology, mode))
    opcode, channel = MODE_OPCODE[mode]
    validate_replica_groups(group_mode(opcode, channel, mode == "flattened"),
                            ReplicaGroups.explicit(groups), topology, uniform_required=True)


@FAST
@given(hlo_modules(max_instructions=14))
def test_printed_module_parses_back_to_an_equal_module(module):
    check_module(module)
    again = parse_module(module.to_text())
    assert again.structurally_equal(module) and again.to_text() == module.to_text()


@FAST
@given(collective_idioms())
def test_printed_idiom_parses_back_to_an_equal_module(module):
    again = parse_module(module.to_text())
    assert again.structurally_equal(module) and again.to_text() == module.to_text()


@settings(max_examples=10, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.one_of(hlo_modules(max_instructions=10), collective_idioms()))
def test_a_module_verifies_against_itself(module):
    result = check_modules(module, module, options=VerifyOptions(trials=2, minimize=False))
    assert result.status in (Status.CORRECT, Status.FAILED_TO_PROVE), result.detail


@settings(max_examples=10, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_module_inputs_are_stacked_per_device(data):
    module = data.draw(hlo_modules(max_instructions=4))
    values = data.draw(module_inputs(module))
    devices = module.replica_count * module.num_partitions
    for param, value in zip(module.entry.parameters, values):
        assert value.shape == (devices, *param.shape.dims)


def fold_fire_rate(count: int, seed: int) -> float:
    """The share of ``count`` idioms (8 devices, drawn from ``seed``) on which one of the seed
    fold passes changes the module."""
    fired = []

    def visit(module, index):
        if index >= count:
            raise StopDrawing
        context = PassContext(topology=Topology(module.replica_count, module.num_partitions))
        fired.append(any(apply_passes(module, pass_list(key), context)[1]
                         for key in FOLD_PASSES))

    draw_modules(collective_idioms(topology=topologies(devices=8)), seed, visit)
    return sum(fired) / len(fired)


def test_most_idioms_make_a_seed_fold_pass_fire():
    assert fold_fire_rate(200, seed=0) >= 0.5


@composite
def _collective_modules(draw):
    """An idiom with a collective, or a random module of collectives, on 4 devices."""
    if draw(sampled(("idiom", "module"))) == "idiom":
        return draw(collective_idioms(topology=topologies(devices=4),
                                      kinds=("collective", "ar_ds_single")))
    return draw(hlo_modules(topology=topologies(devices=4),
                            opcodes=("elementwise", "all-reduce", "all-gather",
                                     "reduce-scatter", "all-to-all", "collective-permute")))


@pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec is not installed")
def test_local_and_mpi_backends_agree_bit_for_bit_on_generated_collective_modules(tmp_path):
    """A few generated modules with collectives, run by the MPI backend under mpiexec -n 2 and
    by the local backend: the same bytes."""
    modules = []

    def visit(module, index):
        if len(modules) >= 4:
            raise StopDrawing
        if any(inst.has("replica_groups") or inst.has("source_target_pairs")
               for inst in module.instructions()):
            modules.append(module)

    draw_modules(_collective_modules(), 5, visit)
    jobs = []
    for i, module in enumerate(modules):
        path = tmp_path / f"m{i}.hlo"
        path.write_text(module.to_text())
        jobs.append({"name": f"m{i}", "hlo": str(path), "seed": 3, "mode": "exact",
                     "output": str(tmp_path / f"m{i}.npz")})
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps(jobs))
    done = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, str(RUNNER), str(spec)],
                          capture_output=True, text=True, timeout=150,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    for job in jobs:
        module = parse_module_file(job["hlo"])
        local = interpreter.run(module, None, Topology(module.replica_count,
                                                       module.num_partitions), seed=3)
        arrays = read_npz(job["output"])
        mpi = [arrays[f"out{j}"] for j in range(len(arrays))]
        assert len(mpi) == len(local)
        for got, expected in zip(mpi, local):
            expected = storable(np.asarray(expected))
            assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def test_compact_forms_spell_the_semantics_examples():
    """docs/semantics.md §2: [2,4]<=[8] is {{0,1,2,3},{4,5,6,7}}, [2,4]<=[4,2]T(1,0) is
    {{0,2,4,6},{1,3,5,7}}; the mesh rule: mesh['x'=4,'y'=2] {'x'} groups over x with y kept,
    i.e. the same strided groups. Permuted groups have no compact form."""
    contiguous = [g.to_text() for g in compact_forms(((0, 1, 2, 3), (4, 5, 6, 7)))]
    strided = [g.to_text() for g in compact_forms(((0, 2, 4, 6), (1, 3, 5, 7)))]
    assert contiguous == ["[2,4]<=[8]", "mesh['x'=2,'y'=4] {'y'}"]
    assert strided == ["[2,4]<=[4,2]T(1,0)", "mesh['x'=4,'y'=2] {'x'}"]
    assert compact_forms(((0, 3), (1, 2))) == []


def test_fused_and_indexed_idioms_are_valid_print_back_and_verify_against_themselves():
    strategy = collective_idioms(topology=topologies(devices=8),
                                 kinds=("ar_ds_fused", "indexed_conditional"))
    texts = []
    for index in range(24):
        module = draw_example(strategy, f"fused:{index}")
        check_module(module)
        text = module.to_text()
        assert parse_module(text).to_text() == text
        texts.append(text)
        if index < 6:
            result = check_modules(module, module, options=VerifyOptions(trials=1, minimize=False))
            assert result.status is Status.CORRECT, result.detail
    joined = "\n".join(texts)
    assert "kind=kLoop" in joined and "branch_computations=" in joined
    assert "<=[" in joined and "mesh[" in joined
