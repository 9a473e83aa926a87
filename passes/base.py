"""The pass framework: HloPass, OpExpanderPass, PassPipeline and the pass registry.

XLA's contract: a pass mutates a module and ``run(module) -> bool`` says whether it changed it.
Ours adds two things a verifier needs:

* atomicity — a pass runs on a clone and the module takes the clone's contents only when the
  pass finished and reported a change, so a pass that raises leaves the module exactly as it was;
* declarations — every pass says what it promises (``contract``: exact equivalence, a refinement,
  or "expected to change results"), how faithfully it follows its seed (``seed_status``) and
  where the seed describes it (``seed``), and it keeps a log of its rewrites (``rewrites``, one
  line per rewrite) so a user sees what happened without diffing modules.
"""

from __future__ import annotations

import enum
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable, TypeVar

from neuron_sim.errors import UserError
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule


class Contract(str, enum.Enum):
    """What a pass promises about the program's results (ARCHITECTURE.md, Passes)."""

    EXACT = "exact"                        # every output bit for bit on every device
    REFINEMENT = "refinement"              # target's behaviours are a subset of the source's
    CHANGES_RESULTS = "changes-results"    # expected to change results (a positive control)

    def __str__(self) -> str:
        return self.value


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


class HloPass:
    """A module-to-module transformation with XLA's ``run(module) -> changed`` contract.

    Subclasses implement ``run_on_module`` (which may mutate the module it is given freely and
    must return True if it changed anything: changes reported as none are discarded) and call
    ``record`` once per rewrite. ``run`` gives them a clone, so a failure cannot leave a
    half-rewritten module behind.
    """

    name: ClassVar[str] = ""                       # the registry key
    contract: ClassVar[Contract] = Contract.EXACT
    seed_status: ClassVar[SeedStatus] = SeedStatus.FAITHFUL
    seed: ClassVar[str] = ""                       # seed file and section that describes it
    summary: ClassVar[str] = ""                    # one line for `neuron-sim passes`

    def __init__(self) -> None:
        self.rewrites: list[str] = []

    def run(self, module: HloModule) -> bool:
        """Run the pass on ``module``; True if it changed it. Raises PassError (module unchanged)."""
        self.rewrites = []
        work = module.clone()
        try:
            changed = bool(self.run_on_module(work))
        except PassError:  # a nested pass already said which pass failed
            self.rewrites = []
            raise
        except Exception as exc:
            self.rewrites = []
            raise PassError(f"pass {self.name or type(self).__name__} failed on module "
                            f"{module.name} and left it unchanged: {exc}") from exc
        if changed:
            module.become(work)
        return changed

    def run_on_module(self, module: HloModule) -> bool:
        """Transform ``module`` in place; return whether anything changed."""
        raise NotImplementedError

    def record(self, line: str) -> None:
        """Log one rewrite, e.g. ``%ds -> %reduce-scatter (reduce-scatter, dimensions={0}, ...)``."""
        self.rewrites.append(line)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class OpExpanderPass(HloPass):
    """XLA's OpExpanderPass: a pass defined by a matcher and an expander.

    ``run`` is shared by every subclass: walk every non-fusion computation in post order
    (callees first), collect every instruction for which ``matches`` holds — all of them,
    before anything is mutated — then replace each with ``expand(inst)`` through
    ``HloComputation.replace_instruction``, which also removes the operands left dead.
    ``expand`` may return None to decline, like XLA's ExpandInstruction returning nullptr.
    """

    def matches(self, inst: HloInstruction) -> bool:
        raise NotImplementedError

    def expand(self, inst: HloInstruction) -> HloInstruction | None:
        raise NotImplementedError

    def describe(self, old: HloInstruction, new: HloInstruction) -> str:
        """The rewrite-log line for replacing ``old`` by ``new``."""
        return f"%{old.name} -> %{new.name} ({new.opcode.spelling})"

    def candidates(self, module: HloModule) -> list[HloInstruction]:
        """The instructions ``run`` will expand, in the order it will expand them."""
        fusion = module.fusion_computations()
        return [inst for comp in module.post_order_computations() if comp not in fusion
                for inst in comp.post_order() if self.matches(inst)]

    def run_on_module(self, module: HloModule) -> bool:
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
            comp.replace_instruction(inst, new)
            self.record(self.describe(inst, new))
            changed = True
        return changed


class PassPipeline(HloPass):
    """Several passes run in order, as one pass: if any of them raises, the module is unchanged.

    ``rewrites`` holds every pass's lines prefixed with the pass name; ``results`` holds
    (pass, changed) per pass of the last run, in order.
    """

    def __init__(self, passes: Iterable[HloPass | str], name: str = "pipeline") -> None:
        super().__init__()
        self.passes: list[HloPass] = [get_pass(p) if isinstance(p, str) else p for p in passes]
        self.pipeline_name = name
        self.results: list[tuple[HloPass, bool]] = []

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.pipeline_name

    def run(self, module: HloModule) -> bool:
        self.results = []
        return super().run(module)

    def run_on_module(self, module: HloModule) -> bool:
        changed = False
        for hlo_pass in self.passes:
            pass_changed = hlo_pass.run(module)
            self.results.append((hlo_pass, pass_changed))
            self.rewrites.extend(f"{hlo_pass.name}: {line}" for line in hlo_pass.rewrites)
            changed |= pass_changed
        return changed

    def __repr__(self) -> str:
        return f"<PassPipeline {[p.name for p in self.passes]}>"


# --------------------------------------------------------------------------------------------
# Registry.


@dataclass(frozen=True)
class PassInfo:
    """What `neuron-sim passes` lists about one registered pass."""

    key: str
    class_name: str
    seed_status: str
    contract: str
    seed: str
    summary: str

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "class": self.class_name, "seed_status": self.seed_status,
                "contract": self.contract, "seed": self.seed, "summary": self.summary}


_BY_KEY: dict[str, type[HloPass]] = {}
_KEY_OF_CLASS_NAME: dict[str, str] = {}
_BUILTIN_PACKAGES = ("passes.neuron", "passes.xla")
_builtins_loaded = False

P = TypeVar("P", bound=type[HloPass])


def register_pass(key: str) -> Callable[[P], P]:
    """Class decorator: register a pass under ``key`` (its ``name``) and its class name."""

    def decorate(cls: P) -> P:
        for taken, what in ((key, "key"), (cls.__name__, "class name")):
            owner = _BY_KEY.get(taken) or _BY_KEY.get(_KEY_OF_CLASS_NAME.get(taken, ""))
            if owner is not None and owner is not cls:
                raise ValueError(f"pass {what} {taken!r} is already registered by "
                                 f"{owner.__module__}.{owner.__name__}")
        cls.name = key
        _BY_KEY[key] = cls
        _KEY_OF_CLASS_NAME[cls.__name__] = key
        return cls

    return decorate


def _load_builtin_passes() -> None:
    """Import every module of the built-in pass packages; their decorators register them."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    for package_name in _BUILTIN_PACKAGES:
        package = importlib.import_module(package_name)
        for info in pkgutil.iter_modules(package.__path__, package_name + "."):
            importlib.import_module(info.name)


def pass_keys() -> list[str]:
    """Every registry key, sorted."""
    _load_builtin_passes()
    return sorted(_BY_KEY)


def pass_class(name: str) -> type[HloPass]:
    """The pass class registered under ``name`` (a registry key or a class name)."""
    _load_builtin_passes()
    key = name if name in _BY_KEY else _KEY_OF_CLASS_NAME.get(name)
    if key is None:
        raise UnknownPassError(f"unknown pass {name!r}; valid passes are: "
                               + ", ".join(pass_keys()))
    return _BY_KEY[key]


def get_pass(name: str, **options) -> HloPass:
    """A new instance of the pass registered under ``name`` (registry key or class name)."""
    return pass_class(name)(**options)


def list_passes() -> list[PassInfo]:
    """Every registered pass, sorted by key."""
    _load_builtin_passes()
    return [PassInfo(key, cls.__name__, str(cls.seed_status), str(cls.contract), cls.seed,
                     cls.summary)
            for key, cls in sorted(_BY_KEY.items())]
