"""``neuron-sim check PATH...``: many files and dump directories, one line per file, a summary,
exit 0 / 1 / 2, the same per file in JSON, and the topology a header leaves out."""

from __future__ import annotations

import json
from pathlib import Path

from neuron_sim.cli import main

GOOD = """HloModule good, replica_count=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add
}
"""

UNPARSABLE = "HloModule bad\nENTRY e {\n  ROOT y = f32[2] negate(z)\n}\n"

REJECTED = GOOD.replace("HloModule good", "HloModule rejected").replace("{{0,1}}", "{{0,1,2}}")


def dump_dir(tmp_path):
    """An XLA --xla_dump_to folder: module text dumps, plus a buffer assignment that is *.txt
    but not HLO (XLA's dump naming: module_NNNN.<name>.<stage>.txt)."""
    d = tmp_path / "dump"
    d.mkdir()
    (d / "module_0001.jit_f.before_optimizations.txt").write_text(GOOD)
    (d / "module_0001.jit_f.cpu_after_optimizations.txt").write_text(REJECTED)
    (d / "module_0001.jit_f.cpu_after_optimizations-buffer-assignment.txt").write_text(
        "BufferAssignment:\nallocation 0: size 16\n")
    (d / "module_0002.jit_g.before_optimizations.txt").write_text(UNPARSABLE)
    return d


def test_a_dump_directory_gives_one_line_per_module_and_a_summary(tmp_path, capsys):
    d = dump_dir(tmp_path)
    assert main(["check", str(d)]) == 1
    lines = capsys.readouterr().out.splitlines()
    good, rejected, bad = (str(d / n) for n in (
        "module_0001.jit_f.before_optimizations.txt",
        "module_0001.jit_f.cpu_after_optimizations.txt",
        "module_0002.jit_g.before_optimizations.txt"))
    assert lines[0].startswith(f"{good}: OK — module good, 2 computations")
    assert lines[1].startswith(f"{rejected}: in computation main: %ar = ")
    assert lines[2] == f"{bad}:3:26: instruction %y uses %z, which is not defined in computation e"
    assert lines[3] == "3 files: 1 accepted, 1 rejected, 1 unparsable"
    assert len(lines) == 4


def test_all_accepted_is_exit_0_and_json_gives_the_same_per_file(tmp_path, capsys):
    a, b = tmp_path / "a.hlo", tmp_path / "b.hlo"
    a.write_text(GOOD)
    b.write_text(GOOD.replace("HloModule good", "HloModule other"))
    assert main(["check", str(a), str(b)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 files: 2 accepted, 0 rejected, 0 unparsable"
    (tmp_path / "c.hlo").write_text(UNPARSABLE)
    assert main(["check", str(tmp_path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["ok"] for f in report["files"]] == [True, True, False]
    assert report["files"][2]["stage"] == "parser" and report["files"][2]["line"] == 3
    assert report["summary"] == {"accepted": 2, "rejected": 0, "unparsable": 1,
                                 "unreadable": 0, "files": 3}


def test_a_missing_path_is_exit_2(tmp_path, capsys):
    good = tmp_path / "a.hlo"
    good.write_text(GOOD)
    assert main(["check", str(good), str(tmp_path / "nope.hlo")]) == 2
    assert capsys.readouterr().err.strip() == f"neuron-sim: error: {tmp_path / 'nope.hlo'}: no such file"


def test_a_header_without_device_counts_gets_the_smallest_topology(tmp_path, capsys):
    """replica_groups={{0,1},{2,3}} without a channel: CrossReplica over replicas 0..3, so 4
    replicas (XLA's CheckReplicaGroups: the groups name each of 0..n-1 once)."""
    path = tmp_path / "m.hlo"
    path.write_text(GOOD.replace(", replica_count=2", "").replace("{{0,1}}", "{{0,1},{2,3}}"))
    assert main(["check", str(path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "topology 4x1 (4 devices, inferred from the collectives' groups" in first
    assert main(["check", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["replica_count"] == 4 and report["topology_inferred"] is True
    assert report["collectives"][0]["participant_groups"] == [[0, 1], [2, 3]]


def test_accepted_modules_always_summarize(tmp_path, capsys):
    """A header that fixes one replica: XLA's verifier skips the coverage rule (count 1), the
    groups {{0,1}} then name no device of a one-device topology; check reports that as the
    module's rejection (exit 1), never an internal error."""
    path = tmp_path / "m.hlo"
    path.write_text(GOOD.replace("replica_count=2", "replica_count=1, num_partitions=1"))
    assert main(["check", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{path}: in computation main: %ar") and not captured.err


def test_allow_mixed_precision_flag(tmp_path, capsys):
    path = tmp_path / "m.hlo"
    path.write_text("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n"
                    "  b = bf16[2] parameter(1)\n  ROOT s = f32[2] add(a, b)\n}\n")
    assert main(["check", str(path)]) == 1
    assert main(["check", str(path), "--allow-mixed-precision"]) == 0


def test_a_permute_without_pairs_is_summarized_as_no_pairs(tmp_path, capsys):
    """A collective-permute with no source_target_pairs sends nothing: every device receives
    zeros (XLA's semantics of a device that is no target). The summary says so rather than
    listing a replica group."""
    import json

    from neuron_sim.cli import main

    path = tmp_path / "cp.hlo"
    path.write_text("HloModule permute_no_pairs, num_partitions=4\n\n"
                    "ENTRY %main (x: f32[2]) -> f32[2] {\n  %x = f32[2]{0} parameter(0)\n"
                    "  ROOT %cp = f32[2]{0} collective-permute(%x), channel_id=1\n}\n")
    assert main(["check", str(path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)["collectives"][0]
    assert record["source_target_pairs"] == [] and "participant_groups" not in record
    assert main(["check", str(path)]) == 0
    assert "no pairs: every device receives zeros" in capsys.readouterr().out


def test_groups_of_a_topology_too_large_to_list_are_not_listed(tmp_path, capsys):
    """num_partitions=2**62 with 8 replicas (in XLA's int64 range; 2**65 devices): the module
    checks, and its collective is summarized without listing every device id (a mutated header
    once kept `check` listing them for ever); the JSON says null."""
    path = tmp_path / "m.hlo"
    path.write_text("HloModule m, replica_count=8, num_partitions=4611686018427387904\n\n"
                    "%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
                    "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n\n"
                    "ENTRY %e (p: f32[4]) -> f32[4] {\n  %p = f32[4] parameter(0)\n"
                    "  ROOT %ar = f32[4] all-reduce(%p), replica_groups={}, to_apply=%sum\n}\n")
    assert main(["check", str(path)]) == 0
    assert "{} (not listed: more than 1048576 devices)" in capsys.readouterr().out
    assert main(["check", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["collectives"][0]["participant_groups"] is None


A2A_EMPTY_GROUPS = """HloModule SyncTensorsGraph.10

ENTRY main {
  p0 = f32[2] parameter(0)
  p1 = f32[2] parameter(1)
  p2 = f32[2] parameter(2)
  p3 = f32[2] parameter(3)
  ROOT a2a = (f32[2], f32[2], f32[2], f32[2]) all-to-all(p0, p1, p2, p3), replica_groups={}%s
}
"""


def test_a_tuple_all_to_all_with_empty_groups_fixes_the_group_size(tmp_path, capsys):
    """torch_xla writes a tuple all-to-all with ``replica_groups={}`` and one operand per device
    (XLA's verifier: the operand count must equal the group size; ``{}`` is every replica, or
    with a channel id every partition). So 4 operands need 4 replicas — 4 partitions with
    channel_id — and a directory of such graphs checks without topology options."""
    (tmp_path / "a.hlo").write_text(A2A_EMPTY_GROUPS % "")
    (tmp_path / "b.hlo").write_text(A2A_EMPTY_GROUPS % ", channel_id=1")
    assert main(["check", str(tmp_path), "--json"]) == 0
    files = {Path(f["file"]).name: f for f in json.loads(capsys.readouterr().out)["files"]}
    assert (files["a.hlo"]["replica_count"], files["a.hlo"]["num_partitions"]) == (4, 1)
    assert (files["b.hlo"]["replica_count"], files["b.hlo"]["num_partitions"]) == (1, 4)
    # Given counts still rule: 2 replicas cannot hold a 4-operand exchange.
    assert main(["check", str(tmp_path / "a.hlo"), "--replicas", "2"]) == 1
    assert "4 operands but the replica group size is 2" in capsys.readouterr().out


def test_run_infers_the_same_topology_and_exchanges_operands(tmp_path, capsys):
    """``run`` uses the inference too (one topology rule for every command). Device d gives
    operand i the value 10*d + i; XLA's tuple all-to-all hands operand i of device d to device
    i as its result d, so device d's result j is device j's operand d: 10*j + d."""
    import numpy as np

    module = tmp_path / "a.hlo"
    module.write_text(A2A_EMPTY_GROUPS % "")
    inputs = {f"arg{i}": np.array([[10 * d + i] * 2 for d in range(4)], np.float32)
              for i in range(4)}
    np.savez(tmp_path / "in.npz", **inputs)
    assert main(["run", str(module), "--inputs", str(tmp_path / "in.npz"),
                 "-o", str(tmp_path / "out.npz")]) == 0
    out = np.load(tmp_path / "out.npz")
    for j in range(4):
        assert out[f"out{j}"].shape == (4, 2)
        assert [out[f"out{j}"][d][0] for d in range(4)] == [10 * j + d for d in range(4)]
