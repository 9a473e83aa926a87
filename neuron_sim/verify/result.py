"""What the verifier concludes: statuses, counterexamples, one verdict per topology, the summary.

After Alive2, a verdict is one of four statuses:

``CORRECT``          no check failed on any trial
``UNSOUND``          a check failed: the verdict names it (an exact ``ERROR:`` line, checks.py)
                     and carries a counterexample (topology, device, output element, inputs)
``FAILED_TO_PROVE``  nothing was refuted, but nothing could be compared either (the source was
                     undefined on every input tried)
``ERROR``            our own limitation or a broken input (an op the interpreter does not
                     implement, a malformed source, a pass that crashed) — never UNSOUND

Every topology gets its own ``TopologyVerdict`` (sweep, fuzz and check-schedule report them one
by one); the ``VerificationResult`` sums them up: its status is the worst of theirs and its
error line, detail and counterexample are those of the first topology with that status.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
import numpy as np

from neuron_sim.hlo.ir import HloModule
from neuron_sim.topology import Topology
from neuron_sim.passes.contracts import EXACT, Contract
from neuron_sim.verify.inputs import DEFAULT_TRIALS, InputValue


class Status(str, enum.Enum):
    """A verdict, from best to worst (``SEVERITY``)."""

    CORRECT = "CORRECT"
    UNSOUND = "UNSOUND"
    FAILED_TO_PROVE = "FAILED_TO_PROVE"
    ERROR = "ERROR"

    def __str__(self) -> str:
        return self.value


# A refutation outranks our own limitation, which outranks an absence of evidence.
SEVERITY = (Status.CORRECT, Status.FAILED_TO_PROVE, Status.ERROR, Status.UNSOUND)


def worst(statuses: list[Status]) -> Status:
    """The most severe of ``statuses`` (CORRECT for none)."""
    return max(statuses, key=SEVERITY.index, default=Status.CORRECT)


@dataclass
class Counterexample:
    """What shows the target wrong: where, which values, on which inputs."""

    check: str                                  # the ERROR line
    topology: Topology
    inputs: list[InputValue]
    style: str                                  # input style (inputs.STYLES) or "given"
    exact: bool                                 # inputs exactly representable (no rounding)
    device: int | None = None                   # set for a value mismatch only
    leaf: int | None = None
    index: tuple[int, ...] = ()
    leaf_shape: str = ""
    source_value: str = ""
    target_value: str = ""
    source_device_values: np.ndarray | None = None  # the leaf on that device, source and target
    target_device_values: np.ndarray | None = None
    mismatch_devices: list[int] = field(default_factory=list)
    mismatch_count: int = 0
    same_as_source_device: int | None = None    # the target's value here is what the source
                                                # computes on this other device (a shard mix-up)
    message: str = ""                           # the failure's text, for the other checks
    source_path: list[str] = field(default_factory=list)   # instructions that lead there
    target_path: list[str] = field(default_factory=list)

    @property
    def replica_partition(self) -> tuple[int, int] | None:
        if self.device is None:
            return None
        return self.topology.replica_partition(self.device)

    def summary(self) -> str:
        """One line: where the values differ, or the failure's message, and the topology."""
        if self.device is None:
            return f"on topology {self.topology}: {self.message}"
        r, p = self.replica_partition
        return (f"on topology {self.topology}, device {self.device} (replica {r}, partition "
                f"{p}), output {self.leaf} index {list(self.index)}: source {self.source_value}, "
                f"target {self.target_value}")


@dataclass
class Minimized:
    """The shrunk pair that is reported (minimize.py)."""

    before: HloModule
    after: HloModule
    counterexample: Counterexample
    original_size: int
    size: int
    steps: int


@dataclass
class TopologyVerdict:
    """The verdict on one topology; ``target`` is what was compared there (with passes, their
    output for this topology)."""

    topology: Topology
    status: Status = Status.CORRECT
    error_line: str | None = None
    detail: str = ""
    counterexample: Counterexample | None = None
    compared: int = 0                           # trials compared on this topology
    classification: str | None = None           # "reassociation", "source undefined"
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    target: HloModule | None = None
    changed: bool | None = None
    rewrites: list[str] = field(default_factory=list)
    proof: str | None = None                    # a CORRECT verdict's kind: "all-inputs",
                                                # "bounded" (all inputs on which every loop
                                                # on data ends within proof_iterations),
                                                # "sampled"
    proof_iterations: int | None = None         # "bounded": the loop iterations unrolled
    proof_held: tuple[int, ...] = ()            # entry parameters of the compared source held
                                                # at values the rewrite folded in (ReplaceRng)
    proof_terms: int = 0                        # term-table size of the symbolic proof
    proof_method: str | None = None             # "elements" (a term per element) or
                                                # "positions" (a term per output, symbolic
                                                # positions); None when no proof ran
    proof_seconds: float = 0.0                  # the proof's time
    proof_bytes: int = 0                        # "positions": the peak resident memory after it
    proof_outputs: list[dict] = field(default_factory=list)  # per output: what was proved
    devices_executed: list[int] | None = None   # the flattened ids executed when only a
                                                # subset fitted (``verify.device_subsets``);
                                                # None: every device (or none, on positions)

    @property
    def ok(self) -> bool:
        return self.status is Status.CORRECT

    def fail(self, status: Status, line: str | None, detail: str = "",
             counterexample: Counterexample | None = None) -> "TopologyVerdict":
        """Set the verdict (returns self, so a check can end with ``return verdict.fail(...)``)."""
        self.status = status
        self.error_line = line
        self.detail = detail
        self.counterexample = counterexample
        return self


@dataclass
class VerificationResult:
    """The summary over every topology, and each topology's verdict in ``topology_results``."""

    status: Status
    name: str
    source: HloModule
    target: HloModule
    topologies: list[Topology]
    error_line: str | None = None
    detail: str = ""
    contract: Contract = EXACT
    trials: int = DEFAULT_TRIALS
    seed: int = 0
    timeout: float | None = None
    compared: int = 0                           # executions compared (trial x topology)
    counterexample: Counterexample | None = None
    minimized: Minimized | None = None
    classification: str | None = None           # "reassociation", "source undefined"
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    passes: list[str] = field(default_factory=list)
    breaking_pass: str | None = None  # the first pass whose prefix breaks its contract
    rewrites: list[str] = field(default_factory=list)
    changed: bool | None = None
    topology_results: list[TopologyVerdict] = field(default_factory=list)

    @property
    def proof(self) -> str | None:
        """For a CORRECT result: "all-inputs" when every topology's verdict is proved for all
        inputs (verifier.py, from the proof's facts), "bounded" when each is that or proved
        for all inputs up to a number of loop iterations, else "sampled"; None otherwise."""
        if self.status is not Status.CORRECT:
            return None
        proofs = [v.proof for v in self.topology_results]
        if proofs and all(p == "all-inputs" for p in proofs):
            return "all-inputs"
        return "bounded" if proofs and all(p in ("all-inputs", "bounded") for p in proofs) \
            else "sampled"

    @property
    def proof_iterations(self) -> int | None:
        """For a "bounded" proof: the fewest loop iterations any topology's proof covers."""
        bounds = [v.proof_iterations for v in self.topology_results
                  if v.proof == "bounded" and v.proof_iterations is not None]
        return min(bounds) if bounds else None

    @property
    def ok(self) -> bool:
        return self.status is Status.CORRECT

    @property
    def reported(self) -> tuple[HloModule, HloModule, Counterexample | None]:
        """The pair and counterexample a user should look at: the minimized ones if any."""
        if self.minimized is not None:
            return self.minimized.before, self.minimized.after, self.minimized.counterexample
        return self.source, self.target, self.counterexample
