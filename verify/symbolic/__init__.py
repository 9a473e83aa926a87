"""Symbolic proofs with z3 where the question is index arithmetic.

* ``index_encoding`` — the integer index sub-language of HLO (partition-id, replica-id, integer
  arithmetic with XLA's exact semantics, compare/select, constant tables, fusion parameters)
  as z3 bit-vectors over a symbolic device;
* ``fold_proof`` — is folding an all-reduce + dynamic-slice pair into a reduce-scatter sound on
  every device of a topology? PROVEN / REFUTED with the smallest witness device /
  FAILED_TO_PROVE naming the instruction outside the sub-language;
* ``pool_theorems`` — for the constant offset pools the seed's multiple-groups matcher admits,
  does the matcher's predicate imply a sound fold, for symbolic group count, width and shard?
* ``proven_fold`` — the pass ``rewrite_all_reduce_dynamic_slice_proven`` (registered when this
  package is imported): fold exactly the pairs z3 proves sound;
* ``replay`` and ``idioms`` — concrete replay through the interpreter, HLO idiom builders.

    from verify.symbolic import prove_module
    for proof in prove_module(module, Topology(1, 8)):
        print(proof.describe())
"""

from verify.symbolic import proven_fold  # noqa: F401 - registers the proven fold pass
from verify.symbolic.ar_ds_pairs import ArDsPair, find_ar_ds_pairs, pair_of
from verify.symbolic.fold_proof import FoldProof, Status, Witness, prove_module, prove_pair
from verify.symbolic.index_encoding import (DeviceCoordinates, IndexEncoder, OutsideSubLanguage,
                                            SymValue)
from verify.symbolic.pool_theorems import Layout, PoolRow, pool_table
from verify.symbolic.proven_fold import RewriteAllReduceDynamicSliceProven

__all__ = [
    "ArDsPair", "DeviceCoordinates", "FoldProof", "IndexEncoder", "Layout",
    "OutsideSubLanguage", "PoolRow", "RewriteAllReduceDynamicSliceProven", "Status", "SymValue",
    "Witness", "find_ar_ds_pairs", "pair_of", "pool_table", "prove_module", "prove_pair",
]
