"""ReplaceRng (key ``aws_neuron_replace_rng``): every ``rng`` becomes a constant sampled at
compile time.

Seed: hlo-misc-cleanup-sweep.txt §3.2 (ReplaceRng::Run, CERTAIN). The binary seeds a
``std::mt19937`` from ``std::random_device``, walks the module in post order and replaces every
``kRng`` by ``CreateConstant(sample_literal(shape, gen))`` — a tuple-shaped rng by a tuple of
one constant per element. Its GOTCHA: the seed comes from ``random_device``, so two compiles of
one module fold different constants.

Our reading (seed status "our reading"):
* The engine is MT19937 seeded as ``std::mt19937(seed)`` (numpy's ``RandomState(seed)``: the
  same ``init_genrand`` with multiplier 1812433253). The ``seed`` option pins it; unset, a fresh
  32-bit seed is drawn from the OS (like ``random_device``), the pass records a warning naming
  it, and ``neuron-sim opt`` prints that warning on stderr.
* The seed says only "uniform_int_distribution into Piece::buffer": it does not say the
  distribution or the bounds are honoured. We sample the rng's own distribution: rng_uniform
  in [a, b) (floats: ``a + (b - a) u`` rounded to the type, a draw that rounds up to b becomes
  a; integers: uniform on a..b-1), rng_normal ``mu + sigma z``. So the bounds must be known at
  compile time: an rng whose ``a``/``b`` are not scalar constants, an empty or non-finite
  interval, a NaN/infinite mu or sigma, or a pred rng is left alone (the negative gates).

Contract: a refinement (``RNG_SUPPORT``): every planted element is a value the rng's
distribution allows — in [a, b) for uniform, finite (exactly mu when sigma is 0) for normal.
The verifier cannot see that on the outputs, which the draws flow through, so ``source_binding``
checks the planted constants element by element against the source rng's bounds, and feeds the
same values to the source (each entry rng made a parameter) so the rest of the program is
compared exactly. An rng outside the entry computation (in a loop body, say) cannot be bound so:
the verifier says so instead of comparing.

Known unsafety: a program that draws an rng in a loop now sees one value each iteration; a
module compiled twice without a seed differs (the GOTCHA); values are drawn from the rng's
support, not from XLA's (implementation-defined) generator, so results differ from any run of
the source.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, TupleShape
from neuron_sim.passes.base import OpExpanderPass, SeedStatus, SourceBinding
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.context_hazards import Reliance, relies_on
from neuron_sim.passes.contracts import Refinement
from neuron_sim.passes.neuron.inline_weights import with_parameters_inserted
from neuron_sim.passes.neuron.pattern_helpers import rederive_entry_layout
from neuron_sim.passes.options import PassOption

SEED = "hlo-misc-cleanup-sweep.txt §3.2 ReplaceRng"
DISTRIBUTIONS = ("rng_uniform", "rng_normal")


def _never(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    return np.zeros(np.broadcast_shapes(np.shape(source), np.shape(target)), dtype=bool)


RNG_SUPPORT = Refinement(
    "rng-support", _never,
    "every planted constant is a value its rng's distribution allows (checked per element "
    "against the rng's bounds; the outputs are then compared exactly with the same values "
    "fed to the source's rng)")


def mersenne_twister(seed: int) -> np.random.RandomState:
    """MT19937 seeded as ``std::mt19937(seed)`` (``init_genrand``; the seed taken mod 2**32)."""
    return np.random.RandomState(seed % 2 ** 32)


def rng_bounds(inst: HloInstruction) -> tuple[str, Any, Any] | None:
    """(distribution, a, b) of an rng whose bounds are scalar constants and describe a
    non-empty, finite distribution of a float or integer type; None otherwise."""
    if inst.opcode is not Opcode.RNG or len(inst.operands) != 2:
        return None
    distribution = str(inst.get("distribution", ""))
    if distribution not in DISTRIBUTIONS:
        return None
    low, high = inst.operands
    if any(op.opcode is not Opcode.CONSTANT or not op.shape.is_array or op.shape.dims
           or op.literal is None or op.literal.is_elided for op in (low, high)):
        return None
    a = np.asarray(low.literal.value).reshape(())
    b = np.asarray(high.literal.value).reshape(())
    for leaf in inst.shape.leaves():
        if not (leaf.element_type.is_float or leaf.element_type.is_integral):
            return None
        if distribution == "rng_normal" and not leaf.element_type.is_float:
            return None
    if a.dtype.kind in "iu":
        if distribution != "rng_uniform" or int(a) >= int(b):
            return None
        return distribution, int(a), int(b)
    a64, b64 = float(a.astype(np.float64)), float(b.astype(np.float64))
    if not (np.isfinite(a64) and np.isfinite(b64)):
        return None
    if distribution == "rng_uniform" and not a64 < b64:
        return None
    return distribution, a64, b64


def admissible(distribution: str, a: Any, b: Any, values: np.ndarray) -> np.ndarray:
    """Elementwise: could an rng of ``distribution`` with bounds ``a``, ``b`` produce this?"""
    values = np.asarray(values)
    if values.dtype.kind in "iu":
        wide = values.astype(np.uint64 if values.dtype.kind == "u" else np.int64)
        return (wide >= a) & (wide < b)
    wide = values.astype(np.float64)
    if distribution == "rng_uniform":
        return (wide >= a) & (wide < b)
    return np.isfinite(wide) & ((b != 0) | (wide == a))


def draw_array(generator: np.random.RandomState, distribution: str, a: Any, b: Any,
           shape: ArrayShape) -> np.ndarray:
    """One array of ``shape`` drawn from the distribution (see the module docstring)."""
    dtype = np.dtype(shape.element_type.numpy_dtype)
    size = shape.dims
    if dtype.kind in "iu":
        wide = np.uint64 if dtype.kind == "u" else np.int64
        return generator.randint(a, b, size=size, dtype=wide).astype(dtype)
    if distribution == "rng_normal":
        values = a + b * generator.standard_normal(size)
        limit = float(np.finfo(np.float32).max) if dtype.itemsize <= 4 else np.inf
        narrow = np.clip(values, -limit, limit).astype(dtype)
        return np.where(np.isfinite(narrow.astype(np.float64)), narrow,
                        np.asarray(a).astype(dtype))
    u = generator.random_sample(size)
    values = (a * (1.0 - u) + b * u).astype(dtype)
    wide = values.astype(np.float64)
    return np.where((wide >= b) | (wide < a), np.asarray(a).astype(dtype), values)


class ReplaceRng(OpExpanderPass):
    """rng(a, b) with constant bounds -> a constant drawn with MT19937 (tuple: a tuple of them)."""

    name = "aws_neuron_replace_rng"
    contract = RNG_SUPPORT
    seed_status = SeedStatus.OUR_READING
    seed = SEED
    summary = ("every rng with constant bounds -> a constant drawn from its distribution "
               "(MT19937); unseeded it differs from run to run")
    options = (PassOption("seed", int, None,
                          "the MT19937 seed (std::mt19937(seed)); unset: a fresh seed from the "
                          "OS each run (the binary's random_device), with a warning"),)
    pipelines = {"neuron-closer": 16}
    hazard = relies_on(Reliance.PINNED_SEED)
    seed_says = ("every `rng` -> a constant sampled by a `std::mt19937` seeded from "
                 "`random_device` (a tuple rng: a tuple of constants); non-deterministic")
    our_reading = ("MT19937 as `std::mt19937(seed)` (`seed` option; unset: a fresh OS seed and a "
                   "warning); samples the rng's own distribution in its bounds, so only rngs with "
                   "scalar-constant, finite, non-empty bounds are replaced")
    known_unsafety = ("unseeded, two compiles differ; an rng in a loop now gives one value every "
                      "iteration")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.planted: dict[str, list[np.ndarray]] = {}   # rng name -> one array per leaf
        self.generator = mersenne_twister(0)

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        seed = self.option("seed")
        if seed is None:
            seed = secrets.randbits(32)
            self.warnings.append(
                f"no seed given: the rng constants come from a fresh seed ({seed}) and differ "
                f"from run to run; --pass-option seed={seed} reproduces this module")
        self.generator = mersenne_twister(seed)
        self.planted = {}
        return super().run_on_module(module, context)

    def matches(self, inst: HloInstruction) -> bool:
        return rng_bounds(inst) is not None

    def expand(self, inst: HloInstruction) -> HloInstruction:
        distribution, a, b = rng_bounds(inst)
        comp = inst.parent
        leaves = list(inst.shape.leaves())
        arrays = [draw_array(self.generator, distribution, a, b, leaf) for leaf in leaves]
        constants = [make_instruction(comp, Opcode.CONSTANT, shape=leaf, name="constant",
                                      literal=Literal.from_array(leaf, values))
                     for leaf, values in zip(leaves, arrays)]
        self.planted[inst.name] = arrays
        if not isinstance(inst.shape, TupleShape):
            return constants[0]
        for constant in constants:
            comp.add_before(constant, inst)
        return make_instruction(comp, Opcode.TUPLE, constants, shape=inst.shape, name="tuple")

    def source_binding(self, source: HloModule, target: HloModule) -> SourceBinding | None:
        """The source with each entry rng made a new parameter fed the planted values; the
        target given the same parameters, unused. Raises ValueError for an rng that cannot be
        bound (not in the entry computation, or tuple-shaped)."""
        if not self.planted:
            return None
        bound = source.clone()
        entry = bound.entry
        by_name = {inst.name: inst for inst in entry.instructions}
        first = len(entry.parameters)
        fixed: dict[int, np.ndarray] = {}
        shapes = {}
        problems: list[str] = []
        for number, (name, arrays) in enumerate(self.planted.items(), start=first):
            rng = by_name.get(name)
            if rng is None or rng.opcode is not Opcode.RNG:
                raise ValueError(f"the rng %{name} is not in the entry computation: the verifier "
                                 "can feed planted values only to entry rngs")
            if isinstance(rng.shape, TupleShape):
                raise ValueError(f"the rng %{name} is tuple-shaped: the verifier cannot feed it")
            distribution, a, b = rng_bounds(rng)
            ok = admissible(distribution, a, b, arrays[0])
            if not ok.all():
                index = tuple(int(i) for i in np.unravel_index(
                    int(np.flatnonzero(~ok.reshape(-1))[0]), ok.shape))
                problems.append(f"%{name}: planted element {list(index)} = "
                                f"{arrays[0][index]} is not a value {distribution}({a}, {b}) "
                                "can produce")
            param = make_instruction(entry, Opcode.PARAMETER, shape=rng.shape,
                                     name=f"{name}.value", parameter_number=number)
            entry.replace_instruction(rng, param)
            fixed[number] = arrays[0]
            shapes[number] = rng.shape
        rederive_entry_layout(bound)
        return SourceBinding(bound, with_parameters_inserted(target, shapes), fixed,
                             "; ".join(problems) or None)
