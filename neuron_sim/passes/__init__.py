"""The pass framework and the passes: Neuron seed passes (``neuron_sim.passes.neuron``) and XLA reference
passes (``neuron_sim.passes.xla``).

    from neuron_sim.passes import get_pass, PassContext, PassPipeline
    changed = get_pass("aws_neuron_rewrite_all_reduce_dynamic_slice").run(module)
    PassPipeline(["aws_neuron_delete_permute", "dce"]).run(
        module, PassContext(Topology(1, 4), options={"dce.keep_channel_collectives": "true"}))

Passes are found by their registry key (the seed's key, e.g. ``aws_neuron_delete_permute``) or
their class name (``neuron_sim.passes.registry``: one explicit list). A pass that raises leaves the module
unchanged (``PassError``). A pass declares its contract (``neuron_sim.passes.contracts``) and its options
(``neuron_sim.passes.options``).

The names below are imported on first use (PEP 562), as ``neuron_sim.hlo``'s are: importing
one module of the package (say ``neuron_sim.passes.contracts``, which the verifier reads) does
not load the registry and every pass with it (before, a program importing one module of the
package first loaded 108 modules of neuron_sim, 0.3 CPU s).
"""

from __future__ import annotations

from neuron_sim.lazy import lazy_exports

_LAZY = {
    "HloPass": "base", "OpExpanderPass": "base", "PassError": "base", "SeedStatus": "base",
    "UnknownPassError": "base", "resolve_pass_options": "base",
    "PassContext": "context",
    "CHANGES_RESULTS": "contracts", "EXACT": "contracts", "INFINITY_TO_FINITE": "contracts",
    "Contract": "contracts", "Refinement": "contracts", "contract_of": "contracts",
    "weakest": "contracts",
    "PassOption": "options", "UnknownPassOptionError": "options",
    "parse_pass_option_args": "options",
    "PassPipeline": "pass_pipeline",
    "PassInfo": "registry", "get_pass": "registry", "list_passes": "registry",
    "pass_class": "registry", "pass_keys": "registry", "register_pass": "registry",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
