"""No false alarms: every module in tests/data verified against itself is CORRECT, or ERROR
where the interpreter cannot run it — never UNSOUND (Alive2: identity must verify)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neuron_sim.hlo import parse_module_file
from neuron_sim.verify import Status, VerifyOptions, check_modules
from neuron_sim.verify.checks import SOURCE_FAILS, UNSUPPORTED

DATA = Path(__file__).resolve().parents[1] / "data"
MANIFEST = json.loads((DATA / "jax" / "MANIFEST.json").read_text())
RUNNABLE = [e["name"] for e in MANIFEST if e["runnable"]]
NOT_RUNNABLE = [e["name"] for e in MANIFEST if not e["runnable"]]
FIXTURES = sorted((DATA / "checker").glob("*.hlo")) + sorted((DATA / "passes").glob("*/*.hlo"))


def corpus_inputs(name: str) -> list[np.ndarray]:
    with np.load(DATA / "jax" / f"{name}.npz") as data:
        args = sorted((k for k in data.files if k.startswith("arg")), key=lambda k: int(k[3:]))
        return [data[k] for k in args]


@pytest.mark.parametrize("name", RUNNABLE)
def test_jax_module_against_itself_is_correct_on_its_corpus_inputs(name):
    module = parse_module_file(str(DATA / "jax" / f"{name}.hlo"))
    result = check_modules(module, module.clone(),
                           options=VerifyOptions(inputs=corpus_inputs(name), minimize=False))
    assert result.status is Status.CORRECT, f"{result.error_line}: {result.detail}"


@pytest.mark.parametrize("name", RUNNABLE)
def test_jax_module_against_itself_is_never_unsound_on_bug_finding_inputs(name):
    module = parse_module_file(str(DATA / "jax" / f"{name}.hlo"))
    result = check_modules(module, module.clone(), options=VerifyOptions(minimize=False, timeout=1))
    if result.status is Status.FAILED_TO_PROVE:
        # e.g. a Collatz loop never ends on negative inputs: nothing to compare, nothing wrong
        assert any("did not finish" in w for w in result.warnings), result.detail
    else:
        assert result.status is Status.CORRECT, f"{result.error_line}: {result.detail}"


@pytest.mark.parametrize("name", NOT_RUNNABLE)
def test_a_module_the_interpreter_cannot_run_is_an_error_never_unsound(name):
    module = parse_module_file(str(DATA / "jax" / f"{name}.hlo"))
    result = check_modules(module, module.clone(), options=VerifyOptions(trials=2, minimize=False))
    assert result.status is Status.ERROR
    assert result.error_line in (UNSUPPORTED, SOURCE_FAILS)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_against_itself_is_correct_or_an_error(path):
    module = parse_module_file(str(path))
    result = check_modules(module, module.clone(), options=VerifyOptions(minimize=False, timeout=5))
    assert result.status in (Status.CORRECT, Status.ERROR), \
        f"{result.status}: {result.error_line}: {result.detail}"
    if result.status is Status.ERROR:
        assert result.error_line in (UNSUPPORTED, SOURCE_FAILS), result.detail
