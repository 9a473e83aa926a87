"""The one bench of neuron-sim: every performance goal as a measured ratio with its spread.

Not a timed test: a developer tool. Each goal is measured over ``--rounds`` rounds in which the
measured thing and its reference (numpy, a fresh Python, the local backend...) alternate, so
that warm-up and the machine's load affect both alike; a goal reports the median of the
per-round ratios and their min and max. Sections (``--only`` picks some):

  verify       verifications per second in process at 512 and 4096 devices
  startup      ``neuron-sim run --help`` and ``run`` of a tiny module, seconds (numpy alone too)
  instruction  per executed instruction / one numpy call on the same per-device arrays
  one_op       execute of a one-op f32[1M] module at 8 devices / the numpy op; peak memory
  argmax       argmax/argmin (JAX's comparator) over each axis and flattened / numpy; argmax
               at 8 devices, one input per device and one for all
  transcendental  f32 tanh, exp, log, sin modules / numpy's f32 functions; all-gather + tanh
               memory at 4096 devices
  mpi          ``mpiexec -n 2`` / local on a per-device-heavy (matmul) module; all-reduce
               bandwidth of the backends
  xla          execution / XLA:CPU's compiled executable on 10 programs of the JAX corpus, and
               the whole job / a fresh JAX process (tests/data/jax/timings.json, written by
               scripts/time_jax_corpus.py under JAX)
  scaling      the mostly-replicated module from 8 to 65,536 devices (the curve)
  symbolic     z3 fold-proof times per idiom and device count (``--pools``: the pools table)
  reading      parse + check throughput of HLO text
  sweep        ``neuron-sim sweep --max-devices 256``: CPU seconds per case on a systematic
               sample (every 40th case), the whole sweep's projected CPU and wall minutes on
               the usable cores (``--sweep-full``: time the real command instead)
  fuzz         ``neuron-sim fuzz`` over the three seed passes at 8 devices, seed 7: modules
               per CPU second / 50, minimizing included (in process, a fixed number of
               modules with the timed campaign's minimizing budget; ``--fuzz-full``: the
               real ``--time 60s`` command instead)

    PYTHONPATH=. python scripts/bench.py [--rounds N] [--only a,b] [--json]

Results go to stdout (a table, or JSON with ``--json``); docs/performance.md holds the latest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import neuron_sim.interpreter as interpreter  # noqa: E402
from neuron_sim.hlo import parse_module  # noqa: E402
from neuron_sim.hlo.checker import check_module  # noqa: E402
from neuron_sim.topology import Topology  # noqa: E402

MOSTLY_REPLICATED = """
HloModule bench_mostly_replicated, num_partitions={devices}

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

cond {{
  state = (s32[], f32[64], f32[64,64]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  limit = s32[] constant({steps})
  ROOT lt = pred[] compare(i, limit), direction=LT
}}

body {{
  state = (s32[], f32[64], f32[64,64]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  h = f32[64] get-tuple-element(state), index=1
  w = f32[64,64] get-tuple-element(state), index=2
  one = s32[] constant(1)
  next = s32[] add(i, one)
  z = f32[64] dot(w, h), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t = f32[64] tanh(z)
  scale = f32[] constant(0.5)
  sb = f32[64] broadcast(scale), dimensions={{}}
  m = f32[64] multiply(t, sb)
  r = f32[64] add(m, h)
  ROOT out = (s32[], f32[64], f32[64,64]) tuple(next, r, w)
}}

ENTRY main {{
  w = f32[64,64] parameter(0)
  x = f32[64] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[64], f32[64,64]) tuple(zero, x, w)
  loop = (s32[], f32[64], f32[64,64]) while(init), condition=cond, body=body
  h = f32[64] get-tuple-element(loop), index=1
  pid = u32[] partition-id()
  eight = u32[] constant(8)
  lane = u32[] remainder(pid, eight)
  s32lane = s32[] convert(lane)
  four = s32[] constant(8)
  start = s32[] multiply(s32lane, four)
  piece = f32[8] dynamic-slice(h, start), dynamic_slice_sizes={{8}}
  pf = f32[] convert(pid)
  pb = f32[8] broadcast(pf), dimensions={{}}
  mine = f32[8] add(piece, pb)
  total = f32[8] all-reduce(mine), channel_id=1, replica_groups={{}}, to_apply=add
  ROOT result = (f32[64], f32[8]) tuple(h, total)
}}
"""

PER_DEVICE = """
HloModule bench_per_device, num_partitions={devices}

ENTRY main {{
  x = f32[256] parameter(0)
  a = f32[256] exponential(x)
  b = f32[256] multiply(a, x)
  c = f32[256] add(b, a)
  d = f32[256] tanh(c)
  e = f32[256] subtract(d, x)
  f = f32[256] maximum(e, x)
  g = f32[256] negate(f)
  ROOT h = f32[256] abs(g)
}}
"""


# --------------------------------------------------------------------------------------------
# Measuring: rounds, spreads, goals.


def seconds(fn: Callable[[], Any], number: int = 1) -> float:
    """Wall time of one call of ``fn``, averaged over ``number`` calls."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def warm(module: Any, inputs: Any) -> None:
    """Execute ``module`` until its computations run their compiled plans (a computation is
    walked on its first ``WALKED_EVALUATIONS`` evaluations): what a repeated execute costs
    is then timed, not the plans' building."""
    from neuron_sim.interpreter.module_facts import WALKED_EVALUATIONS

    for _ in range(WALKED_EVALUATIONS + 1):
        interpreter.execute(module, inputs)


def seconds_and_cpu(fn: Callable[[], Any], number: int, cpu: list[float]) -> float:
    """``seconds(fn, number)``, also appending the CPU time of one call (``process_time``,
    which other processes' load does not inflate as it does wall time) to ``cpu``."""
    start = time.process_time()
    wall = seconds(fn, number)
    cpu.append((time.process_time() - start) / number)
    return wall


def fresh_process_env(cache: Path) -> dict[str, str]:
    """The environment of a fresh ``neuron-sim`` process as an installed package starts: the
    repository on the path and its compiled bytecode kept (under ``cache``). pip compiles an
    installed package's modules, so a user's start-up reads bytecode; a
    PYTHONDONTWRITEBYTECODE inherited from a developer's shell would instead recompile every
    module edited since its last bytecode, on every start."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONPYCACHEPREFIX=str(cache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def child_seconds(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``command``, which must succeed."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def alternating(fns: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each function once per round, in turn: their measurements per round."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            out[name].append(fn())
    return out


def goal(name: str, values: list[float], target: float, *, at_most: bool = True,
         unit: str = "x", **detail: Any) -> dict[str, Any]:
    """One goal's record: the median over rounds, its spread, the target and whether it is met."""
    record = {"goal": name, **spread(values), "target": target,
              "comparison": "<=" if at_most else ">=", "unit": unit, "rounds": len(values)}
    record["met"] = record["median"] <= target if at_most else record["median"] >= target
    record.update(detail)
    return record


def ratios(measured: list[float], reference: list[float]) -> list[float]:
    return [m / r for m, r in zip(measured, reference)]


# --------------------------------------------------------------------------------------------
# 1. verify, in process.

VERIFY_MODULE = """HloModule bench_verify, num_partitions={devices}

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY main {{
  x = f32[8] parameter(0)
  i = s32[2] parameter(1)
  p = pred[3] parameter(2)
  r = f32[8] all-reduce(x), channel_id=1, replica_groups={{}}, to_apply=add
  n = s32[2] negate(i)
  ROOT t = (f32[8], s32[2], pred[3]) tuple(r, n, p)
}}
"""


def bench_verify(rounds: int) -> list[dict]:
    """``check_modules`` (the default 7 trials, one topology) of a small module with small
    integer and pred parameters (rows repeat across devices: the input generator's worst case)
    and an all-reduce. At 512 devices the goal is the default verification, which also proves
    a CORRECT verdict for all inputs (issue 27: >= 40/s); at 4096 the differential one
    (``proof="sampled"``). Each record gives both, per wall second and, in ``*_cpu_per_s``,
    per CPU second of this process (which the machine's other load takes less of)."""
    from neuron_sim.verify.api import VerifyOptions, check_modules

    records = []
    for devices, target, goal_mode in ((512, 40.0, "auto"), (4096, 5.0, "sampled")):
        module = parse_module(VERIFY_MODULE.format(devices=devices))
        modes = {"sampled": VerifyOptions(proof="sampled"), "auto": VerifyOptions()}
        default = check_modules(module, module, options=modes["auto"])
        number = 3 if devices <= 512 else 1

        def rates(options: VerifyOptions) -> Callable[[], tuple[float, float]]:
            def measure() -> tuple[float, float]:
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(number):
                    check_modules(module, module, options=options)
                return (number / (time.perf_counter() - wall),
                        number / (time.process_time() - cpu))
            return measure

        measured = alternating({mode: rates(options) for mode, options in modes.items()},
                               rounds)
        wall = {mode: [w for w, _ in values] for mode, values in measured.items()}
        cpu = {mode: statistics.median(c for _, c in values)
               for mode, values in measured.items()}
        what = "default, with the all-inputs proof" if goal_mode == "auto" else "proof=sampled"
        records.append(goal(
            f"verify at {devices} devices ({what})", wall[goal_mode], target, at_most=False, unit="verifications/s",
            status=str(default.status.value), default_proof=default.proof,
            auto_per_s=statistics.median(wall["auto"]), auto_cpu_per_s=cpu["auto"],
            sampled_per_s=statistics.median(wall["sampled"]),
            sampled_cpu_per_s=cpu["sampled"]))
    records.append(bench_trial_batches(rounds))
    return records


def bench_trial_batches(rounds: int) -> dict:
    """``check_modules`` (sampled, 7 trials) of a dispatch-bound pair at 8 devices — a while
    loop of 20 f32[64] ops x 200 steps, source and target parsed apart — with the input sets
    after the first run together (``verify.trial_batches``) / each set run alone: the batches
    must not be slower."""
    from neuron_sim.verify import trial_batches
    from neuron_sim.verify.api import VerifyOptions, check_modules

    text = _loop_module(8, 20, 200)
    options = VerifyOptions(proof="sampled")
    below = trial_batches.BATCH_BELOW_SECONDS

    def verify(batched: bool) -> Callable[[], float]:
        def measure() -> float:
            trial_batches.BATCH_BELOW_SECONDS = below if batched else 0.0
            try:
                return seconds(lambda: check_modules(parse_module(text), parse_module(text),
                                                     options=options), 3)
            finally:
                trial_batches.BATCH_BELOW_SECONDS = below
        return measure

    times = alternating({"together": verify(True), "alone": verify(False)}, rounds)
    return goal("verify of a 20-op x 200-step loop at 8 devices, input sets together / alone",
                ratios(times["together"], times["alone"]), 1.0,
                together_s=statistics.median(times["together"]),
                alone_s=statistics.median(times["alone"]))


# --------------------------------------------------------------------------------------------
# 2. start-up.

TINY = """HloModule tiny

ENTRY main {
  x = f32[4] parameter(0)
  ROOT y = f32[4] negate(x)
}
"""


def bench_startup(rounds: int) -> list[dict]:
    """Fresh processes: ``neuron-sim run --help``, ``neuron-sim run`` of a 1-op module, and
    ``python -c "import numpy"`` for reference, with bytecode kept as an installed package has
    it (``fresh_process_env``; one warm-up run of each writes it); wall and CPU seconds
    (``cpu_s``: on a loaded machine the wall time also counts the time other processes hold
    the cores); and which heavy modules ``run --help`` imports."""
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        env = fresh_process_env(Path(tmp) / "pycache")
        tiny = Path(tmp) / "tiny.hlo"
        tiny.write_text(TINY)
        commands = {
            "help": [python, "-m", "neuron_sim.cli", "run", "--help"],
            "run": [python, "-m", "neuron_sim.cli", "run", str(tiny), "--seed", "0",
                    "-o", str(Path(tmp) / "out.npz")],
            "numpy": [python, "-c", "import numpy"],
        }
        for command in commands.values():
            child_seconds(command, env)
        cpu: dict[str, list[float]] = {name: [] for name in commands}

        def launch(name: str) -> Callable[[], float]:
            def once() -> float:
                wall, used = child_seconds(commands[name], env)
                cpu[name].append(used)
                return wall
            return once

        times = alternating({name: launch(name) for name in commands}, rounds)
        probe = subprocess.run(
            [python, "-c", "import atexit, sys\n"
             "atexit.register(lambda: sys.stderr.write(','.join(m for m in ('z3', 'mpi4py', "
             "'hypothesis', 'verify', 'passes', 'numpy', 'ml_dtypes') if m in sys.modules)))\n"
             "from neuron_sim.cli import main\nsys.argv = ['neuron-sim', 'run', '--help']\n"
             "sys.exit(main())"],
            env=env, capture_output=True, text=True).stderr.strip().splitlines()
    probe = probe[-1] if probe else ""  # what ``run --help`` loaded, read as it exits
    numpy_s, numpy_cpu = statistics.median(times["numpy"]), statistics.median(cpu["numpy"])
    return [goal("start-up: run --help", times["help"], 0.25, unit="s", numpy_s=numpy_s,
                 cpu_s=statistics.median(cpu["help"]), numpy_cpu_s=numpy_cpu,
                 heavy_imports=probe),
            goal("start-up: run of a 1-op module", times["run"], 0.25, unit="s",
                 numpy_s=numpy_s, cpu_s=statistics.median(cpu["run"]), numpy_cpu_s=numpy_cpu)]


# --------------------------------------------------------------------------------------------
# 3. per instruction.

def _loop_module(devices: int, ops: int, steps: int) -> str:
    body = "\n".join(f"  v{i + 1} = f32[64] {'add' if i % 2 == 0 else 'multiply'}(v{i}, h)"
                     for i in range(ops))
    return f"""HloModule bench_loop, num_partitions={devices}

cond {{
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant({steps})
  ROOT lt = pred[] compare(i, n), direction=LT
}}

body {{
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[64] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  v0 = f32[64] negate(h)
{body}
  ROOT out = (s32[], f32[64]) tuple(j, v{ops})
}}

ENTRY main {{
  x = f32[64] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[64]) tuple(z, x)
  w = (s32[], f32[64]) while(init), condition=cond, body=body
  ROOT r = f32[64] get-tuple-element(w), index=1
}}
"""


def _chain_module(devices: int, ops: int) -> str:
    lines = [f"  v{i + 1} = f32[64] {'add' if i % 2 == 0 else 'multiply'}(v{i}, x)"
             for i in range(ops)]
    return (f"HloModule bench_chain, num_partitions={devices}\n\nENTRY main {{\n"
            f"  x = f32[64] parameter(0)\n  v0 = f32[64] negate(x)\n" + "\n".join(lines) +
            f"\n  ROOT r = f32[64] negate(v{ops})\n}}\n")


def bench_instruction(rounds: int) -> list[dict]:
    """Time per executed instruction of small f32[64] elementwise ops at 8 devices (a while
    loop of 20 ops x 50 steps, and a straight chain of 300 ops, the plan reused across
    executes) / one ``np.add`` of two [8, 64] arrays. Each round times 10 executes against
    4,000 numpy calls, so that one round is not one scheduler slice on a loaded machine."""
    x = (np.random.default_rng(0).standard_normal((8, 64)) * 1e-3).astype(np.float32)
    a, b = x.copy(), x.copy()
    records = []
    for label, text in (("loop", _loop_module(8, 20, 50)), ("chain", _chain_module(8, 300))):
        module = parse_module(text)
        warm(module, [x])
        count = interpreter.execute(module, [x]).instructions_executed
        times = alternating({
            "run": lambda: seconds(lambda: interpreter.execute(module, [x]), 10) / count,
            "numpy": lambda: seconds(lambda: np.add(a, b), 4000)}, rounds)
        records.append(goal(f"per instruction ({label}) / np.add", ratios(times["run"],
                            times["numpy"]), 2.0, instructions=count,
                            us_per_instruction=statistics.median(times["run"]) * 1e6))
    return records


# --------------------------------------------------------------------------------------------
# 4. one op.

def bench_one_op(rounds: int) -> list[dict]:
    """execute of ``add(f32[1M], f32[1M])`` at 8 devices / ``np.add`` of the [8, 1M] inputs;
    peak memory (tracemalloc during execute, plus the caller's inputs) / devices x live bytes
    (two inputs and the output per device)."""
    import tracemalloc

    devices, size = 8, 1 << 20
    module = parse_module(f"""HloModule bench_one_op, num_partitions={devices}

ENTRY main {{
  a = f32[{size}] parameter(0)
  b = f32[{size}] parameter(1)
  ROOT c = f32[{size}] add(a, b)
}}
""")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((devices, size), dtype=np.float32)
    b = rng.standard_normal((devices, size), dtype=np.float32)
    warm(module, [a, b])
    times = alternating({"run": lambda: seconds(lambda: interpreter.execute(module, [a, b]), 5),
                         "numpy": lambda: seconds(lambda: np.add(a, b), 5)}, rounds)
    tracemalloc.start()
    interpreter.execute(module, [a, b])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    memory = (peak + a.nbytes + b.nbytes) / (devices * 3 * 4 * size)
    return [goal("execute of one f32[1M] add at 8 devices / np.add",
                 ratios(times["run"], times["numpy"]), 1.5),
            goal("peak memory / (devices x live bytes)", [memory], 1.2)]


# --------------------------------------------------------------------------------------------
# 5. argmax / argmin.

ARGMAX = """HloModule argmax_bench

argmax_comparator {{
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  ne = pred[] compare(a, a), direction=NE
  pick = pred[] or(gt, ne)
  value = f32[] select(pick, a, b)
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(pick, tie)
  index = s32[] select(keep, ai, bi)
  ROOT pair = (f32[], s32[]) tuple(value, index)
}}

ENTRY main {{
  x = f32[256,1024] parameter(0)
  v = f32[{shape}] reshape(x)
  i = s32[{shape}] iota(), iota_dimension={dim}
  low = f32[] constant(-inf)
  zero = s32[] constant(0)
  r = (f32[{out}], s32[{out}]) reduce(v, i, low, zero), dimensions={{{dim}}}, to_apply=argmax_comparator
  ROOT arg = s32[{out}] get-tuple-element(r), index=1
}}
"""


ARGMAX_CALLS = 200  # calls per timed sample of the one-device argmax goals



def bench_argmax(rounds: int) -> list[dict]:
    """The whole module (reshape, iota, the variadic reduce with JAX's comparator) / numpy's
    argmax or argmin on the same f32[256,1024] (many ties, no NaN: numpy stops at a NaN), per
    axis and flattened; also the reduce's fold alone (``fold_only`` in the JSON). Each module
    is executed until it has its plans before the rounds (``warm``: the first evaluations of a
    computation are walked, the next builds its plan), and each
    sample times ``ARGMAX_CALLS`` calls of both (about 10 ms of the module: samples of 5
    calls, a quarter of a millisecond, spread 2.7-15x from one round to the next on a machine
    running anything else; samples of 50 without the warm-up call put the plan's building in
    the first round's sample and still spread 2.4-7x). Then argmax
    at 8 devices, along axis 1 and flattened: one input per device (f32[8,256,1024], / numpy
    on all of it) and one input for all (held once, / numpy on the one input)."""
    from neuron_sim.interpreter.ops.reduce import fold_arg_reduce
    from neuron_sim.hlo.arg_reducers import ArgReducer

    rng = np.random.default_rng(0)
    x = (rng.integers(-8, 8, size=(256, 1024)) / 2).astype(np.float32)
    cases = {"axis 0": ("256,1024", 0, "1024", 0), "axis 1": ("256,1024", 1, "256", 1),
             "flattened": ("262144", 0, "", None)}
    records = []
    for direction, numpy_fn in (("max", np.argmax), ("min", np.argmin)):
        for label, (shape, dim, out, axis) in cases.items():
            text = ARGMAX.format(shape=shape, dim=dim, out=out)
            if direction == "min":
                text = text.replace("direction=GT", "direction=LT").replace("-inf", "inf")
            module = parse_module(text)
            values = x.reshape(1, *map(int, shape.split(",")))
            where = [1] * values.ndim
            where[1 + dim] = -1
            indices = np.broadcast_to(np.arange(values.shape[1 + dim], dtype=np.int32)
                                      .reshape(where), values.shape)
            low = np.full([1] * (values.ndim - 1), -np.inf if direction == "max" else np.inf,
                          np.float32)
            zero = np.zeros_like(low, dtype=np.int32)
            cpu: dict[str, list[float]] = {"module": [], "numpy": []}
            warm(module, [x])
            times = alternating({
                "module": lambda: seconds_and_cpu(
                    lambda: interpreter.execute(module, [x]), ARGMAX_CALLS, cpu["module"]),
                "fold": lambda: seconds(lambda: fold_arg_reduce(
                    values, indices, low, zero, ArgReducer(direction, True), axis=1 + dim,
                    increasing=True, positions=True), ARGMAX_CALLS),
                "numpy": lambda: seconds_and_cpu(lambda: numpy_fn(x, axis=axis), ARGMAX_CALLS,
                                                 cpu["numpy"])}, rounds)
            records.append(goal(f"arg{direction} {label} (module) / numpy.arg{direction}",
                                ratios(times["module"], times["numpy"]), 3.0,
                                fold_only=statistics.median(ratios(times["fold"],
                                                                   times["numpy"])),
                                cpu_time_ratio=statistics.median(ratios(cpu["module"],
                                                                        cpu["numpy"]))))
    per_device = (rng.integers(-8, 8, size=(8, 256, 1024)) / 2).astype(np.float32)
    for label, (shape, dim, out, axis) in cases.items():
        if axis == 0:
            continue
        module = parse_module(ARGMAX.format(shape=shape, dim=dim, out=out).replace(
            "HloModule argmax_bench", "HloModule argmax_bench, num_partitions=8"))
        flat = per_device.reshape(8, -1)
        warm(module, [x])
        times = alternating({
            "per_device": lambda: seconds(lambda: interpreter.execute(module, [per_device]), 2),
            "numpy_all": lambda: seconds(lambda: np.argmax(per_device, axis=2) if axis
                                         else np.argmax(flat, axis=1), 5),
            "replicated": lambda: seconds(lambda: interpreter.execute(module, [x]), 5),
            "numpy_one": lambda: seconds(lambda: np.argmax(x, axis=axis), 20)}, rounds)
        records.append(goal(f"argmax {label} at 8 devices, one input per device (module) / "
                            "numpy.argmax on [8, ...]",
                            ratios(times["per_device"], times["numpy_all"]), 10.0))
        records.append(goal(f"argmax {label} at 8 devices, one input for all (module) / "
                            "numpy.argmax on it",
                            ratios(times["replicated"], times["numpy_one"]), 10.0))
    return records


# --------------------------------------------------------------------------------------------
# 6. transcendentals.

def bench_transcendental(rounds: int) -> list[dict]:
    """A one-op f32[1M] module at 8 devices / numpy's f32 function on the [8, 1M] input; and
    the all-gather + tanh of 256 KB per device at 4096 devices (1 GiB gathered): the bytes the
    interpreter allocates (tracemalloc) per gathered byte, and that at 2 MB per device."""
    import tracemalloc

    devices, size = 8, 1 << 20
    x = np.random.default_rng(0).standard_normal((devices, size), dtype=np.float32)
    positive = np.abs(x) + np.float32(1e-3)
    records = []
    for name, fn, data in (("tanh", np.tanh, x), ("exponential", np.exp, x),
                           ("log", np.log, positive), ("sine", np.sin, x)):
        module = parse_module(f"""HloModule bench_{name}, num_partitions={devices}

ENTRY main {{
  x = f32[{size}] parameter(0)
  ROOT y = f32[{size}] {name}(x)
}}
""")
        with np.errstate(all="ignore"):
            times = alternating({
                "run": lambda: seconds(lambda: interpreter.execute(module, [data])),
                "numpy": lambda: seconds(lambda: fn(data))}, rounds)
        records.append(goal(f"f32 {name} / numpy f32", ratios(times["run"], times["numpy"]),
                            1.5))
    gather_devices, per_device = 4096, 1 << 16
    module = parse_module(f"""HloModule bench_gather_tanh, num_partitions={gather_devices}

ENTRY main {{
  x = f32[{per_device}] parameter(0)
  g = f32[{gather_devices * per_device}] all-gather(x), channel_id=1, replica_groups={{}}, dimensions={{0}}
  t = f32[{gather_devices * per_device}] tanh(g)
  ROOT s = f32[{per_device}] slice(t), slice={{[0:{per_device}]}}
}}
""")
    inputs = np.random.default_rng(1).standard_normal((gather_devices, per_device),
                                                      dtype=np.float32)
    tracemalloc.start()
    interpreter.execute(module, [inputs])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    gathered = gather_devices * per_device * 4
    full_gathered = gather_devices * (2 << 20)
    projected = (peak / gathered * full_gathered + full_gathered) / 2 ** 30
    records.append(goal("all-gather + tanh, 2 MB per device at 4096 devices (projected)",
                        [projected], 20.0, unit="GiB",
                        allocated_per_gathered_byte=peak / gathered,
                        note="interpreter allocations measured at 256 KB per device, scaled "
                             "to 2 MB, plus the caller's 8 GiB of inputs"))
    return records


# --------------------------------------------------------------------------------------------
# 7. MPI.

MATMUL_HEAVY = """HloModule bench_matmul_heavy, num_partitions={devices}

ENTRY main {{
  x = f32[{n},{n}] parameter(0)
  a = f32[{n},{n}] dot(x, x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  b = f32[{n},{n}] tanh(a)
  c = f32[{n},{n}] dot(b, x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  d = f32[{n},{n}] tanh(c)
  e = f32[{n},{n}] dot(d, x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT f = f32[{n},{n}] tanh(e)
}}
"""


def _matmul_inputs(devices: int, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((devices, n, n)) / np.sqrt(n)).astype(np.float32)]


def _mpi_worker(spec: dict) -> None:
    """Under mpiexec: run the module ``repeat`` times, rank 0 prints the slowest rank's times."""
    from mpi4py import MPI

    from neuron_sim.interpreter.backends.mpi import run_mpi

    comm = MPI.COMM_WORLD
    if spec["kind"] == "matmul":
        module = parse_module(MATMUL_HEAVY.format(devices=spec["devices"], n=spec["n"]))
        inputs: Any = _matmul_inputs(spec["devices"], spec["n"])
    else:
        module = parse_module(ALL_REDUCE.format(devices=spec["devices"],
                                                elements=spec["size_mib"] * (1 << 18)))
        inputs = [np.random.default_rng(0).standard_normal(
            (spec["devices"], spec["size_mib"] * (1 << 18)), dtype=np.float32)]
    run_mpi(module, inputs, mode=spec.get("mode", "exact"), gather=False)  # warm-up
    runs = []
    for _ in range(spec["repeat"]):
        comm.Barrier()
        start = time.perf_counter()
        run_mpi(module, inputs, mode=spec.get("mode", "exact"), gather=False)
        runs.append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
    if comm.Get_rank() == 0:
        print(json.dumps(runs), flush=True)


def _mpiexec(spec: dict, ranks: int) -> list[float]:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    command = [str(mpiexec), "-n", str(ranks), sys.executable, str(Path(__file__).resolve()),
               "--mpi-worker", json.dumps(spec)]
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"mpiexec failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


ALL_REDUCE = """HloModule bench_all_reduce, replica_count={devices}

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY main {{
  p = f32[{elements}] parameter(0)
  ROOT ar = f32[{elements}] all-reduce(p), replica_groups={{}}, to_apply=add
}}
"""


def bench_mpi(rounds: int, all_reduce_mib: int = 16) -> list[dict]:
    """``mpiexec -n 2`` (each rank limits its BLAS threads to its share) / the local backend
    on a module of three f32[384,384] matmuls per device at 8 devices (run time without process
    start-up); and the all-reduce (sum) of ``all_reduce_mib`` MiB per device over 8 devices
    on each backend, as algorithm bandwidth (tensor bytes / time)."""
    if not (Path(sys.executable).parent / "mpiexec").exists():
        return [{"goal": "mpiexec -n 2 / local", "skipped": "no mpiexec next to Python"}]
    devices, n = 8, 384
    module = parse_module(MATMUL_HEAVY.format(devices=devices, n=n))
    inputs = _matmul_inputs(devices, n)
    warm(module, inputs)
    local = [seconds(lambda: interpreter.execute(module, inputs)) for _ in range(rounds)]
    mpi = _mpiexec({"kind": "matmul", "devices": devices, "n": n, "repeat": rounds}, 2)
    records = [goal("mpiexec -n 2 / local (matmul-heavy, 8 devices)",
                    ratios(sorted(mpi), sorted(local)), 1.0,
                    local_s=statistics.median(local), mpi_s=statistics.median(mpi))]
    size = all_reduce_mib * (1 << 20)
    ar_module = parse_module(ALL_REDUCE.format(devices=devices, elements=size // 4))
    ar_inputs = [np.random.default_rng(0).standard_normal((devices, size // 4),
                                                          dtype=np.float32)]
    local_ar = [seconds(lambda: interpreter.execute(ar_module, ar_inputs)) for _ in range(rounds)]
    bandwidth = {"local": [size / t / 1e9 for t in local_ar]}
    for ranks in (2, 4):
        for mode in ("exact", "native"):
            times = _mpiexec({"kind": "all-reduce", "devices": devices,
                              "size_mib": all_reduce_mib, "mode": mode, "repeat": rounds}, ranks)
            bandwidth[f"mpi {mode} W={ranks}"] = [size / t / 1e9 for t in times]
    records.append({"goal": f"all-reduce of {all_reduce_mib} MiB x 8 devices, GB/s (whole run)",
                    **{k: spread(v) for k, v in bandwidth.items()}})
    return records


# --------------------------------------------------------------------------------------------
# 8. against XLA:CPU.

def bench_xla(rounds: int) -> list[dict]:
    """Execution of each program of tests/data/jax/timings.json (written by
    scripts/time_jax_corpus.py under JAX) / XLA:CPU's compiled executable's time recorded
    there; and the whole job, a fresh ``neuron-sim run`` of the module on its inputs, / a fresh
    JAX process compiling and running the same program."""
    path = REPO / "tests" / "data" / "jax" / "timings.json"
    if not path.exists():
        return [{"goal": "execution / XLA:CPU", "skipped": f"{path.relative_to(REPO)} is "
                 "missing: run scripts/time_jax_corpus.py with JAX"}]
    from neuron_sim.hlo import parse_module_file
    from neuron_sim.io import read_npz

    corpus = REPO / "tests" / "data" / "jax"
    programs = json.loads(path.read_text())["programs"]
    execution, execution_cpu, jobs, jobs_cpu = {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        env = fresh_process_env(Path(tmp) / "pycache")
        for name, record in programs.items():
            module = parse_module_file(corpus / f"{name}.hlo")
            arrays = {k: v for k, v in read_npz(corpus / f"{name}.npz").items()
                      if k.startswith("arg")}
            warm(module, arrays)
            number = max(1, int(0.05 / max(1e-6, seconds(lambda: interpreter.execute(
                module, arrays)))))
            walls, cpus = [], []
            for _ in range(rounds):
                cpu = time.process_time()
                walls.append(seconds(lambda: interpreter.execute(module, arrays), number))
                cpus.append((time.process_time() - cpu) / number)
            execution[name] = statistics.median(walls) / record["execute_s"]
            execution_cpu[name] = statistics.median(cpus) / record["execute_s"]
            inputs = Path(tmp) / f"{name}.npz"
            np.savez(inputs, **arrays)
            command = [sys.executable, "-m", "neuron_sim.cli", "run", str(corpus / f"{name}.hlo"),
                       "--inputs", str(inputs), "-o", str(Path(tmp) / f"{name}.out.npz")]
            child_seconds(command, env)  # writes the bytecode (as an installed package has it)
            runs = [child_seconds(command, env) for _ in range(min(rounds, 3))]
            jobs[name] = statistics.median(wall for wall, _ in runs) / record["job_s"]
            jobs_cpu[name] = statistics.median(cpu for _, cpu in runs) / record["job_s"]
    geomean = float(np.exp(np.mean(np.log(list(execution.values())))))
    job_geomean = float(np.exp(np.mean(np.log(list(jobs.values())))))
    job_cpu_geomean = float(np.exp(np.mean(np.log(list(jobs_cpu.values())))))
    worst = max(execution, key=execution.get)
    cpu_geomean = float(np.exp(np.mean(np.log(list(execution_cpu.values())))))
    cpu_worst = max(execution_cpu, key=execution_cpu.get)
    return [goal("execution / XLA:CPU, geometric mean of 10 programs", [geomean], 1.0,
                 per_program=execution),
            goal("execution / XLA:CPU, worst program", [execution[worst]], 2.0, program=worst),
            # The same with our process's CPU time (XLA's was recorded on an idle machine; on a
            # loaded one, wall time also counts the time other processes hold the cores).
            goal("execution (CPU time) / XLA:CPU, geometric mean", [cpu_geomean], 1.0,
                 per_program=execution_cpu),
            goal("execution (CPU time) / XLA:CPU, worst program", [execution_cpu[cpu_worst]],
                 2.0, program=cpu_worst),
            goal("whole job / fresh JAX process, geometric mean", [job_geomean], 0.15,
                 per_program=jobs),
            # The job's CPU seconds (user + system) against JAX's recorded (idle) wall time.
            goal("whole job (CPU time) / fresh JAX process, geometric mean", [job_cpu_geomean],
                 0.15, per_program=jobs_cpu)]


# --------------------------------------------------------------------------------------------
# 9. scaling.

def bench_scaling(rounds: int, largest: int = 65536) -> list[dict]:
    """The mostly-replicated module (a while loop of a small MLP on replicated weights, a
    per-device slice and an all-reduce) from 8 devices up: seconds per run and the ratio to
    8 devices (linear in devices would be the device ratio; held-once values keep it far
    below)."""
    rng = np.random.default_rng(0)
    inputs = [(rng.standard_normal((64, 64)) / 8).astype(np.float32),
              rng.standard_normal(64).astype(np.float32)]
    curve = {}
    devices = 8
    while devices <= largest:
        module = parse_module(MOSTLY_REPLICATED.format(devices=devices, steps=50))
        warm(module, inputs)
        curve[devices] = statistics.median(seconds(lambda: interpreter.execute(module, inputs))
                                           for _ in range(rounds))
        devices *= 8 if devices < 4096 else 16
    base = curve[8]
    top = max(curve)
    return [goal(f"scaling: {top} devices / 8 devices (time ratio)", [curve[top] / base],
                 top / 8, curve_s={str(d): t for d, t in curve.items()})]


# --------------------------------------------------------------------------------------------
# 10. z3 fold proofs.

ALL_INPUTS_FOLD = """HloModule bench_fold, num_partitions={devices}

%sum (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}}

ENTRY %main (x: f32[1024]) -> f32[{shard}] {{
  %x = f32[1024]{{0}} parameter(0)
  %ar = f32[1024]{{0}} all-reduce(%x), channel_id=1, replica_groups=[1,{devices}]<=[{devices}], use_global_device_ids=true, to_apply=%sum
  %pid = u32[] partition-id()
  %size = u32[] constant({shard})
  %offset = u32[] multiply(%pid, %size)
  ROOT %ds = f32[{shard}]{{0}} dynamic-slice(%ar, %offset), dynamic_slice_sizes={{{shard}}}
}}
"""


def all_inputs_fold_proof(rounds: int, devices: int = 512) -> dict:
    """Issue 17's goal: the all-reduce + dynamic-slice of f32[1024] per device folded into a
    reduce-scatter by the seed pass, proved equal for all inputs on ``devices`` devices by the
    symbolic run (``neuron_sim.proofs.all_inputs.prove``, not z3): seconds (target < 10) and term-table size."""
    from neuron_sim.passes import get_pass
    from neuron_sim.verify.api import apply_passes
    from neuron_sim.proofs.all_inputs import prove

    source = parse_module(ALL_INPUTS_FOLD.format(devices=devices, shard=1024 // devices))
    target, changed, _ = apply_passes(
        source, [get_pass("aws_neuron_rewrite_all_reduce_dynamic_slice")])
    times, proof = [], None
    for _ in range(max(1, min(rounds, 3))):
        proof = prove(source, target, Topology(1, devices))
        times.append(proof.seconds)
    return goal(f"all-inputs proof of the AR + DS -> RS fold, f32[1024] at {devices} devices",
                times, 10.0, unit="s", changed=changed, outcome=proof.outcome,
                terms=proof.terms)


def bench_symbolic(rounds: int, pools: bool = False) -> list[dict]:
    """Proof time per all-reduce + dynamic-slice pair at 8, 64 and 4096 devices for the offset
    families that matter (the JAX idiom in a fusion, a position table under shuffled groups,
    strided groups with pid / G: PROVEN; the seed's repeated pool: REFUTED with a minimized
    witness); with ``pools``, the constant-pool theorem table (G*g <= 4096)."""
    import random

    from neuron_sim.passes.neuron.offset_pools import pool_repeated
    from neuron_sim.proofs.index.ar_ds_pairs import find_ar_ds_pairs
    from neuron_sim.proofs.index.fold_proof import prove_pair
    from neuron_sim.proofs.idioms import (ArDsIdiom, offset_divmod, offset_jax, offset_pool,
                                        offset_table)

    width, shard = 8, 4
    rows = []
    for devices in (8, 64, 4096):
        count = devices // width
        contiguous = tuple(tuple(range(k * width, (k + 1) * width)) for k in range(count))
        strided = tuple(tuple(k + count * j for j in range(width)) for k in range(count))
        ids = list(range(devices))
        random.Random(devices).shuffle(ids)
        shuffled = tuple(tuple(ids[k:k + width]) for k in range(0, devices, width))
        position = {f: i for group in shuffled for i, f in enumerate(group)}
        full = width * shard
        idioms = {
            "jax_fused_contiguous": ArDsIdiom(
                "jax", 1, devices, contiguous, "flattened", full, shard,
                offset_jax(shard, full, mask=width - 1, fused=True), fused=True),
            "table_shuffled": ArDsIdiom(
                "table", 1, devices, shuffled, "flattened", full, shard,
                offset_table([position[p] for p in range(devices)], shard)),
            "divide_strided": ArDsIdiom(
                "divide", 1, devices, strided, "flattened", full, shard,
                offset_divmod(shard, divisor=count, use_remainder=False)),
            "repeated_pool_strided": ArDsIdiom(
                "pool", 1, devices, strided, "flattened", full, shard,
                offset_pool(pool_repeated(count, width, shard), shard)),
        }
        topology = Topology(1, devices)
        for name, idiom in idioms.items():
            (pair,) = find_ar_ds_pairs(parse_module(idiom.text()))
            times, proof = [], None
            for _ in range(rounds):
                start = time.perf_counter()
                proof = prove_pair(pair, topology)
                times.append(time.perf_counter() - start)
            rows.append({"idiom": name, "devices": devices, "status": str(proof.status),
                         "witness_device": proof.witness.device if proof.witness else None,
                         **spread(times)})
    result: list[dict] = [{"goal": "z3 fold proofs (seconds per pair)", "pairs": rows},
                          all_inputs_fold_proof(rounds)]
    if pools:
        from neuron_sim.proofs.pools import pool_table

        start = time.perf_counter()
        table = pool_table(max_devices=4096)
        result.append({"goal": "constant-pool theorems (G*g <= 4096)",
                       "seconds": time.perf_counter() - start,
                       "rows": [{"pool": r.pool, "layout": str(r.layout), "verdict": r.status,
                                 "seconds": r.seconds} for r in table]})
    return result


# --------------------------------------------------------------------------------------------
# 11. reading.

DATA = REPO / "tests" / "data"


def generated_text(megabytes: float) -> str:
    """A module of about ``megabytes`` MB: 80% a chain of adds with metadata, 20% constants."""
    lines = ["HloModule bench_reading", "", "ENTRY main {", "  x = f32[128]{0} parameter(0)"]
    size = sum(len(line) + 1 for line in lines)
    budget = megabytes * 1e6
    row = ", ".join(f"{v:.6f}" for v in np.random.default_rng(0).standard_normal(1000))
    k = 0
    while size < 0.2 * budget:
        line = f"  c{k} = f32[1000]{{0}} constant({{{row}}})"
        lines.append(line)
        size += len(line) + 1
        k += 1
    previous, i = "x", 0
    while size < budget:
        line = (f"  add.{i} = f32[128]{{0}} add(f32[128]{{0}} {previous}, f32[128]{{0}} x), "
                f'metadata={{op_name="jit(f)/jit(main)/add" source_file="model.py" '
                f"source_line={i % 997}}}")
        lines.append(line)
        size += len(line) + 1
        previous, i = f"add.{i}", i + 1
    lines.append(f"  ROOT out = f32[128]{{0}} negate({previous})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def reading(text: str, name: str) -> dict:
    """Parse + check ``text``: seconds, MB/s, and peak traced bytes per MB of text."""
    import tracemalloc

    megabytes = len(text.encode()) / 1e6
    start = time.perf_counter()
    check_module(parse_module(text, name))
    seconds = time.perf_counter() - start
    tracemalloc.start()
    check_module(parse_module(text, name))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"file": name, "mb": megabytes, "seconds": seconds, "mb_per_s": megabytes / seconds,
            "peak_mb_per_input_mb": peak / 1e6 / megabytes}


def largest_corpus_file() -> Path:
    return max(DATA.rglob("*.hlo"), key=lambda p: p.stat().st_size)


def bench_reading(rounds: int, text_mb: float = 50.0) -> list[dict]:
    """Parse + check of the largest corpus file and of a generated ``text_mb`` MB module."""
    largest = largest_corpus_file()
    return [{"goal": "parse + check", **reading(largest.read_text(),
                                                 str(largest.relative_to(REPO)))},
            {"goal": "parse + check", **reading(generated_text(text_mb),
                                                 f"generated {text_mb:g} MB")}]


# --------------------------------------------------------------------------------------------
# 12. the sweep at 256 devices.

SWEEP_DEVICES = 256
SWEEP_EVERY = 40


def bench_sweep(rounds: int, full: bool = False) -> list[dict]:
    """``sweep --max-devices 256`` (target: under 10 minutes on this machine's cores).

    By default a systematic sample: every 40th chunk of 8 consecutive cases (the unit a
    ``--jobs`` worker runs; consecutive cases share a topology and layout, which the proofs'
    caches use) runs in this process and its CPU time (``process_time``, which the machine's
    other load does not inflate as much as wall time) is scaled to all cases; the wall
    projection divides it by the usable cores (``--jobs``' default), assuming they are free.
    The CPU minutes themselves are a second goal (<= 10, issue 27's margin). ``full``: the
    real command, wall and CPU seconds and the largest process's peak memory."""
    from neuron_sim.verify.sweep.generator import generate
    from neuron_sim.verify.sweep.runner import default_passes, run_case, usable_cores

    cores = usable_cores()
    if full:
        import resource
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "neuron_sim.cli", "sweep", "--max-devices",
                            str(SWEEP_DEVICES), "--json", str(Path(tmp) / "sweep.json")],
                           check=False, stdout=subprocess.DEVNULL, env=_env())
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return [goal(f"sweep --max-devices {SWEEP_DEVICES} (the real command, {cores} jobs)",
                     [wall / 60], 10.0, unit="min", cpu_minutes=round(cpu / 60, 1),
                     peak_rss_mib=round(after.ru_maxrss / 1024))]
    cases, _ = generate(SWEEP_DEVICES)
    chunk = 8
    sample = [case for start in range(0, len(cases), chunk * SWEEP_EVERY)
              for case in cases[start:start + chunk]]
    passes = default_passes()
    projected = []
    unsound: dict[str, int] = {key: 0 for key in passes}
    disagreements = 0
    for _ in range(max(1, rounds // 5)):
        cpu = 0.0
        for case in sample:
            start = time.process_time()
            result = run_case(case, passes)
            cpu += time.process_time() - start
            disagreements += len(result.disagreements)
            for key, outcome in result.passes.items():
                unsound[key] += outcome.outcome == "fired_unsound"
        projected.append(cpu * len(cases) / len(sample) / 60)
    import resource
    what = f"({len(cases)} cases; every {SWEEP_EVERY}th chunk of {chunk} run)"
    return [goal(f"sweep --max-devices {SWEEP_DEVICES}, projected wall on {cores} free cores "
                 f"{what}", [m / cores for m in projected], 10.0, unit="min",
                 cpu_minutes=[round(m, 1) for m in projected], sampled=len(sample),
                 unsound_folds_in_sample=unsound, disagreements_in_sample=disagreements,
                 peak_rss_mib_of_this_process=round(
                     resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)),
            goal(f"sweep --max-devices {SWEEP_DEVICES}, projected CPU minutes {what}",
                 projected, 10.0, unit="CPU min")]


FUZZ_PASSES = ("aws_neuron_rewrite_all_reduce_dynamic_slice",
               "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups",
               "aws_neuron_delete_permute")
FUZZ_SEED = 7
FUZZ_TARGET = 50.0  # modules per CPU second


def bench_fuzz(rounds: int, full: bool = False, modules: int = 800) -> list[dict]:
    """``neuron-sim fuzz --passes`` the three seed passes ``--time 60s --seed 7`` at 8 devices:
    modules per CPU second (generation, verification and minimizing; the command's own
    ``modules_per_cpu_second``) over the target of 50, so 1.0 meets it.

    By default each round runs the campaign in this process on the first ``modules`` modules
    of seed 7 with the timed campaign's minimizing budget (the same modules and failures in
    every round and on every machine; the CPU time is ``process_time``, as the command's).
    ``full``: each round runs the real timed command and reads its JSON (how many modules it
    draws depends on the machine's speed and load)."""
    per_cpu_second: list[float] = []
    detail: dict[str, Any] = {}
    if full:
        for _ in range(rounds):
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "fuzz.json"
                subprocess.run([sys.executable, "-m", "neuron_sim.cli", "fuzz", "--passes",
                                ",".join(FUZZ_PASSES), "--time", "60s", "--seed",
                                str(FUZZ_SEED), "--json", str(out)],
                               check=False, stdout=subprocess.DEVNULL, env=_env())
                document = json.loads(out.read_text())
            per_cpu_second.append(document["modules_per_cpu_second"])
            detail.setdefault("modules", []).append(document["modules"])
        name = "fuzz --time 60s --seed 7 (the real command), modules per CPU second / 50"
    else:
        from neuron_sim.verify.fuzz.runner import run_campaign
        for _ in range(rounds):
            campaign = run_campaign(list(FUZZ_PASSES), examples=modules, seed=FUZZ_SEED,
                                    minimize_budget=True)
            per_cpu_second.append(campaign.modules / campaign.cpu_seconds)
            detail.setdefault("minimize_share", []).append(
                round(campaign.minimize_seconds / campaign.cpu_seconds, 2))
        name = (f"fuzz, seed {FUZZ_SEED}, first {modules} modules (timed campaign's "
                "minimizing budget), modules per CPU second / 50")
    return [goal(name, [rate / FUZZ_TARGET for rate in per_cpu_second], 1.0, at_most=False,
                 modules_per_cpu_second=[round(rate, 1) for rate in per_cpu_second],
                 **detail)]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


SECTIONS = {"verify": bench_verify, "startup": bench_startup, "instruction": bench_instruction,
            "one_op": bench_one_op, "argmax": bench_argmax,
            "transcendental": bench_transcendental, "mpi": bench_mpi, "xla": bench_xla,
            "scaling": bench_scaling, "symbolic": bench_symbolic, "reading": bench_reading,
            "sweep": bench_sweep, "fuzz": bench_fuzz}


def machine() -> dict[str, Any]:
    """Where the numbers were taken, and how loaded the machine was."""
    try:
        model = next(line.split(":", 1)[1].strip()
                     for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor()
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "load_average": list(os.getloadavg())}


def _format(record: dict) -> str:
    if "skipped" in record:
        return f"  {record['goal']}: skipped ({record['skipped']})"
    if "median" in record:
        unit = record["unit"]
        verdict = "met" if record["met"] else "NOT met"
        cpu = f"; CPU time {record['cpu_time_ratio']:.3g}x" if "cpu_time_ratio" in record else ""
        return (f"  {record['goal']}: {record['median']:.3g} {unit} "
                f"[{record['min']:.3g} .. {record['max']:.3g}] "
                f"(target {record['comparison']} {record['target']:g}; {verdict}{cpu})")
    if "pairs" in record:
        return f"  {record['goal']}:\n" + "\n".join(
            f"    {row['idiom']:<24} {row['devices']:>5} devices  {row['status']:<8} "
            f"witness {row['witness_device'] if row['witness_device'] is not None else '-':>4}  "
            f"{row['median'] * 1e3:8.1f} ms" for row in record["pairs"])
    return f"  {record['goal']}: " + json.dumps({k: v for k, v in record.items() if k != "goal"},
                                               default=str)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per measurement (5)")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections: {', '.join(SECTIONS)}")
    parser.add_argument("--pools", action="store_true", help="symbolic: the pools table too")
    parser.add_argument("--text-mb", type=float, default=50.0,
                        help="reading: size of the generated module (50)")
    parser.add_argument("--sweep-full", action="store_true",
                        help="sweep: run the real 256-device command instead of a sample")
    parser.add_argument("--fuzz-full", action="store_true",
                        help="fuzz: run the real --time 60s command each round instead")
    parser.add_argument("--fuzz-modules", type=int, default=800,
                        help="fuzz: modules per in-process round (800)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--mpi-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mpi_worker:
        _mpi_worker(json.loads(args.mpi_worker))
        return 0
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}")
    report: dict[str, Any] = {"machine": machine(), "rounds": args.rounds, "sections": {}}
    for name in chosen:
        if name == "symbolic":
            records = bench_symbolic(args.rounds, pools=args.pools)
        elif name == "reading":
            records = bench_reading(args.rounds, args.text_mb)
        elif name == "sweep":
            records = bench_sweep(args.rounds, full=args.sweep_full)
        elif name == "fuzz":
            records = bench_fuzz(args.rounds, full=args.fuzz_full, modules=args.fuzz_modules)
        else:
            records = SECTIONS[name](args.rounds)
        report["sections"][name] = records
        if not args.json:
            print(f"{name}:")
            for record in records:
                print(_format(record), flush=True)
    report["machine"]["load_average_after"] = list(os.getloadavg())
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
