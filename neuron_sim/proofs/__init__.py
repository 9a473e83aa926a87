"""Proofs: what neuron-sim can say for *all* inputs and devices, not just the sampled ones.

One roof, one module per question (docs/architecture.md draws the layers):

* ``index`` — the index arithmetic of HLO as z3 bit-vectors over a symbolic device. It sits
  below ``passes`` because passes use it: ``index.slice_info`` (the seed's 1-D shard invariant),
  ``index.ar_ds_pairs`` (which all-reduce + dynamic-slice pairs a fold would touch),
  ``index.index_encoding`` (integer instructions -> z3), ``index.fold_proof`` ("is folding this
  pair into a reduce-scatter sound on every device?": PROVEN / REFUTED with the smallest witness
  / FAILED_TO_PROVE naming the instruction outside the sub-language).
* ``symbolic`` — the interpreter run on symbols: every input element a variable, every result a
  term (above the interpreter, which it extends).
* ``smt`` — "do these differing terms still meet the contract for every input?": terms -> z3.
* ``answers`` — z3's answers kept for the rest of one verification (its other topologies ask
  the same formulas up to renaming).
* ``all_inputs`` — "does the rewrite preserve every output for all inputs?": symbolic execution
  of source and target, then ``smt`` on what differs (``verify --proof``).
* ``pools`` — "for the constant offset pools the seed's multiple-groups matcher admits, does its
  predicate imply a sound fold?", for symbolic group count, width and shard.
* ``idioms``, ``replay``, ``seed_matchers`` — HLO idiom builders, concrete replay of a witness
  through the interpreter, what the seed matchers answer on a pair.
* ``commands`` — the ``neuron-sim prove`` command.

The package itself imports nothing, so that a pass importing ``proofs.index`` loads only that.
"""
