"""Symbolic proofs with z3 where the question is index arithmetic.

* ``index_encoding`` — the integer index sub-language of HLO (partition-id, replica-id, integer
  arithmetic with XLA's exact semantics, compare/select, constant tables) as z3 bit-vectors;
* ``fold_proof`` — is folding an all-reduce + dynamic-slice pair into a reduce-scatter sound on
  every device of a topology? (PROVEN / REFUTED with the smallest witness device /
  FAILED_TO_PROVE naming the instruction outside the sub-language);
* ``pool_theorems`` — for the constant offset pools the seed's multiple-groups matcher admits,
  does the matcher's predicate imply a sound fold, for symbolic group count, width and shard?
* ``proven_fold`` — the pass ``rewrite_all_reduce_dynamic_slice_proven``: fold exactly the
  pairs z3 proves sound.
"""

from verify.symbolic.ar_ds_pairs import ArDsPair, find_ar_ds_pairs, pair_of
from verify.symbolic.fold_proof import FoldProof, Status, Witness, prove_module, prove_pair
from verify.symbolic.index_encoding import (DeviceCoordinates, IndexEncoder, OutsideSubLanguage,
                                            SymValue)

__all__ = [
    "ArDsPair", "DeviceCoordinates", "FoldProof", "IndexEncoder", "OutsideSubLanguage", "Status",
    "SymValue", "Witness", "find_ar_ds_pairs", "pair_of", "prove_module", "prove_pair",
]
