"""A topology's input sets after the first run together (``verify.trial_batches``) and the
verifier reaches the verdicts it reaches running them one by one: every golden pair of
tests/data/verify (miscompiles of each class, their fixes, undefined sources) gives the same
report, field by field, with and without the batches, and the batches are used."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_sim.verify import VerifyOptions, check_modules
from neuron_sim.verify.execution import default_runner
from neuron_sim.verify.inputs import DEFAULT_TRIALS
from neuron_sim.verify.report import read_pair_file, result_json

DATA = Path(__file__).resolve().parents[1] / "data" / "verify"
PAIRS = sorted(DATA.glob("*.hlo"))
TIMING = {"seconds", "elapsed", "time", "duration", "proof_bytes"}


def _without_times(value):
    """The report without its timing fields and the memory the proof measured (they
    differ from run to run)."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items()
                if not any(t in k for t in TIMING)}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def _one_by_one_runner():
    """The default runner without ``run_trials``: every input set runs alone."""
    runner = default_runner()

    def alone(*args, **kwargs):
        return runner(*args, **kwargs)

    alone.takes_devices = runner.takes_devices
    return alone


def _counting_runner(batches: list[int]):
    runner = default_runner()

    def counted(*args, **kwargs):
        return runner(*args, **kwargs)

    def run_trials(module, sets, topology, seed):
        batches.append(len(sets))
        return runner.run_trials(module, sets, topology, seed)

    counted.takes_devices = runner.takes_devices
    counted.run_trials = run_trials
    return counted


def _report(path: Path, runner) -> dict:
    before, after, header = read_pair_file(path)
    topologies = header.get("topologies", "").split() or None
    result = check_modules(before, after, topologies, VerifyOptions(
        contract=header.get("contract", "exact"), minimize=False, runner=runner,
        trials=int(header.get("trials", DEFAULT_TRIALS))))
    return _without_times(result_json(result))


@pytest.mark.parametrize("path", PAIRS, ids=lambda p: p.stem)
def test_a_pair_gets_the_same_report_with_and_without_batches(path: Path) -> None:
    batches: list[int] = []
    batched = _report(path, _counting_runner(batches))
    alone = _report(path, _one_by_one_runner())
    assert batched == alone


def test_the_batches_are_used() -> None:
    """The pairs are small modules: on most topologies the first set's source run is fast
    and the other 6 sets run as one execute of the source and one of the target."""
    batches: list[int] = []
    for path in PAIRS:
        _report(path, _counting_runner(batches))
    assert len(batches) >= len(PAIRS) and set(batches) == {DEFAULT_TRIALS - 1}


def _failing_batches_runner(attempts: list[int]):
    """A runner whose batches always fail (as a batch with a collective mismatch, an error or
    the time limit on one of its sets does): every set must then run alone."""
    runner = default_runner()

    def counted(*args, **kwargs):
        return runner(*args, **kwargs)

    def run_trials(module, sets, topology, seed):
        attempts.append(len(sets))
        raise RuntimeError("a batch that fails")

    counted.takes_devices = runner.takes_devices
    counted.run_trials = run_trials
    return counted


@pytest.mark.parametrize("path", PAIRS, ids=lambda p: p.stem)
def test_a_failed_batch_runs_each_set_alone_to_the_same_report(path: Path) -> None:
    attempts: list[int] = []
    assert _report(path, _failing_batches_runner(attempts)) == \
        _report(path, _one_by_one_runner())


def test_the_status_line_counts_a_batch_as_its_input_sets(monkeypatch) -> None:
    """With a terminal, ``neuron-sim verify`` shows each execution on a status line; the
    runner it wraps keeps ``run_trials``, and a batch of 6 sets advances the line by 6: a
    verification of a pair at 8 devices (7 sets, source and target) advances it by 14 in all,
    as one by one."""
    import contextlib

    from neuron_sim.verify import commands

    advanced: list[int] = []

    @contextlib.contextmanager
    def terminal(columns, description):
        def update(description=None, advance=0, **_):
            advanced.append(advance)
        yield update

    monkeypatch.setattr(commands, "terminal_progress", terminal)
    path = DATA / "xla_all_reduce_deleted_fixed.hlo"
    with commands._progress(default_runner(), "pair") as runner:
        assert callable(getattr(runner, "run_trials", None))
        _report(path, runner)
    before, after, header = read_pair_file(path)
    topologies = header.get("topologies", "").split() or [None]
    assert sum(advanced) == 2 * DEFAULT_TRIALS * len(topologies)
    assert DEFAULT_TRIALS - 1 in advanced
