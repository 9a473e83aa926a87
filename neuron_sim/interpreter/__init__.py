"""The reference interpreter: executes an HLO module on every simulated device.

``run(module, inputs, topology, backend="local", seed=None)`` returns one ``[D, *shape]`` array
per leaf of the entry computation's (flattened) result, where D = replica_count x
num_partitions and row f is device f = replica * num_partitions + partition. ``execute`` returns
the same plus the per-device values (replicated values held once) and execution counts.

Inputs: a list (one per entry parameter) or a dict keyed ``arg{i}``; each array is shaped
``[D, *param_shape]`` (per device) or ``param_shape`` (the same everywhere). A tuple parameter
takes a sequence with one input per element, or dict keys ``arg{i}.{j}`` per leaf j (the npz
form); ``neuron_sim.io.fit_arguments`` says it all. Token parameters take no input. Token
leaves of the result come out as ``[D, 0]`` bool arrays.

Limits: ``time_limit`` (seconds) ends a run that has not finished with ``ExecutionTimeout``
(checked between instructions and loop iterations; ``time_limit(seconds)`` as a context manager
bounds every run inside it); ``max_memory`` (bytes) refuses, before allocating anything, a run
whose estimated peak (``neuron_sim.interpreter.memory``) exceeds it, with ``MemoryLimitExceeded``.
"""

from __future__ import annotations

from neuron_sim.lazy import lazy_exports

# Where each public name lives. Importing the package costs nothing more than this table: the
# names load their module on first use (``neuron-sim run --help`` never executes anything).
_EXPORTS = {
    "RunResult": "neuron_sim.interpreter.api", "execute": "neuron_sim.interpreter.api", "run": "neuron_sim.interpreter.api",
    "BACKENDS": "neuron_sim.interpreter.backends",
    "CollectiveMismatchError": "neuron_sim.interpreter.errors", "ExecutionError": "neuron_sim.interpreter.errors",
    "ExecutionTimeout": "neuron_sim.interpreter.errors", "InputError": "neuron_sim.interpreter.errors",
    "InterpreterError": "neuron_sim.interpreter.errors", "Unimplemented": "neuron_sim.interpreter.errors",
    "LoopNeverEnds": "neuron_sim.interpreter.errors",
    "Evaluator": "neuron_sim.interpreter.evaluator", "Frame": "neuron_sim.interpreter.evaluator",
    "time_limit": "neuron_sim.interpreter.evaluator",
    "MemoryEstimate": "neuron_sim.interpreter.memory", "MemoryLimitExceeded": "neuron_sim.interpreter.memory",
    "default_memory_limit": "neuron_sim.interpreter.memory", "estimate_memory": "neuron_sim.interpreter.memory",
    "require_memory": "neuron_sim.interpreter.memory",
    "PerDevice": "neuron_sim.interpreter.values", "Replicated": "neuron_sim.interpreter.values",
    "TupleValue": "neuron_sim.interpreter.values",
    "draw_inputs": "neuron_sim.interpreter.arguments",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
