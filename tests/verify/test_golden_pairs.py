"""Golden before/after pairs (tests/data/verify/*.hlo): each file's header states the expected
status and first ``ERROR:`` line; each side is also checked against itself (Alive2's rule:
identity must verify). UNSOUND pairs must minimize to at most 8 entry instructions."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_sim.verify import Status, VerifyOptions, check_modules
from neuron_sim.verify.inputs import DEFAULT_TRIALS
from neuron_sim.verify.report import read_pair_file

DATA = Path(__file__).resolve().parents[1] / "data" / "verify"
PAIRS = sorted(DATA.glob("*.hlo"))
MAX_MINIMIZED = 8


def verify_pair(path: Path):
    before, after, header = read_pair_file(path)
    topologies = header.get("topologies", "").split() or None
    result = check_modules(before, after, topologies,
                           VerifyOptions(contract=header.get("contract", "exact"),
                                         trials=int(header.get("trials", DEFAULT_TRIALS))))
    return result, header


def test_there_are_golden_pairs_for_each_xla_miscompile_class():
    names = {p.stem for p in PAIRS}
    for cls in ("xla_cp_cycle_decomposition", "xla_permute_self_pairs_dropped",
                "xla_dynamic_slice_before_all_reduce", "xla_all_reduce_deleted"):
        assert {f"{cls}_wrong", f"{cls}_fixed"} <= names


@pytest.mark.parametrize("path", PAIRS, ids=lambda p: p.stem)
def test_golden_pair_has_its_expected_status_and_first_error_line(path):
    result, header = verify_pair(path)
    assert result.status.value == header["status"], result.detail
    assert result.error_line == header.get("error"), result.detail
    if "classification" in header:
        assert result.classification == header["classification"]
    if result.status is Status.CORRECT:  # issue 17: every CORRECT pair is proved, not sampled
        assert result.proof == "all-inputs", result.notes
    if result.status is Status.UNSOUND:
        assert result.counterexample is not None
        if result.error_line != "ERROR: Target is malformed":
            assert result.minimized is not None
            assert result.minimized.size <= MAX_MINIMIZED
            assert result.minimized.counterexample.check == result.error_line


def _sides() -> list:
    """(path, side) for every side that is a well-formed program (a malformed target is not)."""
    sides = []
    for path in PAIRS:
        sides.append(pytest.param(path, "before", id=f"{path.stem}-before"))
        if "// error: ERROR: Target is malformed" not in path.read_text():
            sides.append(pytest.param(path, "after", id=f"{path.stem}-after"))
    return sides


@pytest.mark.parametrize("path, side", _sides())
def test_each_side_of_a_golden_pair_verifies_against_itself(path, side):
    before, after, header = read_pair_file(path)
    module = before if side == "before" else after
    topologies = header.get("topologies", "").split() or None
    result = check_modules(module, module.clone(), topologies,
                           VerifyOptions(trials=2, minimize=False))
    undefined = (side == "before" and header.get("status") == "FAILED_TO_PROVE") or \
        (side == "after" and header.get("error") == "ERROR: Collective mismatch in target")
    if undefined:  # this side is undefined on every input: nothing to compare
        assert result.status is Status.FAILED_TO_PROVE
    elif header.get("status") == "ERROR" and side == "after":
        assert result.status is Status.ERROR
    else:
        assert result.status is Status.CORRECT, result.detail
