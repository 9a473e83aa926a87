"""The meaning of HLO ops, one definition per op, shared by every layer that needs it.

The interpreter executes these definitions, the checker derives result shapes from them, the
symbolic evaluator and the backends look up what they need here instead of re-deriving it per
opcode. ``collectives`` holds one descriptor per collective kind (its opcodes, shape rule, group
reading, per-device data function, symbolic form, MPI mapping and degenerate rule).
"""
