"""Which entry-parameter leaves a module declares the same on every device — XLA's rules.

XLA's HloReplicationAnalysis (``xla/hlo/analysis/hlo_replication_analysis.cc``,
``ComputeHloReplication``) reads two declarations: "replicated modules read from
``parameter_replicated_at_leaf_buffers`` whereas SPMD partitioned modules read from HloSharding
attributes". That is also the calling convention of the program: an SPMD program's runtime hands
a parameter sharded ``{replicated}`` the same whole array on every partition, and one marked
``parameter_replication={true}`` the same array on every replica.

``declared_replication(param, spmd=...)`` gives one flag per leaf of the parameter's shape:

* ``spmd=False`` (replicas): ``parameter_replication`` — one flag per leaf, a single flag for
  every leaf; absent or malformed: none replicated.
* ``spmd=True`` (one replica, several partitions): the leaf's sharding is ``{replicated}`` (the
  parameter's sharding, or its leaf's part of a tuple sharding), unless ``parameter_replication``
  says false for the leaf (XLA: an explicit false wins in SPMD mode).

``spmd_topology(replicas, partitions)`` says which reading applies: several partitions and one
replica. With several replicas too, a replicated sharding means "the same within a replica",
which no caller models, so it is not read as replicated.
"""

from __future__ import annotations

from neuron_sim.hlo.attributes import Raw
from neuron_sim.hlo.ir import HloInstruction

__all__ = ["declared_replication", "parameter_replication_flags", "sharding_leaves",
           "spmd_topology"]


def spmd_topology(replicas: int, partitions: int) -> bool:
    """Whether parameters' shardings declare replication: one replica, several partitions."""
    return replicas == 1 and partitions > 1


def _text(value: object) -> str:
    return str(value.text if isinstance(value, Raw) else value).strip()


def parameter_replication_flags(param: HloInstruction) -> tuple[bool, ...] | None:
    """``parameter_replication`` per leaf (a single flag repeated), None when absent or when its
    number of flags matches neither 1 nor the leaves."""
    leaves = len(list(param.shape.leaves()))
    value = param.get("parameter_replication")
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        flags = tuple(bool(v) for v in value)
    else:
        flags = tuple(part.strip().lower() == "true"
                      for part in _text(value).strip("{}").split(",") if part.strip())
    if len(flags) == 1:
        return flags * leaves
    return flags if len(flags) == leaves else None


def _split_top_level(text: str) -> list[str]:
    """``{a}, {b, {c}}`` -> ``["{a}", "{b, {c}}"]``: the comma-separated parts at depth 0."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def sharding_leaves(param: HloInstruction) -> tuple[bool, ...] | None:
    """Per leaf: is the parameter's sharding ``{replicated}`` there? None without a sharding or
    with a tuple sharding whose parts do not match the leaves."""
    value = param.get("sharding")
    if value is None:
        return None
    leaves = len(list(param.shape.leaves()))
    text = _text(value)
    if not (text.startswith("{") and text.endswith("}")):
        return None
    inner = text[1:-1].strip()
    if not inner.startswith("{"):  # one sharding for the whole value
        return (inner == "replicated",) * leaves
    parts = _split_top_level(inner)
    if len(parts) != leaves:
        return None
    return tuple(part.strip("{} ") == "replicated" for part in parts)


def declared_replication(param: HloInstruction, *, spmd: bool) -> tuple[bool, ...]:
    """Per leaf of ``param`` (an entry parameter): declared the same on every device? See the
    module docstring for the two readings."""
    leaves = len(list(param.shape.leaves()))
    flags = parameter_replication_flags(param)
    if not spmd:
        return flags if flags is not None else (False,) * leaves
    sharded = sharding_leaves(param) or (False,) * leaves
    if flags is None:
        return sharded
    return tuple(s and f for s, f in zip(sharded, flags))
