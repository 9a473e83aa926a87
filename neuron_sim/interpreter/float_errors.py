"""numpy's floating-point error handling set to ignore everything for the length of a run.

A run executes HLO, where wrap-around, overflow to inf and NaN are semantics, not warnings, so
every execute runs under numpy's "ignore" state. ``np.errstate(all="ignore")`` builds that
state anew each time (1.8 us, as much as executing a one-op module's plan); numpy 2 keeps
the state in a context variable, so the ignoring state derived from the caller's (its buffer
size and error callback kept) is built once per caller's state and set and reset here
(0.5 us). numpy without that variable (1.x) takes ``np.errstate`` as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # numpy >= 2: the error state is a context variable (thread and task safe)
    from numpy._core.umath import _extobj_contextvar as _STATE, _make_extobj
except ImportError:  # pragma: no cover - numpy 1.x
    _STATE = None

__all__ = ["ignore_float_errors", "restore_float_errors"]

# (the caller's state, its ignoring form): one tuple, replaced whole, so that a thread reads a
# matching pair.
_derived: tuple[Any, Any] = (None, None)


def ignore_float_errors() -> Any:
    """Ignore every floating-point error from now on in this context; returns the token
    ``restore_float_errors`` takes to bring the caller's handling back."""
    global _derived
    if _STATE is None:
        state = np.errstate(all="ignore")
        state.__enter__()
        return state
    current = _STATE.get()
    derived = _derived
    if derived[0] is not current:
        derived = _derived = (current, _make_extobj(all="ignore"))
    return _STATE.set(derived[1])


def restore_float_errors(token: Any) -> None:
    """The caller's floating-point error handling again (``token``: ``ignore_float_errors``')."""
    if _STATE is None:
        token.__exit__(None, None, None)
    else:
        _STATE.reset(token)
