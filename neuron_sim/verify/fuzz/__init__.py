"""``neuron-sim fuzz``: random modules that reach the passes, run through them and verified.

``generator.py`` draws the modules (neuron_sim.verify.strategies) deterministically from a seed,
``runner.py`` runs the campaign (classify, minimize, deduplicate, save the corpus),
``report.py`` prints the table and the JSON, ``commands.py`` is the command.
"""
