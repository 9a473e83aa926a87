"""Proving that a rewrite preserved a program's meaning on every device.

    from verify import check_pass, check_modules
    result = check_pass(module, "aws_neuron_rewrite_all_reduce_dynamic_slice")
    result.status          # Status.CORRECT / UNSOUND / FAILED_TO_PROVE / ERROR
    result.error_line      # "ERROR: Value mismatch"
    result.counterexample  # topology, device, output index, values, inputs

Differential checking lives in ``differential.py`` (the checks and statuses), ``compare.py``
(equality and contracts), ``inputs.py`` (bug-finding inputs), ``minimize.py`` (shrinking a
counterexample) and ``report.py`` (text, JSON and the counterexample directory); the z3
proofs in ``symbolic/``. Names are imported lazily so that ``verify.symbolic`` stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Counterexample", "Status", "VerificationResult", "check_modules", "check_pass",
           "format_result", "summary_line", "write_counterexample"]

_LOCATIONS = {
    "Counterexample": "verify.differential", "Status": "verify.differential",
    "VerificationResult": "verify.differential", "check_modules": "verify.differential",
    "check_pass": "verify.differential", "format_result": "verify.report",
    "summary_line": "verify.report", "write_counterexample": "verify.report",
}


def __getattr__(name: str) -> Any:
    if name in _LOCATIONS:
        import importlib
        return getattr(importlib.import_module(_LOCATIONS[name]), name)
    raise AttributeError(f"module 'verify' has no attribute {name!r}")
