"""`--pipeline NAME [--skip KEY]` on opt, verify and passes, through neuron_sim.cli.main.

Exit codes (0 done / 1 the check found a problem / 2 bad usage) and one-sentence errors. The
expected order is the #NN table of hlo-misc-cleanup-sweep.txt as docs/passes.md ("The closer")
transcribes it, written out here rather than read back from passes/named_pipelines.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_sim.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "data" / "jax"
COND = str(CORPUS / "lowered_argcond_cond.hlo")
PSUM = str(CORPUS / "spmd_psum_1d.hlo")
INJECT = "aws_neuron_inject_numerical_errors"
CLOSER_ORDER = [
    (14, "flatten_entry_tuple"), (15, "inline_weights"), (16, "replace_rng"),
    (17, "partition_embeding_ops"), (20, "rewrite_module_dtype"), (21, "metadata_naming"),
    (22, "inject_numerical_errors"), (24, "eliminate_redundant_compare"),
    (52, "replace_minimum_constant"), (54, "peel_optimization_barriers"),
    (55, "dynamic_slice_transpose"), (59, "strip_trivial_collectives"),
    (65, "default_metadata"), (66, "transform_variadic_reduce"),
    (67, "resolve_self_comparison"), (69, "device_assignment_legalization"),
    (70, "hilo_conditional_to_select"), (90, "constant_slice_clamp_simplifier"),
    (93, "rewrite_scatter_partition"), (109, "constant_slice_convert_canonicalizer"),
    (110, "dynamic_slice_reshape_canonicalizer")]
CLOSER_KEYS = ["aws_neuron_" + key for _, key in CLOSER_ORDER]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``neuron-sim ARGV`` (argparse's own exits included)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_passes_lists_the_closer_in_order_with_its_numbers(capsys):
    code, out, _ = run(["passes", "--pipeline", "neuron-closer"], capsys)
    assert code == 0
    rows = [line.split()[:2] for line in out.splitlines()[1:]]
    assert rows == [[f"#{n}", key] for n, key in zip((n for n, _ in CLOSER_ORDER), CLOSER_KEYS)]
    code, out, _ = run(["passes", "--pipeline", "neuron-closer", "--json"], capsys)
    listed = json.loads(out)
    assert code == 0 and [(e["number"], e["key"]) for e in listed] == \
        list(zip((n for n, _ in CLOSER_ORDER), CLOSER_KEYS))
    assert all(e["registered"] for e in listed)


def test_opt_runs_the_closer_in_order_without_the_skipped_pass(capsys):
    code, out, err = run(["opt", COND, "--pipeline", "neuron-closer", "--skip", INJECT,
                          "--json"], capsys)
    assert code == 0, err
    report = json.loads(out)
    assert [p["name"] for p in report["passes"]] == [k for k in CLOSER_KEYS if k != INJECT]
    assert report["changed"]
    changed = {p["name"] for p in report["passes"] if p["changed"]}
    assert "aws_neuron_hilo_conditional_to_select" in changed
    assert " conditional(" not in report["text"]


def test_the_closer_without_targets_leaves_the_injector_out_and_says_so(capsys):
    """Issue 28, point 6: the default closer must not fail on the debug injector nobody asked
    for; it is left out, the output names it, and giving targets brings it back."""
    code, out, err = run(["opt", COND, "--pipeline", "neuron-closer", "--json"], capsys)
    assert code == 0, err
    report = json.loads(out)
    assert [p["name"] for p in report["passes"]] == [k for k in CLOSER_KEYS if k != INJECT]
    assert len(report["left_out"]) == 1 and report["left_out"][0].startswith(f"{INJECT}: ")
    code, out, err = run(["opt", COND, "--pipeline", "neuron-closer"], capsys)
    assert code == 0 and f"{INJECT}: left out of neuron-closer: no targets given" in err
    code, out, err = run(["opt", COND, "--pipeline", "neuron-closer", "--pass-option",
                          f"{INJECT}.targets=root", "--json"], capsys)
    assert code == 0, err
    assert next(p for p in json.loads(out)["passes"] if p["name"] == INJECT)["changed"]
    assert json.loads(out)["left_out"] == []


def test_the_injector_asked_for_by_name_without_targets_still_fails(capsys):
    """Outside a named pipeline the seed's one sentence stands."""
    code, _, err = run(["opt", COND, "--passes", INJECT], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "No targets specified." in err and "Traceback" not in err


def test_verify_the_closer_is_correct_on_a_collective_module(capsys):
    code, out, err = run(["verify", PSUM, "--pipeline", "neuron-closer", "--skip", INJECT,
                          "--trials", "2", "--json"], capsys)
    assert code == 0, out + err
    data = json.loads(out)
    assert data["status"] == "CORRECT" and data["passes"] == [k for k in CLOSER_KEYS
                                                               if k != INJECT]
    assert data["breaking_pass"] is None


def test_verify_names_the_first_pass_that_breaks_the_composed_contract(capsys):
    code, out, _ = run(["verify", PSUM, "--pipeline", "neuron-closer", "--pass-option",
                        f"{INJECT}.targets=root", "--trials", "2", "--no-minimize", "--json"],
                       capsys)
    data = json.loads(out)
    assert code == 1 and data["status"] == "UNSOUND" and data["breaking_pass"] == INJECT
    assert data["contract"] == "changes-results"
    code, out, _ = run(["verify", PSUM, "--pipeline", "neuron-closer", "--pass-option",
                        f"{INJECT}.targets=root", "--trials", "2", "--no-minimize"], capsys)
    assert code == 1
    assert (f"NOTE: the first pass that breaks the composed contract is {INJECT} (pass 7 of 21"
            in out)


@pytest.mark.parametrize("argv, message", [
    (["opt", COND, "--pipeline", "neuron-closer", "--skip", "dce"],
     "--skip dce: pipeline neuron-closer has no pass 'dce'"),
    (["verify", COND, "--pipeline", "neuron-closer", "--skip", "dce"],
     "--skip dce: pipeline neuron-closer has no pass 'dce'"),
    (["opt", COND, "--passes", "dce", "--skip", INJECT], "--skip needs --pipeline"),
    (["verify", COND, "--passes", "dce", "--skip", INJECT], "--skip needs --pipeline"),
    (["verify", COND, "--skip", INJECT], "--skip needs --pipeline"),
    (["opt", COND, "--passes", "dce", "--pipeline", "neuron-closer"],
     "argument --pipeline: not allowed with argument --passes"),
    (["verify", COND, "--passes", "dce", "--pipeline", "neuron-closer"],
     "argument --pipeline: not allowed with argument --passes"),
    (["verify", COND, COND, "--pipeline", "neuron-closer"],
     "give either --passes / --pipeline or a second module, not both"),
    (["opt", COND, "--pipeline", "nosuch"], "argument --pipeline: invalid choice: 'nosuch'"),
    (["passes", "--pipeline", "nosuch"], "argument --pipeline: invalid choice: 'nosuch'"),
])
def test_pipeline_usage_errors_exit_2_with_one_sentence(argv, message, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    last = err.strip().splitlines()[-1]
    assert message in last and "Traceback" not in err
    assert last.count(". ") == 0
