"""The HLO verifier's shape rules, one module per op family (as ``interpreter/ops/``).

``core`` says how a rule is written (its context, its error, its family table), ``helpers`` holds
what several families share, ``registry`` merges the families into the one table that
``neuron_sim.hlo.checker`` (verifying) and ``neuron_sim.hlo.builder`` (inferring) both use.
"""
