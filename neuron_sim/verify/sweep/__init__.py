"""``neuron-sim sweep``: is folding all-reduce + dynamic-slice into reduce-scatter sound across
topologies, group layouts and offset forms — and which fold passes get it right?

``generator`` builds the cases, ``runner`` judges every case (z3 and the differential verifier,
which must agree) and every fold pass on it, ``report`` prints the tables, the JSON and the
heatmap, ``commands`` is the subcommand.
"""
