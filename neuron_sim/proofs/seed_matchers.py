"""Would the seed's matchers fold this all-reduce + dynamic-slice pair?

``neuron-sim prove`` states, next to each proof, whether RewriteAllReduceDynamicSlice and
RewriteAllReduceDynamicSliceMultipleGroups accept the pair — so a user sees at once where a
seed matcher accepts an unsound fold (or misses a sound one).
"""

from __future__ import annotations

from dataclasses import dataclass

from neuron_sim.passes import get_pass
from neuron_sim.proofs.index.ar_ds_pairs import ArDsPair

SEED_PASSES = ("aws_neuron_rewrite_all_reduce_dynamic_slice",
               "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups")


@dataclass(frozen=True)
class SeedMatch:
    key: str
    accepted: bool
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"pass": self.key, "accepts": self.accepted, "reason": self.reason}


def seed_matches(pair: ArDsPair) -> list[SeedMatch]:
    """Each seed matcher's verdict on the pair's dynamic-slice, with its reason.

    A dynamic-slice inside a fusion is never visited by the seeds' OpExpanderPass (it skips
    fusion computations); the matcher's own answer is reported with that note.
    """
    results = []
    for key in SEED_PASSES:
        matcher = get_pass(key)
        try:
            if hasattr(matcher, "explain"):
                outcome = matcher.explain(pair.dynamic_slice)
                accepted, reason = bool(outcome.matched), ("matches" if outcome.matched
                                                           else outcome.reason)
            else:
                accepted = bool(matcher.matches(pair.dynamic_slice))
                reason = "matches" if accepted else "does not match"
        except Exception as exc:  # noqa: BLE001 - a matcher that throws is a verdict too
            accepted, reason = False, f"the matcher raises: {exc}"
        if pair.is_fused:
            accepted = False
            reason += " (the pass never visits the fusion computation holding the slice)"
        results.append(SeedMatch(key, accepted, reason))
    return results
