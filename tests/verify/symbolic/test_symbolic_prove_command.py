"""``neuron-sim prove``: per-pair verdicts with seed matcher verdicts, the pools table, JSON,
and the exit codes 0 proven / 1 refuted / 2 usage / 3 FAILED_TO_PROVE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_sim.cli import main
from neuron_sim.proofs.idioms import ArDsIdiom

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
JAX = ROOT / "tests" / "data" / "jax"


def test_proven_jax_pair_exits_0_and_says_why_the_seeds_miss_it(capsys):
    assert main(["prove", str(JAX / "spmd_ar_ds_x_2x4.hlo")]) == 0
    out = capsys.readouterr().out
    assert "PROVEN: clamp(offset) == position * 4 on all 8 devices" in out
    assert "%dynamic_slice.4 in %select_dynamic-slice_fusion of %psum_invariant.7" in out
    assert "never visits the fusion computation" in out
    assert "Summary: 1 proven, 0 refuted, 0 failed to prove" in out


def test_refuted_pair_exits_1_with_the_witness_device_and_the_accepting_seed(capsys):
    assert main(["prove", str(EXAMPLES / "ar_ds_single_group_unsorted.hlo")]) == 1
    out = capsys.readouterr().out
    assert "REFUTED" in out
    assert "witness: device 0 (replica 0, partition 0) at position 1" in out
    assert "seed aws_neuron_rewrite_all_reduce_dynamic_slice: accepts" in out


def test_offset_outside_the_sub_language_exits_3_naming_it(capsys, tmp_path):
    text = ArDsIdiom("p", 1, 4, ((0, 1, 2, 3),), "flattened", 8, 2,
                     ("%offset = s32[] constant(0)",)).text()
    text = text.replace("%offset = s32[] constant(0)", "%offset = s32[] parameter(1)").replace(
        "(x: s32[8,1])", "(x: s32[8,1], o: s32[])")
    path = tmp_path / "input_offset.hlo"
    path.write_text(text)
    assert main(["prove", str(path)]) == 3
    out = capsys.readouterr().out
    assert "FAILED_TO_PROVE: %offset is outside the index sub-language" in out


@pytest.mark.parametrize("argv, message", [
    (["prove"], "prove needs MODULE.hlo (or --pools)"),
    (["prove", "x.hlo", "--pools"], "either MODULE.hlo or --pools"),
    (["prove", "/no/such/file.hlo"], "no such file"),
    (["prove", str(EXAMPLES / "ar_ds_single_group_sorted.hlo"), "--partitions", "2"],
     "%all-reduce cannot run on topology 1x2"),
    (["prove", "--pools", "--max-devices", "0"], "--max-devices"),
])
def test_bad_usage_and_input_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") <= 2


def test_json_lists_each_pair_with_its_witness_and_seed_verdicts(capsys):
    assert main(["prove", str(EXAMPLES / "ar_ds_multi_group_strided.hlo"), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    (pair,) = data["pairs"]
    assert pair["status"] == "REFUTED" and pair["group_mode"] == "FlattenedID"
    assert pair["witness"]["device"] == 1 and pair["witness"]["expected_start"] == 0
    assert {m["pass"]: m["accepts"] for m in pair["seed_matchers"]} == {
        "aws_neuron_rewrite_all_reduce_dynamic_slice": False,
        "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups": True}
    assert data["summary"] == {"PROVEN": 0, "REFUTED": 1, "FAILED_TO_PROVE": 0}
    assert data["exit_code"] == 1


def test_module_without_pairs_has_nothing_to_refute(capsys):
    assert main(["prove", str(EXAMPLES / "delete_permute_real_all_reduce.hlo")]) == 0
    assert "0 all-reduce + dynamic-slice pairs" in capsys.readouterr().out


@pytest.fixture
def cached_pool_table(monkeypatch, pool_rows):
    import neuron_sim.proofs.pools as theorems
    monkeypatch.setattr(theorems, "pool_table", lambda max_devices: list(pool_rows.values()))


def test_pools_table_lists_every_pool_and_layout_and_exits_1(capsys, cached_pool_table):
    assert main(["prove", "--pools"]) == 1
    out = capsys.readouterr().out
    for pool in ("identity", "multiplied", "repeated"):
        assert out.count(pool) >= 2
    assert "(1, 2, 46341, 1)" in out and "(2, 2, 1, 2)" in out
    assert out.count("agrees") == 5 and "DISAGREES" not in out
    assert "PROVEN" in out and "WARNING" not in out


def test_pools_json_has_replays_and_proven_conditions(capsys, cached_pool_table):
    assert main(["prove", "--pools", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    rows = {(r["pool"], r["layout"]): r for r in data["rows"]}
    assert rows[("repeated", "contiguous")]["verdict"] == "PROVEN"
    assert rows[("identity", "strided")]["smallest_witness"]["device"] == 1
    assert rows[("identity", "strided")]["replay"]["agrees"]
    assert all(r["sound_exactly_when_proven"] for r in data["rows"])
