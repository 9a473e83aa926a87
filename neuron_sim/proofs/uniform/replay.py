"""Replaying one element term on concrete inputs: the check that a position where the proof
on symbolic positions fails is a real difference.

Input element ``e`` (row-major position) of parameter ``p``'s leaf ``l`` on device ``d`` is a
small integer in [-64, 64] given by a hash of ``(seed, p, l, d, e)`` (``d`` is -1 for a leaf
declared replicated), converted to the element type: the value can be recomputed for any
element without materialising the tensor, so a witness on a 5 GB module costs a few reads,
and the same values fill whole input arrays (``witness_inputs``) when the module is small
enough to run, so the interpreter confirms the witness.
Elementwise ops run the interpreter's own op implementation on one element; a reduction adds
its members' values in float64 (exact for these small integers) and rounds once, so it is
judged up to reassociation, as the proof is.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from neuron_sim.hlo import ElementType, Opcode
from neuron_sim.interpreter.evaluator import Frame, OpContext
from neuron_sim.interpreter.ops import REGISTRY
from neuron_sim.interpreter.values import numpy_dtype
from neuron_sim.lazy import LazyModule
from neuron_sim.proofs.uniform.positions import Term
from neuron_sim.semantics.elementwise import reduces_as_multiset

z3 = LazyModule("z3")

__all__ = ["Replayer", "replayed_text", "input_element", "input_values", "same_value",
           "witness_inputs"]

_TYPES = {t.spelling: t for t in ElementType}
INPUT_RANGE = 64  # inputs are integers in [-64, 64] (unsigned: [0, 64]; pred: 0 or 1)


_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
        np.uint64(0x94D049BB133111EB), np.uint64(0xD6E8FEB86659FD93))


def _hash(seed: int, param: int, leaf: int, device: np.ndarray, linear: np.ndarray) -> np.ndarray:
    """A splitmix64-style hash of (seed, param, leaf, device, linear), elementwise."""
    with np.errstate(over="ignore"):
        x = (linear.astype(np.uint64) + _MIX[0] * (device.astype(np.uint64) + np.uint64(1))
             + _MIX[3] * np.uint64((seed * 1_000_003 + param * 1_009 + leaf) & (2**63 - 1)))
        x = (x ^ (x >> np.uint64(30))) * _MIX[1]
        x = (x ^ (x >> np.uint64(27))) * _MIX[2]
        return x ^ (x >> np.uint64(31))


def input_values(seed: int, param: int, leaf: int, device: np.ndarray, linear: np.ndarray,
                 spelling: str) -> np.ndarray:
    """Replayed input values (module docstring) at row-major positions ``linear`` of devices
    ``device`` (-1 for a leaf declared replicated), broadcast together."""
    et = _TYPES[spelling]
    draw = (_hash(seed, param, leaf, device, linear) % np.uint64(2 * INPUT_RANGE + 1)
            ).astype(np.int64) - INPUT_RANGE
    if et is ElementType.PRED:
        draw = draw & 1
    elif spelling.startswith("u"):
        draw = np.abs(draw)
    return draw.astype(numpy_dtype(et))


def input_element(seed: int, param: int, leaf: int, device: int | None,
                  linear: int, spelling: str) -> np.ndarray:
    """One replayed input value, as a 0-d array."""
    return input_values(seed, param, leaf, np.asarray(-1 if device is None else device),
                        np.asarray(linear), spelling).reshape(())


def same_value(a: np.ndarray, b: np.ndarray) -> bool:
    """The verifier's exact rule on one element: the same bits, any NaN equal to any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc" or a.dtype.name in ("bfloat16",) or "float" in a.dtype.name:
        with np.errstate(all="ignore"):
            if bool(np.isnan(a.astype(np.float64))) and bool(np.isnan(b.astype(np.float64))):
                return True
    return a.tobytes() == b.tobytes()


def replayed_text(value: np.ndarray) -> str:
    return str(np.asarray(value).item() if np.asarray(value).dtype.kind in "biuf"
               else np.asarray(value))


def witness_inputs(module: Any, num_devices: int, replicated: Sequence[Sequence[bool]],
                   seed: int) -> list[Any]:
    """Whole input arrays holding the replayed values, in the verifier's input layout
    (``[D, *shape]`` per leaf, ``shape`` for a leaf declared replicated)."""
    values: list[Any] = []
    for param, flags in zip(module.entry.parameters, replicated):
        shapes = list(param.shape.leaves()) if param.shape.is_tuple else [param.shape]
        made = []
        for leaf, shape in enumerate(shapes):
            dims = tuple(shape.dims) if shape.is_array else (0,)
            spelling = shape.element_type.spelling if shape.is_array else "pred"
            linear = np.arange(int(np.prod(dims, dtype=np.int64))).reshape(dims)
            if leaf < len(flags) and flags[leaf]:
                made.append(input_values(seed, param.parameter_number, leaf, np.asarray(-1),
                                         linear, spelling))
            else:
                devices = np.arange(num_devices).reshape((num_devices,) + (1,) * len(dims))
                made.append(input_values(seed, param.parameter_number, leaf, devices,
                                         linear[None], spelling))
        values.append(tuple(made) if param.shape.is_tuple else made[0])
    return values


REPLAY_BUDGET = 1 << 20  # elements of one replayed value under nested dots / reduces

_ARITHMETIC = {"Z3_OP_ADD", "Z3_OP_SUB", "Z3_OP_MUL", "Z3_OP_UMINUS", "Z3_OP_IDIV", "Z3_OP_DIV",
               "Z3_OP_MOD", "Z3_OP_REM", "Z3_OP_LE", "Z3_OP_LT", "Z3_OP_GE", "Z3_OP_GT",
               "Z3_OP_EQ", "Z3_OP_DISTINCT", "Z3_OP_AND", "Z3_OP_OR", "Z3_OP_NOT", "Z3_OP_ITE",
               "Z3_OP_IMPLIES", "Z3_OP_TO_REAL", "Z3_OP_TO_INT"}


class _Scope:
    """Values of the index variables at the replayed position: the position's variables are
    numbers; each enclosing dot or reduce adds trailing axes holding its bound positions, so a
    value inside ``n`` binders is an array of ``n`` axes (or a scalar) and the binder sums its
    own axes away. Values are memoized per scope (terms and index expressions are DAGs)."""

    def __init__(self, env: dict[str, np.ndarray], ndim: int, size: int) -> None:
        self.env, self.ndim, self.size = env, ndim, size
        self.terms: dict[int, tuple[Term, np.ndarray]] = {}
        self.exprs: dict[int, tuple[Any, Any]] = {}

    def inner(self, bound: Sequence[Any], sizes: Sequence[int]) -> "_Scope":
        """The scope inside a binder over ``bound`` ranging over ``sizes``."""
        size = self.size * int(np.prod(sizes, dtype=np.int64))
        if size > REPLAY_BUDGET:
            raise _NoReplay
        extra = len(sizes)
        env = {name: value.reshape(value.shape + (1,) * extra) if value.ndim else value
               for name, value in self.env.items()}
        for k, (variable, size_k) in enumerate(zip(bound, sizes)):
            shape = [1] * (self.ndim + extra)
            shape[self.ndim + k] = size_k
            env[variable.decl().name()] = np.arange(size_k, dtype=np.int64).reshape(shape)
        return _Scope(env, self.ndim + extra, size)


def _sorted_sum(values: np.ndarray, axes: int) -> np.ndarray:
    """The float64 sum over the last ``axes`` axes, added in sorted order: the same number for
    the same multiset of addends, whatever order a rewrite lists them in."""
    flat = values.reshape(values.shape[:values.ndim - axes] + (-1,))
    return np.sort(flat, axis=-1).sum(axis=-1)


class Replayer:
    """Evaluates element terms at a concrete position on the replayed inputs, vectorized over
    the bound positions of dots and reduces (at most ``REPLAY_BUDGET`` of them at once)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def value(self, term: Term, device: int, position: Sequence[int]) -> np.ndarray | None:
        """The term's value at ``position`` (values of the ``position{k}`` variables); None
        where replay has no model of a construct or the bound positions exceed the budget."""
        env = {f"position{k}": np.asarray(p, dtype=np.int64) for k, p in enumerate(position)}
        try:
            with np.errstate(all="ignore"):
                return np.asarray(self._value(term, device, _Scope(env, 0, 1)))
        except Exception:  # noqa: BLE001 - a construct replay cannot evaluate: no witness
            return None

    def _expr(self, expr: Any, scope: _Scope) -> Any:
        """An index expression or condition evaluated on ``scope`` (numpy int64 / bool)."""
        key = expr.get_id()
        found = scope.exprs.get(key)
        if found is not None:
            return found[1]
        if z3.is_int_value(expr):
            value: Any = np.int64(expr.as_long())
        elif z3.is_true(expr):
            value = np.bool_(True)
        elif z3.is_false(expr):
            value = np.bool_(False)
        elif z3.is_const(expr) and expr.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            name = expr.decl().name()
            if name not in scope.env:
                raise _NoReplay
            value = scope.env[name]
        else:
            value = self._apply(expr, [self._expr(c, scope) for c in expr.children()])
        scope.exprs[key] = (expr, value)
        return value

    @staticmethod
    def _apply(expr: Any, args: list[Any]) -> Any:
        kind = expr.decl().kind()
        if kind == z3.Z3_OP_ADD:
            return sum(args[1:], args[0])
        if kind == z3.Z3_OP_SUB:
            out = args[0]
            for a in args[1:]:
                out = out - a
            return out
        if kind == z3.Z3_OP_MUL:
            out = args[0]
            for a in args[1:]:
                out = out * a
            return out
        if kind == z3.Z3_OP_UMINUS:
            return -args[0]
        if kind in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            if np.any(np.asarray(args[1]) <= 0):
                raise _NoReplay  # z3's division by a non-positive number is not numpy's
            return args[0] // args[1] if kind == z3.Z3_OP_IDIV else args[0] % args[1]
        comparisons = {z3.Z3_OP_LE: np.less_equal, z3.Z3_OP_LT: np.less,
                       z3.Z3_OP_GE: np.greater_equal, z3.Z3_OP_GT: np.greater,
                       z3.Z3_OP_EQ: np.equal, z3.Z3_OP_DISTINCT: np.not_equal}
        if kind in comparisons:
            return comparisons[kind](args[0], args[1])
        if kind == z3.Z3_OP_AND:
            return np.logical_and.reduce(np.broadcast_arrays(*args)) if args else np.bool_(True)
        if kind == z3.Z3_OP_OR:
            return np.logical_or.reduce(np.broadcast_arrays(*args)) if args else np.bool_(False)
        if kind == z3.Z3_OP_NOT:
            return np.logical_not(args[0])
        if kind == z3.Z3_OP_IMPLIES:
            return np.logical_or(np.logical_not(args[0]), args[1])
        if kind == z3.Z3_OP_ITE:
            return np.where(args[0], args[1], args[2])
        raise _NoReplay

    def _value(self, term: Term, device: int, scope: _Scope) -> np.ndarray:
        key = id(term)
        found = scope.terms.get(key)
        if found is None:
            found = scope.terms[key] = (term, self._compute(term, device, scope))
        return found[1]

    def _compute(self, term: Term, device: int, scope: _Scope) -> np.ndarray:
        kind = term[0]
        if kind == "read":
            _, param, leaf, on, index, spelling, dims = term
            linear: Any = np.int64(0)
            for i, size in zip(index, dims):
                linear = linear * size + self._expr(i, scope)
            return input_values(self.seed, param, leaf, np.asarray(-1 if on is None else on),
                                np.asarray(linear), spelling)
        if kind == "const":
            return np.asarray(term[2])
        if kind == "index":
            return np.asarray(self._expr(term[1], scope)).astype(numpy_dtype(_TYPES[term[2]]))
        if kind == "cases":
            conditions = [np.asarray(self._expr(c, scope), dtype=bool) for c, _ in term[1]]
            values = [self._value(t, device, scope) for _, t in term[1]]
            shape = np.broadcast_shapes(*[c.shape for c in conditions],
                                        *[v.shape for v in values])
            covered = np.logical_or.reduce([np.broadcast_to(c, shape) for c in conditions])
            if not np.all(covered):
                raise _NoReplay
            return np.select([np.broadcast_to(c, shape) for c in conditions],
                             [np.broadcast_to(v, shape) for v in values])
        if kind == "reduce":
            _, opcode, spelling, members = term
            values = np.stack(np.broadcast_arrays(*[self._value(m, device, scope)
                                                    for m in members]), axis=-1)
            return self._combine(opcode, spelling, values, 1)
        if kind == "op":
            _, opcode, _, _, operands, inst = term
            implementation = REGISTRY.get(opcode)
            if implementation is None or implementation.values:
                raise _NoReplay
            values = np.broadcast_arrays(*[self._value(o, device, scope) for o in operands])
            context = OpContext(None, inst, Frame(np.asarray([device], dtype=np.int64)))
            return np.asarray(implementation.fn(context, *[v[None] for v in values]))[0]
        if kind == "call":
            _, inst, on, leaf, index, evaluator = term
            body = evaluator.body(inst, on, leaf)
            env = {f"formal{k}": np.asarray(self._expr(i, scope)) for k, i in enumerate(index)}
            return self._value(body, on, _Scope(env, scope.ndim, scope.size))
        if kind in ("dot", "fold"):
            _, key, spelling, sizes, bound, first, second, _ = term
            inner = scope.inner(bound, sizes)
            a = self._value(first, device, inner)
            b = self._value(second, device, inner)
            full = np.broadcast_shapes(a.shape, (1,) * scope.ndim + tuple(sizes))
            if kind == "dot":
                full = np.broadcast_shapes(full, b.shape)
                dtype = numpy_dtype(_TYPES[spelling])
                if dtype.kind in "iub":
                    products = np.broadcast_to(a.astype(np.int64) * b.astype(np.int64), full)
                    return products.reshape(full[:scope.ndim] + (-1,)).sum(-1).astype(dtype)
                products = np.broadcast_to(a.astype(np.float64) * b.astype(np.float64), full)
                return _sorted_sum(products, len(sizes)).astype(dtype)
            opcode = next(o for o in Opcode if o.spelling == key[0])
            values = np.broadcast_to(a, full).reshape(full[:scope.ndim] + (-1,))
            # XLA's reduce combines the init value with the operand's elements; for the
            # reassociable ops that is the init as one more addend.
            init = np.broadcast_to(self._value(second, device, scope),
                                   values.shape[:-1])[..., None]
            return self._combine(opcode, spelling, np.concatenate([values, init], axis=-1), 1)
        raise _NoReplay

    @staticmethod
    def _combine(opcode: Opcode, spelling: str, values: np.ndarray, axes: int) -> np.ndarray:
        """A reassociable reduction of the last ``axes`` axes of ``values``: sums in float64 in
        sorted order, rounded once (exact on the replayed small integers); integer sums wrap;
        max / min / and / or / xor by the interpreter's own op."""
        dtype = numpy_dtype(_TYPES[spelling])
        if opcode is Opcode.ADD and dtype.kind not in "iub":
            return _sorted_sum(values.astype(np.float64), axes).astype(dtype)
        if opcode is Opcode.ADD:
            flat = values.reshape(values.shape[:values.ndim - axes] + (-1,))
            return flat.astype(np.int64).sum(-1).astype(dtype)
        if not reduces_as_multiset(opcode):
            raise _NoReplay
        implementation = REGISTRY.get(opcode)
        if implementation is None:
            raise _NoReplay
        flat = values.reshape(values.shape[:values.ndim - axes] + (-1,))
        result = flat[..., 0]
        for k in range(1, flat.shape[-1]):
            result = np.asarray(implementation.fn(None, result[None], flat[..., k][None]))[0]
        return np.asarray(result).astype(dtype)


class _NoReplay(Exception):
    """A construct the replay has no model of."""
