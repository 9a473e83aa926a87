"""The verifier's settings as one record: ``VerifyOptions``.

Every setting a verification takes — where (topologies), on what (trials, seed, given inputs),
how far (the proof mode), under which contract and pass options, within which limits (time,
memory), how it runs (backend or runner), what it reports (minimize, name, breaking pass) and
which checks — lives in one frozen record with today's defaults. It is validated once, when
made, so a verifier never meets a contradictory setting; a variant is ``options.replace(...)``
(the minimizer's unminimized, sampled candidates; a prefix of a pass list with its options).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from neuron_sim.errors import UserError
from neuron_sim.hlo.ir import HloModule
from neuron_sim.interpreter.backends import BACKENDS
from neuron_sim.passes.contracts import EXACT, Contract, contract_of
from neuron_sim.proofs.all_inputs import PROOF_MODES
from neuron_sim.topology import Topology
from neuron_sim.verify.checks import CHECKS, Check
from neuron_sim.verify.execution import DEFAULT_TIMEOUT, Runner
from neuron_sim.verify.inputs import DEFAULT_TRIALS

__all__ = ["Topologies", "VerifyOptions", "parse_topologies"]

Topologies = Topology | str | Iterable[Topology | str] | None
"""A Topology, an ``"RxP"`` string, a list of them, or None (the module header's)."""

VERIFY_BACKENDS = (*BACKENDS, "mpi")


def parse_topologies(topologies: Topologies) -> tuple[Topology, ...] | None:
    """``"RxP"`` strings parsed, duplicates dropped (order kept); None stays None (the module
    header's topology). An empty list is a usage error: there would be nothing to verify."""
    if topologies is None:
        return None
    if isinstance(topologies, (Topology, str)):
        topologies = [topologies]
    result: list[Topology] = []
    for item in topologies:
        topology = Topology.parse(item) if isinstance(item, str) else item
        if topology not in result:
            result.append(topology)
    if not result:
        raise UserError("no topology to verify on")
    return tuple(result)


@dataclass(frozen=True)
class VerifyOptions:
    """How to verify: one record for ``Verifier``, ``check_pass`` and ``check_modules``.

    ``topologies``: where (None: the source module's header); each gets its own verdict.
    ``trials`` input sets per topology (styles cycle, see inputs.py), drawn from ``seed``;
    ``inputs`` (one value per parameter, ``shape`` or ``[D, *shape]``) replaces them and asks
    about those inputs only: the verdict is sampled, reported as one trial, and not minimized.
    ``proof``: "auto" also proves a CORRECT verdict of an exact contract for all inputs where
    symbolic execution can, "symbolic" requires that proof (so it cannot go with ``inputs``),
    "sampled" skips it. ``contract`` (a ``neuron_sim.passes.contracts`` object or its name)
    decides which differences ``check_modules`` allows; ``check_pass`` follows its passes'
    weakest contract instead. ``pass_options`` (``NAME`` or ``key.NAME`` -> text) go into every
    pass run's ``PassContext``. ``timeout`` bounds one execution of the source, in seconds
    (None: no bound; the target gets ``execution.target_limit``); ``max_memory`` (bytes): a
    source whose estimated memory on a topology exceeds it is refused before inputs are drawn,
    a target over it is an ERROR verdict with the default runner, and it bounds the symbolic
    run (None: half of the memory available). ``backend`` ("local" or "mpi") makes the default
    runner; ``runner`` replaces it. An UNSOUND result is minimized unless ``minimize`` is
    False. ``name`` names the result (default: the source module's name). ``checks`` run in
    order (``checks.CHECKS``). With ``name_breaking_pass``, an UNSOUND result of several passes
    also names the first pass whose prefix breaks that prefix's composed contract.
    """

    topologies: tuple[Topology, ...] | None = None
    trials: int = DEFAULT_TRIALS
    seed: int = 0
    inputs: Sequence[Any] | None = None
    proof: str = "auto"
    contract: Contract = EXACT
    pass_options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    timeout: float | None = DEFAULT_TIMEOUT
    max_memory: int | None = None
    backend: str = "local"
    runner: Runner | None = None
    minimize: bool = True
    name: str | None = None
    checks: tuple[Check, ...] = CHECKS
    name_breaking_pass: bool = False

    def __post_init__(self) -> None:
        set_field = object.__setattr__  # normalizing a frozen record while it is made
        set_field(self, "topologies", parse_topologies(self.topologies))
        set_field(self, "contract", contract_of(self.contract))
        set_field(self, "pass_options", MappingProxyType(dict(self.pass_options or {})))
        set_field(self, "checks", tuple(self.checks))
        if self.trials < 1:
            raise UserError(f"trials must be at least 1, not {self.trials}")
        if self.proof not in PROOF_MODES:
            raise UserError(f"unknown proof mode {self.proof!r}; proof modes are "
                            f"{', '.join(PROOF_MODES)}")
        if self.proof == "symbolic" and self.inputs is not None:
            raise UserError('proof="symbolic" proves for all inputs, and inputs asks about the '
                            'given ones only: give one or the other')
        if self.timeout is not None and not self.timeout > 0:
            raise UserError(f"timeout must be positive seconds or None, not {self.timeout}")
        if self.max_memory is not None and self.max_memory <= 0:
            raise UserError(f"max_memory must be positive bytes or None, not {self.max_memory}")
        if self.runner is None and self.backend not in VERIFY_BACKENDS:
            raise UserError(f"unknown backend {self.backend!r}; backends are "
                            f"{', '.join(VERIFY_BACKENDS)}")

    def replace(self, **changes: Any) -> VerifyOptions:
        """A variant with ``changes`` (field names), normalized and validated like the original
        (``dataclasses.replace``'s result, made without running the generated constructor:
        the verifier derives a variant for every pass and every candidate it checks)."""
        unknown = changes.keys() - _FIELD_NAMES
        if unknown:
            raise TypeError(f"VerifyOptions has no field {sorted(unknown)[0]!r}")
        variant = object.__new__(VerifyOptions)
        variant.__dict__.update(self.__dict__)
        variant.__dict__.update(changes)
        variant.__post_init__()
        return variant

    @property
    def proof_mode(self) -> str:
        """The proof mode in effect: given inputs ask about those only ("sampled")."""
        return "sampled" if self.inputs is not None else self.proof

    def topologies_for(self, module: HloModule) -> list[Topology]:
        """The topologies to verify ``module`` on: the record's, else the module header's."""
        if self.topologies is not None:
            return list(self.topologies)
        return [Topology(module.replica_count, module.num_partitions)]


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(VerifyOptions))
