"""Printer for HLO text in XLA's syntax.

A parsed module prints in the style it was written in (``%`` sigils, computation signatures,
operand shapes), with attributes in the order they were parsed, so a diff against XLA's own dump
stays empty. ``print(parse(print(m))) == print(m)`` holds for every module.
"""

from __future__ import annotations

from neuron_sim.hlo.attributes import format_attribute
from neuron_sim.hlo.ir import HloModule


def print_header(module: HloModule) -> str:
    parts = [f"HloModule {module.name}"]
    parts += [f"{key}={format_attribute(key, value)}" for key, value in module.header.items()]
    return ", ".join(parts)


def print_module(module: HloModule) -> str:
    """The module's text; like XLA, every computation is followed by a blank line."""
    blocks = [print_header(module)]
    if module.sections:
        blocks.append(module.sections)
    for comp in module.computations:
        blocks.append(comp.to_text(percent=module.style_percent,
                                   operand_shapes=module.style_operand_shapes,
                                   signature=module.style_signatures,
                                   index_comments=module.style_index_comments))
    return "\n\n".join(blocks) + "\n\n"
