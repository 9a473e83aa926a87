"""Each elementwise definition's numpy kernel and z3 term compute the same bits.

For every (op, element type) pair whose definition has a z3 term (``ElementwiseDefinition.
models``), the kernel runs on sampled and edge inputs — 0, -0, ±1, the type's limits, NaNs
with payloads and signs, ±inf, denormals, values near overflow, halves for the roundings,
division by zero, INT_MIN / -1, shift amounts at and past the width — and z3 evaluates the
same row's term on the same inputs (the term is built once on variables, the inputs
substituted, one ``z3.simplify`` per pair on all of them concatenated). The results must have
equal bits; two NaNs count as equal because z3's FP theory has one NaN
(``NAN_PAYLOADS_MODELLED``). Neither side is the reference: they are two encodings of one
definition written independently (numpy arrays, SMT-LIB bit-vector and FP semantics), so a
disagreement is a bug in one of them, decided by docs/semantics.md §4.

The file is named apart from tests/verify/test_differential.py: test modules share one
namespace here.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import pytest
import z3

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.semantics.element_kinds import Domain
from neuron_sim.semantics.elementwise import (DEFINITIONS, NAN_PAYLOADS_MODELLED, Form, Sort,
                                              fold_is_exact, sort_of, z3_types)
from neuron_sim.semantics.z3_terms import FLOAT_FORMATS

RANDOM_SAMPLES = 32
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


# --- inputs -----------------------------------------------------------------------------------

def _int_edges(et: ElementType, pairs: bool = False) -> list[int]:
    """Bit patterns: 0, ±1, ±2, the limits and their neighbours, the width and past it (shift
    amounts), alternating bits (fewer when drawn in pairs)."""
    w = et.bits
    mask = (1 << w) - 1
    low, high = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if et.is_signed else (0, mask)
    values = {0, 1, 2, -1, -2, low, high, low + 1, w, w + 1, 2 * w, 0x5555555555555555}
    if not pairs:
        values |= {3, 7, high - 1, w - 1, 0xAAAAAAAAAAAAAAAA, 1 << (w - 1)}
    return sorted({v & mask for v in values})


def _float_edges(et: ElementType) -> list[int]:
    """Bit patterns: ±0, ±1, halves, the smallest and largest denormals, the smallest normal,
    the largest finite and values near it, ±inf, quiet and signalling NaNs with payloads of
    either sign."""
    exponent, significand = FLOAT_FORMATS[et]
    mantissa = significand - 1
    bias = (1 << (exponent - 1)) - 1
    sign = 1 << (exponent + mantissa)
    inf = ((1 << exponent) - 1) << mantissa
    quiet = 1 << (mantissa - 1)

    def value(e: int, m: int = 0) -> int:
        return ((e + bias) << mantissa) | m

    # 0, denormals, the smallest normal, 1, 0.5, 1.5, 2.5 (halves for the roundings), 3, 8,
    # the largest finite and its neighbours, an integer at the precision's edge, inf, NaNs
    positives = [0, 1, (1 << mantissa) - 1, value(1 - bias), value(0), value(-1),
                 value(0, quiet), value(1, quiet >> 1), value(1), value(3),
                 value(bias), value(bias, (1 << mantissa) - 1), value(bias - 1),
                 value(mantissa, 1), inf, inf | quiet, inf | quiet | 5, inf | 1]
    return positives + [p | sign for p in positives]


def _binary_float_edges(et: ElementType) -> list[int]:
    """The edges a pair of floats is drawn from: fewer of each kind than for one float."""
    edges = _float_edges(et)
    half = len(edges) // 2
    keep = (0, 1, 3, 4, 5, 6, 8, 10, 11, 14, 15, 16)
    return [edges[i] for i in keep] + [edges[half + i] for i in keep]


def _edges(et: ElementType) -> list[int]:
    if et is ElementType.PRED:
        return [0, 1]
    return _float_edges(et) if et.is_float else _int_edges(et)


def _random_patterns(et: ElementType, count: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    width = 1 if et is ElementType.PRED else et.bits
    patterns = rng.integers(0, 1 << min(width, 63), count, dtype=np.int64).tolist()
    if width == 64:
        patterns = [p | (int(h) << 63) for p, h in zip(patterns, rng.integers(0, 2, count))]
    if et.is_float:  # also finite values of ordinary size, which random bits rarely give
        finite = rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, count)
        patterns += [_bits_of(np.asarray([v]).astype(et.numpy_dtype))[0] for v in finite]
    return patterns


def operand_tuples(et: ElementType, arity: int, seed: int) -> list[tuple[int, ...]]:
    """Every combination of edge patterns (fewer for three operands) and random ones."""
    if arity == 1 or et is ElementType.PRED:
        edges = _edges(et)
    else:
        edges = _binary_float_edges(et) if et.is_float else _int_edges(et, pairs=True)
    if arity == 3:
        edges = edges[::3] + edges[-2:]
    tuples = list(itertools.product(edges, repeat=arity))
    randoms = _random_patterns(et, RANDOM_SAMPLES * arity, seed)
    tuples += list(zip(*(randoms[i::arity] for i in range(arity))))
    return tuples


def _array(et: ElementType, patterns: list[int]) -> np.ndarray:
    if et is ElementType.PRED:
        return np.asarray(patterns, dtype=bool)
    if et.is_integral:
        mask, w = (1 << et.bits) - 1, et.bits
        values = [(p & mask) - ((p & mask) >> (w - 1) << w) if et.is_signed else p & mask
                  for p in patterns]
        return np.asarray(values, dtype=np.int64 if et.is_signed else np.uint64).astype(
            et.numpy_dtype)
    return np.asarray(patterns, dtype=np.uint64).astype(f"u{et.bits // 8}").view(
        et.numpy_dtype)


def _bits_of(array: np.ndarray) -> list[int]:
    """The bit pattern of every element (0/1 for pred, the type's width for integers)."""
    array = np.asarray(array)
    if array.dtype == np.bool_:
        return [int(v) for v in array.reshape(-1)]
    et = ElementType.from_numpy(array.dtype)
    if et.is_integral:
        mask = (1 << et.bits) - 1
        return [int(v) & mask for v in array.reshape(-1).astype(np.int64).tolist()] \
            if et.is_signed or et.bits < 64 else [int(v) for v in array.reshape(-1).tolist()]
    return [int(v) for v in np.ascontiguousarray(array).reshape(-1).view(
        f"u{array.dtype.itemsize}").tolist()]


# --- z3 side ----------------------------------------------------------------------------------

def _variable(et: ElementType, name: str) -> tuple[z3.ExprRef, z3.ExprRef]:
    """(the operand as its sort, the bit-vector it is read from)."""
    if et is ElementType.PRED:
        bit = z3.BitVec(name, 1)
        return bit == 1, bit
    width = et.bits
    bits = z3.BitVec(name, width)
    if et.is_float:
        return z3.fpBVToFP(bits, z3.FPSort(*FLOAT_FORMATS[et])), bits
    return bits, bits


def _as_bits(term: z3.ExprRef) -> z3.ExprRef:
    if z3.is_bool(term):
        return z3.If(term, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1))
    if z3.is_fp(term):  # z3 gives no bits for its NaN: a quiet NaN stands for it
        exponent, significand = term.sort().ebits(), term.sort().sbits()
        nan = (((1 << exponent) - 1) << (significand - 1)) | (1 << (significand - 2))
        return z3.If(z3.fpIsNaN(term), z3.BitVecVal(nan, exponent + significand),
                     z3.fpToIEEEBV(term))
    return term


def z3_results(term: z3.ExprRef, bits: list[z3.ExprRef], widths: list[int],
               tuples: list[tuple[int, ...]]) -> list[int]:
    """The term's result bits on every operand tuple: substituted, concatenated, one
    simplify."""
    result = _as_bits(term)
    width = result.size()
    pieces = [z3.substitute(result, *[(b, z3.BitVecVal(p, w)) for b, p, w
                                      in zip(bits, values, widths)]) for values in tuples]
    total = z3.simplify(z3.Concat(*pieces) if len(pieces) > 1 else pieces[0])
    assert z3.is_bv_value(total), f"z3 left a term unevaluated: {str(total)[:200]}"
    number = int(z3.Z3_get_numeral_binary_string(total.ctx_ref(), total.as_ast()), 2)
    mask = (1 << width) - 1
    return [(number >> (width * (len(pieces) - 1 - i))) & mask for i in range(len(pieces))]


# --- comparing ----------------------------------------------------------------------------------

def _is_nan(pattern: int, et: ElementType) -> bool:
    if not (et and et.is_float):
        return False
    exponent, significand = FLOAT_FORMATS[et]
    mantissa = significand - 1
    inf = ((1 << exponent) - 1) << mantissa
    return (pattern & inf) == inf and pattern & ((1 << mantissa) - 1) != 0


def assert_same_bits(definition, result_type, tuples, numpy_bits, z3_bits, label):
    mismatches = []
    for values, n, z in zip(tuples, numpy_bits, z3_bits):
        if n == z:
            continue
        if not NAN_PAYLOADS_MODELLED and _is_nan(n, result_type) and _is_nan(z, result_type):
            continue
        mismatches.append((tuple(hex(v) for v in values), hex(n), hex(z)))
    assert not mismatches, (f"{definition.opcode.spelling} {label}: numpy and z3 differ on "
                            f"{len(mismatches)} of {len(tuples)} inputs, e.g. (inputs, numpy, "
                            f"z3) {mismatches[:4]}")


# --- the pairs ------------------------------------------------------------------------------------

def _arity(definition) -> int:
    opcode = definition.opcode
    return {Form.SELECT: 3, Form.COMPARE: 2, Form.CONVERT: 1, Form.PREDICATE: 1}.get(
        definition.form, opcode.arity)


def _cases() -> list[tuple]:
    """(opcode, operand type, parameters) for every pair a definition models in z3."""
    cases = []
    for opcode, definition in DEFINITIONS.items():
        for sort in definition.terms:
            for et in z3_types(sort):
                if not definition.models(et):
                    continue
                if definition.form is Form.COMPARE:
                    cases += [(opcode, et, (("direction", d),)) for d in DIRECTIONS]
                    if et.is_float:
                        cases += [(opcode, et, (("direction", d), ("total_order", True)))
                                  for d in DIRECTIONS]
                elif definition.form is Form.CONVERT and sort is Sort.FLOAT:
                    cases += [(opcode, et, (("target", t),)) for t in z3_types(Sort.FLOAT)]
                elif definition.form is Form.CONVERT:
                    cases += [(opcode, et, (("target", t),)) for t in z3_types(Sort.BITS)
                              + z3_types(Sort.BOOL)]
                else:
                    cases.append((opcode, et, ()))
    return cases


CASES = _cases()


def _case_id(case: tuple) -> str:
    opcode, et, params = case
    extra = "-".join(str(v) if not isinstance(v, bool) else k for k, v in params)
    return f"{opcode.spelling}-{et}" + (f"-{extra}" if extra else "")


def _result_type(definition, et: ElementType, params: dict) -> ElementType:
    if definition.form in (Form.COMPARE, Form.PREDICATE):
        return ElementType.PRED
    if definition.form is Form.CONVERT:
        return params["target"]
    return et


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_numpy_kernel_and_z3_term_agree(case):
    opcode, et, params = case
    params = dict(params)
    definition = DEFINITIONS[opcode]
    arity = _arity(definition)
    operand_types = [ElementType.PRED] + [et] * 2 if definition.form is Form.SELECT \
        else [et] * arity
    seed = hash((opcode.spelling, et.spelling)) & 0xFFFF
    if definition.form is Form.SELECT:  # the predicate alternates over the value pairs
        tuples = [(i % 2, a, b) for i, (a, b) in enumerate(operand_tuples(et, 2, seed))]
    else:
        tuples = operand_tuples(et, arity, seed)
    arrays = [_array(t, [v[i] for v in tuples]) for i, t in enumerate(operand_types)]
    with np.errstate(all="ignore"):
        numpy_bits = _bits_of(definition.numpy(*arrays, **params))

    variables = [_variable(t, f"x{i}") for i, t in enumerate(operand_types)]
    operands = [v[0] for v in variables]
    term_params = dict(params)
    if params.get("total_order"):
        term_params["bits"] = tuple(v[1] for v in variables)
    term = definition.term(et, *operands, **term_params)
    widths = [1 if t is ElementType.PRED else t.bits for t in operand_types]
    z3_bits = z3_results(term, [v[1] for v in variables], widths, tuples)
    assert_same_bits(definition, _result_type(definition, et, params), tuples, numpy_bits,
                     z3_bits, _case_id(case))


def test_the_pairs_cover_every_sort_and_the_ops_today_s_proofs_use():
    """The z3 side models at least what the two proofs modelled before the definitions: the
    float basic operations, maximum / minimum, compare and select; the integer arithmetic,
    bit operations, shifts, division, compare, select, clamp and convert; pred logic."""
    modelled = {(opcode, et) for opcode, et, _ in CASES}
    floats = (ElementType.F16, ElementType.BF16, ElementType.F32, ElementType.F64)
    for op in (Opcode.ADD, Opcode.SUBTRACT, Opcode.MULTIPLY, Opcode.DIVIDE, Opcode.SQRT,
               Opcode.NEGATE, Opcode.ABS, Opcode.MAXIMUM, Opcode.MINIMUM, Opcode.COMPARE,
               Opcode.SELECT):
        assert all((op, et) in modelled for et in floats), op
    ints = [et for et in ElementType if et.is_integral]
    for op in (Opcode.ADD, Opcode.SUBTRACT, Opcode.MULTIPLY, Opcode.NEGATE, Opcode.ABS,
               Opcode.DIVIDE, Opcode.REMAINDER, Opcode.MAXIMUM, Opcode.MINIMUM, Opcode.AND,
               Opcode.OR, Opcode.XOR, Opcode.NOT, Opcode.SHIFT_LEFT,
               Opcode.SHIFT_RIGHT_LOGICAL, Opcode.SHIFT_RIGHT_ARITHMETIC, Opcode.COMPARE,
               Opcode.SELECT, Opcode.CLAMP, Opcode.CONVERT):
        assert all((op, et) in modelled for et in ints), op
    for op in (Opcode.AND, Opcode.OR, Opcode.XOR, Opcode.NOT, Opcode.COMPARE, Opcode.SELECT):
        assert (op, ElementType.PRED) in modelled, op


# --- the symbolic facts ---------------------------------------------------------------------------

def _fact_types(domains) -> list[ElementType]:
    chosen = {Domain.FLOAT: [ElementType.F32, ElementType.BF16],
              Domain.INT: [ElementType.S8, ElementType.U32, ElementType.S4],
              Domain.PRED: [ElementType.PRED]}
    return [et for d in domains for et in chosen.get(d, [])]


def _same_up_to_nan(a: np.ndarray, b: np.ndarray) -> bool:
    a_bits, b_bits = _bits_of(a), _bits_of(b)
    et = None if a.dtype == np.bool_ else ElementType.from_numpy(a.dtype)
    return all(x == y or (_is_nan(x, et) and _is_nan(y, et)) for x, y in zip(a_bits, b_bits))


@pytest.mark.parametrize("opcode", [op for op, d in DEFINITIONS.items() if d.commutative],
                         ids=lambda op: op.spelling)
def test_commutative_ops_ignore_operand_order(opcode):
    """The symbolic normal form orders a commutative op's operands: swapping them must not
    change a result (a NaN's payload aside, which the verifier does not compare)."""
    definition = DEFINITIONS[opcode]
    for et in _fact_types(definition.kernels):
        tuples = operand_tuples(et, 2, 1)
        a, b = (_array(et, [t[i] for t in tuples]) for i in (0, 1))
        with np.errstate(all="ignore"):
            assert _same_up_to_nan(definition.numpy(a, b), definition.numpy(b, a)), et


@pytest.mark.parametrize("opcode", [op for op, d in DEFINITIONS.items() if d.exact_fold],
                         ids=lambda op: op.spelling)
def test_exact_folds_are_associative(opcode):
    """Where ``fold_is_exact`` says z3 may fold a multiset in its own order, (a op b) op c
    equals a op (b op c) on every sampled triple."""
    definition = DEFINITIONS[opcode]
    for et in _fact_types(definition.exact_fold):
        assert fold_is_exact(opcode, et)
        tuples = operand_tuples(et, 3, 2)
        a, b, c = (_array(et, [t[i] for t in tuples]) for i in range(3))
        with np.errstate(all="ignore"):
            left = definition.numpy(definition.numpy(a, b), c)
            right = definition.numpy(a, definition.numpy(b, c))
        assert _same_up_to_nan(left, right), et


def test_a_float_sum_is_no_exact_fold():
    """(1 + 2^24) - ... in f32: (2^24 + 1) + 1 rounds twice to 2^24, 2^24 + (1 + 1) is
    2^24 + 2: the order changes the bits, so z3 must not pick one."""
    assert not fold_is_exact(Opcode.ADD, ElementType.F32)
    add = DEFINITIONS[Opcode.ADD]
    big, one = np.float32(2 ** 24), np.float32(1)
    left = add.numpy(add.numpy(np.asarray(big), np.asarray(one)), np.asarray(one))
    right = add.numpy(np.asarray(big), add.numpy(np.asarray(one), np.asarray(one)))
    assert left == big and right == big + 2


@lru_cache(maxsize=None)
def _sorts() -> dict[Sort, int]:
    return {sort: sum(1 for _, et, _ in CASES if sort_of(et) is sort) for sort in Sort}


def test_every_sort_has_pairs():
    assert all(count > 0 for count in _sorts().values()), _sorts()


@pytest.mark.parametrize("opcode", [Opcode.EXP, Opcode.EXPM1, Opcode.LOG, Opcode.LOG1P,
                                    Opcode.LOGISTIC, Opcode.TANH, Opcode.SIN, Opcode.COS,
                                    Opcode.TAN, Opcode.ERF, Opcode.CBRT, Opcode.RSQRT,
                                    Opcode.ATAN2, Opcode.POWER, Opcode.ACOS, Opcode.ASINH],
                         ids=lambda op: op.spelling)
def test_a_transcendental_s_float_kernel_is_one_function(opcode):
    """Swapping a transcendental's algorithm is replacing one function: the float kernel
    applies ``float_function`` and nothing else but the precision rule. exp(1) in f32 is
    2.7182817 (e = 2.71828182..., the nearest f32); f64 goes straight through the function."""
    definition = DEFINITIONS[opcode]
    function = definition.float_function
    assert callable(function)
    x = np.asarray([0.5, 1.0, 0.25])
    args = (x, x) if opcode.arity == 2 else (x,)
    with np.errstate(all="ignore"):
        assert np.array_equal(definition.numpy(*args), function(*args), equal_nan=True)
    if opcode is Opcode.EXP:
        assert definition.numpy(np.asarray([1.0], np.float32))[0] == np.float32(2.7182817)
