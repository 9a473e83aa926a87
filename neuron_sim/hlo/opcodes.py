"""The one opcode table: every HLO opcode XLA has, with its text spelling, arity and category.

Everything that needs to know about an opcode (parser, printer, checker, interpreter, passes) looks
it up here; no other module keeps its own list of opcode spellings.
"""

from __future__ import annotations

import enum

VARIADIC = -1


class Category(enum.Enum):
    """Coarse families used to dispatch and to describe opcodes to users."""

    UNARY = "elementwise unary"
    BINARY = "elementwise binary"
    TERNARY = "elementwise ternary"
    SOURCE = "source"  # produces a value from no data operand
    SHAPE = "data movement"
    REDUCTION = "reduction"
    LINALG = "linear algebra"
    CONTROL = "control flow"
    COLLECTIVE = "collective"
    ASYNC = "async"
    RANDOM = "random"
    IO = "io"
    OTHER = "other"


class Opcode(enum.Enum):
    """An HLO opcode. ``value`` is the text spelling; ``arity`` is -1 for variadic."""

    # name                        spelling                     arity     category
    ABS = ("abs", 1, Category.UNARY)
    ACOS = ("acos", 1, Category.UNARY)
    ACOSH = ("acosh", 1, Category.UNARY)
    ADD = ("add", 2, Category.BINARY)
    ADD_DEPENDENCY = ("add-dependency", 2, Category.OTHER)
    AFTER_ALL = ("after-all", VARIADIC, Category.SOURCE)
    ALL_GATHER = ("all-gather", VARIADIC, Category.COLLECTIVE)
    ALL_GATHER_DONE = ("all-gather-done", 1, Category.ASYNC)
    ALL_GATHER_START = ("all-gather-start", VARIADIC, Category.ASYNC)
    ALL_REDUCE = ("all-reduce", VARIADIC, Category.COLLECTIVE)
    ALL_REDUCE_DONE = ("all-reduce-done", 1, Category.ASYNC)
    ALL_REDUCE_START = ("all-reduce-start", VARIADIC, Category.ASYNC)
    ALL_TO_ALL = ("all-to-all", VARIADIC, Category.COLLECTIVE)
    AND = ("and", 2, Category.BINARY)
    ASIN = ("asin", 1, Category.UNARY)
    ASINH = ("asinh", 1, Category.UNARY)
    ASYNC_DONE = ("async-done", 1, Category.ASYNC)
    ASYNC_START = ("async-start", VARIADIC, Category.ASYNC)
    ASYNC_UPDATE = ("async-update", VARIADIC, Category.ASYNC)
    ATAN = ("atan", 1, Category.UNARY)
    ATAN2 = ("atan2", 2, Category.BINARY)
    ATANH = ("atanh", 1, Category.UNARY)
    BATCH_NORM_GRAD = ("batch-norm-grad", 5, Category.OTHER)
    BATCH_NORM_INFERENCE = ("batch-norm-inference", 5, Category.OTHER)
    BATCH_NORM_TRAINING = ("batch-norm-training", 3, Category.OTHER)
    BITCAST = ("bitcast", 1, Category.SHAPE)
    BITCAST_CONVERT = ("bitcast-convert", 1, Category.UNARY)
    BROADCAST = ("broadcast", 1, Category.SHAPE)
    CALL = ("call", VARIADIC, Category.CONTROL)
    CBRT = ("cbrt", 1, Category.UNARY)
    CEIL = ("ceil", 1, Category.UNARY)
    CHOLESKY = ("cholesky", 1, Category.LINALG)
    CLAMP = ("clamp", 3, Category.TERNARY)
    CLZ = ("count-leading-zeros", 1, Category.UNARY)
    COLLECTIVE_BROADCAST = ("collective-broadcast", VARIADIC, Category.COLLECTIVE)
    COLLECTIVE_PERMUTE = ("collective-permute", VARIADIC, Category.COLLECTIVE)
    COLLECTIVE_PERMUTE_DONE = ("collective-permute-done", 1, Category.ASYNC)
    COLLECTIVE_PERMUTE_START = ("collective-permute-start", VARIADIC, Category.ASYNC)
    COLLECTIVE_REDUCE = ("collective-reduce", VARIADIC, Category.COLLECTIVE)
    COMPARE = ("compare", 2, Category.BINARY)
    COMPLEX = ("complex", 2, Category.BINARY)
    CONCATENATE = ("concatenate", VARIADIC, Category.SHAPE)
    CONDITIONAL = ("conditional", VARIADIC, Category.CONTROL)
    CONSTANT = ("constant", 0, Category.SOURCE)
    CONVERT = ("convert", 1, Category.UNARY)
    CONVOLUTION = ("convolution", VARIADIC, Category.LINALG)
    COPY = ("copy", 1, Category.SHAPE)
    COPY_DONE = ("copy-done", 1, Category.ASYNC)
    COPY_START = ("copy-start", 1, Category.ASYNC)
    COS = ("cosine", 1, Category.UNARY)
    COSH = ("cosh", 1, Category.UNARY)
    CUSTOM_CALL = ("custom-call", VARIADIC, Category.OTHER)
    DIVIDE = ("divide", 2, Category.BINARY)
    DOMAIN = ("domain", 1, Category.OTHER)
    DOT = ("dot", VARIADIC, Category.LINALG)
    DYNAMIC_RESHAPE = ("dynamic-reshape", VARIADIC, Category.SHAPE)
    DYNAMIC_SLICE = ("dynamic-slice", VARIADIC, Category.SHAPE)
    DYNAMIC_UPDATE_SLICE = ("dynamic-update-slice", VARIADIC, Category.SHAPE)
    ERF = ("erf", 1, Category.UNARY)
    EXP = ("exponential", 1, Category.UNARY)
    EXPM1 = ("exponential-minus-one", 1, Category.UNARY)
    FFT = ("fft", 1, Category.LINALG)
    FLOOR = ("floor", 1, Category.UNARY)
    FUSION = ("fusion", VARIADIC, Category.CONTROL)
    GATHER = ("gather", 2, Category.SHAPE)
    GET_DIMENSION_SIZE = ("get-dimension-size", 1, Category.OTHER)
    GET_TUPLE_ELEMENT = ("get-tuple-element", 1, Category.SHAPE)
    IMAG = ("imag", 1, Category.UNARY)
    INFEED = ("infeed", 1, Category.IO)
    IOTA = ("iota", 0, Category.SOURCE)
    IS_FINITE = ("is-finite", 1, Category.UNARY)
    LOG = ("log", 1, Category.UNARY)
    LOG1P = ("log-plus-one", 1, Category.UNARY)
    LOGISTIC = ("logistic", 1, Category.UNARY)
    MAP = ("map", VARIADIC, Category.CONTROL)
    MAXIMUM = ("maximum", 2, Category.BINARY)
    MINIMUM = ("minimum", 2, Category.BINARY)
    MULHI = ("mulhi", 2, Category.BINARY)
    MULTIPLY = ("multiply", 2, Category.BINARY)
    NEGATE = ("negate", 1, Category.UNARY)
    NOT = ("not", 1, Category.UNARY)
    OPTIMIZATION_BARRIER = ("opt-barrier", 1, Category.OTHER)
    OR = ("or", 2, Category.BINARY)
    OUTFEED = ("outfeed", 2, Category.IO)
    PAD = ("pad", 2, Category.SHAPE)
    PARAMETER = ("parameter", 0, Category.SOURCE)
    PARTITION_ID = ("partition-id", 0, Category.SOURCE)
    POPCNT = ("popcnt", 1, Category.UNARY)
    POWER = ("power", 2, Category.BINARY)
    RAGGED_ALL_TO_ALL = ("ragged-all-to-all", 6, Category.COLLECTIVE)
    RAGGED_DOT = ("ragged-dot", 3, Category.LINALG)
    REAL = ("real", 1, Category.UNARY)
    RECV = ("recv", 1, Category.IO)
    RECV_DONE = ("recv-done", 1, Category.IO)
    REDUCE = ("reduce", VARIADIC, Category.REDUCTION)
    REDUCE_PRECISION = ("reduce-precision", 1, Category.UNARY)
    REDUCE_SCATTER = ("reduce-scatter", VARIADIC, Category.COLLECTIVE)
    REDUCE_WINDOW = ("reduce-window", VARIADIC, Category.REDUCTION)
    REMAINDER = ("remainder", 2, Category.BINARY)
    REPLICA_ID = ("replica-id", 0, Category.SOURCE)
    RESHAPE = ("reshape", 1, Category.SHAPE)
    REVERSE = ("reverse", 1, Category.SHAPE)
    RNG = ("rng", VARIADIC, Category.RANDOM)
    RNG_BIT_GENERATOR = ("rng-bit-generator", 1, Category.RANDOM)
    RNG_GET_AND_UPDATE_STATE = ("rng-get-and-update-state", 0, Category.RANDOM)
    ROUND_NEAREST_AFZ = ("round-nearest-afz", 1, Category.UNARY)
    ROUND_NEAREST_EVEN = ("round-nearest-even", 1, Category.UNARY)
    RSQRT = ("rsqrt", 1, Category.UNARY)
    SCALED_DOT = ("scaled-dot", 4, Category.LINALG)
    SCAN = ("scan", VARIADIC, Category.CONTROL)
    SCATTER = ("scatter", VARIADIC, Category.SHAPE)
    SELECT = ("select", 3, Category.TERNARY)
    SELECT_AND_SCATTER = ("select-and-scatter", 3, Category.REDUCTION)
    SEND = ("send", 2, Category.IO)
    SEND_DONE = ("send-done", 1, Category.IO)
    SET_DIMENSION_SIZE = ("set-dimension-size", 2, Category.OTHER)
    SHIFT_LEFT = ("shift-left", 2, Category.BINARY)
    SHIFT_RIGHT_ARITHMETIC = ("shift-right-arithmetic", 2, Category.BINARY)
    SHIFT_RIGHT_LOGICAL = ("shift-right-logical", 2, Category.BINARY)
    SHUFFLE = ("shuffle", 1, Category.OTHER)
    SIGN = ("sign", 1, Category.UNARY)
    SIN = ("sine", 1, Category.UNARY)
    SINH = ("sinh", 1, Category.UNARY)
    SLICE = ("slice", 1, Category.SHAPE)
    SORT = ("sort", VARIADIC, Category.REDUCTION)
    SQRT = ("sqrt", 1, Category.UNARY)
    STOCHASTIC_CONVERT = ("stochastic-convert", 2, Category.BINARY)
    SUBTRACT = ("subtract", 2, Category.BINARY)
    TAN = ("tan", 1, Category.UNARY)
    TANH = ("tanh", 1, Category.UNARY)
    TOPK = ("topk", 1, Category.REDUCTION)
    TRANSPOSE = ("transpose", 1, Category.SHAPE)
    TRIANGULAR_SOLVE = ("triangular-solve", 2, Category.LINALG)
    TUPLE = ("tuple", VARIADIC, Category.SHAPE)
    WHILE = ("while", 1, Category.CONTROL)
    XOR = ("xor", 2, Category.BINARY)

    def __init__(self, spelling: str, arity: int, category: Category) -> None:
        self.spelling = spelling
        self.arity = arity
        self.category = category

    def __str__(self) -> str:
        return self.spelling

    @property
    def is_variadic(self) -> bool:
        return self.arity == VARIADIC

    @property
    def is_elementwise(self) -> bool:
        return self.category in (Category.UNARY, Category.BINARY, Category.TERNARY)

    @property
    def is_collective(self) -> bool:
        """True for every op that talks to other devices (sync collectives and async starts)."""
        return self in COLLECTIVE_OPCODES

    @classmethod
    def from_spelling(cls, spelling: str) -> "Opcode":
        """The opcode spelled ``spelling`` in HLO text; KeyError if XLA has no such opcode."""
        return _BY_SPELLING[spelling]


_BY_SPELLING: dict[str, Opcode] = {op.spelling: op for op in Opcode}

# Ops whose replica_groups / source_target_pairs select devices to talk to (each kind's sync op
# and async start; neuron_sim.semantics.collectives describes each kind).
COLLECTIVE_OPCODES = frozenset({
    Opcode.ALL_GATHER, Opcode.ALL_GATHER_START, Opcode.ALL_REDUCE, Opcode.ALL_REDUCE_START,
    Opcode.ALL_TO_ALL, Opcode.RAGGED_ALL_TO_ALL, Opcode.COLLECTIVE_BROADCAST,
    Opcode.COLLECTIVE_PERMUTE, Opcode.COLLECTIVE_PERMUTE_START, Opcode.REDUCE_SCATTER,
})

# Async '-done' ops and the '-start' op each one completes.
ASYNC_DONE_OF_START = {
    Opcode.ALL_GATHER_START: Opcode.ALL_GATHER_DONE,
    Opcode.ALL_REDUCE_START: Opcode.ALL_REDUCE_DONE,
    Opcode.COLLECTIVE_PERMUTE_START: Opcode.COLLECTIVE_PERMUTE_DONE,
    Opcode.COPY_START: Opcode.COPY_DONE,
    Opcode.ASYNC_START: Opcode.ASYNC_DONE,
}
