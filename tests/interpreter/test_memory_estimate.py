"""The memory estimate counts what numpy holds.

By hand: ``s4[1000]`` is held by ml_dtypes' int4, one byte per element (not half a byte). On
4 devices the per-device parameter (4 x 1000 bytes), its negation (4 x 1000) and the
``[D, *shape]`` output copy (4 x 1000) make at least 12,000 bytes; an f32[1000] module makes at
least 48,000 (4 bytes an element).
"""

from __future__ import annotations

from neuron_sim.interpreter.memory import estimate_memory
from neuron_sim.hlo import parse_module
from neuron_sim.topology import Topology

TEXT = """HloModule m, num_partitions=4

ENTRY %e (x: {t}[1000]) -> {t}[1000] {{
  %x = {t}[1000]{{0}} parameter(0)
  ROOT %n = {t}[1000]{{0}} negate(%x)
}}
"""


def test_sub_byte_types_count_a_byte_per_element():
    estimate = estimate_memory(parse_module(TEXT.format(t="s4")), Topology(1, 4))
    assert estimate.peak_bytes >= 12_000


def test_four_byte_types_count_four_bytes_per_element():
    estimate = estimate_memory(parse_module(TEXT.format(t="f32")), Topology(1, 4))
    assert estimate.peak_bytes >= 48_000
