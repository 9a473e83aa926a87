"""check-schedule against XLA's degenerate rules: every row of
``tests/data/schedule/degenerate_rules.tsv`` (verdicts derived by hand, see its header) is one
collective in one group mode on one topology, in the entry, a while body or a called
computation; DeletePermute must be flagged exactly where the table says "unsafe", and the
dynamic confirmation must find a witness exactly where deleting it changes an output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_sim.hlo.parser import parse_module
from neuron_sim.topology import Topology
from neuron_sim.passes.registry import get_pass, parse_pass_list
from neuron_sim.verify.schedule.runner import VALUE_IDENTITY_NOTE, check_schedule, suggest_positions

DATA = Path(__file__).resolve().parents[1] / "data"
TABLE = DATA / "schedule" / "degenerate_rules.tsv"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _rows() -> list[dict[str, str]]:
    lines = [line for line in TABLE.read_text().splitlines() if not line.startswith("#")]
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


ROWS = _rows()


def _lists(groups: list[list[int]]) -> str:
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


def groups_text(op: str, mode: str, kind: str, replicas: int, partitions: int) -> str:
    """The replica groups / source-target pairs of one table kind, written out."""
    n = {"cross_replica": replicas, "cross_replica_and_partition": replicas,
         "flattened": replicas * partitions, "cross_partition": partitions}[mode]
    if kind == "empty":
        return "{}"
    if op == "all-reduce":
        return {
            "singleton": _lists([[i] for i in range(n)]),
            "multi": _lists([[i, i + 1] for i in range(0, n, 2)]),
            "iota_one_group": f"[1,{n}]<=[{n}]",
            "iota_singletons": f"[{n},1]<=[{n}]",
        }[kind]
    return _lists({
        "all_self": [[i, i] for i in range(n)],
        "some_self": [[0, 0]],
        "ring": [[i, (i + 1) % n] for i in range(n)],
        "swap": [[0, 1], [1, 0]],
    }[kind])


def collective_line(row: dict[str, str], operand: str, replicas: int, partitions: int) -> str:
    groups = groups_text(row["op"], row["mode"], row["kind"], replicas, partitions)
    attributes = {"cross_replica": "", "cross_partition": ", channel_id=1",
                  "cross_replica_and_partition": ", channel_id=1",
                  "flattened": ", channel_id=1, use_global_device_ids=true"}[row["mode"]]
    if row["op"] == "all-reduce":
        return (f"f32[4] all-reduce({operand}){attributes}, replica_groups={groups}, "
                f"to_apply={row['reducer']}")
    return f"f32[4] collective-permute({operand}){attributes}, source_target_pairs={groups}"


def module_text(row: dict[str, str]) -> str:
    """One collective ``%coll`` placed as the row says, on a per-device parameter or on a
    constant that every device holds."""
    replicas, partitions = map(int, row["topology"].split("x"))
    header = f"HloModule m, replica_count={replicas}, num_partitions={partitions}\n\n"
    reducers = "".join(f"""{name} {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] {name}(a, b)
}}

""" for name in ("add", "maximum"))
    reducers = reducers.replace("maximum {", "max {")
    if row["operand"] == "param":
        value = "  x = f32[4] parameter(0)\n"
    else:
        value = "  x = f32[4] constant({1.5, -2, 3, 0.25})\n"
    placement = row["placement"]
    if placement == "entry":
        return header + reducers + f"""ENTRY e {{
{value}  ROOT coll = {collective_line(row, 'x', replicas, partitions)}
}}
"""
    if placement == "call":
        return header + reducers + f"""callee {{
  p = f32[4] parameter(0)
  ROOT coll = {collective_line(row, 'p', replicas, partitions)}
}}

ENTRY e {{
{value}  ROOT c = f32[4] call(x), to_apply=callee
}}
"""
    return header + reducers + f"""body {{
  t = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  v = f32[4] get-tuple-element(t), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  coll = {collective_line(row, 'v', replicas, partitions)}
  ROOT r = (s32[], f32[4]) tuple(j, coll)
}}

cond {{
  t = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  one = s32[] constant(1)
  ROOT lt = pred[] compare(i, one), direction=LT
}}

ENTRY e {{
{value}  zero = s32[] constant(0)
  t0 = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(t0), condition=cond, body=body
  ROOT out = f32[4] get-tuple-element(w), index=1
}}
"""


def _row_id(row: dict[str, str]) -> str:
    return "-".join(row[k] for k in ("topology", "op", "mode", "kind", "placement", "operand",
                                     "reducer"))


def test_the_table_covers_every_mode_kind_and_topology():
    """Acceptance coverage: every group mode of both opcodes, every group kind, six topologies,
    three placements and replicated operands."""
    assert {r["topology"] for r in ROWS} == {"1x1", "1x4", "4x1", "2x2", "2x4", "4x2"}
    assert {(r["op"], r["mode"]) for r in ROWS} == {
        ("all-reduce", "cross_replica"), ("all-reduce", "cross_replica_and_partition"),
        ("all-reduce", "flattened"), ("collective-permute", "cross_replica"),
        ("collective-permute", "cross_partition")}
    assert {r["kind"] for r in ROWS if r["op"] == "collective-permute"} == {
        "all_self", "some_self", "ring", "swap", "empty"}
    assert {r["kind"] for r in ROWS if r["op"] == "all-reduce"} >= {
        "singleton", "empty", "multi", "iota_one_group", "iota_singletons"}
    assert {r["placement"] for r in ROWS} == {"entry", "while", "call"}
    assert {r["operand"] for r in ROWS} == {"param", "replicated"}
    assert {r["expected"] for r in ROWS} == {"safe", "unsafe"}


@pytest.mark.parametrize("row", ROWS, ids=[_row_id(r) for r in ROWS])
def test_delete_permute_is_flagged_exactly_where_the_rules_say(row):
    module = parse_module(module_text(row))
    replicas, partitions = map(int, row["topology"].split("x"))
    before = module.to_text()
    report = check_schedule(module, [get_pass("aws_neuron_delete_permute")],
                            Topology(replicas, partitions))
    assert module.to_text() == before, "check-schedule must not modify its input"
    assert len(report.sites) == 1
    site = report.sites[0]
    assert site.instruction == "coll"
    assert site.computation == {"entry": "e", "call": "callee", "while": "body"}[row["placement"]]
    assert str(site.verdict) == row["expected"], site.reason
    if row["expected"] == "safe":
        assert site.reason == "" and site.witness is None
        return
    assert site.reason.startswith("group mode ")
    if row["witness"] == "yes":
        assert site.witness is not None and site.witness.startswith("device "), site.notes
    else:
        assert site.witness is None and VALUE_IDENTITY_NOTE in site.notes


def test_a_guarded_deletion_is_judged_by_the_same_rules_and_found_safe():
    """delete_permute_guarded only deletes identities; on a module with one identity and one
    real all-reduce (1x4) it is never flagged, while DeletePermute is flagged once."""
    text = """HloModule m, num_partitions=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
  real = f32[4] all-reduce(x), channel_id=1, replica_groups={{0}}, to_apply=add
  ROOT same = f32[4] all-reduce(real), replica_groups={{0}}, to_apply=add
}
"""
    module = parse_module(text)
    guarded = check_schedule(module, parse_pass_list("delete_permute_guarded"), Topology(1, 4))
    assert [(s.instruction, s.unsafe) for s in guarded.sites] == [("same", False)]
    unguarded = check_schedule(module, parse_pass_list("aws_neuron_delete_permute"),
                               Topology(1, 4))
    assert sorted((s.instruction, s.unsafe) for s in unguarded.sites) == [
        ("real", True), ("same", False)]


def test_the_single_group_fold_on_unsorted_groups_is_flagged_with_both_witnesses():
    """The seed's single-group matcher folds examples/ar_ds_single_group_unsorted.hlo although
    its groups {1,0,2,3} put device 1 at position 0 (README, `prove` example): z3 refutes the
    fold and the differential run shows a device whose values change."""
    module = parse_module((EXAMPLES / "ar_ds_single_group_unsorted.hlo").read_text())
    topology = Topology(module.replica_count, module.num_partitions)
    report = check_schedule(module, parse_pass_list(
        "aws_neuron_rewrite_all_reduce_dynamic_slice"), topology)
    assert len(report.unsafe) == 1
    site = report.unsafe[0]
    assert "REFUTED" in site.reason and "device" in site.reason
    assert site.witness is not None and site.witness.startswith("device ")
    sorted_module = parse_module((EXAMPLES / "ar_ds_single_group_sorted.hlo").read_text())
    clean = check_schedule(sorted_module, parse_pass_list(
        "aws_neuron_rewrite_all_reduce_dynamic_slice"), topology)
    assert clean.unsafe == [] and clean.safe == 1


def test_suggest_places_delete_permute_after_a_pass_that_removes_the_real_collective():
    """dce removes the dead real all-reduce %dead: DeletePermute is unsafe before dce (it would
    delete %dead, a 4-participant all-reduce — harmless only because it is dead, but the rules
    judge the rewrite) and safe after it; on 1x1 every position is safe."""
    text = """HloModule m, num_partitions=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
  dead = f32[4] all-reduce(x), channel_id=1, replica_groups={{0}}, to_apply=add
  ROOT same = f32[4] all-reduce(x), replica_groups={{0}}, to_apply=add
}
"""
    module = parse_module(text)
    passes = parse_pass_list("dce,aws_neuron_delete_permute")
    suggestion = suggest_positions(module, passes, get_pass("aws_neuron_delete_permute"),
                                   Topology(1, 4))
    assert suggestion.pipeline == ["dce"]
    assert suggestion.safe_positions == [1]
    assert suggestion.blockers[0].instruction == "dead"
    assert "last (after dce)" in suggestion.describe()
    single = parse_module(text.replace("num_partitions=4", "num_partitions=1"))
    everywhere = suggest_positions(single, passes, get_pass("aws_neuron_delete_permute"),
                                   Topology(1, 1))
    assert everywhere.safe_positions == [0, 1]


def test_cli_reports_unsafe_sites_with_exit_1_and_json(tmp_path, capsys):
    from neuron_sim.cli import main

    row = {"topology": "1x4", "op": "all-reduce", "mode": "cross_replica_and_partition",
           "kind": "singleton", "placement": "while", "operand": "param", "reducer": "add"}
    path = tmp_path / "m.hlo"
    path.write_text(module_text(row))
    original = path.read_bytes()
    assert main(["check-schedule", str(path), "--pipeline", "dce,aws_neuron_delete_permute",
                 "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["safe"] == 0 and len(data["unsafe"]) == 1
    site = data["unsafe"][0]
    assert {"pass", "computation", "instruction", "reason", "witness"} <= set(site)
    assert (site["pass"], site["computation"], site["instruction"]) == (
        "aws_neuron_delete_permute", "body", "coll")
    assert site["reason"] == ("group mode CrossReplicaAndPartition, replica group {0} spans "
                              "partitions 0..3 -> 4 participants")
    assert site["witness"].startswith("device ")
    assert path.read_bytes() == original
    assert main(["check-schedule", str(path), "--pipeline", "dce", "--suggest"]) == 0
    out = capsys.readouterr().out
    assert "0 unsafe site(s), 0 safe, on 1x4; no context-dependent pass" in out
    assert "suggest: aws_neuron_delete_permute is unsafe at every position" in out
    assert "on 1x1" in out


@pytest.mark.parametrize("argv, message", [
    (["--pipeline", "no_such_pass"], "unknown pass 'no_such_pass'"),
    (["--pipeline", "dce", "--pass-option", "nope=1"], "nope"),
    (["--pipeline", "dce", "--partitions", "2"], ""),
])
def test_cli_bad_input_is_one_sentence(tmp_path, capsys, argv, message):
    from neuron_sim.cli import main

    path = tmp_path / "m.hlo"
    path.write_text(module_text({"topology": "1x4", "op": "all-reduce", "mode": "flattened",
                                 "kind": "multi", "placement": "entry", "operand": "param",
                                 "reducer": "add"}))
    code = main(["check-schedule", str(path), *argv])
    err = capsys.readouterr().err
    assert code in (1, 2) and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert message in err


@pytest.mark.parametrize("trials", ["0", "-3"])
def test_cli_trials_below_one_is_usage(tmp_path, capsys, trials):
    """No confirmation can run on fewer than one input set: exit 2 with one sentence, as
    ``verify --trials 0`` (found unsafe with the confirmation silently run anyway before)."""
    from neuron_sim.cli import main

    path = tmp_path / "m.hlo"
    path.write_text(module_text({"topology": "1x4", "op": "all-reduce", "mode": "flattened",
                                 "kind": "multi", "placement": "entry", "operand": "param",
                                 "reducer": "add"}))
    code = main(["check-schedule", str(path), "--pipeline", "aws_neuron_delete_permute",
                 "--trials", trials])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"neuron-sim: error: --trials must be at least 1, not {trials}"]


def _closer_keys() -> list[str]:
    from neuron_sim.passes.named_pipelines import pipeline_entries

    return [key for _, key in pipeline_entries("neuron-closer",
                                               ["aws_neuron_inject_numerical_errors"])]


@pytest.mark.parametrize("late", [False, True], ids=["early", "late"])
def test_delete_permute_early_or_late_in_the_closer_on_real_jax_dumps(late):
    """tests/data/jax/spmd_schedule_psum_ppermute_{8,1}: JAX's psum * 2 + ring ppermute compiled
    for 8 devices (groups {0..7}, pairs {0,1},..,{7,0}: real data movement) and for 1 device
    (groups {{0}}, pairs {{0,0}}: degenerate). DeletePermute before the closer, or after it
    (where device-assignment legalization made the groups physical), is flagged on both
    collectives of the 8-device dump with a witness; on the 1-device dump (topology 1x1) it is
    never flagged."""
    keys = _closer_keys()
    keys = keys + ["aws_neuron_delete_permute"] if late else ["aws_neuron_delete_permute"] + keys
    real = parse_module((DATA / "jax" / "spmd_schedule_psum_ppermute_8.hlo").read_text())
    report = check_schedule(real, parse_pass_list(",".join(keys)), Topology(1, 8))
    flagged = {(s.pass_key, s.instruction) for s in report.unsafe}
    assert flagged == {("aws_neuron_delete_permute", "psum_invariant.7"),
                       ("aws_neuron_delete_permute", "ppermute.3")}
    assert all(s.witness and s.witness.startswith("device ") for s in report.unsafe)
    if late:
        assert all(s.reason.startswith("physical ") for s in report.unsafe)
    single = parse_module((DATA / "jax" / "spmd_schedule_psum_ppermute_1.hlo").read_text())
    assert check_schedule(single, parse_pass_list(",".join(keys)), Topology(1, 1)).unsafe == []


LEGALIZE = "aws_neuron_device_assignment_legalization"
REVERSED = "{{3,1,2,0}}"   # 1x4: partition p runs on physical device (3,1,2,0)[p]
PHYSICAL_MODULE = """HloModule m, num_partitions=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
  ar = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add
  one = f32[4] all-reduce(ar), channel_id=2, replica_groups={{0},{1},{2},{3}}, use_global_device_ids=true, to_apply=add
  ROOT cp = f32[4] collective-permute(one), channel_id=3, source_target_pairs={{0,0},{1,1},{2,2},{3,3}}
}
"""


def test_legalizing_twice_is_flagged_unless_the_assignment_is_the_identity():
    """Under the assignment (3,1,2,0) the first legalization writes %ar's groups {{0,1},{2,3}}
    as physical {{3,1},{2,0}}; a second one reads those as flattened ids and maps them again, to
    {{0,1},{2,3}} in physical ids = flattened {{3,1},{2,0}}: other devices are paired, so every
    collective is flagged and the whole-pass witness shows changed values. Under 1x4's default
    assignment (partition p on device p) physical ids are flattened ids: nothing is flagged."""
    module = parse_module(PHYSICAL_MODULE)
    topology = Topology.parse(f"1x4 da={REVERSED}")
    report = check_schedule(module, parse_pass_list(f"{LEGALIZE},{LEGALIZE}"), topology)
    assert [s.position for s in report.sites if not s.unsafe] == [0, 0, 0]
    assert sorted(s.instruction for s in report.unsafe) == ["ar", "cp", "one"]
    assert all(s.position == 1 and "already physical" in s.reason for s in report.unsafe)
    assert all(s.witness and s.witness.startswith("device ") for s in report.unsafe)
    identity = check_schedule(module, parse_pass_list(f"{LEGALIZE},{LEGALIZE}"), Topology(1, 4))
    assert identity.unsafe == [] and identity.safe == 6


def test_after_legalization_delete_permute_is_judged_on_the_physical_groups():
    """After legalization under (3,1,2,0): %ar's physical group {3,1} has 2 participants
    (unsafe, with a witness); %one's groups {3},{1},{2},{0} and %cp's self-pairs are still the
    identity (safe). The guarded deletion reads the groups as logical ids: flagged wherever it
    would fire on a legalized collective (%one and %cp)."""
    module = parse_module(PHYSICAL_MODULE)
    topology = Topology.parse(f"1x4 da={REVERSED}")
    report = check_schedule(module, parse_pass_list(f"{LEGALIZE},aws_neuron_delete_permute"),
                            topology)
    deletions = {s.instruction: s for s in report.sites
                 if s.pass_key == "aws_neuron_delete_permute"}
    assert {name: s.unsafe for name, s in deletions.items()} == {
        "ar": True, "one": False, "cp": False}
    assert deletions["ar"].reason == "physical group {3,1} -> 2 participants"
    assert deletions["ar"].witness.startswith("device ")
    guarded = check_schedule(module, parse_pass_list(f"{LEGALIZE},delete_permute_guarded"),
                             topology)
    assert sorted(s.instruction for s in guarded.unsafe) == ["cp", "one"]
    assert all("logical ids" in s.reason for s in guarded.unsafe)


RNG_MODULE = """HloModule m
ENTRY e {
  a = f32[] constant(0)
  b = f32[] constant(1)
  ROOT r = f32[64] rng(a, b), distribution=rng_uniform
}
"""


def test_replace_rng_without_a_pinned_seed_is_flagged_with_two_different_compiles():
    """The seed's GOTCHA: constants from std::random_device differ between compiles. Unpinned,
    the rng is a site, and two runs of the pass give different modules (64 uniform draws agree
    with probability ~0); with seed=7 it is safe."""
    module = parse_module(RNG_MODULE)
    report = check_schedule(module, parse_pass_list("aws_neuron_replace_rng"), Topology(1, 1))
    assert [s.instruction for s in report.unsafe] == ["r"]
    assert "seed not pinned" in report.unsafe[0].reason
    assert report.unsafe[0].witness == "two runs of the pass on this module planted different " \
                                       "constants"
    pinned = check_schedule(module, parse_pass_list("aws_neuron_replace_rng"), Topology(1, 1),
                            options={"seed": "7"})
    assert pinned.unsafe == [] and pinned.safe == 1


def test_cli_accepts_a_named_pipeline_with_skip(tmp_path, capsys):
    from neuron_sim.cli import main

    path = DATA / "jax" / "spmd_schedule_psum_ppermute_1.hlo"
    assert main(["check-schedule", str(path), "--pipeline", "neuron-closer", "--skip",
                 "aws_neuron_inject_numerical_errors", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["unsafe"] == [] and "aws_neuron_device_assignment_legalization" in data["pipeline"]
    assert "aws_neuron_inject_numerical_errors" not in data["pipeline"]
    assert main(["check-schedule", str(path), "--pipeline", "dce", "--skip", "dce"]) == 2
    assert "--skip needs a named --pipeline" in capsys.readouterr().err


def test_a_collective_in_a_conditional_branch_is_found_and_named():
    """A real all-reduce (FlattenedID group {0,1,2,3}) in the true branch of a conditional on
    1x4 is flagged in computation %on_true; the identity permute in %on_false is judged safe."""
    text = """HloModule m, num_partitions=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
on_true {
  p = f32[4] parameter(0)
  ROOT real = f32[4] all-reduce(p), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
}
on_false {
  q = f32[4] parameter(0)
  ROOT same = f32[4] collective-permute(q), channel_id=2, source_target_pairs={{0,0},{1,1},{2,2},{3,3}}
}
ENTRY e {
  x = f32[4] parameter(0)
  t = pred[] constant(true)
  ROOT c = f32[4] conditional(t, x, x), true_computation=on_true, false_computation=on_false
}
"""
    report = check_schedule(parse_module(text), parse_pass_list("aws_neuron_delete_permute"),
                            Topology(1, 4))
    judged = {(s.computation, s.instruction): s.unsafe for s in report.sites}
    assert judged == {("on_true", "real"): True, ("on_false", "same"): False}
    assert report.unsafe[0].witness.startswith("device ")


# --- the hazards are what the pass classes declare --------------------------------------------

# The passes check-schedule judges, as docs/passes.md's "known unsafety" column and the rules of
# verify/schedule/hazards.py name them: the two deletions and the stripper (identity
# collectives), the two seed folds (their offsets), the proven fold and XLA's two collective
# passes (logical groups), ReplaceRng (a pinned seed), DeviceAssignmentLegalization (one run).
CONTEXT_DEPENDENT = sorted([
    "aws_neuron_delete_permute", "delete_permute_guarded", "aws_neuron_strip_trivial_collectives",
    "aws_neuron_rewrite_all_reduce_dynamic_slice",
    "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups",
    "rewrite_all_reduce_dynamic_slice_proven", "xla_reduce_scatter_creator",
    "xla_all_reduce_simplifier", "aws_neuron_replace_rng",
    "aws_neuron_device_assignment_legalization"])

ONE_REAL_ALL_REDUCE = """HloModule m, num_partitions=4
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
  ROOT real = f32[4] all-reduce(x), channel_id=1, replica_groups={{0}}, to_apply=add
}
"""


def test_the_judged_passes_are_those_whose_classes_declare_a_hazard():
    from neuron_sim.verify.schedule.hazards import context_dependent_keys, hazard_of
    from neuron_sim.passes.registry import BUILTIN_PASSES

    assert context_dependent_keys() == CONTEXT_DEPENDENT
    hazards = {cls.name: hazard_of(cls()) for cls in BUILTIN_PASSES}
    assert sorted(key for key, hazard in hazards.items() if hazard is not None) == \
        CONTEXT_DEPENDENT
    # Only the rng's hazard cannot be shown by the differential verifier (two runs show it).
    assert [key for key in CONTEXT_DEPENDENT if not hazards[key].confirmable] == [
        "aws_neuron_replace_rng"]


def test_a_hazard_follows_the_pass_class_not_its_registry_key():
    """A DeletePermute under another key is judged as DeletePermute (the 4-participant
    all-reduce on 1x4 is no identity); a context-free pass that carries DeletePermute's key is
    not judged at all."""
    from neuron_sim.passes.base import HloPass
    from neuron_sim.passes.neuron.delete_permute import DeletePermute

    class Renamed(DeletePermute):
        name = "renamed_delete_permute"

    class Impostor(HloPass):
        name = "aws_neuron_delete_permute"

        def run_on_module(self, module, context):
            return False

    module = parse_module(ONE_REAL_ALL_REDUCE)
    report = check_schedule(module, [Renamed()], Topology(1, 4), confirm=False)
    assert [(s.pass_key, s.instruction, s.unsafe) for s in report.sites] == [
        ("renamed_delete_permute", "real", True)]
    assert report.context_dependent == ["renamed_delete_permute"]
    report = check_schedule(module, [Impostor()], Topology(1, 4), confirm=False)
    assert report.sites == [] and report.context_dependent == []


def test_a_declaration_no_rule_judges_is_an_error_naming_the_pass():
    from neuron_sim.passes.base import HloPass
    from neuron_sim.passes.context_hazards import Reliance, relies_on
    from neuron_sim.verify.schedule.hazards import hazard_of

    class Both(HloPass):
        name = "both_rules"
        hazard = relies_on(Reliance.FOLD_OFFSETS, Reliance.PINNED_SEED)

    with pytest.raises(ValueError, match="pass both_rules: a pass relies on at most one of"):
        hazard_of(Both())
