"""z3's answers kept for the rest of one verification, by formula up to renaming.

One verification asks z3 about the same formulas again and again: every topology of
``neuron-sim verify`` runs the same modules on its own devices, so the differing term pairs of
the second and third topologies are, up to renaming their input variables, the formulas the
first one asked about (``neuron_sim.proofs.smt`` already asks one formula per class of such
pairs within a topology). z3 takes seconds on some (a -inf buffer's dynamic-update-slice
case split: 2 to 10 s each, and a timeout), so asking them again on each topology tripled
the time of such a verification.

Inside ``remembering_answers()``, ``decide`` looks up each class's key (the formula with its
constants renamed ``_v0, _v1, ...``, as ``smt._renaming_classes`` makes it) here first:

* unsat is remembered for good: a formula equal up to renaming is unsat too (a model of one,
  renamed, is a model of the other), so the answer is the one z3 would give;
* unknown by timeout is remembered with the budget it had: the same formula asked again with
  no more time gives unknown without asking (the decision says so). That only gives up
  sooner, and an unknown proves nothing: the verifier falls back to its sampled and witness
  checks, as it did after the first timeout;
* sat is not remembered (its model names the first formula's variables; z3 finds one fast);
* a joint query over several classes (their disjunction) is remembered by its classes' keys:
  unsat makes each class unsat, a timeout is kept with its budget like a single formula's;
* so are a decision's classes asked one by one within its overall budget
  (``query="one by one"``): when that budget ran out on the same classes before, the next
  topology gives up at once instead of spending it again (ReplaceMinimumConstant's -inf
  buffer: 9 classes of 1.6 to 10 s each against a 30 s budget, on each of three topologies).

Keys are compared by z3 term id, which z3 gives to a new term once the old one is freed, so
every key stays alive here until the block ends; nothing is kept after it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

__all__ = ["Remembered", "known_unsat", "recall", "remember", "remembering_answers"]

UNSAT = "unsat"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Remembered:
    """z3's answer on a formula (or a joint query's classes) asked before in the block."""

    answer: str          # "unsat" | "unknown"
    budget_ms: int       # the time z3 had (unknown)
    reason: str          # z3's reason_unknown (unknown)


# key (a key's id, or the tuple of a joint query's key ids) -> (keys kept alive, answer)
_memory: dict[Any, tuple[tuple[Any, ...], Remembered]] | None = None


@contextlib.contextmanager
def remembering_answers() -> Iterator[None]:
    """Within the block, ``decide`` reuses z3's unsat and timeout answers on formulas equal up
    to renaming (see the module docstring). A block inside another shares the outer one's
    answers; nothing is kept after the outermost block."""
    global _memory
    outer = _memory
    if outer is None:
        _memory = {}
    try:
        yield
    finally:
        _memory = outer


def _slot(keys: Sequence[Any], query: str) -> Any:
    ids = tuple(k.get_id() for k in keys)
    return (query, ids) if query else ids[0] if len(ids) == 1 else ids


def known_unsat(key: Any) -> bool:
    """Whether z3 proved the formula of class ``key`` unsat before in the block."""
    found = _memory.get(key.get_id()) if _memory is not None else None
    return found is not None and found[1].answer == UNSAT


def recall(keys: Sequence[Any], budget_ms: int, query: str = "") -> Remembered | None:
    """What is known of the query over the classes ``keys`` (one key: that formula; ``query``
    names another kind of query over them than one formula or their disjunction) when it
    would be asked with ``budget_ms``: unsat when every class is, unknown when it ran out of
    time before with at least that budget, else None (ask z3). None outside
    ``remembering_answers``."""
    if _memory is None or not keys:
        return None
    if all(known_unsat(k) for k in keys):
        return Remembered(UNSAT, 0, "")
    found = _memory.get(_slot(keys, query))
    if found is not None and found[1].answer == UNKNOWN and found[1].budget_ms >= budget_ms:
        return found[1]
    return None


def remember(keys: Sequence[Any], answer: str, budget_ms: int, reason: str = "",
             query: str = "") -> None:
    """Keep z3's ``answer`` ("unsat", "unknown"; anything else is not kept) on the query over
    the classes ``keys`` (``query``: as for ``recall``), asked with ``budget_ms``. Unsat is
    kept per class; an unknown only when z3 ran out of time (``reason`` "timeout"), and it
    never replaces a longer budget's."""
    if _memory is None or not keys:
        return
    if answer == UNSAT:
        for key in keys:
            _memory[key.get_id()] = ((key,), Remembered(UNSAT, 0, ""))
        return
    if answer != UNKNOWN or reason != "timeout":
        return
    slot = _slot(keys, query)
    known = _memory.get(slot)
    if known is None or (known[1].answer == UNKNOWN and known[1].budget_ms < budget_ms):
        _memory[slot] = (tuple(keys), Remembered(UNKNOWN, int(budget_ms), reason))
