"""The verifier's entry points: ``check_modules(before, after)`` and ``check_pass(module, passes)``.

They answer the question a compiler engineer asks of a rewrite — did it preserve the program's
meaning on every device of every topology? — with one verdict per topology and a summary
(result.py). Both are thin: the settings are one ``VerifyOptions`` record (options.py) and the
work is a ``Verifier``'s (verifier.py)::

    check_pass(module, "dce")                                  # the module header's topology
    check_pass(module, "dce", ["1x4", "2x2"], VerifyOptions(trials=2, minimize=False))
    check_modules(before, after, options=VerifyOptions(contract="refinement"))
"""

from __future__ import annotations

from typing import Any

from neuron_sim.hlo.ir import HloModule
from neuron_sim.verify.options import Topologies, VerifyOptions
from neuron_sim.verify.pass_runs import apply_passes, options_taken, pass_list
from neuron_sim.verify.result import VerificationResult
from neuron_sim.verify.verifier import Verifier

__all__ = ["Topologies", "Verifier", "VerifyOptions", "apply_passes", "check_modules",
           "check_pass", "options_taken", "pass_list"]


def check_modules(before: HloModule, after: HloModule, topologies: Topologies = None,
                  options: VerifyOptions | None = None) -> VerificationResult:
    """Is ``after`` a correct replacement for ``before`` on every device of ``topologies``
    (a Topology, an ``"RxP"`` string or a list of them; default: ``options.topologies``, else
    ``before``'s header), under ``options`` (default ``VerifyOptions()``)?"""
    return Verifier(_options(options, topologies)).check_modules(before, after)


def check_pass(module: HloModule, passes: Any, topologies: Topologies = None,
               options: VerifyOptions | None = None) -> VerificationResult:
    """Run ``passes`` (``"a,b"``, a list of registry keys, class names or HloPass objects, or a
    PassPipeline) on a copy of ``module`` for each of ``topologies`` (as for
    ``check_modules``) and check each rewrite under ``options`` (``Verifier.check_pass``)."""
    return Verifier(_options(options, topologies)).check_pass(module, passes)


def _options(options: VerifyOptions | None, topologies: Topologies) -> VerifyOptions:
    """``options`` (default ``VerifyOptions()``), on ``topologies`` when they are given."""
    options = options if options is not None else VerifyOptions()
    if topologies is None:
        return options
    return options.replace(topologies=topologies)
