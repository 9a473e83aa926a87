"""The modules a fuzz campaign draws, and the deterministic loop that draws them.

``fuzz_modules(devices=8)`` mixes ``collective_idioms()`` (two draws in three: the patterns
the seed passes look for, in random surrounding code) with ``hlo_modules()`` (random
well-typed programs with every collective), on topologies of ``devices`` devices.

``draw_modules(strategy, seed, visit)`` drives the strategy with hypothesis' own engine —
``@given`` under ``@seed(seed)``, no example database, the generate phase only (no shrinking:
failures are minimized by ``verify.minimize`` on the module itself) — so the same seed gives
the same modules in the same order on every run and machine, at hypothesis' speed. ``visit``
is called with each module and its index; ``StopDrawing`` raised from it ends the loop.
"""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from neuron_sim.hlo.ir import HloModule
from verify.strategies import collective_idioms, hlo_modules, topologies

DEVICES = 8
# Hypothesis stops by itself after this many examples; campaigns stop earlier (--examples,
# --time) by raising StopDrawing.
MAX_EXAMPLES = 10 ** 7


class StopDrawing(BaseException):
    """Raised by a visitor to end ``draw_modules`` (a BaseException, so hypothesis does not
    take it for a failing example)."""


@st.composite
def fuzz_modules(draw: Callable, *, devices: Any = DEVICES, max_instructions: Any = 16
                 ) -> HloModule:
    """An idiom (two draws in three) or a random module, on ``devices`` devices."""
    topology = topologies(devices=devices)
    if draw(st.sampled_from(("idiom", "idiom", "module"))) == "idiom":
        return draw(collective_idioms(topology=topology))
    return draw(hlo_modules(topology=topology, max_instructions=max_instructions))


def draw_modules(strategy: st.SearchStrategy, seed: int,
                 visit: Callable[[HloModule, int], None]) -> int:
    """Call ``visit(module, index)`` for each module ``strategy`` draws from ``seed`` until it
    raises StopDrawing (or hypothesis runs out of examples); returns the number visited."""
    count = 0

    @hypothesis_seed(seed)
    @settings(max_examples=MAX_EXAMPLES, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck),
              report_multiple_bugs=False)
    @given(strategy)
    def campaign(module: HloModule) -> None:
        nonlocal count
        index = count
        count += 1
        visit(module, index)

    try:
        campaign()
    except StopDrawing:
        pass
    return count
