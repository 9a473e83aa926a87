"""The modules a fuzz campaign draws, and the deterministic loop that draws them.

``fuzz_modules(devices=8)`` mixes ``collective_idioms()`` (two draws in three: the patterns
the seed passes look for, in random surrounding code) with ``hlo_modules()`` (random
well-typed programs with every collective), on topologies of ``devices`` devices.

``draw_modules(strategy, seed, visit)`` draws module ``i`` with ``RandomDraw(f"{seed}:{i}")``
(neuron_sim.verify.strategies): the strategies' own definitions run on a seeded ``random.Random``, without
hypothesis' engine, whose per-example bookkeeping cost more than running three passes on the
module. Module ``i`` depends only on ``(seed, i)``, so the same seed gives the same modules in
the same order on every run and machine, and ``module_at(seed, i)`` rebuilds any one of them.
No shrinking happens here: failures are minimized by ``neuron_sim.verify.minimize`` on the module itself.
``visit`` is called with each module and its index; ``StopDrawing`` raised from it ends the
loop.
"""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import strategies as st

from neuron_sim.hlo.ir import HloModule
from neuron_sim.verify.strategies import (RandomDraw, collective_idioms, composite, hlo_modules, sampled,
                               topologies)

DEVICES = 8


class StopDrawing(Exception):
    """Raised by a visitor to end ``draw_modules``."""


@composite
def fuzz_modules(draw: Callable, *, devices: Any = DEVICES, max_instructions: Any = 16
                 ) -> HloModule:
    """An idiom (two draws in three) or a random module, on ``devices`` devices."""
    topology = topologies(devices=devices)
    if draw(sampled(("idiom", "idiom", "module"))) == "idiom":
        return draw(collective_idioms(topology=topology))
    return draw(hlo_modules(topology=topology, max_instructions=max_instructions))


def module_at(strategy: st.SearchStrategy, seed: int, index: int) -> HloModule:
    """Module ``index`` of the campaign that draws ``strategy`` from ``seed``."""
    return RandomDraw(f"{seed}:{index}")(strategy)


def draw_modules(strategy: st.SearchStrategy, seed: int,
                 visit: Callable[[HloModule, int], None], limit: int | None = None) -> int:
    """Call ``visit(module, index)`` for module 0, 1, ... of ``strategy`` from ``seed`` until
    it raises StopDrawing or ``limit`` modules were visited; returns the number visited."""
    index = 0
    while limit is None or index < limit:
        module = module_at(strategy, seed, index)
        try:
            visit(module, index)
        except StopDrawing:
            break
        index += 1
    return index
