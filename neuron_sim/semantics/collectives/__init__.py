"""One descriptor per collective kind, and the pure functions that say what each one computes.

- ``descriptor`` -- ``CollectiveDescriptor`` and the enums it is made of;
- ``kinds`` -- the descriptors, listed once (``DESCRIPTORS``), and ``descriptor_of(opcode)``;
- ``reductions``, ``movement``, ``ragged`` -- the per-device results as vectorized numpy
  (docs/semantics.md §3), over the group tables of ``group_tables``;
- ``shape_rules`` -- the result shapes the checker derives;
- ``groups`` -- reading an instruction's participant groups and pairs on a topology;
- ``reading`` -- everything a collective instruction means on a topology, read once;
- ``identity`` -- XLA's degenerate rule: when a collective returns its operand everywhere.

Import from the submodules. (This package is the core layer: it imports ``neuron_sim.hlo``,
``neuron_sim.topology`` and ``neuron_sim.physical_groups`` only; ``neuron_sim.topology`` reads
the group-mode rows from ``kinds``.)
"""
