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
"""

from neuron_sim.passes.base import (HloPass, OpExpanderPass, PassError, SeedStatus, UnknownPassError,
                         resolve_pass_options)
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.contracts import (CHANGES_RESULTS, EXACT, INFINITY_TO_FINITE, Contract, Refinement,
                              contract_of, weakest)
from neuron_sim.passes.options import PassOption, UnknownPassOptionError, parse_pass_option_args
from neuron_sim.passes.pass_pipeline import PassPipeline
from neuron_sim.passes.registry import (PassInfo, get_pass, list_passes, pass_class, pass_keys,
                             register_pass)

__all__ = [
    "CHANGES_RESULTS", "Contract", "EXACT", "HloPass", "INFINITY_TO_FINITE", "OpExpanderPass",
    "PassContext", "PassError", "PassInfo", "PassOption", "PassPipeline", "Refinement",
    "SeedStatus", "UnknownPassError", "UnknownPassOptionError", "contract_of", "get_pass",
    "list_passes", "parse_pass_option_args", "pass_class", "pass_keys", "register_pass",
    "resolve_pass_options", "weakest",
]
