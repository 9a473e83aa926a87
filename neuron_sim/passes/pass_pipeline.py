"""PassPipeline: several passes run in order as one atomic pass."""

from __future__ import annotations

from typing import Iterable

from neuron_sim.hlo.ir import HloModule
from neuron_sim.passes.base import HloPass, resolve_pass_options
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.registry import get_pass


class PassPipeline(HloPass):
    """Several passes run in order, as one pass: if any of them raises, the module is unchanged.

    Every pass gets the pipeline's context (one topology and one set of options for all);
    ``run`` first checks the context's options against what the passes declare
    (``resolve_pass_options``). ``rewrites`` holds every pass's lines prefixed with the pass
    name; ``results`` holds (pass, changed) per pass of the last run, in order.
    """

    def __init__(self, passes: Iterable[HloPass | str], name: str = "pipeline") -> None:
        self.pipeline_name = name
        super().__init__()
        self.passes: list[HloPass] = [get_pass(p) if isinstance(p, str) else p for p in passes]
        self.results: list[tuple[HloPass, bool]] = []

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.pipeline_name

    def leaf_passes(self) -> list[HloPass]:
        return [leaf for hlo_pass in self.passes for leaf in hlo_pass.leaf_passes()]

    def run(self, module: HloModule, context: PassContext | None = None, *,
            check_options: bool = True) -> bool:
        """Run every pass in order; ``check_options`` False when an enclosing pipeline already
        checked the options against all of its passes."""
        if check_options:
            resolve_pass_options(self.passes, (context or PassContext()).options)
        self.results = []
        return super().run(module, context)

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        changed = False
        for hlo_pass in self.passes:
            if isinstance(hlo_pass, PassPipeline):
                pass_changed = hlo_pass.run(module, context, check_options=False)
            else:
                pass_changed = hlo_pass.run(module, context)
            self.results.append((hlo_pass, pass_changed))
            self.rewrites.extend(f"{hlo_pass.name}: {line}" for line in hlo_pass.rewrites)
            changed |= pass_changed
        return changed

    def __repr__(self) -> str:
        return f"<PassPipeline {[p.name for p in self.passes]}>"
