"""``fuzz --oracle xla``: the comparison rule, the classifiers of documented XLA:CPU
differences on minimal modules run by XLA:CPU itself, the known XLA bug's case, and a bounded
campaign from a fixed seed with no unexplained disagreement.

Expected values are derived by hand in each docstring (XLA's operation semantics), or are what
XLA:CPU computes (the oracle's side).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.interpreter import execute
from neuron_sim.topology import Topology
from neuron_sim.verify.fuzz.oracle_compare import TOLERANCE_ULPS, compare_leaf, compare_outputs
from neuron_sim.verify.fuzz.xla_differences import (BF16_PROMOTED, DENORMALS_FLUSHED,
                                                    FUSED_MULTIPLY_ADD, MESH_DEVICE_IDS,
                                                    NAN_DROPPED,
                                                    NON_IDENTITY_INIT, SEVERAL_MESHES, explain)
from neuron_sim.xla_cpu import jaxlib_installed

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "data" / "xla_oracle"

needs_jaxlib = pytest.mark.skipif(not jaxlib_installed(), reason="jaxlib is not installed")


# --------------------------------------------------------------------------------------------
# The comparison rule.


def test_exact_comparison_treats_nans_as_equal_and_signed_zeros_as_different():
    """Any two NaNs are equal (no payload is promised); -0.0 and +0.0 are different values."""
    ours = np.array([[np.nan, 0.0, 1.0]], np.float32)
    xla = np.array([[-np.nan, -0.0, 1.0]], np.float32)
    bad, used = compare_leaf(ours, xla, tolerant=False)
    assert bad.tolist() == [[False, True, False]] and not used


def test_tolerance_is_ulps_of_the_outputs_largest_magnitude():
    """f32 eps = 2**-23; on a device whose output reaches 8.0, the tolerance is
    64 * 2**-23 * 8 = 2**-14: a difference of 2**-15 passes, 2**-13 does not; an infinity must
    match exactly."""
    assert TOLERANCE_ULPS == 64
    ours = np.array([[8.0, 1.0, 1.0, np.inf]], np.float32)
    xla = np.array([[8.0, 1.0 + 2**-15, 1.0 + 2**-13, 1e30]], np.float32)
    bad, used = compare_leaf(ours, xla, tolerant=True)
    assert bad.tolist() == [[False, False, True, True]] and used
    assert compare_leaf(ours, xla, tolerant=False)[0].tolist() == [[False, True, True, True]]


def test_integers_are_exact_even_in_a_module_with_reductions():
    module = parse_module(REDUCE_INIT)
    ours = [np.array([[1, 2]], np.int32)]
    assert compare_outputs(module, ours, [np.array([[1, 3]], np.int32)]).verdict == "differ"


# --------------------------------------------------------------------------------------------
# Classifiers, each on its minimal module (docs/semantics.md, XLA:CPU runtime differences).

REDUCE_INIT = """HloModule reduce_init

%max (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %m = s32[] maximum(%a, %b)
}

ENTRY %main (x: s32[2,1]) -> s32[2] {
  %x = s32[2,1] parameter(0)
  %zero = s32[] constant(0)
  ROOT %r = s32[2] reduce(%x, %zero), dimensions={1}, to_apply=%max
}
"""

FMA = """HloModule fma

ENTRY %main (x: f32[1], y: f32[1], z: f32[1]) -> f32[1] {
  %x = f32[1] parameter(0)
  %y = f32[1] parameter(1)
  %z = f32[1] parameter(2)
  %m = f32[1] multiply(%x, %y)
  ROOT %a = f32[1] add(%m, %z)
}
"""


def _both(text: str, inputs: list, fast: bool = False) -> tuple:
    from neuron_sim.xla_cpu import shared_xla
    from neuron_sim.xla_cpu.client import per_device_arguments

    module = parse_module(text)
    topology = Topology(module.replica_count, module.num_partitions)
    ours = execute(module, inputs, topology).outputs
    xla = shared_xla(topology.num_devices)
    xla.fast_compile = fast
    theirs = xla.run(module, per_device_arguments(module, inputs, topology.num_devices),
                     topology)
    return module, topology, ours, theirs


@needs_jaxlib
def test_a_non_identity_reduce_init_is_recognized():
    """reduce(max, init 0) of [[-5], [7]] over the size-1 dimension is [max(0,-5), max(0,7)]
    = [0, 7] by XLA's semantics (the init is combined in); XLA:CPU, which assumes an identity
    init, returns the elements themselves, [-5, 7]."""
    module, topology, ours, theirs = _both(REDUCE_INIT, [np.array([[-5], [7]], np.int32)])
    assert ours[0].tolist() == [[0, 7]]
    comparison = compare_outputs(module, ours, theirs)
    assert comparison.verdict == "differ"
    assert theirs[0].tolist() == [[-5, 7]]
    assert explain(module, topology, comparison, ours, theirs) == NON_IDENTITY_INIT


@needs_jaxlib
def test_a_contracted_multiply_add_is_recognized():
    """x = y = 1 + 2**-23, z = -(1 + 2**-22): x*y rounds to 1 + 2**-22 in f32, so the
    separately rounded sum is 0; the exact x*y + z is 2**-46, what one fused multiply-add
    gives. XLA:CPU's default compile contracts the two."""
    x = np.array([1 + 2**-23], np.float32)
    z = np.array([-(1 + 2**-22)], np.float32)
    module, topology, ours, theirs = _both(FMA, [x, x, z])
    assert ours[0].tolist() == [[0.0]]
    comparison = compare_outputs(module, ours, theirs)
    assert comparison.verdict == "differ"
    assert theirs[0].tolist() == [[2.0**-46]]
    assert explain(module, topology, comparison, ours, theirs) == FUSED_MULTIPLY_ADD


NAN_MAX = """HloModule nan_max, num_partitions=2

%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}

ENTRY %main (x: f32[1]) -> f32[1] {
  %x = f32[1] parameter(0)
  ROOT %mx = f32[1] all-reduce(%x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%max
}
"""


@needs_jaxlib
def test_a_nan_lost_by_a_max_all_reduce_is_recognized():
    """maximum(NaN, 1) is NaN in HLO (maximum propagates NaN), so both partitions get NaN;
    XLA:CPU's max all-reduce folds with std::max and gives 1."""
    x = np.array([[np.nan], [1.0]], np.float32)
    module, topology, ours, theirs = _both(NAN_MAX, [x])
    assert np.isnan(ours[0]).all()
    assert theirs[0].tolist() == [[1.0], [1.0]]
    comparison = compare_outputs(module, ours, theirs)
    assert explain(module, topology, comparison, ours, theirs) == NAN_DROPPED
    # The same difference in the other direction is not this class.
    assert explain(module, topology, compare_outputs(module, theirs, ours), theirs, ours) \
        != NAN_DROPPED


FTZ = """HloModule ftz

ENTRY %main (x: f32[1], y: f32[1]) -> f32[1] {
  %x = f32[1] parameter(0)
  %y = f32[1] parameter(1)
  ROOT %m = f32[1] multiply(%x, %y)
}
"""

BF16_SUM = """HloModule bf16_sum, num_partitions=4

%add (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
}

ENTRY %main (x: bf16[1]) -> bf16[1] {
  %x = bf16[1] parameter(0)
  ROOT %r = bf16[1] all-reduce(%x), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%add
}
"""


@needs_jaxlib
def test_a_flushed_denormal_is_recognized():
    """2**-100 * 2**-30 = 2**-130, a subnormal f32 (the smallest normal is 2**-126), exact in
    HLO; XLA:CPU flushes it to 0."""
    module, topology, ours, theirs = _both(FTZ, [np.array([2.0**-100], np.float32),
                                                 np.array([2.0**-30], np.float32)])
    assert ours[0].tolist() == [[2.0**-130]]
    assert theirs[0].tolist() == [[0.0]]
    comparison = compare_outputs(module, ours, theirs)
    assert explain(module, topology, comparison, ours, theirs) == DENORMALS_FLUSHED


@needs_jaxlib
def test_a_bf16_sum_all_reduce_in_f32_is_recognized():
    """256 + 1 + 1 + 1 in bf16 (8 significant bits: 256's neighbours are 254 and 258), adding
    in the group's order and rounding each time: 257 -> 256 (tie to even), three times: 256.
    XLA:CPU sums in f32 (259) and rounds once: 260 (tie to even)."""
    import ml_dtypes

    x = np.array([[256.0], [1.0], [1.0], [1.0]], ml_dtypes.bfloat16)
    module, topology, ours, theirs = _both(BF16_SUM, [x])
    assert ours[0].astype(np.float32).ravel().tolist() == [256.0] * 4
    assert theirs[0].astype(np.float32).ravel().tolist() == [260.0] * 4
    comparison = compare_outputs(module, ours, theirs)
    assert comparison.verdict == "differ"
    assert explain(module, topology, comparison, ours, theirs) == BF16_PROMOTED


def test_an_integer_difference_is_not_excused_by_a_multiply_add():
    """The FMA classifier takes float mismatches of a few ulps only."""
    module = parse_module(FMA.replace("f32", "s32"))
    topology = Topology()
    ours = [np.array([[0]], np.int32)]
    theirs = [np.array([[1]], np.int32)]
    assert explain(module, topology, compare_outputs(module, ours, theirs), ours, theirs) \
        is None


def jaxlib_version() -> tuple[int, ...]:
    """The installed jaxlib's (major, minor): XLA bugs are fixed from one release to the next."""
    from importlib.metadata import version

    return tuple(int(part) for part in version("jaxlib").split(".")[:2])


@needs_jaxlib
def test_the_two_meshes_case_is_the_known_xla_bug():
    """tests/data/xla_oracle/two_meshes/README.md derives 28 on every replica for %all and
    12, 16, 12, 16, ... for %pairs."""
    text = (CASES / "two_meshes" / "module.hlo").read_text()
    module, topology, ours, theirs = _both(text, [])
    assert ours[0].tolist() == [28] * 8
    assert ours[1].tolist() == [12, 16] * 4
    assert theirs[1].tolist() == [12, 16] * 4
    if jaxlib_version() >= (0, 12):  # fixed there (seen with jaxlib 0.12.0.1)
        assert theirs[0].tolist() == [28] * 8
        return
    assert theirs[0].tolist() == [1, 1, 5, 5, 9, 9, 13, 13]  # jaxlib 0.10.2's wrong result
    comparison = compare_outputs(module, ours, theirs)
    assert explain(module, topology, comparison, ours, theirs) == SEVERAL_MESHES


@needs_jaxlib
def test_the_mesh_device_ids_case_is_the_known_xla_bug():
    """tests/data/xla_oracle/mesh_device_ids/README.md derives groups {0,1}, {2,3}: sums of
    1 << p are 3, 3, 12, 12."""
    text = (CASES / "mesh_device_ids" / "module.hlo").read_text()
    module, topology, ours, theirs = _both(text, [])
    assert ours[0].tolist() == [3, 3, 12, 12]
    assert theirs[0].tolist() == [5, 10, 5, 10]  # jaxlib 0.10.2's wrong result
    comparison = compare_outputs(module, ours, theirs)
    assert explain(module, topology, comparison, ours, theirs) == MESH_DEVICE_IDS


@needs_jaxlib
def test_outputs_that_differ_for_different_known_reasons_are_explained_together():
    """tests/data/xla_oracle/two_causes/README.md: out0 and out5 are max(0, -41) = 0 by HLO
    (the init is combined in), out4 is a one-group sum read on the wrong mesh by XLA:CPU."""
    from neuron_sim.io import read_npz
    from neuron_sim.verify.fuzz.oracle import OracleRun
    from neuron_sim.xla_cpu import shared_xla

    case = CASES / "two_causes"
    module = parse_module((case / "module.hlo").read_text())
    arrays = read_npz(case / "inputs.npz")
    inputs = [arrays[f"arg{i}"] for i in range(3)]
    topology = Topology(4, 1)
    ours = execute(module, inputs, topology).outputs
    assert ours[0][3, 12, 0] == 0 and ours[5][3, 12, 0] == 0
    outcome = OracleRun(shared_xla(4)).outcome(module, topology, inputs)
    # jaxlib 0.12 reads out4's groups on the right mesh: only the init difference is left.
    assert outcome.klass == (NON_IDENTITY_INIT if jaxlib_version() >= (0, 12)
                             else f"{SEVERAL_MESHES} + {NON_IDENTITY_INIT}")


# --------------------------------------------------------------------------------------------
# A bounded campaign.


@needs_jaxlib
def test_a_seeded_campaign_has_no_unexplained_disagreement(tmp_path):
    """120 modules of seed 11 (every kind of fuzz module: idioms, random programs with
    collectives, control flow, 2-8 devices) compared on XLA:CPU and the interpreter."""
    from neuron_sim.cli import main

    out = tmp_path / "oracle.json"
    code = main(["fuzz", "--oracle", "xla", "--examples", "120", "--seed", "11", "--json",
                 str(out), "--corpus", str(tmp_path / "corpus")])
    oracle = json.loads(out.read_text())["oracle"]
    assert oracle["unexplained"] == 0, oracle["disagreements"]
    assert code == 0
    assert oracle["modules"] == 120
    assert oracle["compared"] >= 100
    assert oracle["compared"] == oracle["agree"] + oracle["explained"]
    assert sum(oracle["by_class"].values()) == 120


# --------------------------------------------------------------------------------------------
# Minimization and saving, with a stand-in for XLA that gets negate wrong.


class _NegateOffByOne:
    """Computes like the interpreter, except that any module with a negate gets every output
    plus one: a known, planted disagreement."""

    def start(self) -> None:
        pass

    def run(self, module, arguments, topology):
        from neuron_sim.hlo.opcodes import Opcode

        outputs = execute(module, arguments, topology).outputs
        if any(inst.opcode is Opcode.NEGATE for inst in module.instructions()):
            outputs = [o + np.ones((), o.dtype) if o.dtype.kind in "iuf" else o
                       for o in outputs]
        return outputs

    def run_batch(self, items, topology):
        return [self.run(module, arguments, topology) for module, arguments in items]


PLANTED = """HloModule planted, replica_count=2

%add (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %r = s32[] add(%a, %b)
}

ENTRY %main (x: s32[4], y: s32[4]) -> s32[4] {
  %x = s32[4] parameter(0)
  %y = s32[4] parameter(1)
  %s = s32[4] add(%x, %y)
  %ar = s32[4] all-reduce(%s), replica_groups={{0,1}}, to_apply=%add
  %n = s32[4] negate(%ar)
  ROOT %m = s32[4] multiply(%n, %x)
}
"""


def test_an_unexplained_disagreement_is_minimized_to_its_cause():
    """The planted difference lives in the negate alone: the minimizer keeps it and drops the
    rest (parameter y, the all-reduce, the multiply, the second replica)."""
    from neuron_sim.verify.fuzz.oracle import UNEXPLAINED, OracleRun, minimize_disagreement

    module = parse_module(PLANTED)
    topology = Topology(2, 1)
    run = OracleRun(_NegateOffByOne())
    inputs = [np.arange(8, dtype=np.int32).reshape(2, 4), np.ones((2, 4), np.int32)]
    outcome = run.outcome(module, topology, inputs)
    assert outcome.klass == UNEXPLAINED
    small, where, _, _ = minimize_disagreement(run, module, topology, inputs, outcome.detail, 0)
    assert [inst.opcode.spelling for inst in small.entry.instructions] == ["parameter", "negate"]
    assert where == Topology(1, 1)


def test_a_campaign_saves_each_new_disagreement(tmp_path):
    """With the stand-in, fuzz modules holding a negate disagree; each kind is minimized and
    saved with its module, inputs, both outputs and the command that reproduces it."""
    from neuron_sim.verify.fuzz.oracle import run_oracle_campaign

    campaign = run_oracle_campaign(examples=40, seed=1, corpus=tmp_path,
                                   xla=_NegateOffByOne())
    assert campaign.modules == 40
    assert campaign.unexplained == sum(d.count for d in campaign.disagreements) > 0
    first = campaign.disagreements[0]
    saved = tmp_path / first.directory
    assert sorted(p.name for p in saved.iterdir()) == ["case.json", "inputs.npz", "module.hlo",
                                                       "ours.npz", "xla.npz"]
    case = json.loads((saved / "case.json").read_text())
    assert case["reproduce"].startswith("neuron-sim run module.hlo --inputs inputs.npz")
    assert "negate" in (saved / "module.hlo").read_text()
