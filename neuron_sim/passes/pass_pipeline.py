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
        work = self.rewritten(module, context, check_options=check_options)
        if work is not None:
            module.become(work)
        return work is not None

    def rewritten(self, module: HloModule, context: PassContext | None = None, *,
                  check_options: bool = True) -> HloModule | None:
        """What ``run`` makes of ``module`` as a new module (``HloPass.rewritten``), copied
        once: the passes before the first that changes anything each run on a clone of
        ``module`` that they drop, and the passes from that one on run on its clone, which the
        pipeline owns (each of them still on a clone of its own, so that one that raises or
        reports no change leaves it as it was). So a failure leaves ``module`` untouched
        without a copy of the pipeline's own."""
        if check_options:
            resolve_pass_options(self.passes, (context or PassContext()).options)
        self.results = []
        context = self.bind(context)
        work: HloModule | None = None
        with self.failing_as_pass_error(module):
            for hlo_pass in self.passes:
                if work is None:
                    work = _rewritten(hlo_pass, module, context)
                    pass_changed = work is not None
                else:
                    pass_changed = _run(hlo_pass, work, context)
                self._record(hlo_pass, pass_changed)
        return work

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        changed = False
        for hlo_pass in self.passes:
            pass_changed = _run(hlo_pass, module, context)
            self._record(hlo_pass, pass_changed)
            changed |= pass_changed
        return changed

    def _record(self, hlo_pass: HloPass, changed: bool) -> None:
        """``hlo_pass``'s result and its rewrite lines, prefixed with its name."""
        self.results.append((hlo_pass, changed))
        self.rewrites.extend(f"{hlo_pass.name}: {line}" for line in hlo_pass.rewrites)

    def __repr__(self) -> str:
        return f"<PassPipeline {[p.name for p in self.passes]}>"


def _run(hlo_pass: HloPass, module: HloModule, context: PassContext) -> bool:
    """``hlo_pass.run`` inside a pipeline (a nested pipeline's options are checked already)."""
    if isinstance(hlo_pass, PassPipeline):
        return hlo_pass.run(module, context, check_options=False)
    return hlo_pass.run(module, context)


def _rewritten(hlo_pass: HloPass, module: HloModule, context: PassContext) -> HloModule | None:
    """``hlo_pass.rewritten`` inside a pipeline."""
    if isinstance(hlo_pass, PassPipeline):
        return hlo_pass.rewritten(module, context, check_options=False)
    return hlo_pass.rewritten(module, context)
