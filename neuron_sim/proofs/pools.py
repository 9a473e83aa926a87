"""Theorems about the constant offset pools of RewriteAllReduceDynamicSliceMultipleGroups.

The seed's multiple-groups matcher folds ``dynamic-slice(all-reduce(x), reshape(s *
dynamic-slice(POOL, partition-id)))`` into a reduce-scatter when POOL equals one of three
``s32[G*g]`` literals (``neuron_sim.passes.neuron.offset_pools``): *identity* ``[0 .. G*g-1]``,
*multiplied* ``s*j`` and *repeated* ``j`` (j = 0..g-1, once per group). It never compares the
pool with the groups' members. Does its predicate imply that the fold is sound?

The model, for symbolic G (groups), g (group width), s (shard length) and a device:

* one replica and ``P = G*g`` partitions; the all-reduce has ``use_global_device_ids=true``
  (FlattenedID, so groups name partitions) — the form of the seed's examples and of JAX;
* layouts: *contiguous* groups ``{k*g .. k*g+g-1}`` and *strided* groups ``{k, k+G, k+2G, ...}``;
  a device is named by its group k and position j, so its partition is ``k*g + j`` or ``k + G*j``;
* ``1 <= G``; ``2 <= g`` (the matcher's 1-D shard check and ``g*s == extent`` rule out g = 1:
  a slice of the whole extent differs from its operand in no dimension); ``G*g <= max_devices``
  (4096); ``1 <= s``; ``g*s <= 2^31 - 1`` (the sliced extent fits the s32 indices the matcher
  requires);
* the pool holds ``POOL[a*g + b]`` = ``a*g + b`` / ``s*b`` / ``b`` (0 <= b < g), as the builders
  lay it out; the device at partition p reads ``clamp(s32(s * POOL[p]), 0, (g-1)*s)`` — s32
  wraparound and dynamic-slice's clamp exactly; the pool's own dynamic-slice clamp never moves
  p, which is always < G*g — and must read ``position * s = j * s``.

Two exact encodings of this model are used, each where its solver is decisive:

* ``IntModel`` — unbounded integers, the s32 product as ``x - 2^32*w`` with
  ``-2^31 <= x - 2^32*w < 2^31``. z3's nonlinear integer reasoning settles ordering facts
  (``j*s <= (g-1)*s``) that bit-blasting cannot; it decides the verdicts, finds the smallest
  witnesses and proves the "sound when" directions.
* ``BitVecModel`` — bounded bit-vectors: the s32 product is a 32-bit multiply. Bit-blasting
  settles modular facts (``s*s != s`` mod 2^32) that integer reasoning cannot; it proves the
  "unsound otherwise" directions at an explicit witness device, quantifier-free.

Tests evaluate both encodings on concrete instances against a plain numpy reading of the
program, so they are checked to mean the same thing.
"""

from __future__ import annotations

import enum
import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable

from neuron_sim.lazy import LazyModule
from neuron_sim.passes.neuron.offset_pools import POOL_READINGS

z3 = LazyModule("z3")

INT32_MAX = (1 << 31) - 1
TWO_32 = 1 << 32
MAX_DEVICES = 4096
POOLS = tuple(POOL_READINGS)  # identity, multiplied, repeated
QUERY_TIMEOUT_MS = 120_000


class GroupLayout(str, enum.Enum):
    CONTIGUOUS = "contiguous"   # {{0..g-1}, {g..2g-1}, ...}
    STRIDED = "strided"         # {{0, G, 2G, ...}, {1, G+1, ...}, ...}

    def __str__(self) -> str:
        return self.value

    def groups(self, groups: int, width: int) -> list[list[int]]:
        """The concrete groups (partition ids) for G = ``groups`` and g = ``width``."""
        if self is GroupLayout.CONTIGUOUS:
            return [[k * width + j for j in range(width)] for k in range(groups)]
        return [[k + groups * j for j in range(width)] for k in range(groups)]


def _check_pool(pool: str) -> None:
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; the pools are {', '.join(POOLS)}")


# --------------------------------------------------------------------------------------------
# The integer encoding.


class IntModel:
    """The model over unbounded integers (see the module docstring).

    Every method that needs auxiliary variables (a quotient, a wraparound count) returns
    ``(constraints, term)``; ``tag`` keeps the variables of different devices apart.
    """

    def __init__(self, max_devices: int = MAX_DEVICES) -> None:
        self.max_devices = max_devices
        self.G, self.g, self.s = z3.Ints("G g s")

    def domain(self) -> list[z3.BoolRef]:
        G, g, s = self.G, self.g, self.s
        return [G >= 1, g >= 2, G * g <= self.max_devices, s >= 1, g * s <= INT32_MAX]

    def is_device(self, k: z3.ArithRef, j: z3.ArithRef) -> z3.BoolRef:
        return z3.And(k >= 0, k < self.G, j >= 0, j < self.g)

    def partition(self, layout: GroupLayout, k: z3.ArithRef, j: z3.ArithRef) -> z3.ArithRef:
        return k * self.g + j if layout is GroupLayout.CONTIGUOUS else k + self.G * j

    def pool_value(self, pool: str, layout: GroupLayout, k: z3.ArithRef, j: z3.ArithRef,
                   tag: str) -> tuple[list[z3.BoolRef], z3.ArithRef]:
        """``POOL[partition(k, j)]``. The pool index p is written ``a*g + b`` (0 <= b < g); for
        contiguous groups that is (k, j) itself — Euclid's division is unique
        (``prove_lemmas``) — so no quotient variable is needed there."""
        _check_pool(pool)
        p = self.partition(layout, k, j)
        if layout is GroupLayout.CONTIGUOUS:
            constraints, b = [], j
        else:
            a, b = z3.Ints(f"a_{tag} b_{tag}")
            constraints = [p == a * self.g + b, a >= 0, b >= 0, b < self.g]
        value = {"identity": p, "multiplied": self.s * b, "repeated": b}[pool]
        return constraints, value

    def offset(self, pool: str, layout: GroupLayout, k: z3.ArithRef, j: z3.ArithRef,
               tag: str) -> tuple[list[z3.BoolRef], z3.ArithRef]:
        """``s32(s * POOL[p])``: the exact product minus the multiple of 2^32 that puts it in
        the s32 range."""
        constraints, value = self.pool_value(pool, layout, k, j, tag)
        wraps = z3.Int(f"w_{tag}")
        offset = self.s * value - TWO_32 * wraps
        return constraints + [offset >= -(1 << 31), offset <= INT32_MAX], offset

    def clamped(self, offset: z3.ArithRef) -> z3.ArithRef:
        limit = (self.g - 1) * self.s
        return z3.If(offset < 0, 0, z3.If(offset > limit, limit, offset))

    def mismatch(self, pool: str, layout: GroupLayout, k: z3.ArithRef, j: z3.ArithRef,
                 tag: str) -> tuple[list[z3.BoolRef], z3.BoolRef]:
        """The device (k, j) reads a row other than ``j * s``."""
        constraints, offset = self.offset(pool, layout, k, j, tag)
        return constraints, self.clamped(offset) != j * self.s

    def square_s32(self, tag: str = "square") -> tuple[list[z3.BoolRef], z3.ArithRef]:
        """``s32(s*s)``."""
        wraps = z3.Int(f"w_{tag}")
        value = self.s * self.s - TWO_32 * wraps
        return [value >= -(1 << 31), value <= INT32_MAX], value


# --------------------------------------------------------------------------------------------
# The bit-vector encoding.


class BitVecModel:
    """The model over bounded bit-vectors: ids are ``ID_BITS`` wide, s is 32-bit, products are
    exact in ``WIDE_BITS``; only the program's own s32 multiply wraps."""

    ID_BITS = 14     # ids and partitions (< G*g <= max_devices < 2^13): exact on devices
    WIDE_BITS = 48   # any product of an id and s < 2^31 is exact

    def __init__(self, max_devices: int = MAX_DEVICES) -> None:
        if not 1 <= max_devices < 1 << (self.ID_BITS - 1):
            raise ValueError(f"max_devices must be in 1..{(1 << (self.ID_BITS - 1)) - 1}")
        self.max_devices = max_devices
        self.G, self.g = z3.BitVecs("G g", self.ID_BITS)
        self.s = z3.BitVec("s", 32)

    def wide(self, x: z3.BitVecRef) -> z3.BitVecRef:
        return z3.ZeroExt(self.WIDE_BITS - x.size(), x)

    def domain(self) -> list[z3.BoolRef]:
        G, g, s = self.G, self.g, self.s
        devices = z3.ZeroExt(self.ID_BITS, G) * z3.ZeroExt(self.ID_BITS, g)
        return [z3.UGE(G, 1), z3.ULE(G, self.max_devices), z3.UGE(g, 2),
                z3.ULE(g, self.max_devices), z3.ULE(devices, self.max_devices),
                z3.UGE(s, 1), z3.ULE(s, INT32_MAX),
                z3.ULE(self.wide(g) * self.wide(s), INT32_MAX)]

    def is_device(self, k: z3.BitVecRef, j: z3.BitVecRef) -> z3.BoolRef:
        return z3.And(z3.ULT(k, self.G), z3.ULT(j, self.g))

    def partition(self, layout: GroupLayout, k: z3.BitVecRef, j: z3.BitVecRef) -> z3.BitVecRef:
        """The device's partition; exact whenever (k, j) is a device (it is < G*g then)."""
        return k * self.g + j if layout is GroupLayout.CONTIGUOUS else k + self.G * j

    def pool_value(self, pool: str, layout: GroupLayout, k: z3.BitVecRef,
                   j: z3.BitVecRef) -> z3.BitVecRef:
        """``POOL[p]`` as an s32 bit-vector: ``p``, ``s * (p mod g)`` or ``p mod g``."""
        _check_pool(pool)
        p = self.partition(layout, k, j)
        b = z3.URem(p, self.g)
        if pool == "identity":
            return z3.ZeroExt(32 - self.ID_BITS, p)
        if pool == "multiplied":
            return z3.Extract(31, 0, self.wide(self.s) * self.wide(b))
        return z3.ZeroExt(32 - self.ID_BITS, b)

    def offset(self, pool: str, layout: GroupLayout, k: z3.BitVecRef,
               j: z3.BitVecRef) -> z3.BitVecRef:
        """``s32(s * POOL[p])``: a 32-bit multiply."""
        return self.s * self.pool_value(pool, layout, k, j)

    def clamped(self, offset: z3.BitVecRef) -> z3.BitVecRef:
        wide = z3.SignExt(self.WIDE_BITS - 32, offset)
        limit = self.wide(self.g - 1) * self.wide(self.s)
        return z3.If(wide < 0, z3.BitVecVal(0, self.WIDE_BITS),
                     z3.If(wide > limit, limit, wide))

    def mismatch(self, pool: str, layout: GroupLayout, k: z3.BitVecRef,
                 j: z3.BitVecRef) -> z3.BoolRef:
        return self.clamped(self.offset(pool, layout, k, j)) != \
            self.wide(j) * self.wide(self.s)

    def square_s32(self) -> z3.BitVecRef:
        """``s32(s*s)`` sign-extended to ``WIDE_BITS``."""
        return z3.SignExt(self.WIDE_BITS - 32, self.s * self.s)

    def id_value(self, value: int) -> z3.BitVecRef:
        return z3.BitVecVal(value, self.ID_BITS)


# --------------------------------------------------------------------------------------------
# Lemmas the encodings rely on.


def prove_lemmas() -> dict[str, bool]:
    """Facts of arithmetic the ``IntModel`` uses, each proven by z3 (True = proven)."""
    g, k, j, a, b = z3.Ints("g k j a b")
    euclid = z3.Solver()
    euclid.add(g >= 1, k >= 0, a >= 0, j >= 0, j < g, b >= 0, b < g,
               k * g + j == a * g + b, z3.Or(a != k, b != j))
    return {"euclidean division is unique (contiguous pool index = (group, position))":
            euclid.check() == z3.unsat}


# --------------------------------------------------------------------------------------------
# Verdicts with the smallest witness.


@dataclass(frozen=True)
class PoolWitness:
    """Concrete G, g, s and a device (partition) on which the fold reads the wrong shard."""

    groups: int
    width: int
    slice_size: int
    device: int
    group: int
    position: int
    offset: int      # the s32 start index the program computes
    clamped: int     # the row the dynamic-slice reads
    expected: int    # position * s: where the device's reduce-scatter block starts

    def to_json(self) -> dict[str, int]:
        return {"G": self.groups, "g": self.width, "s": self.slice_size, "device": self.device,
                "group": self.group, "position": self.position, "offset": self.offset,
                "clamped_start": self.clamped, "expected_start": self.expected}

    def describe(self) -> str:
        read = str(self.offset) if self.offset == self.clamped else \
            f"{self.offset}, clamped to {self.clamped}"
        return (f"G={self.groups}, g={self.width}, s={self.slice_size}: device {self.device} "
                f"(position {self.position} of group {self.group}) reads from {read}; its "
                f"block starts at {self.expected}")


@dataclass(frozen=True)
class PoolVerdict:
    pool: str
    layout: GroupLayout
    proven: bool
    witness: PoolWitness | None
    seconds: float


class UndecidedError(RuntimeError):
    """z3 answered unknown (a timeout) where the table needs an answer."""


# z3's run time on these queries is heavy-tailed in its random seed: most seeds answer in
# milliseconds, an unlucky one can take minutes. Each query is therefore tried with a few seeds
# under short time limits before a long last attempt. Any answer is a valid answer.
ATTEMPTS = {"QF_NIA": ((0, 2_000), (1, 2_000), (2, 4_000), (3, 8_000), (4, QUERY_TIMEOUT_MS)),
            "QF_BV": ((0, QUERY_TIMEOUT_MS), (1, QUERY_TIMEOUT_MS))}


def model_of(facts: list[z3.BoolRef], logic: str = "QF_NIA") -> z3.ModelRef | None:
    """A model of ``facts``, or None if they are unsatisfiable (proof by z3).

    ``logic`` is "QF_NIA" for the integer encoding (z3's non-incremental QF_NIA configuration
    is far faster here than its default solver) or "QF_BV". Raises UndecidedError if every
    attempt times out.
    """
    reason = ""
    for seed, timeout_ms in ATTEMPTS[logic]:
        solver = z3.SolverFor(logic)
        solver.set("timeout", timeout_ms)
        solver.set("random_seed", seed)
        solver.add(*facts)
        result = solver.check()
        if result == z3.sat:
            return solver.model()
        if result == z3.unsat:
            return None
        reason = solver.reason_unknown()
    raise UndecidedError(f"z3 gave up after {len(ATTEMPTS[logic])} attempts: {reason}")


def verdict(pool: str, layout: GroupLayout, *, max_devices: int = MAX_DEVICES) -> PoolVerdict:
    """Prove "the matcher accepts ⟹ the fold is sound" for every (G, g, s, device) of the
    model, or find the smallest witness in the order (G, g, s, device)."""
    started = time.perf_counter()
    m = IntModel(max_devices)
    k, j = z3.Ints("k j")
    constraints, bad = m.mismatch(pool, layout, k, j, "device")
    facts = [*m.domain(), m.is_device(k, j), *constraints, bad]
    device = m.partition(layout, k, j)
    bounds = ((m.G, 1, max_devices), (m.g, 2, max_devices), (m.s, 1, INT32_MAX),
              (device, 0, max_devices - 1))
    for term, low, high in bounds:
        smallest = _smallest(facts, term, low, high)
        if smallest is None:
            return PoolVerdict(pool, layout, True, None, time.perf_counter() - started)
        facts.append(term == smallest)
    model = model_of(facts)
    assert model is not None

    def value(term: z3.ArithRef) -> int:
        return model.eval(term, model_completion=True).as_long()

    _, offset = m.offset(pool, layout, k, j, "device")
    witness = PoolWitness(value(m.G), value(m.g), value(m.s), value(device), value(k), value(j),
                          value(offset), value(m.clamped(offset)), value(j * m.s))
    return PoolVerdict(pool, layout, False, witness, time.perf_counter() - started)


def _smallest(facts: list[z3.BoolRef], term: z3.ArithRef, low: int, high: int) -> int | None:
    """The smallest value of ``term`` in ``[low, high]`` over the models of ``facts``, or None
    if ``facts`` has no model with ``term <= high``.

    Galloping up from ``low`` (``term <= low``, ``low + 1``, ``low + 3``, ...) then bisecting:
    small instances are asked about first, and z3 answers those fastest.
    """
    below = low          # no model has term < below
    step = 1
    while True:
        bound = min(below + step - 1, high)
        model = model_of(facts + [term <= bound])
        if model is not None:
            break
        if bound == high:
            return None
        below, step = bound + 1, step * 2
    best = model.eval(term, model_completion=True).as_long()
    while below < best:
        middle = (below + best) // 2
        model = model_of(facts + [term <= middle])
        if model is not None:
            best = model.eval(term, model_completion=True).as_long()
        else:
            below = middle + 1
    return best


# --------------------------------------------------------------------------------------------
# Exact characterizations: when the fold is sound, and which device breaks it otherwise.

# Annotation-only aliases, as text: evaluating them would import z3 at module load.
IntCondition = "Callable[[IntModel], tuple[list[z3.BoolRef], list[z3.BoolRef]]]"
BitVecCondition = "Callable[[BitVecModel], z3.BoolRef]"
WitnessDevice = "Callable[[BitVecModel], tuple[z3.BitVecRef, z3.BitVecRef]]"


@dataclass(frozen=True)
class Characterization:
    """The fold is sound exactly when ``text`` holds; otherwise the device at (group,
    position) ``witness`` reads the wrong shard.

    ``cases`` is the condition for the integer encoding as a disjunction: each case is
    (side constraints defining auxiliary terms, the case's conjuncts); ``condition`` is the same
    condition for the bit-vector encoding.
    """

    text: str
    cases: IntCondition
    condition: BitVecCondition
    witness: WitnessDevice
    witness_text: str


def _cases(*conditions: Callable[[IntModel], z3.BoolRef]) -> IntCondition:
    return lambda m: ([], [c(m) for c in conditions])


def _multiplied_one_group_cases(m: IntModel) -> tuple[list[z3.BoolRef], list[z3.BoolRef]]:
    side, square = m.square_s32()
    return side, [m.s == 1, z3.And(m.g == 2, square >= m.s)]


def _multiplied_one_group(m: BitVecModel) -> z3.BoolRef:
    return z3.Or(m.s == 1, z3.And(m.g == 2, m.square_s32() >= m.wide(m.s)))


def _at(group: int, position: int) -> WitnessDevice:
    return lambda m: (m.id_value(group), m.id_value(position))


def _one_group(m: IntModel | BitVecModel) -> z3.BoolRef:
    return m.G == 1


CHARACTERIZATIONS: dict[tuple[str, GroupLayout], Characterization] = {
    ("identity", GroupLayout.CONTIGUOUS): Characterization(
        "G == 1", _cases(_one_group), _one_group, _at(1, 0),
        "device g (position 0 of group 1)"),
    ("identity", GroupLayout.STRIDED): Characterization(
        "G == 1", _cases(_one_group), _one_group, _at(1, 0),
        "device 1 (position 0 of group 1)"),
    ("multiplied", GroupLayout.CONTIGUOUS): Characterization(
        "s == 1 or (g == 2 and s32(s*s) >= s)", _multiplied_one_group_cases,
        _multiplied_one_group, _at(0, 1), "device 1 (position 1 of group 0)"),
    ("multiplied", GroupLayout.STRIDED): Characterization(
        "G == 1 and (s == 1 or (g == 2 and s32(s*s) >= s))",
        lambda m: (lambda side, cases: (side, [z3.And(m.G == 1, c) for c in cases]))(
            *_multiplied_one_group_cases(m)),
        lambda m: z3.And(m.G == 1, _multiplied_one_group(m)),
        lambda m: (z3.If(z3.And(m.G != 1, m.square_s32() > 0), m.id_value(1), m.id_value(0)),
                   z3.If(z3.And(m.G != 1, m.square_s32() > 0), m.id_value(0), m.id_value(1))),
        "device 1 when G == 1 or s32(s*s) > 0, else device G (position 1 of group 0)"),
    ("repeated", GroupLayout.CONTIGUOUS): Characterization(
        "always", _cases(lambda m: z3.BoolVal(True)), lambda m: z3.BoolVal(True), _at(0, 0),
        "none"),
    ("repeated", GroupLayout.STRIDED): Characterization(
        "G == 1", _cases(_one_group), _one_group, _at(1, 0),
        "device 1 (position 0 of group 1)"),
}


@dataclass(frozen=True)
class CharacterizationProof:
    """Both directions of a characterization; a counterexample if one of them fails."""

    sufficient: bool        # the condition ⟹ every device reads its own block (IntModel)
    necessary: bool         # not the condition ⟹ the witness device reads another (BitVecModel)
    counterexample: dict[str, int] | None = None

    @property
    def holds(self) -> bool:
        return self.sufficient and self.necessary


def prove_characterization(pool: str, layout: GroupLayout, cases: IntCondition,
                           condition: BitVecCondition, witness: WitnessDevice, *,
                           max_devices: int = MAX_DEVICES) -> CharacterizationProof:
    """Prove that the fold is sound exactly when the condition holds.

    Sufficient, per case of ``cases`` (integers): no device of an instance in the case reads
    the wrong block. Necessary (bit-vectors): no instance violating ``condition`` has
    ``witness`` reading its own block (or not being a device). Both are quantifier-free.
    """
    counterexample: dict[str, int] | None = None

    def refuted(facts: list[z3.BoolRef], logic: str, names: dict[str, Any]) -> bool:
        nonlocal counterexample
        model = model_of(facts, logic)
        if model is None:
            return False
        counterexample = {name: model.eval(term, model_completion=True).as_long()
                          for name, term in names.items()}
        return True

    im = IntModel(max_devices)
    k, j = z3.Ints("k j")
    side, disjuncts = cases(im)
    constraints, bad = im.mismatch(pool, layout, k, j, "device")
    sufficient = True
    for case in disjuncts:
        facts = [*im.domain(), *side, case, im.is_device(k, j), *constraints, bad]
        if refuted(facts, "QF_NIA", {"G": im.G, "g": im.g, "s": im.s, "group": k, "position": j}):
            sufficient = False
            break

    bm = BitVecModel(max_devices)
    wk, wj = witness(bm)
    facts = [*bm.domain(), z3.Not(condition(bm)),
             z3.Or(z3.Not(bm.is_device(wk, wj)), z3.Not(bm.mismatch(pool, layout, wk, wj)))]
    necessary = not refuted(facts, "QF_BV", {"G": bm.G, "g": bm.g, "s": bm.s, "group": wk,
                                     "position": wj})
    return CharacterizationProof(sufficient, necessary, counterexample)


# --------------------------------------------------------------------------------------------
# The table.


@dataclass(frozen=True)
class PoolRow:
    pool: str
    layout: GroupLayout
    verdict: PoolVerdict
    sound_when: str
    witness_device: str
    characterization: CharacterizationProof
    seconds: float

    @property
    def status(self) -> str:
        return "PROVEN" if self.verdict.proven else "REFUTED"

    def to_json(self) -> dict[str, Any]:
        witness = self.verdict.witness
        return {"pool": self.pool, "layout": str(self.layout), "verdict": self.status,
                "smallest_witness": witness.to_json() if witness else None,
                "sound_exactly_when": self.sound_when,
                "sound_exactly_when_proven": self.characterization.holds,
                "witness_device_otherwise": self.witness_device,
                "seconds": round(self.seconds, 3)}


def pool_rows() -> list[tuple[str, GroupLayout]]:
    return list(itertools.product(POOLS, GroupLayout))


def pool_row(pool: str, layout: GroupLayout, *, max_devices: int = MAX_DEVICES) -> PoolRow:
    """One row: the verdict with its smallest witness, and the proven exact condition."""
    started = time.perf_counter()
    result = verdict(pool, layout, max_devices=max_devices)
    known = CHARACTERIZATIONS[(pool, layout)]
    proof = prove_characterization(pool, layout, known.cases, known.condition, known.witness,
                                   max_devices=max_devices)
    return PoolRow(pool, layout, result, known.text, known.witness_text, proof,
                   time.perf_counter() - started)


def pool_table(*, max_devices: int = MAX_DEVICES) -> list[PoolRow]:
    """Every pool x layout (``pool_row``)."""
    return [pool_row(pool, layout, max_devices=max_devices) for pool, layout in pool_rows()]
