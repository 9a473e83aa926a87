"""``--pass-option`` and the pass context on the command line (``opt`` and ``verify``).

Expected behaviour, by hand from the fixtures:

* ``dce/dead_channel_all_reduce.hlo`` has one dead all-reduce with a channel_id. ``dce`` removes
  it by default (XLA's HloDCE with remove_cross_partition_collective_ops), and then %sum, which
  nothing calls any more; with
  ``keep_channel_collectives=true`` it is kept, so the pass reports no change.
* ``delete_permute/cross_replica_empty_groups.hlo`` has a cross-replica all-reduce with
  ``replica_groups={}``: one group of every replica. On 1 replica that group is a singleton and
  the all-reduce is the identity, so the guarded DeletePermute deletes it; on 2 replicas it
  really sums, and the guarded pass keeps it. The topology comes from the command's topology
  options through the pass context.
"""

from __future__ import annotations

import json

import pytest

from neuron_sim.cli import main

from pass_fixtures import fixture_path

DEAD = str(fixture_path("dce/dead_channel_all_reduce.hlo"))
EMPTY = str(fixture_path("delete_permute/cross_replica_empty_groups.hlo"))


def test_dce_removes_a_dead_channel_collective_by_default(capsys):
    assert main(["opt", DEAD, "--passes", "dce"]) == 0
    out, err = capsys.readouterr()
    assert "all-reduce" not in out
    assert err.splitlines() == ["dce: %dead removed (dead all-reduce)",
                                "dce: computation %sum removed (no longer called)"]


@pytest.mark.parametrize("option", ["keep_channel_collectives=true",
                                    "dce.keep_channel_collectives=true",
                                    "DeadCodeElimination.keep_channel_collectives=yes"])
def test_a_pass_option_reaches_the_pass_that_declares_it(capsys, option):
    assert main(["opt", DEAD, "--passes", "dce", "--pass-option", option]) == 0
    out, err = capsys.readouterr()
    assert "%dead = f32[4]{0} all-reduce(%x)" in out
    assert err.splitlines() == ["dce: no change"]


@pytest.mark.parametrize("option, message", [
    ("colour=red", "unknown pass option 'colour'"),
    ("keep_channel_collectives", "--pass-option 'keep_channel_collectives' is not NAME=VALUE"),
    ("keep_channel_collectives=maybe", "is not a valid boolean"),
    ("aws_neuron_delete_permute.keep_channel_collectives=true",
     "names pass 'aws_neuron_delete_permute', which is not among the passes run"),
])
def test_a_bad_pass_option_is_exit_2_with_one_sentence(capsys, option, message):
    assert main(["opt", DEAD, "--passes", "dce", "--pass-option", option]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("neuron-sim: error: ") and message in err


def test_verify_refuses_an_unknown_pass_option_before_running_anything(capsys):
    assert main(["verify", DEAD, "--passes", "dce", "--pass-option", "colour=red"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "unknown pass option 'colour'" in err


def test_verify_hands_the_option_to_the_pass(capsys):
    assert main(["verify", DEAD, "--passes", "dce", "--pass-option",
                 "keep_channel_collectives=true", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["changed"] is False


@pytest.mark.parametrize("replicas, deleted", [("1", True), ("2", False)])
def test_opt_runs_the_passes_for_the_topology_of_its_options(capsys, replicas, deleted):
    assert main(["opt", EMPTY, "--passes", "delete_permute_guarded", "--replicas", replicas]) == 0
    out, err = capsys.readouterr()
    assert ("all-reduce(" not in out) is deleted
    assert (err == "delete_permute_guarded: no change\n") is not deleted


def test_verify_runs_a_topology_dependent_pass_once_per_topology(capsys):
    assert main(["verify", EMPTY, "--passes", "delete_permute_guarded", "--topology", "1x1",
                 "--topology", "2x1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    verdicts = {v["topology"]: v for v in report["topology_results"]}
    assert list(verdicts) == ["1x1", "2x1"]
    assert verdicts["1x1"]["changed"] is True and verdicts["1x1"]["status"] == "CORRECT"
    assert verdicts["2x1"]["changed"] is False and verdicts["2x1"]["rewrites"] == []
