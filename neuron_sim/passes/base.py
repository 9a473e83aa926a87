"""The pass framework: HloPass and OpExpanderPass, and resolving their options.

XLA's contract: a pass mutates a module and ``run(module, context) -> bool`` says whether it
changed it. Ours adds what a verifier needs:

* atomicity — a pass runs on a clone and the module takes the clone's contents only when the
  pass finished and reported a change, so a pass that raises leaves the module exactly as it was;
* a context — the topology the module is compiled for and the user's options
  (``PassContext``), handed to every pass instead of each reading the header its own way;
* declarations — every pass says what it promises (``contract``, a ``neuron_sim.passes.contracts``
  object), which options it takes (``options``), how faithfully it follows its seed
  (``seed_status``) and where the seed describes it (``seed``), and it keeps a log of its
  rewrites (``rewrites``, one line per rewrite) so a user sees what happened without diffing;
* what the system knows about it, in one place — its row of docs/passes.md (``seed_says``,
  ``our_reading``, ``known_unsafety``; ``neuron_sim.passes.docs_tables`` writes the table), its
  slot in each named pipeline (``pipelines``; ``neuron_sim.passes.named_pipelines`` builds
  them) and the context it relies on without checking (``hazard``, a
  ``neuron_sim.passes.context_hazards`` declaration that ``check-schedule`` judges).

The registry (``neuron_sim.passes.registry``) and PassPipeline
(``neuron_sim.passes.pass_pipeline``) sit on top of this.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from typing import Any, ClassVar, Iterator, Mapping, Sequence

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.topology import Topology
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.context_hazards import ContextHazard
from neuron_sim.passes.contracts import EXACT, Contract
from neuron_sim.passes.options import (PassOption, UnknownPassOptionError, check_option_names,
                            resolved_values)


class SeedStatus(str, enum.Enum):
    """How closely a pass follows the seed that describes it."""

    FAITHFUL = "faithful"        # the seed's checks and rewrite, as written
    OUR_READING = "our reading"  # the seed is ambiguous or ill-typed somewhere; see the docstring
    INFERRED = "inferred"        # the seed only implies it (a rationale, a neighbouring pass)

    def __str__(self) -> str:
        return self.value


class PassError(UserError):
    """A pass failed; the module it ran on is unchanged. The cause is chained."""


class UnknownPassError(UserError):
    """A pass name that is neither a registry key nor a pass class name."""


@dataclasses.dataclass
class SourceBinding:
    """How the verifier compares a rewrite that removed inputs or nondeterminism of the source.

    ``source`` and ``target`` (the same entry parameters) are run with the parameters ``fixed``
    (number -> value) held at those values on every device; ``problem``, if not None, says why
    the rewrite is wrong whatever the runs show (e.g. a planted value the source cannot produce).
    """

    source: HloModule
    target: HloModule
    fixed: Mapping[int, np.ndarray]
    problem: str | None = None


class HloPass:
    """A module-to-module transformation with XLA's ``run(module) -> changed`` contract.

    Subclasses implement ``run_on_module(module, context)`` (which may mutate the module it is
    given freely and must return True if it changed anything: changes reported as none are
    discarded) and call ``record`` once per rewrite. ``run`` gives them a clone, so a failure
    cannot leave a half-rewritten module behind.

    The constructor takes a ``topology`` (overriding the context's) and values for the
    declared ``options`` (overriding the context's ``options``); inside a run
    ``self.option(name)`` is the typed value and ``self.context`` the context in force.
    """

    name: ClassVar[str] = ""                       # the registry key
    contract: ClassVar[Contract] = EXACT
    options: ClassVar[tuple[PassOption, ...]] = ()
    seed_status: ClassVar[SeedStatus] = SeedStatus.FAITHFUL
    seed: ClassVar[str] = ""                       # seed file and section that describes it
    summary: ClassVar[str] = ""                    # one line for `neuron-sim passes`
    # Its row of docs/passes.md's table (markdown): what the seed says the pass does, how we
    # read the seed where it is ambiguous ("" for none), and what is known to be unsafe.
    seed_says: ClassVar[str] = ""
    our_reading: ClassVar[str] = ""
    known_unsafety: ClassVar[str] = ""
    pipelines: ClassVar[Mapping[str, int]] = {}    # named pipeline -> its #NN in it
    # An option without which the pass stays out of its named pipelines (a debug pass that only
    # means something when asked, such as the error injector's ``targets``); None: always in.
    pipeline_only_with: ClassVar[str | None] = None
    hazard: ClassVar[ContextHazard | None] = None  # what it relies on without checking

    def __init__(self, *, topology: Topology | None = None, **options: Any) -> None:
        declared = {option.name for option in type(self).options}
        for unknown in options:
            if unknown not in declared:
                raise UnknownPassOptionError(
                    f"pass {self.label} declares no option {unknown!r} (its options: "
                    f"{', '.join(sorted(declared)) or 'none'})")
        self.rewrites: list[str] = []
        self.warnings: list[str] = []              # one line each; `opt` prints them on stderr
        self.given_topology = topology
        self.given_options: dict[str, Any] = dict(options)
        self.context = PassContext(topology)
        self._option_values = self._resolve({})

    @property
    def label(self) -> str:
        """The registry key, or the class name of an unregistered pass."""
        return self.name or type(self).__name__

    def _resolve(self, given: Mapping[str, str]) -> dict[str, Any]:
        return resolved_values(type(self).options, self.label, type(self).__name__, given,
                               self.given_options)

    def run(self, module: HloModule, context: PassContext | None = None) -> bool:
        """Run the pass on ``module``; True if it changed it. Raises PassError (module unchanged),
        or UnknownPassOptionError (nothing run) if an option value of the context is bad."""
        work = self.rewritten(module, context)
        if work is not None:
            module.become(work)
        return work is not None

    def rewritten(self, module: HloModule, context: PassContext | None = None
                  ) -> HloModule | None:
        """What ``run`` makes of ``module``, as a new module, ``module`` itself left as it is:
        the rewritten clone, or None when the pass changed nothing (its clone is dropped, as
        ``run`` drops it). Raises what ``run`` raises. For a caller that wants the rewrite
        beside the original (the verifier, the minimizer): ``run`` on a clone of its own would
        copy the module twice."""
        context = self.bind(context)
        work = module.clone()
        with self.failing_as_pass_error(module):
            changed = bool(self.run_on_module(work, context))
        return work if changed else None

    @contextlib.contextmanager
    def failing_as_pass_error(self, module: HloModule) -> Iterator[None]:
        """Around a run on (a copy of) ``module``: ``rewrites`` starts empty; any failure
        empties it and raises this pass's PassError (a nested pass's PassError as it is: it
        already says which pass failed)."""
        self.rewrites = []
        try:
            yield
        except PassError:
            self.rewrites = []
            raise
        except Exception as exc:
            self.rewrites = []
            raise self.failure(module, exc) from exc

    def failure(self, module: HloModule, exc: Exception) -> PassError:
        """The PassError of this pass failing on ``module`` with ``exc``."""
        return PassError(f"pass {self.label} failed on module {module.name} and left it "
                         f"unchanged: {exc}")

    def bind(self, context: PassContext | None = None) -> PassContext:
        """Put the pass in the state ``run`` gives it, without running it: the context in force
        (a topology given to the constructor wins) and its options resolved. Analyses that ask
        a pass's matcher (check-schedule) call it first; returns the context in force."""
        context = context or PassContext()
        if self.given_topology is not None:
            context = dataclasses.replace(context, topology=self.given_topology)
        self._option_values = self._resolve(context.options)
        self.context = context
        return context

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        """Transform ``module`` in place; return whether anything changed."""
        raise NotImplementedError

    def option(self, name: str) -> Any:
        """The typed value of the declared option ``name`` in the current run (before any run:
        the constructor's value or the default)."""
        if name not in self._option_values:
            raise KeyError(f"pass {self.label} declares no option {name!r}")
        return self._option_values[name]

    def source_binding(self, source: HloModule, target: HloModule) -> SourceBinding | None:
        """After the run that made ``target`` from ``source``: what the verifier must hold fixed
        to compare them (InlineWeights: the weights, fed to the source's parameters). None, the
        default: compare them as they are."""
        return None

    def leaf_passes(self) -> list[HloPass]:
        """The passes that actually run: this one (a pipeline lists its passes')."""
        return [self]

    def record(self, line: str) -> None:
        """Log one rewrite, e.g. ``%ds -> %reduce-scatter (reduce-scatter, dimensions={0}, ...)``."""
        self.rewrites.append(line)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def resolve_pass_options(passes: Sequence[HloPass], given: Mapping[str, str]) -> None:
    """Check the user's options ``given`` (``NAME`` or ``key.NAME`` -> text) against what
    ``passes`` (pipelines included) declare, before anything runs.

    Raises UnknownPassOptionError for an option no pass in the list declares, a qualified
    ``key.NAME`` whose pass is not in the list or does not declare NAME, or a value its
    option's type cannot convert.
    """
    leaves = [leaf for hlo_pass in passes for leaf in hlo_pass.leaf_passes()]
    declared: dict[str, list[PassOption]] = {}
    aliases: dict[str, str] = {}
    for leaf in leaves:
        declared.setdefault(leaf.label, list(type(leaf).options))
        aliases[type(leaf).__name__] = leaf.label
    check_option_names(declared, aliases, given)
    for leaf in leaves:
        leaf._resolve(given)


class OpExpanderPass(HloPass):
    """XLA's OpExpanderPass: a pass defined by a matcher and an expander.

    ``run`` is shared by every subclass: walk every non-fusion computation in post order
    (callees first), collect every instruction for which ``matches`` holds — all of them,
    before anything is mutated — then replace each with ``expand(inst)`` through
    ``HloComputation.replace_instruction``, which also removes the operands left dead.

    What ``expand`` returns, and what the pass reports as a change:

    * None declines, like XLA's ExpandInstruction returning nullptr; the expansion must then
      have left the module untouched;
    * ``inst`` itself says "changed in place" (e.g. an edit of its ``to_apply`` callee or of
      its attributes): nothing is replaced, and it counts as a change;
    * any other instruction replaces ``inst``: a change.

    ``run`` returns True exactly when some expansion returned an instruction. XLA's
    ``OpExpanderPass::Run`` returns ``!matching_instructions.empty()`` — a match counts even
    when every expansion declined. Ours does not: our ``run`` keeps the rewritten clone only on
    a reported change and ``opt`` prints "no change" from it, so the report must be true; and
    an in-place edit has an explicit way to be counted (return ``inst``).
    """

    def matches(self, inst: HloInstruction) -> bool:
        raise NotImplementedError

    def expand(self, inst: HloInstruction) -> HloInstruction | None:
        raise NotImplementedError

    def describe(self, old: HloInstruction, new: HloInstruction) -> str:
        """The rewrite-log line for replacing ``old`` by ``new``."""
        if new is old:
            return f"%{old.name} changed in place ({old.opcode.spelling})"
        return f"%{old.name} -> %{new.name} ({new.opcode.spelling})"

    def candidates(self, module: HloModule) -> list[HloInstruction]:
        """The instructions ``run`` will expand, in the order it will expand them."""
        fusion = module.fusion_computations()
        return [inst for comp in module.post_order_computations() if comp not in fusion
                for inst in comp.post_order() if self.matches(inst)]

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        changed = False
        for inst in self.candidates(module):
            comp: HloComputation | None = inst.parent
            if comp is None:
                # Removed as a dead operand of an earlier rewrite. (XLA would hold a dangling
                # pointer here; no seed pass reaches this case with a live use.)
                continue
            new = self.expand(inst)
            if new is None:
                continue
            if new is not inst:
                comp.replace_instruction(inst, new)
            self.record(self.describe(inst, new))
            changed = True
        return changed
