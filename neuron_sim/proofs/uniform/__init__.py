"""The proof on symbolic positions: a rewrite that moves or reduces data the same way at every
element, proved for all inputs with memory independent of the tensor's size
(``positions.py`` builds element terms, ``compare.py`` decides them with z3, ``replay.py``
confirms a difference on concrete values)."""

from neuron_sim.proofs.uniform.compare import (OutputProof, PositionsProof, PositionWitness,
                                               prove_positions)

__all__ = ["OutputProof", "PositionWitness", "PositionsProof", "prove_positions"]
