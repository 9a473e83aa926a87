"""The meaning of HLO ops, one definition per op, shared by every layer that needs it.

The interpreter executes these definitions, the checker derives result shapes from them, the
symbolic evaluator and the backends look up what they need here instead of re-deriving it per
opcode. ``collectives`` holds one descriptor per collective kind (its opcodes, shape rule, group
reading, per-device data function, symbolic form, MPI mapping and degenerate rule).

Elementwise ops (``elementwise``): one row per ``Opcode`` holding the op's numpy kernel per
family of element types, its z3 term per sort where z3 models it exactly, and its symbolic
facts (commutative, reduced as a multiset). A row rather than a class per op: an op is mostly a
choice among shared conventions (integers wrap, narrow floats go through f32, pred ops are Bool
ops), so a row names the op's few own functions and builders apply the conventions; a table
also lets the differential test walk every (op, type) pair. The row's parts live in modules by
job: ``element_kinds`` (families of element types), ``int_kernels`` and ``float_kernels``
(numpy), ``z3_terms`` (z3, imported lazily through ``neuron_sim.lazy``). The interpreter, the
z3 proofs (``proofs.smt``, ``proofs.index.int_semantics``), the symbolic evaluator and the
passes read the rows; none keeps its own copy of an op's meaning.
"""
