"""The expected offset-pool literals of RewriteAllReduceDynamicSliceMultipleGroups (step 14).

The multiple-groups matcher accepts a dynamic-slice whose offset is
``reshape(multiply(s, dynamic-slice(POOL, partition-id)))`` only if the constant ``POOL`` equals
one of three ``s32[G*g]`` literals built from the number of groups G, the group width g and the
slice size s. The binary builds them with ``std::vector<int>`` + ``LiteralUtil::CreateR1<int>``;
the labels identity / multiplied / repeated come from the seed's reading of the loop arithmetic
(HIGH, not CERTAIN). Each reading is one small function below, listed in ``POOL_READINGS``:
change a function (or the list) to try another reading.

For the rewrite to be sound the pool must give every partition its *position in its group*
(reduce-scatter sends block i to position i, and the dynamic-slice reads block ``pool[pid]``).
None of the three does that for every group layout:

* identity  ``[0, 1, ..., G*g-1]``: right only for one sorted group (G == 1);
* multiplied ``[s*j for each group, j in 0..g-1]``: the offset is then ``s * s * j`` — a second
  multiplication by s; right only when s == 1;
* repeated ``[0..g-1] * G`` (our reading of "grp repeated g×", see below): right for contiguous
  groups ``{{0..g-1},{g..2g-1},...}``, wrong for strided ones such as ``{{0,2},{1,3}}``.

"repeated" is ambiguous in the seed ("per-group: grp repeated g×"). Two readings are well typed:
(a) the within-group ramp ``[0..g-1]`` repeated G times — implemented, because it is the only
reading under which the pass is ever sound with G > 1; (b) each group index repeated g times,
``[0]*g + [1]*g + ...`` — available as ``pool_group_index_repeated`` for experiments.
"""

from __future__ import annotations

from typing import Callable


def pool_identity(groups: int, width: int, slice_size: int) -> list[int]:
    """``[0, 1, ..., G*g-1]`` (s unused)."""
    return list(range(groups * width))


def pool_multiplied(groups: int, width: int, slice_size: int) -> list[int]:
    """Per group, ``s*j`` for j in 0..g-1: ``[0, s, 2s, ..., 0, s, 2s, ...]``."""
    return [slice_size * j for _ in range(groups) for j in range(width)]


def pool_repeated(groups: int, width: int, slice_size: int) -> list[int]:
    """Our reading of "repeated": the within-group ramp ``[0..g-1]`` repeated G times (s unused)."""
    return [j for _ in range(groups) for j in range(width)]


def pool_group_index_repeated(groups: int, width: int, slice_size: int) -> list[int]:
    """The other reading of "repeated" (not used by the pass): group index k repeated g times."""
    return [k for k in range(groups) for _ in range(width)]


# The pools step 14 compares against, in the binary's order. Change here to try other readings.
POOL_READINGS: dict[str, Callable[[int, int, int], list[int]]] = {
    "identity": pool_identity,
    "multiplied": pool_multiplied,
    "repeated": pool_repeated,
}


def expected_pools(groups: int, width: int, slice_size: int) -> dict[str, list[int]]:
    """Every accepted pool literal, by reading name."""
    return {name: build(groups, width, slice_size) for name, build in POOL_READINGS.items()}
