"""An execute ignores floating-point errors and gives the caller's handling back.

HLO's overflow, division by zero and invalid operations are results (inf, NaN), so a run
must neither warn nor raise on them, whatever numpy's error handling the caller set; and
after the run the caller's handling (modes, buffer size) is what it was. The expected
values are IEEE's: 1/0 = inf, 0/0 = NaN, f32 max * 2 = inf."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

from neuron_sim import interpreter
from neuron_sim.interpreter.float_errors import ignore_float_errors, restore_float_errors

DIVIDE = """HloModule divide
ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT q = f32[3] divide(a, b)
}
"""


def test_a_run_under_raise_gives_ieee_results_and_keeps_raise_after() -> None:
    a = np.array([1, 0, np.finfo(np.float32).max], np.float32)
    b = np.array([0, 0, 0.5], np.float32)
    with np.errstate(all="raise"):
        (out,) = interpreter.run(DIVIDE, [a, b])
        assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise",
                               "invalid": "raise"}
        with pytest.raises(FloatingPointError):
            np.float32(1) / np.float32(0)
    assert out[0, 0] == np.inf and np.isnan(out[0, 1]) and out[0, 2] == np.inf


def test_a_run_under_warn_warns_nothing() -> None:
    a = np.array([1, 0, 2], np.float32)
    b = np.zeros(3, np.float32)
    with np.errstate(all="warn"), warnings.catch_warnings():
        warnings.simplefilter("error")
        (out,) = interpreter.run(DIVIDE, [a, b])
    assert out[0, 0] == np.inf and np.isnan(out[0, 1]) and out[0, 2] == np.inf


def test_ignoring_keeps_the_callers_buffer_size_and_restores_modes() -> None:
    with np.errstate(divide="raise", over="warn"):
        before = np.geterr()
        size = np.getbufsize()
        np.setbufsize(size * 2)
        try:
            token = ignore_float_errors()
            assert np.geterr() == {"divide": "ignore", "over": "ignore", "under": "ignore",
                                   "invalid": "ignore"}
            assert np.getbufsize() == size * 2
            restore_float_errors(token)
            assert np.geterr() == before and np.getbufsize() == size * 2
        finally:
            np.setbufsize(size)


def test_the_callers_state_changing_between_runs_is_followed() -> None:
    """The ignoring state is derived from the caller's: a second caller state (another buffer
    size) gets its own, not the first one's."""
    size = np.getbufsize()
    seen = []
    for factor in (2, 4):
        np.setbufsize(size * factor)
        try:
            token = ignore_float_errors()
            seen.append((np.getbufsize(), np.geterr()["over"]))
            restore_float_errors(token)
        finally:
            np.setbufsize(size)
    assert seen == [(size * 2, "ignore"), (size * 4, "ignore")]


def test_nested_and_threaded_uses_restore_their_own_state() -> None:
    results = []

    def worker(mode: str) -> None:
        with np.errstate(all=mode):
            for _ in range(200):
                outer = ignore_float_errors()
                inner = ignore_float_errors()
                restore_float_errors(inner)
                restore_float_errors(outer)
                if np.geterr()["divide"] != mode:
                    results.append(mode)
                    return
        results.append("ok")

    threads = [threading.Thread(target=worker, args=(m,)) for m in ("raise", "warn", "print")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["ok"] * 3
