"""Inputs that find bugs: per-device values for every entry parameter.

A rewrite that is wrong only when devices hold different data (a shard delivered to the wrong
position, a collective deleted) is invisible on replicated inputs, so every device gets its own
values. A rewrite that is wrong only at a tie (``LT`` flipped to ``LE``), at a signed zero, a
NaN, an infinity or an integer boundary is invisible on generic random data, so the trials
cycle through *styles* that put those values in:

=============  =============================================================================
``distinct``   finite values, different on every device, with deliberate ties and near ties
               (one-ulp neighbours)
``exact``      exactly representable small values (multiples of 1/4, or integers for narrow
               floats): sums and products of a few of them are exact in any order, so a
               difference seen on them cannot be rounding or reassociation
``constants``  the module's own constants and their neighbours (one ulp, or one, away):
               ``x < 5`` and ``x <= 5`` differ only at 5, a bound only matters at the bound
``signed``     ``distinct`` plus negative and positive zeros and infinities
``nan``        ``distinct`` plus one NaN on one device per array
``boundary``   ``distinct`` plus the type's extremes (INT_MIN, INT_MAX, -1, 0, lowest and
               largest finite floats)
``uniform``    every array filled with one value (-inf, 0, NaN, +inf, -0, 1, -1, the extremes;
               a different one per device and per parameter): a reduction's initial value or
               a guard for "all elements are -inf" only matters then
=============  =============================================================================

Parameters declared replicated get the same value on every device: a program may rely on that,
and feeding it different values would report a false alarm. Declared as XLA reads it
(``neuron_sim.hlo.replication``): ``parameter_replication={true}``, or on a topology of one
replica and several partitions (an SPMD program) a ``sharding={replicated}``.

Arrays are stacked per device: ``[D, *shape]``, row ``f`` for flattened device ``f`` (the npz
format of docs/run.md). Tuple-shaped parameters get a tuple of such arrays, one per leaf;
token parameters get None.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.hlo.dtypes import ElementType, Kind
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.replication import declared_replication, spmd_topology
from neuron_sim.hlo.shapes import ArrayShape, Shape
from neuron_sim.io import fit_arguments
from neuron_sim.topology import Topology

STYLES = ("distinct", "exact", "constants", "signed", "nan", "boundary", "uniform")
"""Trial ``t`` uses ``STYLES[t % len(STYLES)]``."""

DEFAULT_TRIALS = len(STYLES)  # one input set of each style

InputValue = Any  # np.ndarray for an array parameter, tuple of them for a tuple parameter


def style_of_trial(trial: int) -> str:
    return STYLES[trial % len(STYLES)]


def parameter_replication(param: HloInstruction, topology: Topology | None = None
                          ) -> tuple[bool, ...]:
    """Per leaf of the parameter's shape: is it declared the same on every device? XLA's
    reading (``neuron_sim.hlo.replication``): ``parameter_replication={true}`` (one flag per
    leaf of a tuple parameter, a single flag for every leaf) — or, on a ``topology`` of one
    replica and several partitions (an SPMD program), a ``sharding={replicated}``: the runtime
    hands such a parameter the same whole array on every partition."""
    spmd = topology is not None and spmd_topology(topology.replica_count,
                                                  topology.num_partitions)
    return declared_replication(param, spmd=spmd)


def generate_inputs(module: HloModule, topology: Topology, *, seed: int = 0,
                    trial: int = 0, style: str | None = None) -> list[InputValue]:
    """One value per entry parameter, stacked per device (``[D, *shape]``).

    Deterministic in (module signature, topology, seed, trial). ``style`` overrides the trial's
    style (see the module docstring).
    """
    style = style or style_of_trial(trial)
    if style not in STYLES:
        raise ValueError(f"unknown input style {style!r}; styles are {', '.join(STYLES)}")
    rng = np.random.default_rng([seed, trial, STYLES.index(style)])
    dictionary = module_constants(module) if style == "constants" else ()
    values: list[InputValue] = []
    leaf_number = 0
    for param in module.entry.parameters:
        replicated = parameter_replication(param, topology)
        leaves = list(param.shape.leaves())
        arrays = []
        for leaf, rep in zip(leaves, replicated):
            # uniform style: the first parameter starts at -inf, the next at 0, ...; each
            # further round of trials shifts by one
            offset = trial // len(STYLES) + leaf_number
            leaf_number += 1
            arrays.append(None if leaf.is_token else
                          leaf_values(leaf, topology.num_devices, rng, style, replicated=rep,
                                      dictionary=dictionary, uniform_offset=offset))
        arrays = tuple(arrays)
        values.append(arrays if param.shape.is_tuple else arrays[0])
    return values


def module_constants(module: HloModule, limit: int = 64) -> tuple[float, ...]:
    """The distinct finite numbers the module's constants hold (the first ``limit``)."""
    from neuron_sim.hlo.opcodes import Opcode

    found: dict[float, None] = {}
    for inst in module.instructions():
        if inst.opcode is not Opcode.CONSTANT or inst.literal is None or inst.literal.is_elided \
                or not isinstance(inst.shape, ArrayShape) or not inst.shape.is_array \
                or inst.shape.element_type.kind is Kind.COMPLEX:
            continue
        try:
            flat = np.asarray(inst.literal.value).reshape(-1)[:limit]
            numbers = flat.astype(np.float64)
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            continue
        for number in numbers:
            if np.isfinite(number):
                found.setdefault(float(number), None)
        if len(found) >= limit:
            break
    return tuple(list(found)[:limit])


def leaf_values(shape: ArrayShape, num_devices: int, rng: np.random.Generator, style: str, *,
                replicated: bool = False, dictionary: Sequence[float] = (),
                uniform_offset: int = 0) -> np.ndarray:
    """A ``[D, *dims]`` array of ``shape``'s element type in ``style``; identical rows if
    ``replicated``. The ``constants`` style draws from ``dictionary`` (and neighbours)."""
    et = shape.element_type
    dims = tuple(shape.dims)
    if et.kind in (Kind.TOKEN, Kind.OPAQUE):
        raise UserError(f"cannot generate values for a {et.spelling} parameter")
    rows = 1 if replicated else num_devices
    base = _draw(et, (rows, *dims), rng, style)
    if style == "constants" and dictionary and et.kind in (Kind.SIGNED, Kind.UNSIGNED, Kind.FLOAT):
        _use_dictionary(base, et, rng, dictionary)
    if style == "uniform":
        _fill_uniform(base, et, uniform_offset)
    if not replicated and style != "uniform":
        _make_rows_distinct(base, et, rng, style)
    if replicated:
        base = np.broadcast_to(base, (num_devices, *dims)).copy()
    return base


# --------------------------------------------------------------------------------------------
# Drawing values per element kind.


def _draw(et: ElementType, shape: tuple[int, ...], rng: np.random.Generator,
          style: str) -> np.ndarray:
    dtype = et.numpy_dtype
    if et.kind is Kind.PRED:
        return rng.random(shape) < 0.5
    if et.is_integral:
        return _draw_integers(et, shape, rng, style).astype(dtype)
    if et.kind is Kind.COMPLEX:
        real = _draw_floats(ElementType.F32 if et.bits == 64 else ElementType.F64, shape, rng,
                            style)
        imag = _draw_floats(ElementType.F32 if et.bits == 64 else ElementType.F64, shape, rng,
                            style)
        out = np.empty(shape, dtype=dtype)
        out.real = real
        out.imag = imag
        return out
    return _draw_floats(et, shape, rng, style)


@functools.lru_cache(maxsize=None)
def _integer_range(et: ElementType) -> tuple[int, int]:
    info = np.iinfo(et.numpy_dtype) if et.bits >= 8 else None
    if info is not None:
        return int(info.min), int(info.max)
    return (-(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1) if et.is_signed \
        else (0, (1 << et.bits) - 1)


def _draw_integers(et: ElementType, shape: tuple[int, ...], rng: np.random.Generator,
                   style: str) -> np.ndarray:
    low, high = _integer_range(et)
    # Small values: they make ties, and as indices they land inside and just outside arrays.
    small_low, small_high = max(low, -8), min(high, 15 if not et.is_signed else 8)
    work = np.uint64 if high > np.iinfo(np.int64).max else np.int64
    if style == "signed":  # many ties, so that tie-breaking on the other operands matters
        small_low, small_high = max(low, -2), min(high, 2)
    values = rng.integers(small_low, small_high + 1, size=shape).astype(work)
    # Indices and counts meet their edge cases at 0 and +-1: make those common.
    _sprinkle(values, rng, [v for v in (0, 1, -1) if low <= v <= high], fraction=0.2)
    if style == "boundary" and values.size:
        extremes = sorted({low, high, max(low, -1), 0, min(high, 1), low + 1, high - 1})
        _sprinkle(values, rng, extremes, fraction=0.25)
        _place_each(values, rng, [low, high, max(low, -1)])
    return values


def _exact_grid(et: ElementType) -> np.ndarray:
    """Values whose sums and products over a few operands stay exact in ``et``."""
    mantissa = _mantissa_bits(et)
    if mantissa >= 10:
        return np.arange(-16, 17) / 4.0        # multiples of 1/4 in [-4, 4]
    if mantissa >= 7:
        return np.arange(-4, 5).astype(np.float64)
    return np.array([-2.0, -1.0, 0.0, 1.0, 2.0])


@functools.lru_cache(maxsize=None)
def _mantissa_bits(et: ElementType) -> int:
    return int(ml_dtypes.finfo(et.numpy_dtype).nmant)


@functools.lru_cache(maxsize=None)
def _finfo(dtype: Any) -> Any:
    """``ml_dtypes.finfo(dtype)``, made once per type (each draw of floats reads it)."""
    return ml_dtypes.finfo(dtype)


def _draw_floats(et: ElementType, shape: tuple[int, ...], rng: np.random.Generator,
                 style: str) -> np.ndarray:
    dtype = et.numpy_dtype
    if style == "exact":
        grid = _exact_grid(et)
        return grid[rng.integers(0, len(grid), size=shape)].astype(dtype)
    finfo = _finfo(dtype)
    scale = min(4.0, float(finfo.max) / 8)
    values = (rng.standard_normal(shape) * scale).astype(dtype)
    flat = values.reshape(-1)
    if flat.size >= 2:
        # Ties: a quarter of the elements copy another element.
        count = max(1, flat.size // 4)
        targets = rng.choice(flat.size, size=count, replace=False)
        sources = rng.integers(0, flat.size, size=count)
        flat[targets] = flat[sources]
        # Near ties: an eighth of the elements sit one ulp from another element.
        count = max(1, flat.size // 8)
        near = rng.choice(flat.size, size=count, replace=False)
        flat[near] = _ulp_neighbours(flat[rng.integers(0, flat.size, size=count)],
                                     int(rng.choice([-1, 1])))
    if style == "signed":
        # Zeros of both signs everywhere (comparators that canonicalize -0 only show it when
        # both signs meet), plus the infinities.
        _sprinkle(flat, rng, [-0.0, 0.0], fraction=0.4)
        specials = [-0.0, 0.0]
        if _has_infinity(dtype):
            specials += [float("inf"), float("-inf")]
        _place_each(flat, rng, specials)
    elif style == "nan" and _has_nan(dtype) and flat.size:
        flat[rng.integers(0, flat.size)] = np.nan
    elif style == "boundary":
        extremes = [float(finfo.min), float(finfo.max), float(finfo.tiny), -float(finfo.tiny)]
        _sprinkle(flat, rng, extremes, fraction=0.1)
        _place_each(flat, rng, extremes[:2])
    return values


@functools.lru_cache(maxsize=None)
def _has_nan(dtype: Any) -> bool:
    try:
        return bool(np.isnan(np.array(np.nan, dtype=dtype)))
    except (ValueError, TypeError):
        return False


@functools.lru_cache(maxsize=None)
def _has_infinity(dtype: Any) -> bool:
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            return bool(np.isinf(np.array(np.inf, dtype=dtype)))
    except (ValueError, TypeError, OverflowError):
        return False


def _sprinkle(values: np.ndarray, rng: np.random.Generator, choices: Sequence[Any], *,
              fraction: float) -> None:
    flat = values.reshape(-1)
    if not flat.size:
        return
    # size * fraction elements, at least one — except that an array too small for one (a
    # scalar) is sprinkled only half the time: always overwriting its one element made a
    # scalar integer parameter never leave {-1, 0, 1}.
    count = int(flat.size * fraction) or int(rng.random() < 0.5)
    if not count:
        return
    where = rng.choice(flat.size, size=min(count, flat.size), replace=False)
    picks = rng.integers(0, len(choices), size=len(where))
    _assign(flat, where, choices, picks)


def _place_each(values: np.ndarray, rng: np.random.Generator, choices: Sequence[Any]) -> None:
    """Put every one of ``choices`` somewhere (as many as there are elements), so that a
    style's special values are never left to chance."""
    flat = values.reshape(-1)
    count = min(len(choices), flat.size)
    where = rng.choice(flat.size, size=count, replace=False)
    _assign(flat, where, choices, rng.permutation(len(choices))[:count])


def _assign(flat: np.ndarray, where: np.ndarray, choices: Sequence[Any],
            picks: np.ndarray) -> None:
    """``flat[where[k]] = choices[picks[k]]`` for every k at once (``where`` has no repeats),
    each choice converted to ``flat``'s type as a single assignment would convert it."""
    with np.errstate(over="ignore", invalid="ignore"):
        table = np.empty(len(choices), dtype=flat.dtype)
        for k, choice in enumerate(choices):
            table[k] = choice
        flat[where] = table[picks]


def _uniform_values(et: ElementType) -> list[Any]:
    if et.kind is Kind.PRED:
        return [False, True]
    if et.is_integral:
        low, high = _integer_range(et)
        return [v for v in (0, low, 1, -1, high) if low <= v <= high]
    values = [0.0, 1.0, -1.0]
    finfo = ml_dtypes.finfo(et.numpy_dtype) if et.kind is Kind.FLOAT else None
    dtype = et.numpy_dtype
    if _has_infinity(dtype):
        values = [float("-inf")] + values[:1] + [float("nan")] * _has_nan(dtype) + \
            [float("inf"), -0.0] + values[1:]
    elif _has_nan(dtype):
        values = values[:1] + [float("nan"), -0.0] + values[1:]
    if finfo is not None:
        values += [float(finfo.min), float(finfo.max)]
    return values


def _fill_uniform(values: np.ndarray, et: ElementType, offset: int) -> None:
    """Row f (device f) becomes one repeated value, the rows cycling through the special ones."""
    if et.kind is Kind.COMPLEX or values.ndim == 0:
        return
    choices = np.asarray(_uniform_values(et))
    picks = choices[(offset + np.arange(values.shape[0])) % len(choices)]
    with np.errstate(over="ignore", invalid="ignore"):
        values[...] = picks.astype(values.dtype).reshape((-1,) + (1,) * (values.ndim - 1))


def _use_dictionary(values: np.ndarray, et: ElementType, rng: np.random.Generator,
                    dictionary: Sequence[float]) -> None:
    """Replace about half of the elements by constants of the module or their neighbours."""
    flat = values.reshape(-1)
    if not flat.size:
        return
    if et.is_integral:
        low, high = _integer_range(et)
        bases = [int(np.clip(np.trunc(number), low, high)) for number in dictionary]
        candidates = np.array([v for base in bases for v in (base - 1, base, base + 1)
                               if low <= v <= high], dtype=object)
    else:
        dtype = et.numpy_dtype
        with np.errstate(over="ignore", invalid="ignore"):
            exact = np.array(dictionary, dtype=np.float64).astype(dtype)
        exact = exact[np.isfinite(exact.astype(np.float64))]
        candidates = np.concatenate([exact, _ulp_neighbours(exact, +1),
                                     _ulp_neighbours(exact, -1)])
    if not candidates.size:
        return
    count = max(1, flat.size // 2)
    where = rng.choice(flat.size, size=count, replace=False)
    picks = rng.integers(0, len(candidates), size=count)
    flat[where] = candidates[picks].astype(flat.dtype)


def _ulp_neighbours(values: np.ndarray, direction: int) -> np.ndarray:
    """Each value moved one ulp up (+1) or down (-1), in its own float type."""
    values = np.ascontiguousarray(values)
    if values.size == 0:
        return values
    unsigned = np.dtype(f"u{values.dtype.itemsize}")
    bits = values.view(unsigned).copy()
    negative = np.signbit(values.astype(np.float64))
    away = (direction > 0) != negative          # moving away from zero adds to the magnitude
    zero = values.astype(np.float64) == 0
    step = np.where(away | zero, 1, -1).astype(np.int64)
    moved = (bits.astype(np.int64) + step).astype(unsigned)
    out = moved.view(values.dtype).copy()
    sign_bit = np.array(1 << (8 * values.dtype.itemsize - 1), dtype=np.uint64).astype(unsigned)
    out_bits = out.view(unsigned)   # from either zero: the smallest subnormal of that side
    out_bits[zero] = 1 if direction > 0 else (np.array(1, dtype=unsigned) | sign_bit)
    return out


def _make_rows_distinct(values: np.ndarray, et: ElementType, rng: np.random.Generator,
                        style: str) -> None:
    """Redraw the rows (devices) that repeat an earlier row, all of them at once, for a few
    rounds, where the type allows it: a row that still repeats after them keeps its value.
    A round that resolves fewer than a quarter of the repeats ends the redrawing: the type has
    few more distinct rows of this style to give (``pred[3]`` has 8, ``s32[2]`` of small values
    289), and more rounds would cost time for a handful of rows."""
    rows = values.shape[0]
    if rows < 2 or values[0].size == 0:
        return
    before = rows
    for _ in range(8):
        repeats = _repeated_rows(values)
        if not repeats.size or 4 * len(repeats) > 3 * before:
            return
        before = len(repeats)
        values[repeats] = _draw(et, (len(repeats), *values.shape[1:]), rng, style)


def _row_keys(values: np.ndarray) -> np.ndarray:
    """One scalar per row holding the row's bytes, for comparing rows as wholes: an unsigned
    integer when a row fits in 8 bytes (sorting those is much faster), else an opaque one."""
    flat = np.ascontiguousarray(values).reshape(values.shape[0], -1).view(np.uint8)
    width = flat.shape[1]
    if width <= 8:
        padded = np.zeros((flat.shape[0], 8), dtype=np.uint8)
        padded[:, :width] = flat
        return padded.view(np.uint64).reshape(-1)
    return flat.view(np.dtype((np.void, width))).reshape(-1)


def _repeated_rows(values: np.ndarray) -> np.ndarray:
    """The indices of the rows whose bytes equal those of an earlier row."""
    _, first = np.unique(_row_keys(values), return_index=True)
    keep = np.zeros(values.shape[0], dtype=bool)
    keep[first] = True
    return np.flatnonzero(~keep)


def distinct_rows(values: np.ndarray) -> int:
    """How many different rows (by their bytes) ``values`` has."""
    return len(np.unique(_row_keys(values)))


def describe_style(style: str) -> str:
    return {
        "distinct": "finite values, distinct per device, with ties",
        "exact": "exactly representable small values",
        "signed": "with negative zeros and infinities",
        "nan": "with a NaN",
        "boundary": "with the type's extreme values",
    }[style]


def given_inputs(module: HloModule, inputs: Any, topology: Topology) -> list[InputValue]:
    """User inputs (one value per parameter, shaped like it or ``[D, *shape]``, or an npz-style
    mapping) as per-device stacks, checked by ``neuron_sim.io.fit_arguments``; ArgumentError
    names a parameter that does not fit. A tuple parameter's value is the flat tuple of its
    leaves, numbered as the npz keys ``arg{i}.{j}`` number them."""
    params = module.entry.parameters
    fitted = fit_arguments(inputs, [p.shape for p in params], topology.num_devices)
    return [_stacked(value, param.shape, topology.num_devices)
            for param, value in zip(params, fitted)]


def _stacked(value: Any, shape: Shape, num_devices: int) -> InputValue:
    """``value`` broadcast to ``[num_devices, *shape]`` if it is shaped like one device's; a
    (nested) tuple as the flat tuple of its leaves."""
    if shape.is_tuple:
        return tuple(_stacked_leaf(v, leaf, num_devices)
                     for v, leaf in zip(_leaves_of(value), shape.leaves()))
    return _stacked_leaf(value, shape, num_devices)


def _leaves_of(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [leaf for element in value for leaf in _leaves_of(element)]
    return [value]


def _stacked_leaf(value: Any, shape: Shape, num_devices: int) -> Any:
    if value is None:
        return None
    dims = tuple(shape.dims)
    if value.shape == dims:
        return np.broadcast_to(value, (num_devices, *dims)).copy()
    return value


def input_arrays(inputs: Sequence[Any]) -> dict[str, np.ndarray]:
    """The npz keys: ``arg{i}`` per parameter (``arg{i}.{j}`` per leaf of a tuple one); token
    parameters have none."""
    arrays: dict[str, np.ndarray] = {}
    for i, value in enumerate(inputs):
        if isinstance(value, tuple):
            for j, leaf in enumerate(value):
                if leaf is not None:
                    arrays[f"arg{i}.{j}"] = np.asarray(leaf)
        elif value is not None:
            arrays[f"arg{i}"] = np.asarray(value)
    return arrays


def content_key(inputs: Sequence[Any]) -> tuple:
    """What a run sees of ``inputs`` (``input_arrays``: each array's key, dtype, shape and
    bytes), as a dict key: two input sets with the same key run the same way."""
    return tuple((name, a.dtype.str, a.shape, a.tobytes())
                 for name, a in input_arrays(inputs).items())


def input_signature(module: HloModule) -> list[Shape]:
    """The entry parameters' shapes, in parameter order."""
    return [param.shape for param in module.entry.parameters]


def exact_counterpart(values: Sequence[InputValue], *, seed: int = 0) -> list[InputValue]:
    """The same inputs with every finite nonzero float replaced by an exactly representable
    small value — one per distinct value, distinct while the grid of exact values lasts, so
    equal elements (ties, a replicated parameter's rows) stay equal; NaN, infinities and signed zeros stay where they are, integers stay as
    they are.

    On such inputs a sum, product, max or min over any number of operands gives the same result
    in every order (the special values propagate order-independently), so a difference that
    survives the replacement is not rounding or overflow from reassociation.
    """
    rng = np.random.default_rng([seed, 104729])

    def convert(array: np.ndarray) -> np.ndarray:
        array = np.asarray(array)
        try:
            et = ElementType.from_numpy(array.dtype)
        except (KeyError, ValueError, TypeError):
            return array
        if et.kind is not Kind.FLOAT:
            return array
        wide = array.astype(np.float64)
        replace = np.isfinite(wide) & (wide != 0)
        grid = _exact_grid(et)
        grid = grid[grid != 0]
        out = wide.copy()
        # One replacement per distinct value: equal elements stay equal, so a parameter that
        # is the same on every device (parameter_replication) stays replicated, and ties stay.
        distinct, which = np.unique(wide[replace], return_inverse=True)
        picks = rng.choice(len(grid), size=len(distinct), replace=len(distinct) > len(grid))
        out[replace] = grid[picks][which]
        return out.astype(array.dtype)

    return [tuple(convert(v) for v in value) if isinstance(value, tuple) else convert(value)
            for value in values]
