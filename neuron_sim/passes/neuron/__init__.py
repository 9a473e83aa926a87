"""Neuron compiler passes re-implemented from the seeds (one module per pass, plus the helpers
the seed says they share). The registry (``neuron_sim.passes.registry``) lists each pass class."""
