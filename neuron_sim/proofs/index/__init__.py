"""Analyses passes decide with: the z3 encoding of HLO's integer index sub-language
(``index_encoding``, ``int_semantics``, ``tables``), all-reduce + dynamic-slice pairs
(``ar_ds_pairs``) and the proof that folding one into a reduce-scatter is sound
(``fold_proof``). They sit below ``passes`` so that a pass may use them; ``neuron_sim.proofs``
builds its commands and theorems on top."""
