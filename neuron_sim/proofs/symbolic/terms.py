"""The term table: every symbolic element is an int64 handle to a hash-consed term.

A term is a row ``(op, a, b)`` of three int64 columns. ``op`` indexes an operator signature
(``TermTable.operator``: an ``Opcode`` with its result and operand ``ElementType``s and the
attributes that change its meaning, a constant's dtype, a parameter leaf, a multiset of an
``Opcode`` over an ``ElementType``); ``a`` and ``b`` are child handles or, for leaves,
payloads (a variable's device and element, a constant's bits).
Equal rows get the same handle (hash-consing), so two programs compute the same function on an
element exactly when they end with the same handle there.

Interning is vectorised: a batch of rows is looked up and inserted in an open-addressing table
(linear probing over numpy arrays, at most half full) with one numpy pass per probe step, never
a Python loop over elements. Handle 0 is reserved: it marks the zero rows the collectives fill
in for devices that receive nothing, which the symbolic evaluator replaces by a zero constant.

Normalisations (exact in IEEE arithmetic, nothing more): the two operands of an op whose
definition is commutative are ordered, and a reduction by an op whose definition reduces as a
multiset (``neuron_sim.semantics.elementwise``: add, multiply, minimum, maximum, and, or, xor)
is a *multiset* term over its leaves, flattened through nested multisets of the same op and
sorted: one row ``(multiset, fingerprint, count)`` whose sorted leaves are kept beside the table
(``leaves``) and compared exactly when a fingerprint matches (a fingerprint shared by different
leaves moves one of them to a salted row), so interning k leaves costs one row, not k - 1
pair terms. A multiset of one leaf is the leaf itself (a fold over one value does not apply
the op).
"""

from __future__ import annotations

from typing import Hashable

import numpy as np

__all__ = ["NONE", "TermTable"]

NONE = -1  # the ``b`` column of a unary term
_EMPTY = -1
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)
_K3 = np.uint64(0x165667B19E3779F9)
_K4 = np.uint64(0xFF51AFD7ED558CCD)


def _mix(op: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row (only chooses a slot: keys are compared exactly). ``op`` may
    be one operator for every row (a one-element array)."""
    h = a.view(np.uint64) * _K2
    h ^= op.astype(np.uint64) * _K1
    h ^= b.view(np.uint64) * _K3
    h ^= h >> np.uint64(29)
    h *= _K4
    h ^= h >> np.uint64(32)
    return h


def _distinct_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the first occurrence of each distinct pair ``(a[i], b[i])`` and, for every
    i, the number of its pair among them."""
    order = np.lexsort((b, a))
    sa, sb = a[order], b[order]
    new = np.ones(len(order), bool)
    new[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    inverse = np.empty(len(order), np.int64)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


# A multiset batch of at least this many leaves is remembered (with the last one before it):
# a proof folds the same all-reduce operand again in the target's reduce-scatter, or in the
# same all-reduce when the target leaves it alone, and recognising it (a hash and one
# comparison) costs a tenth of folding it.
_RECALLED_LEAVES = 1 << 12


class TermTable:
    """Hash-consed terms; ``intern`` maps arrays of rows to arrays of handles."""

    def __init__(self, capacity: int = 1 << 12) -> None:
        self.operators: list[tuple] = []
        self._operator_ids: dict[Hashable, int] = {}
        self.size = 0
        self._op = np.zeros(capacity, np.int64)
        self._a = np.zeros(capacity, np.int64)
        self._b = np.zeros(capacity, np.int64)
        self._slots = np.full(2 * capacity, _EMPTY, np.int64)
        self._leaf_start = np.zeros(capacity, np.int64)  # meaningful where _leaf_count > 0
        self._leaf_count = np.zeros(capacity, np.int64)
        self._pool = np.zeros(1 << 10, np.int64)
        self._pool_size = 0
        self._commutative: set[int] = set()
        self._repeat: dict[int, tuple] = {}
        self._variables: dict[tuple, np.ndarray] = {}
        self._recent_multisets: list[tuple[int, int, np.ndarray, np.ndarray]] = []
        self._slotted = 0  # rows placed in the hash slots
        self._unslotted_ops: set[int] = set()  # variables reached through _variables only
        filler = self.operator(("zero-fill",))
        self.intern(filler, np.zeros(1, np.int64), np.zeros(1, np.int64))

    # -- operators ---------------------------------------------------------------------------
    def operator(self, signature: tuple, *, commutative: bool = False) -> int:
        """The id of an operator signature (created on first use)."""
        found = self._operator_ids.get(signature)
        if found is None:
            found = self._operator_ids[signature] = len(self.operators)
            self.operators.append(signature)
            if commutative:
                self._commutative.add(found)
        return found

    def multiset_operator(self, signature: tuple, repeat: tuple | None = None) -> int:
        """The id of a multiset (canonical reduction) operator.

        ``repeat = (multiply operator, numpy dtype, integral)`` for a sum: k copies of one leaf
        are the term ``multiply(leaf, k)`` when that is exact — always for wrapping integers,
        for floats when k is a power of two (pairwise doubling is exact, overflow included).
        """
        op = self.operator(("multiset", *signature))
        if repeat is not None:
            self._repeat[op] = repeat
        return op

    # -- interning ---------------------------------------------------------------------------
    def intern(self, op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Handles of the rows ``(op, a[i], b[i])`` (a and b broadcast), created where new."""
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        shape = a.shape
        a = np.ascontiguousarray(a).reshape(-1)
        b = np.ascontiguousarray(b).reshape(-1)
        if op in self._commutative:
            a, b = np.minimum(a, b), np.maximum(a, b)
        handles = self._lookup(op, a, b)
        missing = np.flatnonzero(handles < 0)
        if missing.size:
            first, inverse = _distinct_pairs(a[missing], b[missing])
            created = self._append(np.full(len(first), op, np.int64), a[missing][first],
                                   b[missing][first])
            handles[missing] = created[inverse]
        return handles.reshape(shape)

    def _lookup(self, op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The handle of each row ``(op, a[i], b[i])``, -1 where there is none.

        ``op`` is one operator for the whole batch, so a probe compares it with the slot's
        operator as a scalar. The first probe runs over every row without an index array;
        later probes only over the rows still unresolved (few: the table is at most half
        full)."""
        mask = np.int64(len(self._slots) - 1)
        position = (_mix(np.full(1, op, np.int64), a, b) & np.uint64(mask)).view(np.int64)
        slot = self._slots[position]
        occupied = slot >= 0
        safe = np.where(occupied, slot, 0)
        found = occupied & (self._op[safe] == op) & (self._a[safe] == a) & (self._b[safe] == b)
        result = np.where(found, slot, _EMPTY)
        pending = np.flatnonzero(occupied & ~found)
        while pending.size:
            position[pending] = (position[pending] + 1) & mask
            slot = self._slots[position[pending]]
            occupied = slot >= 0
            safe = np.where(occupied, slot, 0)
            found = occupied & (self._op[safe] == op) & (self._a[safe] == a[pending]) \
                & (self._b[safe] == b[pending])
            result[pending[found]] = slot[found]
            pending = pending[occupied & ~found]
        return result

    def _append(self, op: np.ndarray, a: np.ndarray, b: np.ndarray, *,
                slotted: bool = True) -> np.ndarray:
        """New rows; ``slotted``: placed in the hash slots, so that ``intern`` finds them."""
        count = len(op)
        if self.size + count > len(self._op):
            self._grow(self.size + count)
        handles = np.arange(self.size, self.size + count, dtype=np.int64)
        self._op[handles], self._a[handles], self._b[handles] = op, a, b
        self.size += count
        if slotted:
            self._place(handles)
        return handles

    def _place(self, handles: np.ndarray) -> None:
        self._slotted += len(handles)
        if 2 * self._slotted > len(self._slots):
            self._rehash(4 * self._slotted)
        else:
            self._insert(handles)

    def _grow(self, needed: int) -> None:
        capacity = max(2 * needed, 2 * len(self._op))
        for name in ("_op", "_a", "_b", "_leaf_start", "_leaf_count"):
            old = getattr(self, name)
            new = np.zeros(capacity, np.int64)  # (zeroed lazily by the OS: only copied rows
            new[:len(old)] = old                # and rows later appended touch memory)
            setattr(self, name, new)

    def _rehash(self, slots: int) -> None:
        size = 1 << max(12, int(slots - 1).bit_length())
        self._slots = np.full(size, _EMPTY, np.int64)
        rows = np.arange(self.size, dtype=np.int64)
        if self._unslotted_ops:
            unslotted = np.fromiter(self._unslotted_ops, np.int64, len(self._unslotted_ops))
            rows = rows[~np.isin(self._op[:self.size], unslotted)]
        self._slotted = len(rows)
        self._insert(rows)

    def _insert(self, handles: np.ndarray) -> None:
        """Place ``handles`` in free slots by linear probing. Rows that reach the same free slot
        in one step all write it and the one whose handle stays there is placed (no sort); the
        others probe on. Where a handle lands never changes a handle's value."""
        mask = np.int64(len(self._slots) - 1)
        position = (_mix(self._op[handles], self._a[handles], self._b[handles])
                    & np.uint64(mask)).view(np.int64)
        pending = np.arange(len(handles))
        while pending.size:
            where = position[pending]
            free = self._slots[where] < 0
            candidates, where = pending[free], where[free]
            self._slots[where] = handles[candidates]
            placed = np.zeros(len(handles), bool)
            placed[candidates[self._slots[where] == handles[candidates]]] = True
            pending = pending[~placed[pending]]
            position[pending] = (position[pending] + 1) & mask

    # -- leaves --------------------------------------------------------------------------------
    def constants(self, values: np.ndarray) -> np.ndarray:
        """Constant terms of ``values`` (keyed by dtype and bit pattern: -0.0 and NaN payloads
        stay distinct)."""
        values = np.asarray(values)
        if not values.flags.c_contiguous:  # (ascontiguousarray would make a 0-d array 1-d)
            values = values.copy()
        dtype = values.dtype
        op = self.operator(("constant", str(dtype)))
        if dtype.kind == "c":
            # (viewed flat: numpy refuses to change a 0-d array's itemsize)
            parts = values.reshape(-1).view(f"u{dtype.itemsize // 2}").reshape(*values.shape, 2)
            a, b = (parts[..., i].astype(np.uint64).view(np.int64) for i in (0, 1))
            return self.intern(op, a, b)
        bits = values.view(f"u{dtype.itemsize}") if dtype.itemsize in (1, 2, 4, 8) else \
            values.astype(np.float64).view(np.uint64)
        return self.intern(op, bits.astype(np.uint64).view(np.int64), np.zeros((), np.int64))

    def variables(self, signature: tuple, devices: np.ndarray | None,
                  shape: tuple[int, ...]) -> np.ndarray:
        """Fresh input variables: ``[len(devices), *shape]`` (one per device and element), or
        ``shape`` when ``devices`` is None (one per element, the same on every device).

        Asked again for the same leaf (the second module of a proof) they are the same
        handles, from a dict. The rows of a new signature are appended without a lookup and
        stay out of the hash slots (a proof at hundreds of devices holds more input variables
        than other terms): they are found through this method only, and placed in the slots
        if the signature is ever asked for with other devices or shape."""
        fresh = ("variable", *signature) not in self._operator_ids
        op = self.operator(("variable", *signature))
        rows = np.full(1, -1, np.int64) if devices is None else np.asarray(devices, np.int64)
        key = (op, rows.tobytes(), tuple(shape))
        known = self._variables.get(key)
        if known is not None:  # the second module of a proof asks for the same inputs
            return known
        elements = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        a = np.repeat(rows, len(elements))
        b = np.tile(elements, len(rows))
        if fresh and len(np.unique(rows)) == len(rows):
            # a new operator has no rows yet and these are all distinct: nothing to look up
            self._unslotted_ops.add(op)
            handles = self._append(np.full(len(a), op, np.int64), a, b, slotted=False)
        else:
            if op in self._unslotted_ops:
                self._unslotted_ops.discard(op)
                self._place(np.flatnonzero(self._op[:self.size] == op).astype(np.int64))
            handles = self.intern(op, a, b)
        handles = handles.reshape(shape) if devices is None else \
            handles.reshape(len(rows), *shape)
        handles.flags.writeable = False
        self._variables[key] = handles
        return handles

    # -- reductions ------------------------------------------------------------------------------
    def multiset(self, op: int, children: np.ndarray) -> np.ndarray:
        """One multiset term per row of ``children`` (shape ``(*batch, k)``): its leaves are the
        children, with children that are multisets of ``op`` replaced by their leaves."""
        children = np.asarray(children, np.int64)
        batch, k = children.shape[:-1], children.shape[-1]
        flat = children.reshape(-1, k)
        rows = flat.shape[0]
        if rows == 0:
            return np.zeros(batch, np.int64)
        if flat.size < _RECALLED_LEAVES:
            return self._multisets(op, flat, k).reshape(batch)
        flat = np.ascontiguousarray(flat)
        key = hash(flat.data.tobytes())
        for known_op, known_key, known, result in self._recent_multisets:
            if known_op == op and known_key == key and known.shape == flat.shape and \
                    np.array_equal(known, flat):
                return result.reshape(batch).copy()
        result = self._multisets(op, flat, k)
        self._recent_multisets = [(op, key, flat, result), *self._recent_multisets[:1]]
        return result.reshape(batch).copy()

    def _multisets(self, op: int, flat: np.ndarray, k: int) -> np.ndarray:
        """``multiset`` of the rows of ``flat`` (``(rows, k)``)."""
        rows = flat.shape[0]
        nested = self._op[flat] == op
        if nested.any():
            matrix, lengths = self._flatten(flat, nested)
        else:
            matrix, lengths = flat, np.full(rows, k, np.int64)
        matrix = np.sort(matrix, axis=1)  # padding (max int64) sorts last
        result = matrix[:, 0].copy()  # a multiset of one leaf is the leaf
        several = np.flatnonzero(lengths > 1)
        if op in self._repeat and several.size:
            several = self._repeated(op, matrix, lengths, several, result)
        if several.size:
            result[several] = self._multiset_rows(op, matrix[several], lengths[several])
        return result

    def _multiset_rows(self, op: int, matrix: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The multiset term of each row's first ``lengths[r]`` sorted leaves, in one interning
        of ``(op, fingerprint, length)`` per row instead of a term per pair of leaves.

        The fingerprint (a hash of the sorted leaves and their positions) only chooses the row:
        each handle's stored leaves are compared with the row's, and rows whose fingerprint and
        length equal another multiset's (a collision) are interned again under the next salt
        (``length + salt * 2**40``) until their own leaves are found or stored, so two handles
        are equal exactly when their leaves are."""
        width = matrix.shape[1]
        valid = np.arange(width)[None, :] < lengths[:, None]
        columns = np.broadcast_to(np.arange(width, dtype=np.int64), matrix.shape)
        hashes = _mix(np.full(1, op, np.int64), matrix, columns)
        fingerprint = np.where(valid, hashes, np.uint64(0)).sum(axis=1, dtype=np.uint64)
        fingerprint = fingerprint.view(np.int64)
        result = np.empty(len(lengths), np.int64)
        pending = np.arange(len(lengths))
        salt = 0
        while pending.size:
            before = self.size
            made = self.intern(op, fingerprint[pending], lengths[pending] + (salt << 40))
            fresh = np.flatnonzero(made >= before)
            same = np.zeros(len(pending), bool)
            if fresh.size:  # the row whose leaves a new handle stores is equal by construction
                stored = self._store_leaves(made[fresh], matrix[pending[fresh]],
                                            lengths[pending[fresh]])
                same[fresh[stored]] = True
            check = np.flatnonzero(~same)
            same[check] = self._leaves_equal(made[check], matrix[pending[check]],
                                             lengths[pending[check]])
            result[pending[same]] = made[same]
            pending = pending[~same]
            salt += 1
        return result

    def _leaves_equal(self, handles: np.ndarray, matrix: np.ndarray, lengths: np.ndarray
                      ) -> np.ndarray:
        """Whether each handle's stored leaves are the row's first ``lengths[r]`` entries."""
        width = matrix.shape[1]
        valid = np.arange(width)[None, :] < lengths[:, None]
        same = self._leaf_count[handles] == lengths
        where = np.where(valid, self._leaf_start[handles][:, None] + np.arange(width)[None, :], 0)
        stored = self._pool[np.maximum(where, 0)]
        return same & np.where(valid, stored == matrix, True).all(axis=1)

    def _repeated(self, op: int, matrix: np.ndarray, lengths: np.ndarray, rows: np.ndarray,
                  result: np.ndarray) -> np.ndarray:
        """Write ``multiply(leaf, k)`` into ``result`` for the rows of ``rows`` that hold k
        copies of one leaf (where exact); the rows left to build as multisets."""
        multiply, dtype, integral = self._repeat[op]
        k = lengths[rows]
        first = matrix[rows, 0]
        same = matrix[rows, k - 1] == first  # (the rows are sorted)
        if not integral:
            same &= (k & (k - 1)) == 0
        if not same.any():
            return rows
        hit = rows[same]
        factors = self.constants(np.asarray(lengths[hit]).astype(dtype))
        result[hit] = self.intern(multiply, first[same], factors)
        return rows[~same]

    def _flatten(self, flat: np.ndarray, nested: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of leaves (padded with int64 max) and their lengths."""
        rows, k = flat.shape
        counts = np.where(nested, self._leaf_count[flat], 1).reshape(-1)
        starts = np.where(nested, self._leaf_start[flat], -1).reshape(-1)
        children = flat.reshape(-1)
        owner = np.repeat(np.arange(children.size), counts)
        offset = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        leaves = np.where(nested.reshape(-1)[owner],
                          self._pool[np.maximum(starts[owner], 0) + offset], children[owner])
        row = owner // k
        lengths = np.bincount(row, minlength=rows).astype(np.int64)
        column = np.arange(leaves.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        matrix = np.full((rows, int(lengths.max())), np.iinfo(np.int64).max, np.int64)
        matrix[row, column] = leaves
        return matrix, lengths

    def _store_leaves(self, handles: np.ndarray, matrix: np.ndarray, lengths: np.ndarray
                      ) -> np.ndarray:
        """Store the leaves of the first row of each handle; returns those rows' indices."""
        handles, first = np.unique(handles, return_index=True)
        matrix, lengths = matrix[first], lengths[first]
        total = int(lengths.sum())
        if self._pool_size + total > len(self._pool):
            pool = np.zeros(max(2 * len(self._pool), self._pool_size + total), np.int64)
            pool[:self._pool_size] = self._pool[:self._pool_size]
            self._pool = pool
        starts = self._pool_size + np.cumsum(lengths) - lengths
        valid = np.arange(matrix.shape[1])[None, :] < lengths[:, None]
        self._pool[self._pool_size:self._pool_size + total] = matrix[valid]
        self._leaf_start[handles] = starts
        self._leaf_count[handles] = lengths
        self._pool_size += total
        return first

    # -- reading terms ---------------------------------------------------------------------------
    def row(self, handle: int) -> tuple[tuple, int, int]:
        """(operator signature, a, b) of one term."""
        return self.operators[int(self._op[handle])], int(self._a[handle]), int(self._b[handle])

    def leaves(self, handle: int) -> list[int] | None:
        """A multiset term's leaves (None for other terms)."""
        if self._leaf_count[handle] == 0:
            return None
        start = int(self._leaf_start[handle])
        return self._pool[start:start + int(self._leaf_count[handle])].tolist()

    def render(self, handle: int, limit: int = 160) -> str:
        """A term as text (``add(p0[d1][3], c:f32=1)``), cut after about ``limit`` characters."""
        out: list[str] = []
        budget = [limit]

        def emit(text: str) -> bool:
            out.append(text)
            budget[0] -= len(text)
            return budget[0] > 0

        def walk(h: int) -> bool:
            signature, a, b = self.row(h)
            kind = signature[0]
            if kind == "variable":
                where = "" if a < 0 else f"[d{a}]"
                return emit(f"{signature[1]}{where}[{b}]")
            if kind == "constant":
                return emit(f"c:{signature[1]}#{a & 0xFFFFFFFFFFFFFFFF:x}")
            if kind == "multiset":
                if not emit(f"{signature[1]}{{"):
                    return False
                for i, leaf in enumerate(self.leaves(h) or ()):
                    if (i and not emit(", ")) or not walk(leaf):
                        return False
                return emit("}")
            if kind == "pair":
                return walk(a) and emit(", ") and walk(b)
            if not emit(f"{signature[1] if len(signature) > 1 else kind}(") or not walk(a):
                return False
            if b != NONE and (not emit(", ") or not walk(b)):
                return False
            return emit(")")

        walk(int(handle))
        text = "".join(out)
        return text if budget[0] > 0 else text[:limit] + "..."

    def ops_of(self, handles: np.ndarray) -> np.ndarray:
        """The operator id of each handle."""
        return self._op[handles]

    def children(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ``a`` and ``b`` columns of each handle."""
        return self._a[handles], self._b[handles]
