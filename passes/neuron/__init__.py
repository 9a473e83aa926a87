"""Neuron compiler passes re-implemented from the seeds (one module per pass, plus the helpers
the seed says they share). Every module here is imported by the registry; the
``@register_pass`` decorator is the only registration."""
