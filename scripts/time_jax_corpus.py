"""JAX's side of the bench's XLA:CPU comparison: tests/data/jax/timings.json.

For the ten largest runnable compiled multi-device programs of the JAX corpus (by HLO text
size), this compiles each program as scripts/make_jax_corpus.py does (same cases, same inputs,
8 forced CPU devices) and records the median wall time of one execution of XLA:CPU's compiled
executable (``execute_s``, outputs ready) and of a whole fresh JAX process that imports JAX,
compiles and runs that one program (``job_s``). ``scripts/bench.py --only xla`` reads the file.

    python scripts/time_jax_corpus.py [--repeat 20] [--jobs 3]   # with jax installed

Needs an environment with ``jax`` (never a dependency of neuron-sim).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_jax_corpus as corpus  # noqa: E402  (sets XLA_FLAGS before importing jax)

jax = corpus.jax
np = corpus.np
COUNT = 10


def define_cases() -> dict[str, "corpus.Case"]:
    for define in (corpus._define_spmd_1d, corpus._define_spmd_2d,
                   corpus._define_spmd_control_flow, corpus._define_lowered_spmd,
                   corpus._define_named, corpus._define_single, corpus._define_program_files):
        define()
    return {case.name: case for case in corpus.CASES}


def chosen(cases: dict) -> list[str]:
    """The COUNT largest runnable compiled programs on more than one device."""
    manifest = json.loads((corpus.OUT_DIR / "MANIFEST.json").read_text())
    names = [e["name"] for e in manifest if e["runnable"] and e["kind"] == "compiled"
             and e["replica_count"] * e["num_partitions"] > 1 and e["name"] in cases]
    names.sort(key=lambda n: -(corpus.OUT_DIR / f"{n}.hlo").stat().st_size)
    return names[:COUNT]


def compiled_program(case) -> tuple[object, list]:
    """XLA's executable of ``case`` and its (sharded) arguments, built like run_case does."""
    devices = np.array(jax.devices())[:int(np.prod(case.mesh))]
    mesh = corpus.Mesh(devices.reshape(case.mesh), case.axes)
    if case.named:
        shardings = tuple(corpus.NamedSharding(mesh, s) for s in case.in_specs)
        extra = {} if case.out_specs is None else {
            "out_shardings": corpus.NamedSharding(mesh, case.out_specs)}
        with jax.set_mesh(mesh):
            args = [jax.device_put(a, s) for a, s in zip(case.args, shardings)]
            return jax.jit(case.fn, in_shardings=shardings, **extra).lower(*args).compile(), args
    jax.config.update("jax_use_shardy_partitioner", not case.gspmd)
    specs = (case.in_specs,) if isinstance(case.in_specs, corpus.P) else tuple(case.in_specs)
    program = jax.jit(corpus._shard_map(case.fn, mesh=mesh, in_specs=case.in_specs,
                                        out_specs=case.out_specs))
    args = [jax.device_put(a, corpus.NamedSharding(mesh, s)) for a, s in zip(case.args, specs)]
    return program.lower(*args).compile(), args


def execute_seconds(case, repeat: int) -> float:
    compiled, args = compiled_program(case)
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=3, help="fresh processes per program")
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = define_cases()
    if args.job:
        compiled, program_args = compiled_program(cases[args.job])
        jax.block_until_ready(compiled(*program_args))
        return 0
    timings = {}
    for name in chosen(cases):
        jobs = []
        for _ in range(args.jobs):
            start = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--job", name], check=True)
            jobs.append(time.perf_counter() - start)
        timings[name] = {"execute_s": execute_seconds(cases[name], args.repeat),
                         "job_s": statistics.median(jobs)}
        print(name, timings[name], flush=True)
    (corpus.OUT_DIR / "timings.json").write_text(json.dumps(
        {"jax": jax.__version__, "programs": timings}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
