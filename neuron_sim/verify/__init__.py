"""Proving that a rewrite preserved a program's meaning on every device.

    from neuron_sim.verify import check_pass, check_modules
    result = check_pass(module, "aws_neuron_rewrite_all_reduce_dynamic_slice", ["1x4", "2x2"])
    result.status          # Status.CORRECT / UNSOUND / FAILED_TO_PROVE / ERROR (the worst)
    result.error_line      # "ERROR: Value mismatch"
    result.counterexample  # topology, device, output index, values, inputs
    result.topology_results  # one TopologyVerdict per topology

Differential checking is split by job: ``result.py`` (statuses, counterexamples, verdicts),
``execution.py`` (running a module on every device, classifying failures), ``checks.py`` (the
ordered checks, the verdict on one topology), ``api.py`` (passes per topology, the summary,
minimization), with ``compare.py`` (contracts applied to outputs), ``inputs.py`` (bug-finding
inputs), ``minimize.py`` (shrinking a counterexample) and ``report.py`` (text, JSON and the
counterexample directory); the z3 proofs in ``symbolic/``.
"""

from __future__ import annotations

from neuron_sim.verify.api import check_modules, check_pass
from neuron_sim.verify.report import format_result, summary_line, write_counterexample
from neuron_sim.verify.result import Counterexample, Status, TopologyVerdict, VerificationResult

__all__ = ["Counterexample", "Status", "TopologyVerdict", "VerificationResult", "check_modules",
           "check_pass", "format_result", "summary_line", "write_counterexample"]
