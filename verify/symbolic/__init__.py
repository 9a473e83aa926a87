"""Symbolic proofs with z3 where the question is index arithmetic.

* ``passes.analysis.index_encoding`` (below ``passes``, because a pass uses it) — the integer
  index sub-language of HLO (partition-id, replica-id, integer arithmetic with XLA's exact
  semantics, compare/select, constant tables, fusion parameters) as z3 bit-vectors over a
  symbolic device;
* ``passes.analysis.fold_proof`` — is folding an all-reduce + dynamic-slice pair into a
  reduce-scatter sound on every device of a topology? PROVEN / REFUTED with the smallest witness
  device / FAILED_TO_PROVE naming the instruction outside the sub-language;
* ``pool_theorems`` — for the constant offset pools the seed's multiple-groups matcher admits,
  does the matcher's predicate imply a sound fold, for symbolic group count, width and shard?
* the pass ``rewrite_all_reduce_dynamic_slice_proven`` (``passes.neuron``, registered like
  every pass) folds exactly the pairs z3 proves sound;
* ``replay`` and ``idioms`` — concrete replay through the interpreter, HLO idiom builders.

    from verify.symbolic import prove_module
    for proof in prove_module(module, Topology(1, 8)):
        print(proof.describe())
"""

from passes.analysis.ar_ds_pairs import ArDsPair, find_ar_ds_pairs, pair_of
from passes.analysis.fold_proof import FoldProof, Status, Witness, prove_module, prove_pair
from passes.analysis.index_encoding import (DeviceCoordinates, IndexEncoder, OutsideSubLanguage,
                                            SymValue)
from passes.neuron.rewrite_all_reduce_dynamic_slice_proven import (
    RewriteAllReduceDynamicSliceProven)
from verify.symbolic.pool_theorems import Layout, PoolRow, pool_table

__all__ = [
    "ArDsPair", "DeviceCoordinates", "FoldProof", "IndexEncoder", "Layout",
    "OutsideSubLanguage", "PoolRow", "RewriteAllReduceDynamicSliceProven", "Status", "SymValue",
    "Witness", "find_ar_ds_pairs", "pair_of", "pool_table", "prove_module", "prove_pair",
]
