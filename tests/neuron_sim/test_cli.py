"""The neuron-sim command: help, version, exit codes, one-line errors, and `check`."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_sim import __version__
from neuron_sim.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"neuron-sim {__version__}"


def test_help_lists_check(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "check" in capsys.readouterr().out


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out


def test_unknown_option_is_usage_error(capsys):
    assert main(["check", "m.hlo", "--frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --frobnicate" in err and "Traceback" not in err


def test_missing_file_is_one_line_exit_2(capsys, tmp_path):
    assert main(["check", str(tmp_path / "nope.hlo")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"neuron-sim: error: {tmp_path / 'nope.hlo'}: no such file"


def test_parse_error_shows_location_line_and_caret(capsys, tmp_path):
    """A file that does not parse is check's verdict on it (exit 1, the per-file line on
    stdout), not a usage error; a single file also gets its source line and caret."""
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(z)\n}\n")
    assert main(["check", str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"{bad}:4:26: instruction %y uses %z, which is not "
                        f"defined in computation e")
    assert lines[1] == "  ROOT y = f32[2] negate(z)"
    assert lines[2] == " " * 25 + "^"


def test_debug_shows_traceback(capsys, tmp_path):
    assert main(["--debug", "check", str(tmp_path / "nope.hlo")]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_check_summarizes_collectives_with_group_mode(capsys):
    path = EXAMPLES / "ar_ds_single_group_unsorted.hlo"
    assert main(["check", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["computations"] == 2 and summary["instructions"] == 10
    (collective,) = summary["collectives"]
    # channel_id + use_global_device_ids=true on all-reduce: FlattenedID; R=1 so ids are partitions.
    assert collective["group_mode"] == "FlattenedID"
    assert collective["participant_groups"] == [[1, 0, 2, 3]]


def test_check_rejects_groups_not_covering_the_devices(capsys, tmp_path):
    text = (EXAMPLES / "ar_ds_single_group_sorted.hlo").read_text()
    path = tmp_path / "m.hlo"
    path.write_text(text.replace("num_partitions=4", "num_partitions=8"))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: in computation") and "all-reduce" in out


def test_check_with_topology_override(capsys):
    path = EXAMPLES / "delete_permute_real_all_reduce.hlo"
    assert main(["check", str(path), "--replicas", "1", "--partitions", "4", "--json"]) == 0
    (collective,) = json.loads(capsys.readouterr().out)["collectives"]
    assert collective["participant_groups"] == [[0, 1], [2, 3]]


def test_console_script_runs_as_a_process():
    result = subprocess.run([sys.executable, "-m", "neuron_sim.cli", "--version"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.strip() == f"neuron-sim {__version__}"


def test_usage_errors_are_one_line_when_run_as_a_module(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "neuron_sim.cli", "run",
         str(EXAMPLES / "delete_permute_real_all_reduce.hlo"), "--seed", "0", "--output-per-rank"],
        capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.strip() == ("neuron-sim: error: --output-per-rank needs --backend mpi "
                                     "and -o OUT.npz")


# --- the scaffold: whose fault an error is -------------------------------------------------


def _raising(exc: BaseException):
    def check_module(module, topology, **options):
        raise exc
    return check_module


def test_a_bare_value_error_is_our_bug_not_the_users(capsys, monkeypatch):
    """A ValueError that no UserError class marks is an internal error: exit 2, the exception
    named, and the pointer to --debug (never passed off as the user's mistake)."""
    import neuron_sim.check_command

    monkeypatch.setattr(neuron_sim.check_command, "check_module", _raising(ValueError("boom")))
    assert main(["check", str(EXAMPLES / "ar_ds_single_group_sorted.hlo")]) == 2
    err = capsys.readouterr().err
    assert err == ("neuron-sim: internal error: ValueError: boom "
                   "(rerun with --debug for the traceback)\n")


def test_a_user_error_is_one_sentence(capsys, monkeypatch):
    import neuron_sim.check_command
    from neuron_sim.errors import UserError

    monkeypatch.setattr(neuron_sim.check_command, "check_module",
                        _raising(UserError("m.hlo: %x is wrong")))
    assert main(["check", str(EXAMPLES / "ar_ds_single_group_sorted.hlo")]) == 2
    assert capsys.readouterr().err == "neuron-sim: error: m.hlo: %x is wrong\n"


def test_debug_shows_the_traceback_of_an_internal_error(capsys, monkeypatch):
    import neuron_sim.check_command

    monkeypatch.setattr(neuron_sim.check_command, "check_module", _raising(KeyError("k")))
    assert main(["--debug", "check", str(EXAMPLES / "ar_ds_single_group_sorted.hlo")]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "internal error: KeyError" in err


@pytest.mark.parametrize("error_class", [
    "neuron_sim.hlo.parser.HloParseError", "neuron_sim.hlo.checker.HloCheckError",
    "neuron_sim.topology.TopologyError", "neuron_sim.hlo.replica_groups.ReplicaGroupError",
    "neuron_sim.io.ArgumentError", "neuron_sim.interpreter.errors.InputError", "neuron_sim.passes.base.PassError",
    "neuron_sim.passes.base.UnknownPassError", "neuron_sim.passes.options.UnknownPassOptionError",
])
def test_the_errors_a_user_can_cause_are_user_errors(error_class):
    import importlib

    from neuron_sim.errors import UserError

    module, name = error_class.rsplit(".", 1)
    assert issubclass(getattr(importlib.import_module(module), name), UserError)


def test_the_readme_documents_exactly_the_commands_the_cli_has():
    """Every subcommand has a `### `neuron-sim NAME ...`` section (or is named in one's title),
    and every section title names a command that exists."""
    import re

    from neuron_sim.cli import build_parser

    parser = build_parser()
    commands = set(next(a for a in parser._actions
                        if isinstance(a, argparse._SubParsersAction)).choices)
    titles = [line for line in (ROOT / "README.md").read_text().splitlines()
              if line.startswith("### ")]
    documented = {name for title in titles
                  for name in re.findall(r"`(?:mpiexec -n W )?neuron-sim ([a-z-]+)", title)}
    assert documented == commands


TINY = "HloModule tiny\n\nENTRY main {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] negate(x)\n}\n"


@pytest.mark.parametrize("argv, option, phrase", [
    # numpy's SeedSequence refuses a negative seed: it was an internal error past the parser
    (["run", "m.hlo", "--seed", "-1"], "--seed", "non-negative integer, got -1"),
    (["verify", "m.hlo", "m.hlo", "--seed", "-1"], "--seed", "non-negative integer, got -1"),
    (["sweep", "--preset", "trn1.2xlarge", "--seed", "-3"], "--seed", "got -3"),
    (["verify", "m.hlo", "--passes", "dce", "--partitions", "0"], "--partitions", "got 0"),
    (["run", "m.hlo", "--seed", "0", "--replicas", "9223372036854775808"], "--replicas",
     "up to 2**63 - 1 (XLA's int64)"),
])
def test_bad_seeds_and_counts_are_usage_errors_naming_the_option(tmp_path, monkeypatch, capsys,
                                                                   argv, option, phrase):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.hlo").write_text(TINY)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"argument {option}: " in err and phrase in err
    assert "internal error" not in err and "Traceback" not in err


def test_proof_symbolic_with_given_inputs_is_a_usage_error(tmp_path, monkeypatch, capsys):
    """--inputs asks about those inputs only; --proof symbolic asks for all inputs: before,
    the proof was skipped without a word and the verdict was a sampled CORRECT."""
    import numpy as np

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.hlo").write_text(TINY)
    np.savez(tmp_path / "in.npz", arg0=np.ones(4, np.float32))
    assert main(["verify", "m.hlo", "m.hlo", "--proof", "symbolic", "--inputs", "in.npz"]) == 2
    assert "--proof symbolic proves for all inputs" in capsys.readouterr().err
    assert main(["verify", "m.hlo", "m.hlo", "--inputs", "in.npz"]) == 0
