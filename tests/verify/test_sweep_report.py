"""The sweep's report: the pool theorems evaluated on concrete G, g, s, the JSON schema, the
tables and the CLI (exit codes, --plot without matplotlib, determinism)."""

from __future__ import annotations

import io
import json
import sys

import pytest

from neuron_sim.cli import main
from neuron_sim.verify.sweep.generator import generate
from neuron_sim.verify.sweep.report import (findings, pass_counts, print_report, sweep_json,
                                 theorem_says_sound)
from neuron_sim.verify.sweep.runner import default_passes, run_cases
from neuron_sim.proofs.pools import GroupLayout


@pytest.mark.parametrize("pool, layout, G, g, s, sound", [
    # identity [0..G*g-1]: partition p reads s*p; right only if p is its position: G == 1.
    ("identity", GroupLayout.CONTIGUOUS, 1, 4, 2, True),
    ("identity", GroupLayout.CONTIGUOUS, 2, 2, 1, False),
    # multiplied [s*j]: reads s*s*j; right when s == 1 (or g == 2 and the clamp saves it:
    # s*s >= s puts position 1 at the last block).
    ("multiplied", GroupLayout.CONTIGUOUS, 2, 3, 1, True),
    ("multiplied", GroupLayout.CONTIGUOUS, 1, 3, 2, False),
    ("multiplied", GroupLayout.CONTIGUOUS, 1, 2, 3, True),
    # repeated [j]: partition k*g + j reads s*j: its block on contiguous groups; on strided
    # groups partition k + G*j is at position j but reads s * ((k + G*j) % g).
    ("repeated", GroupLayout.CONTIGUOUS, 3, 4, 2, True),
    ("repeated", GroupLayout.STRIDED, 2, 2, 1, False),
    ("repeated", GroupLayout.STRIDED, 1, 3, 1, True),
])
def test_pool_theorem_at_concrete_values(pool, layout, G, g, s, sound):
    assert theorem_says_sound(pool, layout, G, g, s) is sound


@pytest.fixture(scope="module")
def preset_run():
    cases, skips = generate(presets=["trn1.32xlarge"])
    passes = default_passes()
    return run_cases(cases, passes), skips, passes


def test_json_schema(preset_run):
    results, skips, passes = preset_run
    data = json.loads(json.dumps(sweep_json(results, skips, passes, 1.5, seed=0,
                                            max_devices=64)))
    assert set(data) >= {"cases", "passes", "seconds", "skipped", "findings"}
    assert len(data["cases"]) == len(results)
    assert set(data["passes"]) == set(passes)
    for key, counts in data["passes"].items():
        assert counts["fired"] == counts["sound"] + counts["unsound"]
        assert counts["fired"] + counts["missed"] + counts["declined_unsound"] \
            + counts["error"] == len(results)
    case = data["cases"][0]
    assert {"id", "topology", "replicas", "partitions", "mode", "layout", "replica_groups",
            "offset_form", "fused", "slice_dim", "slice_size", "extent", "reference",
            "passes"} <= set(case)
    assert {"z3", "differential", "sound", "agree"} <= set(case["reference"])
    assert set(case["passes"]) == set(passes)


def test_findings_on_trn1_32xlarge(preset_run):
    """The TP2/DP16 split on 16 x 2 (one FlattenedID group of 32, partition-id * s): replica 1
    reads replica 0's shard, so the single-group seed is unsound on multi-replica topologies;
    the proven fold is never unsound."""
    results, _, passes = preset_run
    by_claim = {f.claim: f for f in findings(results, passes)}
    assert by_claim["the single-group seed matcher folds unsoundly on multi-replica "
                    "topologies"].holds is True
    assert by_claim["the proven fold never folds unsoundly"].holds is True
    assert by_claim["z3 and the differential verifier agree on every verdict"].holds is True
    assert pass_counts(results, "rewrite_all_reduce_dynamic_slice_proven")["unsound"] == 0


def test_table_per_pass(preset_run):
    from rich.console import Console

    results, skips, passes = preset_run
    out = io.StringIO()
    print_report(results, skips, passes, 2.0, Console(file=out, width=200))
    text = out.getvalue()
    for key in passes:
        assert key in text
    for title in ("fired & sound", "fired & UNSOUND", "missed although sound",
                  "declined & unsound", "findings", "Summary:"):
        assert title in text
    assert "reads from" in text   # an unsound fold's witness device and offsets


def test_cli_exit_1_when_a_pass_folds_unsoundly(tmp_path, capsys):
    out = tmp_path / "out.json"
    assert main(["sweep", "--preset", "trn1.32xlarge", "--json", str(out)]) == 1
    data = json.loads(out.read_text())
    assert data["passes"]["aws_neuron_rewrite_all_reduce_dynamic_slice"]["unsound"] > 0
    assert "Summary:" in capsys.readouterr().out


def test_cli_exit_0_when_every_fold_is_sound(capsys):
    assert main(["sweep", "--preset", "trn1.32xlarge", "--passes",
                 "rewrite_all_reduce_dynamic_slice_proven"]) == 0


@pytest.mark.parametrize("argv, message", [
    (["--max-devices", "1"], "--max-devices"),
    (["--preset", "trn9"], "unknown preset"),
    (["--passes", "no_such_pass"], "no_such_pass"),
])
def test_cli_usage_errors(argv, message, capsys):
    assert main(["sweep", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_plot_without_matplotlib_is_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    plot = tmp_path / "heat.png"
    assert main(["sweep", "--preset", "trn1.2xlarge", "--plot", str(plot)]) == 2
    assert "pip install 'neuron-sim[plot]'" in capsys.readouterr().err
    assert not plot.exists()


def test_cli_deterministic_given_the_seed(tmp_path):
    def cases(name, seed):
        path = tmp_path / name
        main(["sweep", "--preset", "trn1.2xlarge", "--seed", str(seed), "--json", str(path)])
        data = json.loads(path.read_text())
        return [{k: v for k, v in c.items() if k != "seconds"} for c in data["cases"]]

    assert cases("a.json", 5) == cases("b.json", 5)


def test_cli_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "heat.png"
    main(["sweep", "--preset", "trn1.2xlarge", "--plot", str(plot)])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_format_follows_the_suffix(tmp_path, capsys):
    """--plot heat.svg writes SVG (an XML document with an <svg> element), not PNG bytes
    under that name; a suffix matplotlib is not asked for (.txt) is a usage error, exit 2,
    before anything runs, and nothing is written."""
    pytest.importorskip("matplotlib")
    svg = tmp_path / "heat.svg"
    main(["sweep", "--preset", "trn1.2xlarge", "--plot", str(svg)])
    assert b"<svg" in svg.read_bytes()[:2000]
    text = tmp_path / "heat.txt"
    assert main(["sweep", "--preset", "trn1.2xlarge", "--plot", str(text)]) == 2
    assert "heat.txt: the heatmap is written as .png, .pdf, .svg" in capsys.readouterr().err
    assert not text.exists()
