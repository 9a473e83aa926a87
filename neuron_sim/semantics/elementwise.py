"""The definitions of the elementwise ops: one row per ``Opcode`` (``DEFINITIONS``).

A row says everything neuron-sim knows about what the op computes:

* ``kernels``: its numpy kernel per family of element types (``Domain``: pred, integer, float,
  complex), each complete — it takes the operand arrays and returns the result in the result's
  dtype, the conventions of its family applied (integers wrap, sub-byte ones computed in 8 bits;
  narrow floats computed in f32 and rounded once; f32 in f32 or through f64 as
  ``float_kernels.float_math`` says). A float kernel wraps exactly one function: that is where a
  transcendental's algorithm is chosen (``float_function``).
* ``terms``: its z3 term per sort (``Sort``: FP for f16/bf16/f32/f64, bit-vectors for integers,
  Bool for pred), only where z3 models the op exactly (``z3_terms``). The FP theory has one NaN:
  a term never models NaN payloads (``NAN_PAYLOADS_MODELLED``).
* its symbolic facts: ``commutative`` (operands may be ordered: swapping them changes no
  result, a NaN's payload aside), ``multiset`` (HLO leaves a reduction by it free of order,
  so a reduction is a multiset of its operands) and
  ``exact_fold`` (the families where it is exactly associative and commutative, so any fold
  order gives the same bits and z3 may fold a multiset in its own order).
* ``direct``: a numpy ufunc that computes the kernel bit for bit on f32/f64 or 8..64-bit
  integer arrays, which the interpreter calls without dispatch.

Everything that executes or reasons about an elementwise op reads its row: the interpreter
registers ``numpy`` (``neuron_sim.interpreter.ops.elementwise``), the proofs build z3 terms with
``term`` (``neuron_sim.proofs.smt``, ``neuron_sim.proofs.index.int_semantics``), the symbolic
evaluator reads the facts, and tests/neuron_sim/semantics checks that each row's kernel and
term agree bit for bit. Parameters travel by keyword: ``direction`` and ``total_order`` for
compare, ``target`` for convert and bitcast-convert, ``exponent_bits`` / ``mantissa_bits`` for
reduce-precision.
"""

from __future__ import annotations

import enum
from functools import partial
from typing import Any, Callable, Mapping

import numpy as np

from neuron_sim.conversions import convert_array, wrap_int
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.records import Record
from neuron_sim.semantics import float_kernels as fk
from neuron_sim.semantics import int_kernels as ik
from neuron_sim.semantics import z3_terms as zt
from neuron_sim.semantics.element_kinds import (Domain, NotDefined, domain_of, domain_of_type,
                                                element_type_of, int_work_dtype,
                                                is_narrow_float_type)

__all__ = ["DEFINITIONS", "DIRECT_DTYPES", "ElementwiseDefinition", "Form",
           "NAN_PAYLOADS_MODELLED", "Sort", "definition_of", "fold_is_exact", "is_commutative",
           "reduces_as_multiset", "sort_of", "z3_types"]

Kernel = Callable[..., np.ndarray]
TermBuilder = Callable[..., Any]

# z3's FP theory has a single NaN: no term models a NaN's payload or sign.
NAN_PAYLOADS_MODELLED = False


class Form(enum.Enum):
    """How an op's operand types and result type relate."""

    SAME = "same"            # every operand and the result share one element type
    COMPARE = "compare"      # two operands of one type; a pred result
    SELECT = "select"        # a pred, then two values of the result's type
    CONVERT = "convert"      # one operand; the result is of the target type
    PREDICATE = "predicate"  # one operand; a pred result
    OTHER = "other"          # the result type by the op's own rule (real, complex, bitcast...)


class Sort(enum.Enum):
    """The z3 sort that holds a family of element types."""

    FLOAT = "floating-point"  # f16, bf16, f32, f64
    BITS = "bit-vector"       # integers, as wide as the type
    BOOL = "Bool"             # pred


def sort_of(et: ElementType) -> Sort:
    """The sort of ``et``'s values in z3 (NotDefined for types z3 does not model exactly)."""
    if et in zt.FLOAT_FORMATS:
        return Sort.FLOAT
    if et.is_integral:
        return Sort.BITS
    if et is ElementType.PRED:
        return Sort.BOOL
    raise NotDefined(f"no z3 model for element type {et.spelling}")


def z3_types(sort: Sort) -> tuple[ElementType, ...]:
    """The element types whose values z3 holds in ``sort``."""
    return tuple(et for et in ElementType if et.is_array_type and _sort_or_none(et) is sort)


def _sort_or_none(et: ElementType) -> Sort | None:
    try:
        return sort_of(et)
    except NotDefined:
        return None


_WRAPPING_INTS = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8,
                                              np.uint16, np.uint32, np.uint64))
# The dtypes on which a row's ``direct`` ufunc may stand for its kernel, per family: IEEE
# arithmetic in the type itself, two's-complement wrap-around.
DIRECT_DTYPES: dict[Domain, tuple[np.dtype, ...]] = {Domain.FLOAT: (fk.F32, fk.F64),
                                                     Domain.INT: _WRAPPING_INTS}


class ElementwiseDefinition(Record):
    """One elementwise op: its numpy kernels, z3 terms and symbolic facts (module docstring).

    A ``Record`` (a frozen dataclass's behaviour): creating the dataclass cost every start-up
    more than building the whole table. ``direct`` is a ufunc, or a kernel taking ``out=``."""

    __slots__ = ("opcode", "form", "kernels", "terms", "commutative", "multiset", "exact_fold",
                 "direct", "direct_domains")

    opcode: Opcode
    form: Form
    kernels: Mapping[Domain, Kernel]
    terms: Mapping[Sort, TermBuilder]
    commutative: bool
    multiset: bool
    exact_fold: frozenset[Domain]
    direct: Callable[..., np.ndarray] | None
    direct_domains: tuple[Domain, ...]

    def __init__(self, opcode: Opcode, form: Form, kernels: Mapping[Domain, Kernel],
                 terms: Mapping[Sort, TermBuilder] | None = None, commutative: bool = False,
                 multiset: bool = False, exact_fold: frozenset[Domain] = frozenset(),
                 direct: Callable[..., np.ndarray] | None = None,
                 direct_domains: tuple[Domain, ...] = ()) -> None:
        self._set(opcode=opcode, form=form, kernels=kernels,
                  terms={} if terms is None else terms, commutative=commutative,
                  multiset=multiset, exact_fold=exact_fold, direct=direct,
                  direct_domains=direct_domains)

    def numpy(self, *arrays: np.ndarray, **params: Any) -> np.ndarray:
        """The op on numpy arrays (broadcast together), by the family of its operands' type
        (select: of its values). NotDefined if the op has no kernel for that family."""
        dtype = arrays[1 if self.form is Form.SELECT else 0].dtype
        kernel = self.kernels.get(domain_of(dtype))
        if kernel is None:
            raise NotDefined(f"for element type {element_type_of(dtype).spelling}")
        return kernel(*arrays, **params)

    @property
    def float_function(self) -> Callable[..., np.ndarray] | None:
        """The one function the float kernel applies (after the precision rule): the place a
        transcendental's algorithm is chosen."""
        return getattr(self.kernels.get(Domain.FLOAT), "function", None)

    @property
    def direct_dtypes(self) -> tuple[np.dtype, ...]:
        """The dtypes on which ``direct`` computes the kernel bit for bit."""
        return tuple(d for domain in self.direct_domains for d in DIRECT_DTYPES[domain])

    def models(self, et: ElementType) -> bool:
        """True if ``term`` models the op exactly on operands of type ``et``."""
        sort = _sort_or_none(et)
        return sort is not None and sort in self.terms and domain_of_type(et) in self.kernels

    def term(self, et: ElementType, *operands: Any, **params: Any) -> Any:
        """The op's z3 term on operands of element type ``et`` (select: the values' type;
        convert: the source type), each operand a term of ``sort_of(et)`` (select's predicate
        a Bool). NotDefined where z3 does not model the op exactly."""
        sort = sort_of(et)
        builder = self.terms.get(sort)
        if builder is None:
            raise NotDefined(f"no exact z3 model for {self.opcode.spelling} on {et.spelling}")
        if sort is Sort.BITS:
            return builder(et.is_signed, *operands, **params)
        return builder(*operands, **params)

    def bits_term(self, signed: bool, *operands: Any, **params: Any) -> Any:
        """The op's term on bit-vector operands of any width (integers read as ``signed``)."""
        builder = self.terms.get(Sort.BITS)
        if builder is None:
            raise NotDefined(f"no exact z3 model for {self.opcode.spelling} on integers")
        return builder(signed, *operands, **params)

    def bool_term(self, *operands: Any, **params: Any) -> Any:
        """The op's term on Bool operands (pred)."""
        builder = self.terms.get(Sort.BOOL)
        if builder is None:
            raise NotDefined(f"no exact z3 model for {self.opcode.spelling} on pred")
        return builder(*operands, **params)


# --- kernel builders: one family's conventions around a function ---------------------------------

def _float(fn: Callable[..., np.ndarray], *, exact: bool = True) -> Kernel:
    """A float kernel: ``fn`` under ``float_math``'s precision rule (``exact=False``: f32
    through f64), the result rounded once to the operands' type."""

    def kernel(*arrays: np.ndarray, **params: Any) -> np.ndarray:
        out = fk.float_math(partial(fn, **params) if params else fn, *arrays, exact=exact)
        dtype = arrays[0].dtype
        return out if out.dtype == dtype else out.astype(dtype)

    kernel.function = fn  # type: ignore[attr-defined]
    return kernel


class _Transcendental:
    """The float kernel of a ``neuron_sim.numerics`` function: f64 in f64; f32 (and bf16 / f16
    through f32) evaluated in f64 and rounded once to f32, as the numerics are built for. On
    f32 and f64 it is also the row's ``direct`` callable: it takes ``out=`` like a ufunc, so the
    interpreter can write a large result into an operand's dead buffer.

    The function is named, and ``neuron_sim.numerics`` imported when it is first needed: a
    program without a transcendental does not load the seven modules of kernels."""

    def __init__(self, name: str, nin: int) -> None:
        self.name = name
        self.nin = nin
        self._function: Callable[..., np.ndarray] | None = None

    @property
    def function(self) -> Callable[..., np.ndarray]:
        """``neuron_sim.numerics.transcendental``'s function of this name."""
        if self._function is None:
            from neuron_sim.numerics import transcendental

            self._function = getattr(transcendental, self.name)
        return self._function

    def __call__(self, *arrays: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        result = fk.float_math(self.function, *arrays, out=out)
        dtype = arrays[0].dtype
        return result if result.dtype == dtype else result.astype(dtype)


def _transcendental(name: str, nin: int = 1) -> Kernel:
    """A ``_Transcendental`` kernel of the ``neuron_sim.numerics`` function ``name`` (``nin``
    operands)."""
    return _Transcendental(name, nin)


def _int(fn: Callable[..., np.ndarray], *, typed: bool = False) -> Kernel:
    """An integer kernel: ``fn`` on the operands in their work dtype (``typed``: with the
    element type first), wrapped back to the type's width."""

    def kernel(*arrays: np.ndarray, **params: Any) -> np.ndarray:
        dtype = arrays[0].dtype
        work = int_work_dtype(dtype)
        operands = [a.astype(work, copy=False) for a in arrays]
        out = fn(element_type_of(dtype), *operands, **params) if typed else \
            fn(*operands, **params)
        return wrap_int(out, dtype)

    return kernel


def _row(opcode: Opcode, *, form: Form = Form.SAME, float: Kernel | None = None,
         int: Kernel | None = None, complex: Kernel | None = None, pred: Kernel | None = None,
         fp: TermBuilder | None = None, bits: TermBuilder | None = None,
         boolean: TermBuilder | None = None, **facts: Any) -> ElementwiseDefinition:
    kernels = {domain: k for domain, k in ((Domain.FLOAT, float), (Domain.INT, int),
                                           (Domain.COMPLEX, complex), (Domain.PRED, pred))
               if k is not None}
    terms = {sort: t for sort, t in ((Sort.FLOAT, fp), (Sort.BITS, bits), (Sort.BOOL, boolean))
             if t is not None}
    if isinstance(float, _Transcendental) and "direct" not in facts:
        facts = {**facts, "direct": float, "direct_domains": (Domain.FLOAT,)}
    return ElementwiseDefinition(opcode, form, kernels, terms, **facts)


def _reduction(*exact: Domain) -> dict[str, Any]:
    """The facts of an op a reduction may combine in any order."""
    return {"commutative": True, "multiset": True, "exact_fold": frozenset(exact)}


# --- the kernels that are more than one function ------------------------------------------------

_NUMPY_DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "GT": np.greater,
                     "LE": np.less_equal, "GE": np.greater_equal}


def _compare(a: np.ndarray, b: np.ndarray, *, direction: str, total_order: bool = False
             ) -> np.ndarray:
    """compare in ``direction``; floats by IEEE, or by TOTALORDER when ``total_order``."""
    op = _NUMPY_DIRECTIONS.get(direction)
    if op is None:
        raise NotDefined(f"no comparison direction {direction!r}")
    domain = domain_of(a.dtype)
    if domain is Domain.FLOAT:
        if total_order:
            return op(fk.total_order_key(a), fk.total_order_key(b))
        if is_narrow_float_type(a.dtype):
            a, b = a.astype(fk.F32), b.astype(fk.F32)
    elif domain is Domain.COMPLEX and direction not in ("EQ", "NE"):
        raise NotDefined(f"compare {direction} is not defined for complex numbers")
    elif domain is Domain.INT:
        work = int_work_dtype(a.dtype)
        a, b = a.astype(work, copy=False), b.astype(work, copy=False)
    return op(a, b)


def _select(pred: np.ndarray, on_true: np.ndarray, on_false: np.ndarray) -> np.ndarray:
    return np.where(pred, on_true, on_false)


def _float_clamp(low: np.ndarray, x: np.ndarray, high: np.ndarray) -> np.ndarray:
    """minimum(hi, maximum(lo, x)) with XLA's NaN and signed-zero rules."""
    low, x, high = np.broadcast_arrays(low, x, high)
    return fk.float_minimum(high, fk.float_maximum(low, x))


def _int_clamp(low: np.ndarray, x: np.ndarray, high: np.ndarray) -> np.ndarray:
    return np.minimum(high, np.maximum(low, x))


def _convert(x: np.ndarray, *, target: ElementType) -> np.ndarray:
    return convert_array(x, target)


def _bitcast(x: np.ndarray, *, target: ElementType) -> np.ndarray:
    """The bits of ``x`` read as ``target``: a narrower type adds a last dimension, a wider one
    consumes the last dimension (its size must be the width ratio)."""
    dtype = target.numpy_dtype
    if element_type_of(x.dtype).bits < 8 or target.bits < 8:
        raise NotDefined("for sub-byte element types")
    source_size, target_size = x.dtype.itemsize, dtype.itemsize
    x = np.ascontiguousarray(x)
    if source_size == target_size:
        return x.view(dtype)
    if source_size > target_size:
        return x.view(dtype).reshape(*x.shape, source_size // target_size)
    ratio = target_size // source_size
    if x.shape[-1] != ratio:
        raise ValueError(f"bitcast-convert to a type {ratio} times wider needs a last "
                         f"dimension of {ratio}, got {x.shape[-1]}")
    return x.view(dtype).reshape(x.shape[:-1])


def _reduce_precision(x: np.ndarray, *, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    if element_type_of(x.dtype) not in (ElementType.F64, ElementType.F32, ElementType.F16,
                                        ElementType.BF16):
        raise NotDefined(f"for {element_type_of(x.dtype).spelling}")
    return fk.reduce_precision_array(x, exponent_bits, mantissa_bits)


def _make_complex(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    """complex(re, im) without arithmetic (inf and NaN parts stay as they are)."""
    real, imag = np.broadcast_arrays(real, imag)
    out = np.empty(real.shape, np.result_type(real.dtype, np.complex64))
    out.real = real
    out.imag = imag
    return out


def _real(x: np.ndarray) -> np.ndarray:
    return x


def _no_imaginary_part(x: np.ndarray) -> np.ndarray:
    return np.zeros_like(x)


def _reciprocal_sqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


def _complex_reciprocal_sqrt(x: np.ndarray) -> np.ndarray:
    return 1 / np.sqrt(x)


def _complex_expm1(x: np.ndarray) -> np.ndarray:
    return np.exp(x) - 1


def _complex_log1p(x: np.ndarray) -> np.ndarray:
    return np.log(1 + x)


def _fp_compare(a: Any, b: Any, *, direction: str, total_order: bool = False,
                bits: tuple[Any, Any] | None = None) -> Any:
    """IEEE compare of FP terms; TOTALORDER needs the operands' bit patterns (``bits``)."""
    if total_order:
        if bits is None:
            raise NotDefined("no exact z3 model for a TOTALORDER compare without the "
                             "operands' bit patterns")
        return zt.fp_total_order_compare(*bits, direction=direction)
    return zt.fp_compare(a, b, direction=direction)


def _bits_select(signed: bool, pred: Any, on_true: Any, on_false: Any) -> Any:
    return zt.select_term(pred, on_true, on_false)


# --- the table -----------------------------------------------------------------------------------

_F, _I, _C, _P = Domain.FLOAT, Domain.INT, Domain.COMPLEX, Domain.PRED

_ROWS = [
    # Unary arithmetic.
    _row(Opcode.ABS, float=_float(np.abs), int=_int(np.abs), complex=fk.complex_abs,
         fp=zt.fp_abs, bits=zt.bv_abs, direct=np.abs, direct_domains=(_F,)),
    _row(Opcode.NEGATE, float=_float(np.negative), int=_int(np.negative), complex=np.negative,
         fp=zt.fp_negate, bits=zt.bv_negate, direct=np.negative, direct_domains=(_F, _I)),
    _row(Opcode.SIGN, float=_float(fk.float_sign), int=_int(np.sign), complex=fk.complex_sign,
         fp=zt.fp_sign, bits=zt.bv_sign),
    _row(Opcode.FLOOR, float=_float(np.floor), fp=zt.fp_floor),
    _row(Opcode.CEIL, float=_float(np.ceil), fp=zt.fp_ceil),
    _row(Opcode.ROUND_NEAREST_AFZ, float=_float(fk.round_half_away), fp=zt.fp_round_nearest_afz),
    _row(Opcode.ROUND_NEAREST_EVEN, float=_float(np.rint), fp=zt.fp_round_nearest_even),
    _row(Opcode.SQRT, float=_float(np.sqrt), complex=np.sqrt, fp=zt.fp_sqrt, direct=np.sqrt,
         direct_domains=(_F,)),
    _row(Opcode.RSQRT, float=_float(_reciprocal_sqrt), complex=_complex_reciprocal_sqrt),
    _row(Opcode.CBRT, float=_transcendental("cbrt")),
    # Transcendentals: one float function each, from neuron_sim.numerics (IEEE basic operations
    # only, so the same bits on every CPU; numpy's own loops are not): f32, bf16 and f16 are
    # evaluated in f64 and rounded to f32 (then to the narrow type), f64 in f64.
    _row(Opcode.EXP, float=_transcendental("exp"), complex=np.exp),
    _row(Opcode.EXPM1, float=_transcendental("expm1"), complex=_complex_expm1),
    _row(Opcode.LOG, float=_transcendental("log"), complex=np.log),
    _row(Opcode.LOG1P, float=_transcendental("log1p"), complex=_complex_log1p),
    _row(Opcode.LOGISTIC, float=_transcendental("logistic"), complex=fk.float_logistic),
    _row(Opcode.TANH, float=_transcendental("tanh"), complex=np.tanh),
    _row(Opcode.SIN, float=_transcendental("sin"), complex=np.sin),
    _row(Opcode.COS, float=_transcendental("cos"), complex=np.cos),
    _row(Opcode.TAN, float=_transcendental("tan"), complex=np.tan),
    _row(Opcode.ERF, float=_transcendental("erf")),
    _row(Opcode.ACOS, float=_transcendental("acos"), complex=np.arccos),
    _row(Opcode.ACOSH, float=_transcendental("acosh"), complex=np.arccosh),
    _row(Opcode.ASIN, float=_transcendental("asin"), complex=np.arcsin),
    _row(Opcode.ASINH, float=_transcendental("asinh"), complex=np.arcsinh),
    _row(Opcode.ATAN, float=_transcendental("atan"), complex=np.arctan),
    _row(Opcode.ATANH, float=_transcendental("atanh"), complex=np.arctanh),
    _row(Opcode.COSH, float=_transcendental("cosh"), complex=np.cosh),
    _row(Opcode.SINH, float=_transcendental("sinh"), complex=np.sinh),
    # Bits.
    _row(Opcode.NOT, int=_int(np.invert), pred=np.logical_not, bits=zt.bv_not,
         boolean=zt.bool_not, direct=np.invert, direct_domains=(_I,)),
    _row(Opcode.POPCNT, int=_int(ik.int_popcount, typed=True), bits=zt.bv_popcount),
    _row(Opcode.CLZ, int=_int(ik.int_count_leading_zeros, typed=True),
         bits=zt.bv_count_leading_zeros),
    # Parts and classes of values.
    _row(Opcode.IS_FINITE, form=Form.PREDICATE, float=fk.is_finite, fp=zt.fp_is_finite),
    _row(Opcode.REAL, form=Form.OTHER, complex=np.real, float=_real, int=_real),
    _row(Opcode.IMAG, form=Form.OTHER, complex=np.imag, float=_no_imaginary_part,
         int=_no_imaginary_part),
    _row(Opcode.COMPLEX, form=Form.OTHER, float=_make_complex),
    # Binary arithmetic.
    _row(Opcode.ADD, float=_float(np.add), int=_int(np.add), complex=fk.complex_add,
         pred=np.logical_or, fp=zt.fp_add, bits=zt.bv_add, boolean=zt.bool_or,
         direct=np.add, direct_domains=(_F, _I), **_reduction(_I, _P)),
    _row(Opcode.SUBTRACT, float=_float(np.subtract), int=_int(np.subtract),
         complex=fk.complex_subtract, fp=zt.fp_subtract, bits=zt.bv_subtract, direct=np.subtract,
         direct_domains=(_F, _I)),
    _row(Opcode.MULTIPLY, float=_float(np.multiply), int=_int(np.multiply),
         complex=fk.complex_multiply, pred=np.logical_and, fp=zt.fp_multiply, bits=zt.bv_multiply,
         boolean=zt.bool_and, direct=np.multiply, direct_domains=(_F, _I),
         **_reduction(_I, _P)),
    _row(Opcode.DIVIDE, float=_float(np.divide), int=_int(ik.int_divide, typed=True),
         complex=np.divide, fp=zt.fp_divide, bits=zt.bv_divide, direct=np.divide,
         direct_domains=(_F,)),
    _row(Opcode.REMAINDER, float=_float(np.fmod), int=_int(ik.int_remainder, typed=True),
         bits=zt.bv_remainder),
    _row(Opcode.POWER, float=_transcendental("power", 2), int=_int(ik.int_power, typed=True),
         complex=np.power),
    _row(Opcode.MAXIMUM, float=_float(fk.xla_maximum), int=_int(np.maximum),
         pred=np.logical_or, fp=zt.fp_maximum, bits=zt.bv_maximum, boolean=zt.bool_or,
         **_reduction(_F, _I, _P)),
    _row(Opcode.MINIMUM, float=_float(fk.xla_minimum), int=_int(np.minimum),
         pred=np.logical_and, fp=zt.fp_minimum, bits=zt.bv_minimum, boolean=zt.bool_and,
         **_reduction(_F, _I, _P)),
    _row(Opcode.ATAN2, float=_transcendental("atan2", 2)),
    _row(Opcode.MULHI, int=_int(ik.int_mulhi, typed=True), bits=zt.bv_mulhi),
    _row(Opcode.AND, int=_int(np.bitwise_and), pred=np.logical_and, bits=zt.bv_and,
         boolean=zt.bool_and, direct=np.bitwise_and, direct_domains=(_I,),
         **_reduction(_I, _P)),
    _row(Opcode.OR, int=_int(np.bitwise_or), pred=np.logical_or, bits=zt.bv_or,
         boolean=zt.bool_or, direct=np.bitwise_or, direct_domains=(_I,),
         **_reduction(_I, _P)),
    _row(Opcode.XOR, int=_int(np.bitwise_xor), pred=np.logical_xor, bits=zt.bv_xor,
         boolean=zt.bool_xor, direct=np.bitwise_xor, direct_domains=(_I,),
         **_reduction(_I, _P)),
    _row(Opcode.SHIFT_LEFT, int=_int(ik.int_shift_left, typed=True), bits=zt.bv_shift_left),
    _row(Opcode.SHIFT_RIGHT_LOGICAL, int=_int(ik.int_shift_right_logical, typed=True),
         bits=zt.bv_shift_right_logical),
    _row(Opcode.SHIFT_RIGHT_ARITHMETIC, int=_int(ik.int_shift_right_arithmetic, typed=True),
         bits=zt.bv_shift_right_arithmetic),
    # Compare, select, clamp.
    _row(Opcode.COMPARE, form=Form.COMPARE, float=_compare, int=_compare, complex=_compare,
         pred=_compare, fp=_fp_compare, bits=zt.bv_compare, boolean=zt.bool_compare),
    _row(Opcode.SELECT, form=Form.SELECT, float=_select, int=_select, complex=_select,
         pred=_select, fp=zt.select_term, bits=_bits_select, boolean=zt.select_term),
    _row(Opcode.CLAMP, float=_float_clamp, int=_int(_int_clamp), pred=_int_clamp,
         fp=zt.fp_clamp, bits=zt.bv_clamp, boolean=zt.bool_clamp),
    # Conversions.
    _row(Opcode.CONVERT, form=Form.CONVERT, float=_convert, int=_convert, complex=_convert,
         pred=_convert, fp=zt.fp_convert, bits=zt.bv_convert, boolean=zt.bool_convert),
    _row(Opcode.BITCAST_CONVERT, form=Form.OTHER, float=_bitcast, int=_bitcast,
         complex=_bitcast, pred=_bitcast),
    _row(Opcode.REDUCE_PRECISION, float=_reduce_precision),
]

DEFINITIONS: Mapping[Opcode, ElementwiseDefinition] = {row.opcode: row for row in _ROWS}


def definition_of(opcode: Opcode) -> ElementwiseDefinition:
    """The definition of an elementwise opcode (NotDefined for opcodes without one)."""
    try:
        return DEFINITIONS[opcode]
    except KeyError:
        raise NotDefined(f"{opcode.spelling} has no elementwise definition") from None


def is_commutative(opcode: Opcode) -> bool:
    """The op's two operands may be swapped without changing a result (a NaN's payload
    aside, which the verifier does not compare)."""
    row = DEFINITIONS.get(opcode)
    return row is not None and row.commutative


def reduces_as_multiset(opcode: Opcode) -> bool:
    """A reduction by the op is free of order in HLO: its operands form a multiset."""
    row = DEFINITIONS.get(opcode)
    return row is not None and row.multiset


def fold_is_exact(opcode: Opcode, et: ElementType) -> bool:
    """Folding a multiset by the op in any order gives the same bits for type ``et``."""
    row = DEFINITIONS.get(opcode)
    return row is not None and et.is_array_type and domain_of_type(et) in row.exact_fold
