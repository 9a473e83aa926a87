"""The hostile-input fuzz (``scripts/hostile_fuzz.py``) on a bounded CI sample.

Mutated corpus modules go through ``check``; those that still check go through ``run --timeout
10`` and ``verify --trials 1``. The user must never see a traceback or an internal error, a
command must never run past its limit, and exit codes stay 0/1/2. The sample is deterministic
(seed 0); the full campaign is ``python scripts/hostile_fuzz.py --count 7000``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "hostile_fuzz.py"

# The CI sample: mutants through check, and of those that check, how many run and verify.
CHECKS, RUNS, VERIFIES = 3000, 280, 200


def load_fuzz():
    spec = importlib.util.spec_from_file_location("hostile_fuzz", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("hostile_fuzz", module)
    spec.loader.exec_module(module)
    return module


fuzz = load_fuzz()


def test_mutants_are_deterministic_and_differ_from_their_base():
    bases = fuzz.corpus()
    first = [fuzz.mutant(i, 0, bases) for i in range(50)]
    again = [fuzz.mutant(i, 0, bases) for i in range(50)]
    assert [m.text for m in first] == [m.text for m in again]
    assert all(m.mutations for m in first)
    assert sum(m.text != m.base_text for m in first) >= 45  # two edits may undo each other


def test_every_mutation_changes_a_module_that_offers_its_site():
    import random

    text = ("HloModule m, replica_count=4\n\nENTRY %e (p: f32[4,2]) -> f32[4,2] {\n"
            "  %p = f32[4,2] parameter(0)\n  ROOT %ar = f32[4,2] all-reduce(%p), "
            "replica_groups={{0,1},{2,3}}, to_apply=%add\n}\n")
    for name, mutate in fuzz.MUTATIONS.items():
        results = {mutate(text, random.Random(k)) for k in range(20)}
        assert any(r is not None and r != text for r in results), name


def test_judge_names_each_failure_class():
    assert fuzz.judge("check", 2, 0.1, 20, "neuron-sim: error: m.hlo:3:4: bad") is None
    assert fuzz.judge("check", 2, 0.1, 20, "Traceback (most recent call last):\n") == \
        "traceback"
    assert fuzz.judge("run", 2, 0.1, 20, "neuron-sim: internal error: KeyError") == \
        "internal error"
    assert fuzz.judge("run", 3, 0.1, 20, "") == "exit code"
    assert fuzz.judge("verify", 0, 20 + fuzz.LIMIT_GRACE + 0.1, 20, "") == "time limit"
    assert fuzz.judge("verify", 0, 20 + fuzz.LIMIT_GRACE - 0.1, 20, "") is None


def test_hostile_mutants_never_trace_back_hang_or_crash():
    report = fuzz.campaign(CHECKS, RUNS, VERIFIES, seed=0, jobs=2, minimize=False)
    assert report.counts["check"] == CHECKS
    assert report.counts["run"] == RUNS and report.counts["verify"] == VERIFIES
    assert not report.failures, "\n".join(fuzz.summary(report))


@pytest.mark.parametrize("index", range(4))
def test_a_few_mutants_through_the_real_command_line(cli, tmp_path, index):
    """The same judgement on the installed entry point, in a subprocess of its own."""
    m = fuzz.mutant(index, 0, fuzz.corpus())
    (tmp_path / "m.hlo").write_text(m.text)
    code, _, stderr = cli("check", "m.hlo", cwd=tmp_path, timeout=60)
    assert fuzz.judge("check", code, 0, 1, stderr) is None, stderr
    if code == 0:
        code, _, stderr = cli(*fuzz.run_argv("m.hlo", "out.npz"), cwd=tmp_path, timeout=60)
        assert fuzz.judge("run", code, 0, 1, stderr) is None, stderr


def test_proto_mutants_are_deterministic_and_mutated():
    bases = fuzz.proto_corpus()
    assert len(bases) > 700
    first = [fuzz.proto_mutant(i, 0, bases) for i in range(40)]
    assert [m.data for m in first] == [fuzz.proto_mutant(i, 0, bases).data for i in range(40)]
    assert all(m.mutations for m in first)
    assert {k for m in first for k in m.mutations} >= {"truncate", "flip-bits", "field-damage"}


def test_mutated_protos_never_trace_back_or_crash():
    """Truncated, bit-flipped, re-typed, huge-length and field-damaged HloModuleProto files
    through check (and run, for those that still check): one sentence, exit 0/1/2."""
    report = fuzz.proto_campaign(200, 20, seed=0)
    assert report.counts["check"] == 200
    assert report.codes["check:2"] > 150  # most mutants are refused, as they should be
    assert not report.failures, "\n".join(fuzz.summary(report))
