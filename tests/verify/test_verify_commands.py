"""``neuron-sim verify`` and ``neuron-sim demo``: exit codes, the text and JSON reports, the
counterexample directory and its reproduce command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from neuron_sim.cli import main
from neuron_sim.verify.report import read_pair_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PAIRS = ROOT / "tests" / "data" / "verify"
SINGLE = "aws_neuron_rewrite_all_reduce_dynamic_slice"


def write_pair(tmp_path: Path, name: str) -> tuple[str, str]:
    before, after, _ = read_pair_file(PAIRS / f"{name}.hlo")
    b, a = tmp_path / "before.hlo", tmp_path / "after.hlo"
    b.write_text(before.to_text())
    a.write_text(after.to_text())
    return str(b), str(a)


def test_verify_with_passes_exits_1_and_prints_the_error_line_and_summary(capsys):
    code = main(["verify", str(EXAMPLES / "ar_ds_single_group_unsorted.hlo"), "--passes", SINGLE])
    out = capsys.readouterr().out
    assert code == 1
    assert "\nERROR: Value mismatch\n" in out
    assert "device 0 (replica 0, partition 0)" in out
    assert "Summary: 0 correct, 1 unsound, 0 failed to prove, 0 errors" in out


def test_verify_a_correct_rewrite_exits_0(capsys):
    code = main(["verify", str(EXAMPLES / "ar_ds_single_group_sorted.hlo"), "--passes", SINGLE])
    assert code == 0
    assert "Result: CORRECT" in capsys.readouterr().out


def test_verify_two_modules_and_json(tmp_path, capsys):
    before, after = write_pair(tmp_path, "xla_permute_self_pairs_dropped_fixed")
    assert main(["verify", before, after, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "CORRECT" and data["error"] is None
    assert data["topologies"] == ["1x4"]


def test_several_topologies_with_the_topology_option(tmp_path, capsys):
    before, after = write_pair(tmp_path, "multi_topology_group_mode")
    assert main(["verify", before, after, "--topology", "4x1", "--topology", "4x2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["topologies"] == ["4x1", "4x2"]


def test_out_dir_holds_a_reproducible_counterexample(tmp_path, capsys):
    out = tmp_path / "cex"
    code = main(["verify", str(EXAMPLES / "delete_permute_real_all_reduce.hlo"), "--passes",
                 "aws_neuron_delete_permute", "--out", str(out)])
    assert code == 1
    names = {p.name for p in out.iterdir()}
    assert {"before.hlo", "after.hlo", "inputs.npz", "report.json", "reproduce.sh"} <= names
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "UNSOUND" and report["error"] == "ERROR: Value mismatch"
    assert report["minimized"]["size"] == 2
    with np.load(out / "inputs.npz") as data:
        assert data["arg0"].shape == (4, 4)
    capsys.readouterr()
    # The exact command in report.json reproduces the verdict on the written files.
    argv = shlex.split(report["reproduce"])
    assert argv[:2] == ["neuron-sim", "verify"]
    assert main(argv[1:]) == 1
    assert "\nERROR: Value mismatch\n" in capsys.readouterr().out
    assert "--inputs" in (out / "reproduce.sh").read_text()


@pytest.mark.parametrize("argv, message", [
    (["verify", "EXAMPLE"], "give --passes"),
    (["verify", "EXAMPLE", "EXAMPLE", "--passes", "dce"], "not both"),
    (["verify", "EXAMPLE", "--passes", "no_such_pass"], "unknown pass"),
    (["verify", "EXAMPLE", "--passes", "dce", "--trials", "0"], "--trials"),
    (["verify", "EXAMPLE", "--passes", "dce", "--topology", "2by2"], "RxP"),
])
def test_usage_errors_exit_2_with_one_sentence(argv, message, capsys):
    argv = [str(EXAMPLES / "delete_permute_real_all_reduce.hlo") if a == "EXAMPLE" else a
            for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_verdict_of_error_exits_2(tmp_path, capsys):
    before, after = write_pair(tmp_path, "unsupported_custom_call")
    assert main(["verify", before, after]) == 2
    assert "ERROR: Unsupported by the interpreter" in capsys.readouterr().out


def test_inputs_from_npz(tmp_path, capsys):
    before, after = write_pair(tmp_path, "unreplicated_parameter")
    same = tmp_path / "same.npz"
    np.savez(same, arg0=np.array([1, 2, 3, 4], np.float32))   # the same on both devices
    assert main(["verify", before, after, "--inputs", str(same)]) == 0
    differ = tmp_path / "differ.npz"
    np.savez(differ, arg0=np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32))
    assert main(["verify", before, after, "--inputs", str(differ)]) == 1
    capsys.readouterr()


def test_demo_runs_the_tour_and_exits_0(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.count("UNSOUND (as expected)") == 3
    assert out.count("CORRECT (as expected)") == 3
    assert "Summary: 3 correct, 3 unsound, 0 failed to prove, 0 errors" in out


def test_demo_without_its_examples_says_so_in_one_sentence(monkeypatch, tmp_path, capsys):
    from neuron_sim.verify import demo

    monkeypatch.setattr(demo, "EXAMPLES_DIR", tmp_path)
    assert main(["demo"]) == 2
    out = capsys.readouterr().out
    assert "cannot run: example " in out and "is missing" in out
    assert "Traceback" not in out
