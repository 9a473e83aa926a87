"""Running passes for the verifier: a pass list from what a user names, a rewritten clone of a
module, and the options a prefix of a pass list takes."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from neuron_sim.hlo.ir import HloModule
from neuron_sim.passes import (HloPass, PassContext, PassPipeline, UnknownPassOptionError,
                               get_pass, resolve_pass_options)
from neuron_sim.passes.registry import parse_pass_list

__all__ = ["apply_passes", "options_taken", "pass_list"]


def pass_list(passes: Any) -> list[HloPass]:
    """``"a,b"``, a name, a list of names or HloPass objects, or a PassPipeline -> HloPass list."""
    if isinstance(passes, PassPipeline):
        return list(passes.passes)
    if isinstance(passes, HloPass):
        return [passes]
    if isinstance(passes, str):
        return parse_pass_list(passes)
    return [get_pass(p) if isinstance(p, str) else p for p in passes]


def apply_passes(module: HloModule, hlo_passes: Sequence[HloPass],
                 context: PassContext | None = None) -> tuple[HloModule, bool, list[str]]:
    """A rewritten clone of ``module``: (target, changed, rewrite log). Raises PassError.
    (The pipeline's ``rewritten`` copies the module once where it changes it; a plain clone
    is the target where nothing changed.)"""
    pipeline = PassPipeline(list(hlo_passes), name="verify")
    target = pipeline.rewritten(module, context)
    if target is None:
        return module.clone(), False, list(pipeline.rewrites)
    return target, True, list(pipeline.rewrites)


def options_taken(hlo_passes: Sequence[HloPass], options: Mapping[str, str]) -> dict[str, str]:
    """The options of ``options`` that some pass of ``hlo_passes`` takes: a prefix of a pass
    list is run with the options meant for the whole list, less those of the passes after it
    (which ``resolve_pass_options`` would refuse for the prefix)."""
    taken = {}
    for name, value in options.items():
        try:
            resolve_pass_options(hlo_passes, {name: value})
        except UnknownPassOptionError:
            continue
        taken[name] = value
    return taken
