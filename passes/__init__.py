"""The pass framework and the passes: Neuron seed passes (``passes.neuron``) and XLA reference
passes (``passes.xla``).

    from passes import get_pass, PassPipeline
    changed = get_pass("aws_neuron_rewrite_all_reduce_dynamic_slice").run(module)
    PassPipeline(["aws_neuron_delete_permute", "dce"]).run(module)

Passes are found by their registry key (the seed's key, e.g. ``aws_neuron_delete_permute``) or
their class name. A pass that raises leaves the module unchanged (``PassError``).
"""

from passes.base import (Contract, HloPass, OpExpanderPass, PassError, PassInfo, PassPipeline,
                         SeedStatus, UnknownPassError, get_pass, list_passes, pass_class,
                         pass_keys, register_pass)

__all__ = [
    "Contract", "HloPass", "OpExpanderPass", "PassError", "PassInfo", "PassPipeline",
    "SeedStatus", "UnknownPassError", "get_pass", "list_passes", "pass_class", "pass_keys",
    "register_pass",
]
