"""``neuron-sim fuzz``: exit codes, the --json schema, the corpus, determinism, signatures."""

from __future__ import annotations

import json

import pytest

from neuron_sim.cli import main
from neuron_sim.verify.fuzz.commands import parse_duration
from neuron_sim.verify.fuzz.runner import CLASSES, group_layout, pairs_layout

DELETE = "aws_neuron_delete_permute"


def fuzz(*args: str) -> int:
    return main(["fuzz", *args])


def test_layouts_are_named_as_drawn():
    """Hand-derived: {{0,2,4,6},{1,3,5,7}} is strided, {{0,1},{2,3}} contiguous."""
    assert group_layout(((0, 2, 4, 6), (1, 3, 5, 7))) == "strided"
    assert group_layout(((0, 1), (2, 3))) == "contiguous"
    assert group_layout(((1, 0, 2, 3),)) == "one unsorted"
    assert group_layout(((0, 3), (1, 2))) == "permuted"
    assert group_layout(()) == "empty"
    assert pairs_layout(((0, 0), (1, 1))) == "self"
    assert pairs_layout(((0, 1), (1, 0))) == "shift"
    assert pairs_layout(((0, 1),)) == "partial"


def test_delete_permute_fails_json_and_corpus(tmp_path, capsys):
    out, corpus = tmp_path / "c.json", tmp_path / "corpus"
    assert fuzz("--passes", DELETE, "--examples", "25", "--seed", "1", "--json", str(out),
                "--corpus", str(corpus)) == 1
    doc = json.loads(out.read_text())
    assert doc["modules"] == 25 and doc["seconds"] > 0
    counts = doc["by_pass"][DELETE]
    assert set(CLASSES) <= set(counts) and sum(counts[k] for k in CLASSES) == 25
    assert counts["unsound"] > 0 and doc["failures"]
    failure = doc["failures"][0]
    assert failure["pass"] == DELETE and failure["class"] == "unsound"
    case = corpus / failure["directory"].split("/")[-1]
    assert {"before.hlo", "after.hlo", "inputs.npz", "fuzz.json", "reproduce.sh"} <= \
        {p.name for p in case.iterdir()}
    assert "--passes " + DELETE in json.loads((case / "fuzz.json").read_text())["reproduce"]
    assert "distinct failures:" in capsys.readouterr().out


def test_same_seed_same_campaign(tmp_path):
    docs = []
    for name in ("a.json", "b.json"):
        fuzz("--passes", DELETE, "--examples", "12", "--seed", "4", "--json",
             str(tmp_path / name))
        doc = json.loads((tmp_path / name).read_text())
        docs.append(({k: {c: v[c] for c in CLASSES} for k, v in doc["by_pass"].items()},
                     [(f["shape"], f["count"], f["size"]) for f in doc["failures"]]))
    assert docs[0] == docs[1]


def test_a_clean_pass_exits_zero(tmp_path):
    assert fuzz("--passes", "dce", "--examples", "8", "--json", str(tmp_path / "d.json")) == 0


@pytest.mark.parametrize("args", [("--passes", DELETE, "--examples", "0"),
                                  ("--passes", DELETE, "--time", "soon"),
                                  ("--passes", DELETE, "--examples", "3", "--time", "5s"),
                                  ("--passes", "no_such_pass", "--examples", "3")])
def test_bad_usage_exits_two(args):
    assert fuzz(*args) == 2


def test_durations():
    assert parse_duration("60s") == 60 and parse_duration("2m") == 120
    assert parse_duration("1.5") == 1.5
