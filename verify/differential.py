"""Differential verification: run the source and the target on every device, compare, classify.

``check_modules(before, after)`` and ``check_pass(module, passes)`` answer the question a
compiler engineer asks of a rewrite — did it preserve the program's meaning on every device of
every topology? — with one of four statuses (after Alive2):

``CORRECT``          no check failed on any trial of any topology
``UNSOUND``          a check failed: the result names the check (an exact ``ERROR:`` line) and
                     carries a counterexample (topology, device, output element, inputs)
``FAILED_TO_PROVE``  nothing was refuted, but nothing could be compared either (the source was
                     undefined on every input tried)
``ERROR``            our own limitation or a broken input (an op the interpreter does not
                     implement, a malformed source, a pass that crashed) — never UNSOUND

The checks run in a fixed order, and the first that fails is the verdict:

1. ``ERROR: Target is malformed`` — the target breaks an HLO rule for the topology, or its
   signature differs from the source's;
2. ``ERROR: Target fails where source does not`` — executing the target raises;
3. ``ERROR: Collective mismatch in target`` — the target's devices do not meet at the same
   collectives. (If the *source* mismatches, the source is undefined on that input and any
   target refines it: the trial is skipped and the result says so.)
4. ``ERROR: Value mismatch`` — an output element differs (bitwise by default; the pass's
   contract decides, see compare.py).

Reduction order: XLA leaves the order in which a collective (or reduce, dot...) combines its
operands to the implementation. A value mismatch found on generic floats is therefore replayed
on exactly representable values (small multiples of 1/4, whose sums are exact in any order):
if the mismatch persists, the replay is the reported witness and it cannot be rounding noise;
if it vanishes, is rounding-sized and a reduction is involved, it is classified as
reassociation — reported as a note, not as UNSOUND. A mismatch that needs NaN, an infinity, a
signed zero or an extreme value to show stays UNSOUND with its original witness.
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from neuron_sim.hlo.checker import HloCheckError, check_module
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import Shape
from neuron_sim.topology import Topology
from verify import compare
from verify.inputs import STYLES, InputValue, exact_counterpart, generate_inputs, style_of_trial

# --------------------------------------------------------------------------------------------
# Statuses and the exact ERROR lines (tests match them).


class Status(str, enum.Enum):
    CORRECT = "CORRECT"
    UNSOUND = "UNSOUND"
    FAILED_TO_PROVE = "FAILED_TO_PROVE"
    ERROR = "ERROR"

    def __str__(self) -> str:
        return self.value


TARGET_MALFORMED = "ERROR: Target is malformed"
TARGET_FAILS = "ERROR: Target fails where source does not"
COLLECTIVE_MISMATCH = "ERROR: Collective mismatch in target"
VALUE_MISMATCH = "ERROR: Value mismatch"
# ERROR-status lines: the verifier could not decide.
SOURCE_MALFORMED = "ERROR: Source is malformed"
SOURCE_FAILS = "ERROR: Source could not be executed"
UNSUPPORTED = "ERROR: Unsupported by the interpreter"
PASS_FAILED = "ERROR: Pass failed"
NO_INTERPRETER = "ERROR: Interpreter unavailable"

UNSOUND_CHECKS = (TARGET_MALFORMED, TARGET_FAILS, COLLECTIVE_MISMATCH, VALUE_MISMATCH)

DEFAULT_TRIALS = len(STYLES)  # one input set of each style
DEFAULT_TIMEOUT = 30.0      # seconds one execution of the source may take
TARGET_SLOWDOWN = 20.0      # the target may take this many times the source's time
EXACT_REPLAYS = 3

# Opcodes whose combination order XLA leaves to the implementation.
REORDERING_OPCODES = frozenset({
    Opcode.ALL_REDUCE, Opcode.ALL_REDUCE_START, Opcode.REDUCE_SCATTER, Opcode.REDUCE,
    Opcode.REDUCE_WINDOW, Opcode.DOT, Opcode.CONVOLUTION, Opcode.SCATTER,
    Opcode.SELECT_AND_SCATTER,
})


# --------------------------------------------------------------------------------------------
# Running a module, and what its failures mean.

Runner = Callable[[HloModule, list, Topology, int], list]
"""``runner(module, inputs, topology, seed) -> per-leaf [D, *shape] arrays``."""


class InterpreterUnavailable(RuntimeError):
    """``interpreter.run`` cannot be imported (not installed, or not written yet)."""


def default_runner(backend: str = "local") -> Runner:
    """``interpreter.run`` with ``backend``; InterpreterUnavailable if it cannot be imported."""
    try:
        interpreter = importlib.import_module("interpreter")
        run = getattr(interpreter, "run")
    except (ImportError, AttributeError) as exc:
        raise InterpreterUnavailable(
            f"the interpreter is not available (interpreter.run: {exc})") from exc

    def runner(module: HloModule, inputs: list, topology: Topology, seed: int) -> list:
        return list(run(module, inputs, topology=topology, backend=backend, seed=seed))

    return runner


FAILURE_COLLECTIVE_MISMATCH = "collective mismatch"
FAILURE_UNSUPPORTED = "unsupported"
FAILURE_EXECUTION = "execution"
FAILURE_TIMEOUT = "timeout"


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _interpreter_error_classes() -> dict[str, tuple[type, ...]]:
    try:
        errors = importlib.import_module("interpreter.errors")
    except ImportError:
        return {}
    found: dict[str, tuple[type, ...]] = {}
    for kind, names in ((FAILURE_COLLECTIVE_MISMATCH, ("CollectiveMismatchError",
                                                       "CollectiveMismatch")),
                        (FAILURE_UNSUPPORTED, ("Unimplemented", "UnimplementedError",
                                               "UnsupportedError"))):
        classes = tuple(c for c in (getattr(errors, n, None) for n in names) if isinstance(c, type))
        if classes:
            found[kind] = classes
    return found


def classify_failure(exc: BaseException) -> str:
    """What an exception raised while executing a module means to the verifier.

    Looks through wrapped causes (the interpreter wraps errors with ``While executing %x``),
    by class from ``interpreter.errors`` where it exists and by class name otherwise.
    """
    classes = _interpreter_error_classes()
    chain = _exception_chain(exc)
    if any(isinstance(e, ExecutionTimeout) for e in chain):
        return FAILURE_TIMEOUT
    for kind in (FAILURE_COLLECTIVE_MISMATCH, FAILURE_UNSUPPORTED):
        if kind in classes and any(isinstance(e, classes[kind]) for e in chain):
            return kind
    for e in chain:
        name = type(e).__name__
        if "CollectiveMismatch" in name:
            return FAILURE_COLLECTIVE_MISMATCH
        if name in ("Unimplemented", "UnimplementedError", "NotImplementedError",
                    "ElidedLiteralError", "UnsupportedError"):
            return FAILURE_UNSUPPORTED
    return FAILURE_EXECUTION


def describe_exception(exc: BaseException) -> str:
    """The message of ``exc`` (the interpreter's includes ``While executing %x = ...``)."""
    text = str(exc) or type(exc).__name__
    return text


@dataclass
class Outcome:
    """One execution: outputs, or how it failed."""

    outputs: list[np.ndarray] | None = None
    failure: str | None = None
    error: BaseException | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.failure is None


class ExecutionTimeout(Exception):
    """An execution ran longer than the verifier's limit (a loop that may never end)."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise ExecutionTimeout in the main thread after ``seconds`` (no limit elsewhere: signals
    reach only the main thread)."""
    usable = seconds is not None and seconds > 0 and hasattr(signal, "setitimer") and \
        threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise ExecutionTimeout(f"did not finish within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def execute(runner: Runner, module: HloModule, inputs: list, topology: Topology,
            seed: int, limit: float | None = None) -> Outcome:
    """Run ``module``; a failure (or running past ``limit`` seconds) is classified, not raised."""
    started = time.perf_counter()
    with np.errstate(all="ignore"):
        try:
            with _time_limit(limit):
                outputs = runner(module, inputs, topology, seed)
        except InterpreterUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is classified and reported
            return Outcome(failure=classify_failure(exc), error=exc,
                           seconds=time.perf_counter() - started)
    return Outcome(outputs=[np.asarray(o) for o in outputs],
                   seconds=time.perf_counter() - started)


# --------------------------------------------------------------------------------------------
# Results.


@dataclass
class Counterexample:
    """What shows the target wrong: where, which values, on which inputs."""

    check: str                                  # the ERROR line
    topology: Topology
    inputs: list[InputValue]
    style: str                                  # input style (inputs.STYLES) or "given"
    exact: bool                                 # inputs exactly representable (no rounding)
    device: int | None = None
    leaf: int | None = None
    index: tuple[int, ...] = ()
    leaf_shape: str = ""
    source_value: str = ""
    target_value: str = ""
    source_device_values: np.ndarray | None = None  # the leaf on that device, source and target
    target_device_values: np.ndarray | None = None
    mismatch_devices: list[int] = field(default_factory=list)
    mismatch_count: int = 0
    same_as_source_device: int | None = None    # the target's value here is what the source
                                                # computes on this other device (a shard mix-up)
    message: str = ""                           # the failure's text, for checks 1-3
    source_path: list[str] = field(default_factory=list)   # instructions that lead there
    target_path: list[str] = field(default_factory=list)

    @property
    def replica_partition(self) -> tuple[int, int] | None:
        if self.device is None:
            return None
        return self.topology.replica_partition(self.device)


@dataclass
class Minimized:
    """The shrunk pair that is reported (minimize.py)."""

    before: HloModule
    after: HloModule
    counterexample: Counterexample
    original_size: int
    size: int
    steps: int


@dataclass
class VerificationResult:
    status: Status
    name: str
    source: HloModule
    target: HloModule
    topologies: list[Topology]
    error_line: str | None = None
    detail: str = ""
    contract: str = compare.EXACT
    trials: int = DEFAULT_TRIALS
    seed: int = 0
    timeout: float | None = None
    compared: int = 0                           # executions compared (trial x topology)
    counterexample: Counterexample | None = None
    minimized: Minimized | None = None
    classification: str | None = None           # "reassociation", "source undefined"
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    passes: list[str] = field(default_factory=list)
    rewrites: list[str] = field(default_factory=list)
    changed: bool | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.CORRECT

    @property
    def reported(self) -> tuple[HloModule, HloModule, Counterexample | None]:
        """The pair and counterexample a user should look at: the minimized ones if any."""
        if self.minimized is not None:
            return self.minimized.before, self.minimized.after, self.minimized.counterexample
        return self.source, self.target, self.counterexample


# --------------------------------------------------------------------------------------------
# Topologies and given inputs.


def normalize_topologies(topologies: Topology | str | Iterable[Topology | str] | None,
                         module: HloModule) -> list[Topology]:
    """None -> the module header's; "RxP" strings parsed; duplicates dropped, order kept."""
    if topologies is None:
        return [Topology(module.replica_count, module.num_partitions)]
    if isinstance(topologies, (Topology, str)):
        topologies = [topologies]
    result: list[Topology] = []
    for item in topologies:
        topology = Topology.parse(item) if isinstance(item, str) else item
        if topology not in result:
            result.append(topology)
    if not result:
        raise ValueError("no topology to verify on")
    return result


def stack_given_inputs(module: HloModule, inputs: Sequence[Any], topology: Topology) -> list:
    """User inputs as per-device stacks: a value shaped like the parameter is the same on every
    device; one shaped ``[D, *shape]`` gives each device its row. ValueError otherwise."""
    params = module.entry.parameters
    if len(inputs) != len(params):
        raise ValueError(f"module {module.name} has {len(params)} parameters but "
                         f"{len(inputs)} inputs were given")
    stacked = []
    for param, value in zip(params, inputs):
        leaves = list(param.shape.leaves())
        values = list(value) if param.shape.is_tuple else [value]
        if len(values) != len(leaves):
            raise ValueError(f"parameter {param.parameter_number} (%{param.name}) has "
                             f"{len(leaves)} leaves but {len(values)} input arrays were given")
        arrays = []
        for leaf, array in zip(leaves, values):
            if leaf.is_token:
                arrays.append(None)
                continue
            array = np.asarray(array)
            dims = tuple(leaf.dims)
            dtype = leaf.element_type.numpy_dtype
            if array.shape == dims:
                array = np.broadcast_to(array, (topology.num_devices, *dims)).copy()
            elif array.shape != (topology.num_devices, *dims):
                raise ValueError(
                    f"input for parameter {param.parameter_number} (%{param.name}, {leaf}) has "
                    f"shape {list(array.shape)}; expected {list(dims)} or "
                    f"[{topology.num_devices}, {', '.join(map(str, dims))}] for topology "
                    f"{topology}")
            if array.dtype != dtype and array.dtype.kind == "V" and \
                    array.dtype.itemsize == np.dtype(dtype).itemsize:
                array = array.view(dtype)  # bf16 / f8 arrays are stored in npz as raw bytes
            if array.dtype != dtype:
                raise ValueError(
                    f"input for parameter {param.parameter_number} (%{param.name}) has dtype "
                    f"{array.dtype}; expected {leaf.element_type.spelling}")
            arrays.append(array)
        stacked.append(tuple(arrays) if param.shape.is_tuple else arrays[0])
    return stacked


# --------------------------------------------------------------------------------------------
# Static checks.


def _signature_problem(source: HloModule, target: HloModule) -> str | None:
    s_params = [p.shape for p in source.entry.parameters]
    t_params = [p.shape for p in target.entry.parameters]
    if len(s_params) != len(t_params):
        return (f"the target's entry has {len(t_params)} parameters, the source's "
                f"{len(s_params)}")
    for i, (s, t) in enumerate(zip(s_params, t_params)):
        if not s.compatible(t):
            return f"parameter {i} is {t} in the target but {s} in the source"
    s_root, t_root = source.entry.root.shape, target.entry.root.shape
    if not s_root.compatible(t_root):
        return f"the target returns {t_root} but the source returns {s_root}"
    return None


def _check_malformed(module: HloModule, topology: Topology) -> str | None:
    try:
        check_module(module, topology)
    except HloCheckError as exc:
        return str(exc)
    except ValueError as exc:  # replica-group errors and other IR complaints
        return str(exc)
    return None


# --------------------------------------------------------------------------------------------
# The instructions that lead to an output leaf.


def leaf_producer(module: HloModule, leaf: int) -> HloInstruction:
    """The entry instruction that produces flattened output leaf ``leaf`` (through tuples)."""
    inst = module.entry.root

    def walk(node: HloInstruction, shape: Shape, target: int) -> tuple[HloInstruction, int]:
        # Returns (instruction, leaf offset within it) by descending through tuple instructions.
        if not shape.is_tuple:
            return node, target
        if node.opcode is not Opcode.TUPLE:
            return node, target
        for operand in node.operands:
            count = len(list(operand.shape.leaves()))
            if target < count:
                return walk(operand, operand.shape, target)
            target -= count
        return node, target

    producer, _ = walk(inst, inst.shape, leaf)
    return producer


def path_to(module: HloModule, leaf: int | None, limit: int = 12) -> list[str]:
    """The entry instructions an output leaf depends on, operands first (the last ``limit``)."""
    root = module.entry.root if leaf is None else leaf_producer(module, leaf)
    needed: set[HloInstruction] = set()
    stack = [root]
    while stack:
        inst = stack.pop()
        if inst in needed:
            continue
        needed.add(inst)
        stack.extend(inst.operands)
    lines = [inst.to_text() for inst in module.entry.instructions if inst in needed]
    if len(lines) > limit:
        lines = [f"... ({len(lines) - limit} more)"] + lines[-limit:]
    return lines


def leaf_has_reordering_reduction(module: HloModule, leaf: int) -> bool:
    """Does output leaf ``leaf`` depend on a reduction whose order is free (in the entry or in a
    computation called on the way)?"""
    stack: list[HloInstruction] = [leaf_producer(module, leaf)]
    seen: set[HloInstruction] = set()
    while stack:
        inst = stack.pop()
        if inst in seen:
            continue
        seen.add(inst)
        if inst.opcode in REORDERING_OPCODES:
            return True
        stack.extend(inst.operands)
        for called in inst.called_computations:
            stack.extend(called.instructions)
    return False


def has_reordering_reduction(*modules: HloModule) -> bool:
    return any(inst.opcode in REORDERING_OPCODES for m in modules for inst in m.instructions())


# --------------------------------------------------------------------------------------------
# One comparison.


@dataclass
class _TrialFinding:
    check: str
    counterexample: Counterexample
    rounding_sized: bool = False
    leaves: tuple[int, ...] = ()                 # every output leaf with a mismatch


def _compare_once(source: HloModule, target: HloModule, topology: Topology, inputs: list,
                  style: str, contract: str, runner: Runner, seed: int,
                  timeout: float | None = None) -> tuple[str, Any]:
    """Run both; returns one of ("ok", None), ("source-ub", message), ("source-timeout",
    message), ("source-unsupported", message), ("source-fails", message),
    ("target-unsupported", message), or ("finding", _TrialFinding).

    The target may take ``TARGET_SLOWDOWN`` times as long as the source (at least ``timeout``)
    before it counts as failing where the source does not."""
    src = execute(runner, source, inputs, topology, seed, timeout)
    if not src.ok:
        message = describe_exception(src.error)
        if src.failure == FAILURE_COLLECTIVE_MISMATCH:
            return "source-ub", message
        if src.failure == FAILURE_TIMEOUT:
            return "source-timeout", message
        if src.failure == FAILURE_UNSUPPORTED:
            return "source-unsupported", message
        return "source-fails", message
    limit = None if timeout is None else max(timeout, TARGET_SLOWDOWN * src.seconds)
    tgt = execute(runner, target, inputs, topology, seed, limit)
    exact = style == "exact"
    if not tgt.ok:
        message = describe_exception(tgt.error)
        if tgt.failure == FAILURE_UNSUPPORTED:
            return "target-unsupported", message
        if tgt.failure == FAILURE_TIMEOUT:
            message = f"the target {message}; the source took {src.seconds:.2g} s"
        check = COLLECTIVE_MISMATCH if tgt.failure == FAILURE_COLLECTIVE_MISMATCH \
            else TARGET_FAILS
        cex = Counterexample(check=check, topology=topology, inputs=inputs, style=style,
                             exact=exact, message=message)
        return "finding", _TrialFinding(check, cex)
    mismatch = compare.find_mismatch(src.outputs, tgt.outputs, contract)
    if mismatch is None:
        return "ok", None
    if mismatch.shape_problem is not None:
        cex = Counterexample(check=TARGET_MALFORMED, topology=topology, inputs=inputs,
                             style=style, exact=exact, message=mismatch.shape_problem)
        return "finding", _TrialFinding(TARGET_MALFORMED, cex)
    s_leaf = src.outputs[mismatch.leaf]
    t_leaf = tgt.outputs[mismatch.leaf]
    cex = Counterexample(
        check=VALUE_MISMATCH, topology=topology, inputs=inputs, style=style, exact=exact,
        device=mismatch.device, leaf=mismatch.leaf, index=mismatch.index,
        leaf_shape=_shape_text(s_leaf),
        source_value=mismatch.source_text, target_value=mismatch.target_text,
        source_device_values=s_leaf[mismatch.device], target_device_values=t_leaf[mismatch.device],
        mismatch_devices=mismatch.devices, mismatch_count=mismatch.count,
        same_as_source_device=_source_device_with(s_leaf, t_leaf[mismatch.device], contract,
                                                  mismatch.device))
    rounding = _all_rounding_sized(src.outputs, tgt.outputs, contract)
    leaves = tuple(j for j, (s, t) in enumerate(zip(src.outputs, tgt.outputs))
                   if not compare.allowed_mask(s, t, contract).all())
    return "finding", _TrialFinding(VALUE_MISMATCH, cex, rounding_sized=rounding, leaves=leaves)


def _shape_text(stacked: np.ndarray) -> str:
    """``f32[2,4]`` for a ``[D, 2, 4]`` float32 stack."""
    try:
        spelling = ElementType.from_numpy(stacked.dtype).spelling
    except (KeyError, ValueError, TypeError):
        spelling = str(stacked.dtype)
    return f"{spelling}[{','.join(map(str, stacked.shape[1:]))}]"


def _source_device_with(source_leaf: np.ndarray, target_value: np.ndarray, contract: str,
                        skip: int) -> int | None:
    """A device on which the source computes exactly what the target gave device ``skip``."""
    if target_value.size < 2 or compare.equal_mask(target_value, target_value.reshape(-1)[0]).all():
        return None  # a single repeated value matches too easily to mean anything
    for g in range(source_leaf.shape[0]):
        if g != skip and compare.allowed_mask(source_leaf[g], target_value, contract).all():
            return g
    return None


def _all_rounding_sized(source: list[np.ndarray], target: list[np.ndarray],
                        contract: str) -> bool:
    """Every disallowed element differs only by what another summation order could cause."""
    for s, t in zip(source, target):
        bad = ~compare.allowed_mask(s, t, contract)
        if bad.any() and not compare.rounding_sized_mask(s[bad], t[bad]).all():
            return False
    return True


# --------------------------------------------------------------------------------------------
# check_modules / check_pass.


def check_modules(before: HloModule, after: HloModule,
                  topologies: Topology | str | Iterable[Topology | str] | None = None, *,
                  trials: int = DEFAULT_TRIALS, seed: int = 0,
                  inputs: Sequence[Any] | None = None, contract: Any = compare.EXACT,
                  backend: str = "local", runner: Runner | None = None,
                  minimize: bool = True, name: str | None = None,
                  timeout: float | None = DEFAULT_TIMEOUT) -> VerificationResult:
    """Is ``after`` a correct replacement for ``before`` on every device of ``topologies``?

    ``topologies``: a Topology, an ``"RxP"`` string or a list of them (default: ``before``'s
    header). ``trials`` input sets per topology (styles cycle, see inputs.py), drawn from
    ``seed``; ``inputs`` (one value per parameter, ``shape`` or ``[D, *shape]``) replaces them.
    An UNSOUND result is minimized (minimize.py) unless ``minimize`` is False. ``timeout``
    bounds one execution of the source, in seconds (None: no bound).
    """
    contract = compare.contract_name(contract)
    topologies = normalize_topologies(topologies, before)
    result = VerificationResult(status=Status.CORRECT, name=name or before.name, source=before,
                                target=after, topologies=topologies, contract=contract,
                                trials=trials if inputs is None else 1, seed=seed,
                                timeout=timeout)
    if runner is None:
        try:
            runner = default_runner(backend)
        except InterpreterUnavailable as exc:
            return _set(result, Status.ERROR, NO_INTERPRETER, str(exc))
    _verify(result, before, after, topologies, trials, seed, inputs, contract, runner, timeout)
    cex = result.counterexample
    if cex is not None and cex.check != TARGET_MALFORMED:
        cex.source_path = path_to(before, cex.leaf)
        cex.target_path = path_to(after, cex.leaf)
    if result.status is Status.UNSOUND and contract == compare.CHANGES_RESULTS:
        result.notes.append("the pass declares that it changes results (a positive control): "
                            "this difference is expected")
    if result.status is Status.UNSOUND and minimize and inputs is None:
        from verify.minimize import minimize_pair
        result.minimized = minimize_pair(result, runner=runner)
    return result


def _set(result: VerificationResult, status: Status, line: str | None, detail: str = "",
         counterexample: Counterexample | None = None) -> VerificationResult:
    result.status = status
    result.error_line = line
    result.detail = detail
    result.counterexample = counterexample
    return result


def _verify(result: VerificationResult, before: HloModule, after: HloModule,
            topologies: list[Topology], trials: int, seed: int, inputs: Sequence[Any] | None,
            contract: str, runner: Runner, timeout: float | None) -> None:
    # Check 1, static: on every topology before anything runs.
    for topology in topologies:
        problem = _check_malformed(before, topology)
        if problem is not None:
            _set(result, Status.ERROR, SOURCE_MALFORMED, f"on topology {topology}: {problem}")
            return
    signature = _signature_problem(before, after)
    for topology in topologies:
        problem = signature or _check_malformed(after, topology)
        if problem is not None:
            cex = Counterexample(check=TARGET_MALFORMED, topology=topology, inputs=[],
                                 style="none", exact=True, message=problem)
            _set(result, Status.UNSOUND, TARGET_MALFORMED, problem, cex)
            return

    undefined: list[str] = []
    unfinished: list[str] = []
    reassociation: Counterexample | None = None
    for topology in topologies:
        plan = [("given", None)] if inputs is not None else \
            [(style_of_trial(t), t) for t in range(trials)]
        for style, trial in plan:
            values = stack_given_inputs(before, inputs, topology) if trial is None else \
                generate_inputs(before, topology, seed=seed, trial=trial)
            kind, info = _compare_once(before, after, topology, values, style, contract, runner,
                                       seed, timeout)
            if kind == "ok":
                result.compared += 1
                continue
            if kind == "source-ub":
                undefined.append(f"topology {topology}, {style} inputs: {info}")
                continue
            if kind == "source-timeout":
                unfinished.append(f"topology {topology}, {style} inputs: {info}")
                continue
            if kind in ("source-unsupported", "target-unsupported"):
                which = "source" if kind.startswith("source") else "target"
                _set(result, Status.ERROR, UNSUPPORTED,
                     f"the {which} cannot be executed on topology {topology}: {info}")
                return
            if kind == "source-fails":
                _set(result, Status.ERROR, SOURCE_FAILS,
                     f"on topology {topology} with {style} inputs: {info}")
                return
            finding: _TrialFinding = info
            result.compared += 1
            if finding.check == VALUE_MISMATCH and style != "exact" and inputs is None:
                replay = _replay_exact(before, after, topology, seed, trial, values, contract,
                                       runner, timeout)
                if replay is not None:
                    _set(result, Status.UNSOUND, replay.check, summary_of(replay.counterexample),
                         replay.counterexample)
                    return
                # Not reproducible once every finite value is exact: what remains is rounding,
                # or overflow of the extreme values, in a reduction whose order is free.
                overflow = style == "boundary"
                reorderable = all(leaf_has_reordering_reduction(before, j) or
                                  leaf_has_reordering_reduction(after, j)
                                  for j in finding.leaves)
                if (finding.rounding_sized or overflow) and reorderable:
                    reassociation = reassociation or finding.counterexample
                    continue
                finding.counterexample.exact = False
            _set(result, Status.UNSOUND, finding.check, summary_of(finding.counterexample),
                 finding.counterexample)
            return

    if reassociation is not None:
        result.classification = "reassociation"
        cex = reassociation
        result.notes.append(
            f"outputs differ by rounding only (e.g. device {cex.device}, leaf {cex.leaf} index "
            f"{list(cex.index)}: {cex.source_value} vs {cex.target_value} on topology "
            f"{cex.topology}), and the difference vanishes on exactly representable inputs: "
            "reassociation of a reduction whose order XLA leaves to the implementation, not a "
            "miscompile")
    if unfinished:
        result.warnings.append(
            f"the source did not finish on {len(unfinished)} input set(s) (a loop that may not "
            "end on such inputs); nothing to compare there: " + unfinished[0])
    if undefined:
        result.warnings.append(
            "the source has undefined behaviour (a collective mismatch) on "
            f"{len(undefined)} input set(s); any target refines it there: " + undefined[0])
        result.classification = result.classification or "source undefined"
    if (undefined or unfinished) and result.compared == 0:
        why = "undefined" if undefined and not unfinished else \
            "unfinished" if not undefined else "undefined or unfinished"
        _set(result, Status.FAILED_TO_PROVE, None,
             f"the source is {why} on every input tried: nothing was compared")
        return
    _set(result, Status.CORRECT, None, "")


def _replay_exact(before: HloModule, after: HloModule, topology: Topology, seed: int,
                  trial: int | None, original: list, contract: str,
                  runner: Runner, timeout: float | None) -> _TrialFinding | None:
    """Look for a failure on exactly representable inputs: first the original inputs with
    every finite nonzero float made exact (special values kept in place), then fresh exact
    inputs. On these no summation order can round or overflow differently."""
    candidates = [exact_counterpart(original, seed=seed + k) for k in range(EXACT_REPLAYS)]
    candidates += [generate_inputs(before, topology, seed=seed + 7919 * (k + 1),
                                   trial=(trial or 0) + k, style="exact")
                   for k in range(EXACT_REPLAYS)]
    for values in candidates:
        kind, info = _compare_once(before, after, topology, values, "exact", contract, runner,
                                   seed, timeout)
        if kind == "finding":
            return info
    return None


def summary_of(cex: Counterexample) -> str:
    if cex.check == VALUE_MISMATCH:
        r, p = cex.replica_partition
        return (f"on topology {cex.topology}, device {cex.device} (replica {r}, partition {p}), "
                f"output {cex.leaf} index {list(cex.index)}: source {cex.source_value}, target "
                f"{cex.target_value}")
    return f"on topology {cex.topology}: {cex.message}"


# --------------------------------------------------------------------------------------------
# Passes.


def pass_list(passes: Any) -> list:
    """``"a,b"``, a name, a list of names or HloPass objects, or a PassPipeline -> HloPass list."""
    from passes import HloPass, PassPipeline, get_pass

    if isinstance(passes, PassPipeline):
        return list(passes.passes)
    if isinstance(passes, HloPass):
        return [passes]
    if isinstance(passes, str):
        names = [n.strip() for n in passes.split(",")]
        if not passes.strip() or not all(names):
            raise ValueError(f"pass list {passes!r} has an empty pass name")
        return [get_pass(n) for n in names]
    return [get_pass(p) if isinstance(p, str) else p for p in passes]


def pipeline_contract(hlo_passes: Sequence[Any]) -> str:
    """The weakest contract among the passes: changes-results > refinement > exact."""
    names = {compare.contract_name(getattr(p, "contract", compare.EXACT)) for p in hlo_passes}
    for name in (compare.CHANGES_RESULTS, compare.REFINEMENT):
        if name in names:
            return name
    return compare.EXACT


def apply_passes(module: HloModule, hlo_passes: Sequence[Any]) -> tuple[HloModule, bool, list[str]]:
    """A rewritten clone of ``module``: (target, changed, rewrite log). Raises PassError."""
    from passes import PassPipeline

    target = module.clone()
    pipeline = PassPipeline(list(hlo_passes), name="verify")
    changed = pipeline.run(target)
    return target, changed, list(pipeline.rewrites)


def check_pass(module: HloModule, passes: Any,
               topologies: Topology | str | Iterable[Topology | str] | None = None, *,
               trials: int = DEFAULT_TRIALS, seed: int = 0, inputs: Sequence[Any] | None = None,
               backend: str = "local", runner: Runner | None = None, minimize: bool = True,
               name: str | None = None, timeout: float | None = DEFAULT_TIMEOUT
               ) -> VerificationResult:
    """Run ``passes`` on a copy of ``module`` and check the result against ``module``.

    ``passes``: ``"a,b"``, a list of registry keys / class names / HloPass objects, or a
    PassPipeline. The comparison follows the passes' weakest declared contract. An UNSOUND
    result is minimized by shrinking the *source* and re-running the passes on it, so the
    reported pair is one the passes really produce.
    """
    hlo_passes = pass_list(passes)
    names = [p.name for p in hlo_passes]
    contract = pipeline_contract(hlo_passes)
    try:
        target, changed, rewrites = apply_passes(module, hlo_passes)
    except Exception as exc:  # noqa: BLE001 - PassError and anything a pass lets escape
        result = VerificationResult(status=Status.ERROR, name=name or module.name, source=module,
                                    target=module, topologies=normalize_topologies(topologies,
                                                                                   module),
                                    error_line=PASS_FAILED, detail=str(exc), contract=contract,
                                    trials=trials, seed=seed, passes=names, changed=False)
        return result
    if not changed:
        result = VerificationResult(status=Status.CORRECT, name=name or module.name,
                                    source=module, target=target,
                                    topologies=normalize_topologies(topologies, module),
                                    contract=contract, trials=trials, seed=seed, passes=names,
                                    changed=False)
        result.notes.append("the passes made no change: the target is the source")
        return result
    result = check_modules(module, target, topologies, trials=trials, seed=seed, inputs=inputs,
                           contract=contract, backend=backend, runner=runner, minimize=False,
                           name=name, timeout=timeout)
    result.passes = names
    result.rewrites = rewrites
    result.changed = True
    if result.status is Status.UNSOUND and minimize and inputs is None:
        from verify.minimize import minimize_pass_case
        result.minimized = minimize_pass_case(result, hlo_passes, runner=runner or
                                              default_runner(backend))
    return result
