"""Proving that a rewrite preserved a program's meaning on every device.

    from neuron_sim.verify import VerifyOptions, check_pass, check_modules
    result = check_pass(module, "aws_neuron_rewrite_all_reduce_dynamic_slice", ["1x4", "2x2"],
                        VerifyOptions(trials=7, seed=0))
    result.status          # Status.CORRECT / UNSOUND / FAILED_TO_PROVE / ERROR (the worst)
    result.error_line      # "ERROR: Value mismatch"
    result.counterexample  # topology, device, output index, values, inputs
    result.topology_results  # one TopologyVerdict per topology

Differential checking is split by job: ``options.py`` (the settings, one ``VerifyOptions``
record), ``verifier.py`` (``Verifier``: each topology's verdict, passes per topology, the
summary, minimization and the breaking pass), ``api.py`` (the thin entry points),
``result.py`` (statuses, counterexamples, verdicts), ``execution.py`` (running a module on
every device, classifying failures), ``checks.py`` (the ordered checks on sampled inputs),
``proving.py`` (the facts of the proof for all inputs, from ``neuron_sim.proofs``), with
``pass_runs.py`` (running passes), ``compare.py`` (contracts applied to outputs), ``inputs.py``
(bug-finding inputs), ``minimize.py`` (shrinking a counterexample) and ``report.py`` (text,
JSON and the counterexample directory).
"""

from __future__ import annotations

from neuron_sim.verify.api import check_modules, check_pass
from neuron_sim.verify.options import VerifyOptions
from neuron_sim.verify.report import format_result, summary_line, write_counterexample
from neuron_sim.verify.result import Counterexample, Status, TopologyVerdict, VerificationResult
from neuron_sim.verify.verifier import Verifier

__all__ = ["Counterexample", "Status", "TopologyVerdict", "VerificationResult", "Verifier",
           "VerifyOptions", "check_modules", "check_pass", "format_result", "summary_line",
           "write_counterexample"]
