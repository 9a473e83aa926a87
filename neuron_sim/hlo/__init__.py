"""The model of HLO programs: opcodes, element types, shapes, IR and its text, parser, builder, checker."""

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloComputation, HloError, HloInstruction, HloModule, print_module
from neuron_sim.hlo.opcodes import Category, Opcode
from neuron_sim.hlo.parser import HloParseError, parse_module, parse_module_file, parse_shape
from neuron_sim.hlo.shapes import ArrayShape, Layout, Shape, TupleShape

__all__ = [
    "ArrayShape", "Category", "ElementType", "HloComputation", "HloError", "HloInstruction",
    "HloModule", "HloParseError", "Layout", "Opcode", "Shape", "TupleShape", "parse_module",
    "parse_module_file", "parse_shape", "print_module",
]
