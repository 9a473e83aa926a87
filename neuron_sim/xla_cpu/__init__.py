"""XLA:CPU as a second executor of HLO modules (the optional ``xla`` extra: jaxlib).

``run_on_xla(module, inputs, topology)`` compiles a module with XLA's CPU compiler for
``replica_count x num_partitions`` host devices and executes it, collectives included, in a
long-lived worker process (``worker.py``), one ``[D, *shape]`` array per result leaf, indexed by
flattened device id as the interpreter's outputs are. jaxlib is imported only by that worker: a
process that never asks for XLA never loads it, and XLA's device count (fixed when its CPU
client starts) is the worker's own.

``XlaUnavailable``: jaxlib is not installed. ``XlaRefused``: XLA would not compile or run the
module (its message, one line).
"""

from neuron_sim.xla_cpu.client import (XlaCpu, XlaError, XlaRefused, XlaUnavailable,
                                       install_hint, jaxlib_installed, run_on_xla, shared_xla)

__all__ = ["XlaCpu", "XlaError", "XlaRefused", "XlaUnavailable", "install_hint",
           "jaxlib_installed", "run_on_xla", "shared_xla"]
