"""`neuron-sim opt` and `neuron-sim passes`, through neuron_sim.cli.main with exit codes."""

from __future__ import annotations

import json
import re

from neuron_sim.cli import main
from neuron_sim.hlo import parse_module_file

from pass_fixtures import fixture_path

SINGLE = "aws_neuron_rewrite_all_reduce_dynamic_slice"
MATCH = str(fixture_path("ar_ds_single_group/match.hlo"))
REWRITE_LINE = (f"{SINGLE}: %dynamic-slice -> %reduce-scatter (reduce-scatter, dimensions={{0}}, "
                "replica_groups={{0,1,2,3}}, channel_id=5)")
# The CLI also loads neuron_sim.proofs, which registers the z3-proven fold.
# The collective tier, the cleanup tier (the keys issues 12 and 13 fix: aws_neuron_<snake_case>
# of the seed's class names) and XLA's baselines (issue 15).
CLEANUP_CLASSES = [
    "InlineWeights", "ReplaceRng", "HiloConditionalToSelect", "DynamicSliceTranspose",
    "TransformVariadicReduce", "ReplaceMinimumConstant", "DeviceAssignmentLegalization",
    "RewriteScatterPartition", "PartitionEmbedingOps", "ResolveSelfComparison",
    "ConstantSliceClampSimplifier", "ConstantSliceConvertCanonicalizer",
    "DynamicSliceReshapeCanonicalizer", "EliminateRedundantCompare", "FlattenEntryTuple",
    "PeelOptimizationBarriers", "StripTrivialCollectives", "MetadataNaming", "DefaultMetadata",
    "RewriteModuleDtype", "InjectNumericalErrors"]
KEYS = ["aws_neuron_delete_permute", SINGLE, SINGLE + "_multiple_groups", "dce",
        "delete_permute_guarded", "rewrite_all_reduce_dynamic_slice_proven",
        "xla_reduce_scatter_creator", "xla_all_reduce_simplifier",
        *("aws_neuron_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
          for name in CLEANUP_CLASSES)]


def test_opt_prints_the_rewritten_module_and_one_line_per_rewrite(capsys):
    assert main(["opt", MATCH, "--passes", f"{SINGLE},dce"]) == 0
    out, err = capsys.readouterr()
    assert "ROOT %tuple = (f32[2,3]{1,0}, f32[4]{0}) tuple(%reduce-scatter, %other)" in out
    assert "all-reduce(%x)" not in out
    assert err.splitlines() == [REWRITE_LINE, "dce: no change"]


def test_opt_output_parses_back_to_the_module_the_passes_produced(capsys, tmp_path):
    out_path = tmp_path / "out.hlo"
    assert main(["opt", MATCH, "--passes", SINGLE, "-o", str(out_path)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [REWRITE_LINE, f"wrote {out_path}"]
    written = out_path.read_text()
    assert parse_module_file(str(out_path)).to_text() == written
    assert "reduce-scatter(%x), channel_id=5" in written
    assert [p.name for p in tmp_path.iterdir()] == ["out.hlo"]  # no temporary left behind


def test_opt_accepts_class_names_and_reports_no_change(capsys):
    assert main(["opt", MATCH, "--passes", "DeletePermuteGuarded"]) == 0
    out, err = capsys.readouterr()
    assert out == parse_module_file(MATCH).to_text()
    assert err.splitlines() == ["delete_permute_guarded: no change"]


def test_opt_json_reports_every_pass(capsys):
    assert main(["opt", MATCH, "--passes", f"{SINGLE},dce", "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert err == ""
    assert report["changed"] is True and report["output"] is None
    assert [p["name"] for p in report["passes"]] == [SINGLE, "dce"]
    assert report["passes"][0]["class"] == "RewriteAllReduceDynamicSlice"
    assert report["passes"][0]["rewrites"] == [REWRITE_LINE.split(": ", 1)[1]]
    assert report["passes"][1] == {"name": "dce", "class": "DeadCodeElimination",
                                   "changed": False, "rewrites": [], "warnings": []}
    assert "reduce-scatter(%x)" in report["text"]


def test_opt_explain_says_which_check_rejected_each_candidate(capsys):
    path = str(fixture_path("ar_ds_multiple_groups/fail_13_pool_parameter.hlo"))
    assert main(["opt", path, "--passes", f"{SINGLE},{SINGLE}_multiple_groups", "--explain"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert (f"{SINGLE}_multiple_groups: %dynamic-slice: rejected at check 13: "
            "Slice pool operand is not a constant.") in err
    assert f"{SINGLE}: %dynamic-slice: rejected at check 4: " \
           "All-reduce does not have exactly one replica group." in err
    # The pool's own dynamic-slice gets past the opcode gate, then fails check 2.
    assert (f"{SINGLE}_multiple_groups: %rank: rejected at check 2: "
            "Dynamic slice operand is not an all-reduce.") in err


def test_unknown_pass_is_exit_2_with_one_sentence_naming_the_valid_passes(capsys):
    assert main(["opt", MATCH, "--passes", f"{SINGLE},delete_permute"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("neuron-sim: error: unknown pass 'delete_permute'; valid passes are: ")
    for key in KEYS:
        assert key in err


def test_empty_pass_name_is_exit_2(capsys):
    assert main(["opt", MATCH, "--passes", f"{SINGLE},"]) == 2
    assert "empty pass name" in capsys.readouterr().err


def test_missing_module_is_exit_2(capsys, tmp_path):
    assert main(["opt", str(tmp_path / "nope.hlo"), "--passes", "dce"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_failing_pass_is_exit_2_and_writes_nothing(capsys, tmp_path):
    path = str(fixture_path("ar_ds_single_group/raise_start_index_out_of_range.hlo"))
    out_path = tmp_path / "out.hlo"
    assert main(["opt", path, "--passes", SINGLE, "-o", str(out_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"neuron-sim: error: pass {SINGLE} failed on module ")
    assert "left it unchanged" in err and err.count("\n") == 1
    assert not out_path.exists()


def test_passes_lists_key_class_seed_status_and_contract(capsys):
    assert main(["passes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["key", "class", "seed", "status", "contract"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert sorted(rows) == sorted(KEYS)
    assert rows["aws_neuron_delete_permute"].split() == ["aws_neuron_delete_permute",
                                                         "DeletePermute", "faithful", "exact"]
    assert rows[SINGLE].split() == [SINGLE, "RewriteAllReduceDynamicSlice", "our", "reading",
                                    "exact"]


def test_passes_json(capsys):
    assert main(["passes", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [p["key"] for p in listing] == sorted(KEYS)
    guarded = next(p for p in listing if p["key"] == "delete_permute_guarded")
    assert guarded["class"] == "DeletePermuteGuarded"
    assert guarded["seed_status"] == "inferred" and guarded["contract"] == "exact"
    assert guarded["seed"].startswith("allreduce-reducescatter-dynamicslice-rewrites.txt")
