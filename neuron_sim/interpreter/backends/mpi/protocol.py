"""The control plane of the MPI backend: rendezvous before collectives, one agreed error, a watchdog.

Real hardware hangs when device-dependent control flow sends some participants of a collective
elsewhere; the MPI backend must instead end every process with the same clear message. Three
mechanisms do that, all on a private duplicate of the world communicator so they never mix with
data:

- **Rendezvous.** Before a collective each rank sends an :class:`Arrival` (the collective's
  fingerprint and which of its devices arrived) to every *peer* rank hosting another member of
  a group it takes part in, and receives one arrival from each. MPI keeps messages between two
  ranks in order, so every message a rank receives must be the arrival it expects next: a
  different fingerprint, or the end-of-program arrival that every rank sends to all others when
  it finishes, is a mismatch. Any asymmetry (a rank waiting for a peer that does not consider it
  a peer) is therefore detected at the latest when the peer finishes.
- **Agreement.** Whatever ends a run early (a mismatch, an error on one rank, the watchdog), the
  rank that sees it sends its *contribution* to every rank; a rank that notices an abort message
  while waiting joins with a contribution describing where it is. Each rank collects the
  contributions of all ranks (for a bounded grace period), picks the decisive one by a fixed
  rule and tells the others its decision, which a late rank adopts. Mismatch texts are built
  symmetrically from both sides' arrivals, so the two ranks that see a mismatch write the same
  sentence. Every rank then raises the same error and exits non-zero; rank 0 alone prints it
  (an error seen on one rank names that rank and its devices).
- **Watchdog.** A timer thread ends the run when it has not finished within ``--timeout``
  seconds, whatever the main thread is doing (an infinite loop computes without ever waiting).

A rank that dies is handled by the launcher: mpiexec (hydra) kills the remaining processes and
reports the failed rank, so nobody waits for it; on launchers that do not, the watchdog does.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NoReturn, Sequence

from neuron_sim.interpreter.backends.mpi.layout import RankLayout, format_devices
from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.collective_calls import Fingerprint

__all__ = [
    "Arrival",
    "ControlPlane",
    "EXIT_MISMATCH",
    "MpiRunError",
    "check_groups_arrived",
    "describe_mismatch",
    "end_of_program",
]

TAG_ARRIVAL = 101
TAG_ABORT = 102

EXIT_MISMATCH = 1  # the program is wrong for this topology: the check found a problem
EXIT_TIMEOUT = 1
EXIT_INTERNAL = 2

# How long the agreement waits for the contributions of ranks that do not answer (busy
# computing or dead), and how long a rank waits for the others to have printed before exiting.
AGREEMENT_GRACE_SECONDS = 5.0
EXIT_GRACE_SECONDS = 5.0
OUTPUT_DRAIN_SECONDS = 1.0

# Severity of a contribution: the lowest wins; among equals the lowest rank.
SEVERITY_MISMATCH = 0
SEVERITY_ERROR = 1
SEVERITY_TIMEOUT = 2
SEVERITY_BYSTANDER = 3


class MpiRunError(InterpreterError):
    """The agreed reason a run ended early; every rank raises the same one.

    ``exit_code`` follows the CLI's convention: 1 the run found a problem in the program
    (collective mismatch, timeout), 2 bad input or an internal error. It is an
    ``InterpreterError`` so that the evaluator lets it through unchanged; its message is already
    final (it names the instruction where that matters), so it is never re-attached to the
    instruction this rank happened to be executing.
    """

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        # Set once every rank reported: True if MPI may be shut down cleanly.
        self.clean_shutdown: bool | None = None

    def attach(self, instruction) -> None:  # noqa: ARG002 - the agreed message stays as is
        return

    def __str__(self) -> str:
        return self.message


class CollectiveMismatch(Exception):
    """Raised inside a rank when it sees a mismatch; becomes that rank's contribution."""


# --------------------------------------------------------------------------------------------
# What ranks tell each other.


@dataclass(frozen=True)
class Arrival:
    """A rank reached a rendezvous point with some of its devices.

    ``fingerprint`` is None at the end of the program. ``label`` names the point in messages
    (the instruction's text), ``active`` lists the flattened ids of the rank's devices that
    arrived.
    """

    rank: int
    fingerprint: Fingerprint | None
    label: str
    active: tuple[int, ...]

    @property
    def is_end(self) -> bool:
        return self.fingerprint is None

    def matches(self, other: "Arrival") -> bool:
        return self.fingerprint == other.fingerprint


def end_of_program(rank: int, devices: Sequence[int]) -> Arrival:
    return Arrival(rank, None, "the end of the program", tuple(devices))


def describe_mismatch(a: Arrival, b: Arrival) -> str:
    """One sentence for two ranks that reached different points; symmetric in ``a`` and ``b``."""
    first, second = sorted((a, b), key=lambda arrival: arrival.rank)

    def side(arrival: Arrival) -> str:
        devices = format_devices(arrival.active)
        verb = "finished the program" if arrival.is_end else f"reached {arrival.label}"
        return f"devices {devices} (rank {arrival.rank}) {verb}"

    text = f"collective mismatch: {side(first)}, but {side(second)}"
    if first.is_end or second.is_end:
        skipped = second if first.is_end else first
        return text + f"; device-dependent control flow skipped {skipped.label.split(' ')[0]} " \
                      "on some of its participants"
    differences = first.fingerprint.differences(second.fingerprint)  # type: ignore[union-attr]
    return text + "; they differ in " + ", ".join(differences)


def check_groups_arrived(mine: Arrival, peers: Iterable[Arrival],
                         groups: Sequence[Sequence[int]], layout: RankLayout) -> str | None:
    """A mismatch sentence if a group that any known arrival touches lacks a member.

    Known arrivals are this rank's and its peers'. Only members hosted by those ranks are
    checked (the others are their own peers' business): a member that did not arrive with its
    rank's arrival was sent elsewhere by device-dependent control flow. Groups are checked in
    order and the first incomplete one is named.
    """
    arrivals = [mine, *peers]
    arrived: set[int] = set()
    for arrival in arrivals:
        arrived.update(arrival.active)
    known_ranks = {arrival.rank for arrival in arrivals}
    for index, group in enumerate(groups):
        if arrived.isdisjoint(group):
            continue
        missing = [d for d in group if d not in arrived and layout.rank_of(d) in known_ranks]
        if missing:
            present = [d for d in group if d in arrived]
            ranks = layout.ranks_of(missing)
            return (f"collective mismatch at {mine.label}: devices {format_devices(present)} "
                    f"reached it but devices {format_devices(missing)} "
                    f"(rank{'s' * (len(ranks) > 1)} {','.join(map(str, ranks))}) of the same "
                    f"participant group {{{','.join(map(str, group))}}} did not: "
                    f"device-dependent control flow sent them elsewhere")
    return None


# --------------------------------------------------------------------------------------------
# The control plane.


@dataclass
class _Contribution:
    severity: int
    rank: int
    exit_code: int
    text: str

    def key(self) -> tuple[int, int]:
        return (self.severity, self.rank)


class _Backoff:
    """Polling pace: yield at first, then sleep up to 2 ms (ranks may share few cores)."""

    def __init__(self) -> None:
        self.idle = 0

    def reset(self) -> None:
        self.idle = 0

    def wait(self) -> None:
        self.idle += 1
        if self.idle < 50:
            time.sleep(0)
        else:
            time.sleep(min(0.002, 0.00002 * (self.idle - 49)))


@dataclass
class ControlPlane:
    """Rendezvous, abort agreement and watchdog for one rank.

    ``comm`` must be a communicator private to the control plane (a ``Dup`` of the world).
    ``timeout`` is the watchdog's limit in seconds (None or 0: no watchdog).
    """

    comm: Any
    layout: RankLayout
    timeout: float | None = None
    rank: int = field(init=False)
    size: int = field(init=False)
    state: str = field(init=False, default="starting")

    def __post_init__(self) -> None:
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self._sends: list[Any] = []
        self._lock = threading.Lock()
        self._decision: MpiRunError | None = None
        self._watchdog: threading.Timer | None = None
        self._finished = False
        self._concluded = False
        self._conclude_lock = threading.Lock()
        self.data_pending = False
        from mpi4py import MPI

        self._any = MPI.ANY_SOURCE

    # -- point-to-point ------------------------------------------------------------------------
    def _send(self, dest: int, tag: int, message: Any) -> None:
        self._sends.append(self.comm.isend(message, dest=dest, tag=tag))
        if len(self._sends) > 64:
            self._sends = [r for r in self._sends if not r.Test()]

    def _broadcast(self, tag: int, message: Any) -> None:
        for dest in range(self.size):
            if dest != self.rank:
                self._send(dest, tag, message)

    # -- rendezvous ----------------------------------------------------------------------------
    def rendezvous(self, arrival: Arrival, peers: Sequence[int]) -> dict[int, Arrival]:
        """Exchange arrivals with ``peers``; returns theirs, or raises on a mismatch or abort."""
        peers = sorted(set(peers) - {self.rank})
        for peer in peers:
            self._send(peer, TAG_ARRIVAL, arrival)
        received: dict[int, Arrival] = {}
        backoff = _Backoff()
        where = arrival.label if not arrival.is_end else "the end of the program"
        while len(received) < len(peers):
            waiting = [p for p in peers if p not in received]
            self.state = (f"waiting at {where} for rank{'s' * (len(waiting) > 1)} "
                          f"{','.join(map(str, waiting))}")
            self.poll_abort()
            progressed = False
            for peer in waiting:
                message = self.comm.improbe(source=peer, tag=TAG_ARRIVAL)
                if message is None:
                    continue
                other: Arrival = message.recv()
                received[peer] = other
                progressed = True
                if not arrival.matches(other):
                    self.fail(CollectiveMismatch(describe_mismatch(arrival, other)))
            if progressed:
                backoff.reset()
            else:
                backoff.wait()
        self.state = "executing"
        return received

    def finish_rendezvous(self, devices: Sequence[int]) -> None:
        """The end of the program: every rank must have passed every collective it shares."""
        self.rendezvous(end_of_program(self.rank, devices), range(self.size))

    # -- waiting for data ----------------------------------------------------------------------
    def wait(self, requests: Sequence[Any], what: str) -> None:
        """Complete ``requests`` while watching for aborts (a peer may abort instead of sending)."""
        from mpi4py import MPI

        if not requests:
            return
        self.state = what
        self.data_pending = True
        started = time.monotonic()
        while not MPI.Request.Testall(list(requests)):
            self.poll_abort()
            # Yield while a transfer is likely in flight; sleep once it is clearly waiting.
            time.sleep(0 if time.monotonic() - started < 0.05 else 0.0005)
        self.data_pending = False
        self.state = "executing"

    # -- aborting ------------------------------------------------------------------------------
    def poll_abort(self) -> None:
        """Join the agreement (and raise its decision) if another rank started aborting."""
        if self._decision is not None:
            raise self._decision
        if self.comm.iprobe(source=self._any_source(), tag=TAG_ABORT):
            raise self._agree(_Contribution(SEVERITY_BYSTANDER, self.rank, EXIT_INTERNAL,
                                            f"was {self.state}"))

    def fail(self, error: BaseException, *, exit_code: int | None = None) -> NoReturn:
        """End the run because of ``error`` seen on this rank: agree, then raise the decision."""
        if isinstance(error, MpiRunError):
            raise error
        if isinstance(error, CollectiveMismatch):
            contribution = _Contribution(SEVERITY_MISMATCH, self.rank, EXIT_MISMATCH, str(error))
        else:
            code = EXIT_INTERNAL if exit_code is None else exit_code
            contribution = _Contribution(SEVERITY_ERROR, self.rank, code,
                                         str(error) or type(error).__name__)
        raise self._agree(contribution) from error

    def _any_source(self) -> int:
        return self._any

    def _agree(self, contribution: _Contribution) -> MpiRunError:
        with self._lock:
            if self._decision is not None:
                return self._decision
            self._broadcast(TAG_ABORT, ("contribution", contribution))
            contributions = {self.rank: contribution}
            adopted: MpiRunError | None = None
            deadline = time.monotonic() + AGREEMENT_GRACE_SECONDS
            backoff = _Backoff()
            while len(contributions) < self.size and time.monotonic() < deadline:
                message = self.comm.improbe(source=self._any_source(), tag=TAG_ABORT)
                if message is None:
                    backoff.wait()
                    continue
                kind, payload = message.recv()
                if kind == "decided":
                    adopted = MpiRunError(*payload)
                    break
                contributions[payload.rank] = payload
            decision = adopted or self._decide(contributions)
            if adopted is None:
                self._broadcast(TAG_ABORT, ("decided", (decision.message, decision.exit_code)))
            self._decision = decision
            return decision

    def _decide(self, contributions: dict[int, _Contribution]) -> MpiRunError:
        best = min(contributions.values(), key=_Contribution.key)
        if best.severity == SEVERITY_MISMATCH:
            return MpiRunError(best.text, best.exit_code)
        if best.severity == SEVERITY_ERROR:
            where = ""
            if self.size > 1:
                where = (f" (on MPI rank {best.rank}, devices "
                         f"{format_devices(self.layout.hosted(best.rank))})")
            return MpiRunError(best.text + where, best.exit_code)
        states = []
        for rank in range(self.size):
            found = contributions.get(rank)
            states.append(f"rank {rank} {found.text if found else 'did not answer'}")
        if best.severity == SEVERITY_TIMEOUT:
            head = f"the MPI run did not finish within {self.timeout:g} s (--timeout)"
            return MpiRunError(f"{head}: " + "; ".join(_shorten(states)), EXIT_TIMEOUT)
        return MpiRunError("the MPI run was aborted: " + "; ".join(_shorten(states)),
                           EXIT_INTERNAL)

    # -- watchdog ------------------------------------------------------------------------------
    def start_watchdog(self, report: Callable[[MpiRunError], None]) -> None:
        """After ``timeout`` seconds agree on a timeout, ``report`` it, and end the process.

        The main thread may be computing (an infinite loop never waits) or blocked, so the
        watchdog ends the process itself with ``os._exit``.
        """
        if not self.timeout:
            return

        def fire() -> None:
            if self._finished:
                return
            decision = self._agree(_Contribution(SEVERITY_TIMEOUT, self.rank, EXIT_TIMEOUT,
                                                 f"was {self.state}"))
            if self.conclude(decision, report, from_watchdog=True) is None:
                time.sleep(AGREEMENT_GRACE_SECONDS + EXIT_GRACE_SECONDS)  # main is concluding
            # The first process to leave makes mpiexec kill the others: give the launcher a
            # moment to forward what every rank printed.
            time.sleep(OUTPUT_DRAIN_SECONDS)
            os._exit(decision.exit_code)

        self._watchdog = threading.Timer(self.timeout, fire)
        self._watchdog.daemon = True
        self._watchdog.start()

    def stop_watchdog(self) -> None:
        self._finished = True
        if self._watchdog is not None:
            self._watchdog.cancel()

    # -- leaving -------------------------------------------------------------------------------
    def conclude(self, decision: MpiRunError, report: Callable[[MpiRunError], None], *,
                 from_watchdog: bool = False) -> bool | None:
        """Report the agreed ``decision`` once, on rank 0, then wait for the other ranks.

        Returns True when the process may shut MPI down cleanly (every rank reported and no
        data transfer is pending), False when it must leave with ``os._exit``, and None when
        another thread of this process already concluded (and will end the process).
        """
        with self._conclude_lock:
            if self._concluded:
                return None
            self._concluded = True
        if not from_watchdog:
            self.stop_watchdog()
        if self.rank == 0:
            report(decision)
        everyone = self.exit_barrier()
        return everyone and not self.data_pending

    def exit_barrier(self) -> bool:
        """Wait (bounded) until every rank reached this point; True if they all did.

        Used after printing an error: a rank that exits first makes mpiexec kill the others,
        possibly before they printed.
        """
        request = self.comm.Ibarrier()
        deadline = time.monotonic() + EXIT_GRACE_SECONDS
        backoff = _Backoff()
        while not request.Test():
            if time.monotonic() > deadline:
                return False
            backoff.wait()
        return self.flush_sends(deadline)

    def flush_sends(self, deadline: float | None = None) -> bool:
        """Complete this rank's outstanding control messages; False if some never complete."""
        deadline = deadline or time.monotonic() + EXIT_GRACE_SECONDS
        backoff = _Backoff()
        while self._sends:
            self._sends = [r for r in self._sends if not r.Test()]
            if self._sends:
                if time.monotonic() > deadline:
                    return False
                backoff.wait()
        return True


def _shorten(states: list[str], limit: int = 16) -> list[str]:
    if len(states) <= limit:
        return states
    return states[:limit] + [f"... {len(states) - limit} more ranks"]

