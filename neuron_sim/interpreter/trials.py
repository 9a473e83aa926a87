"""One execute for several input sets of a module: the verifier's trials on a trial axis.

``neuron-sim verify`` runs the source and the target on 7 input sets per topology, and a small
module's execute is mostly its fixed cost (checking the module's facts, preparing arguments,
dispatching each instruction), paid once per input set. ``execute_trials`` runs T input sets
as one frame of T x D rows (``neuron_sim.interpreter.trial_topology``: row ``t * D + d`` is
device d of trial t), so each instruction is dispatched once for all of them and numpy works
on T times the rows. The outputs are those of T separate executes with the same topology and
seed, bit for bit (``tests/interpreter/test_trials.py`` holds it over the front ends'
corpora): nothing a device computes reads another trial's rows, a device's ids are its own,
and every trial sees the same rng numbers, as every separate execute with one seed does.

What a run of several trials cannot be is refused before it starts (``Unimplemented``): a
module with send / recv (their pairs are read per frame, not per trial). Any failure is the
whole batch's: the caller runs the sets one by one to learn which trial it belongs to.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from neuron_sim.hlo import HloModule, Opcode
from neuron_sim.topology import Topology

from neuron_sim.interpreter.api import parsed_with_topology, ready_to_run
from neuron_sim.interpreter.arguments import prepare_arguments
from neuron_sim.interpreter.backends import make_transport
from neuron_sim.interpreter.errors import Unimplemented
from neuron_sim.interpreter.evaluator import Evaluator
from neuron_sim.interpreter.trial_topology import Trials
from neuron_sim.interpreter.values import (TOKEN, PerDevice, Replicated, TupleValue, Value,
                                           leaves, output_rows, stacked)

__all__ = ["execute_trials"]

# Ops that read which devices a frame holds other than through their ids or a collective's
# groups: they are not run on a trial axis.
_PER_FRAME_OPCODES = frozenset({Opcode.SEND, Opcode.SEND_DONE, Opcode.RECV, Opcode.RECV_DONE})


def execute_trials(module: HloModule | str,
                   trial_inputs: Sequence[Sequence[Any] | Mapping[str, Any]],
                   topology: Topology | None = None, seed: int | None = None, *,
                   time_limit: float | None = None, max_memory: int | None = None
                   ) -> list[list[np.ndarray]]:
    """Per input set of ``trial_inputs``, the outputs ``execute(module, inputs, topology,
    seed).outputs`` would give (one ``[D, *shape]`` array per result leaf, the caller's own),
    from one execute over all of them. ``time_limit`` bounds the whole run, ``max_memory``
    its estimate on every trial's devices."""
    module, topology = parsed_with_topology(module, topology)
    count = len(trial_inputs)
    reads_frame = next((i for c in module.computations for i in c.instructions
                        if i.opcode in _PER_FRAME_OPCODES), None)
    if reads_frame is not None:
        raise Unimplemented(reads_frame.opcode.spelling, "not run on several input sets at once",
                            reads_frame)
    trials = Trials(topology, count)
    facts, deadline = ready_to_run(module, topology, max_memory, trials.num_devices, time_limit)
    per_trial = [prepare_arguments(module, topology, inputs, seed, signature=facts.signature)
                 for inputs in trial_inputs]
    size = topology.num_devices
    args = [_on_every_trial([values[i] for values in per_trial], size)
            for i in range(len(per_trial[0]))]
    evaluator = Evaluator(module, trials, make_transport("local", trials.num_devices), seed,
                          deadline, facts=facts)
    result = evaluator.run_entry(args)
    rows = [output_rows(value, trials.num_devices) for value in leaves(result)]
    return [[np.array(leaf[t * size:(t + 1) * size]) for leaf in rows] for t in range(count)]


def _on_every_trial(values: list[Value], size: int) -> Value:
    """One parameter's values of every trial (``size`` devices each) as one value over all the
    rows: held once when every trial holds the same array once, else stacked trial by trial."""
    first = values[0]
    if type(first) is TupleValue:
        return TupleValue([_on_every_trial([v.elements[k] for v in values], size)
                           for k in range(len(first.elements))])
    if first is TOKEN:
        return TOKEN
    if all(type(v) is Replicated and v.array is first.array for v in values):
        return first
    return PerDevice(np.concatenate([stacked(v, size) for v in values]))
