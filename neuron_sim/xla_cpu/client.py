"""The caller's side of XLA:CPU: a worker process per device count, requests and replies.

Why a process: XLA's CPU client fixes its number of host devices when it starts, and loading
jaxlib costs seconds and hundreds of megabytes; a command that never uses XLA must not pay for
it. The worker (``worker.py``) is started on first use and kept for the life of the caller, so
a campaign compiles and runs thousands of modules on one client. If the worker dies (XLA
aborts on some modules) or runs past the time limit, the request is refused with what it
printed last, and the next request starts a new worker.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import select
import subprocess
import sys
import tempfile
from typing import Any, Mapping, Sequence

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.hlo import HloModule
from neuron_sim.io import fit_arguments
from neuron_sim.topology import Topology
from neuron_sim.xla_cpu.protocol import receive, send

MIN_DEVICES = 8  # a worker has at least this many devices, so 2..8-device campaigns share one
START_SECONDS = 120.0  # loading jaxlib on a busy machine
RUN_SECONDS = 60.0


def install_hint() -> str:
    return "pip install 'neuron-sim[xla]'"


class XlaError(UserError):
    """XLA:CPU could not be used for a module (one sentence)."""


class XlaUnavailable(XlaError):
    """jaxlib (or jax) is not installed."""


class XlaRefused(XlaError):
    """XLA would not parse, compile or run the module; the message is XLA's, on one line."""


class XlaTimeout(XlaRefused):
    """XLA did not finish within the time limit (the worker was stopped)."""


def jaxlib_installed() -> bool:
    """Whether jax and jaxlib can be imported, judged without importing them."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in ("jaxlib", "jax"))
    except (ImportError, ValueError):
        return False


def compact_assignment(topology: Topology) -> tuple[tuple[int, ...], ...]:
    """The topology's device assignment with its physical ids renumbered 0..D-1 in their
    order: the worker's devices are 0..D-1, and no HLO instruction observes a physical id."""
    ids = topology.device_ids
    ranks = np.empty(ids.size, dtype=np.int64)
    ranks[np.argsort(ids.ravel(), kind="stable")] = np.arange(ids.size)
    return tuple(tuple(int(v) for v in row) for row in ranks.reshape(ids.shape))


def per_device_arguments(module: HloModule, inputs: Sequence[Any] | Mapping[str, Any],
                         num_devices: int) -> list[np.ndarray]:
    """One ``[D, *shape]`` array per entry parameter from inputs as ``fit_arguments`` takes
    them (an input given once is repeated on every device). Tuple and token parameters are
    refused: the worker passes arrays only."""
    shapes = [p.shape for p in module.entry.parameters]
    for i, shape in enumerate(shapes):
        if not shape.is_array:
            raise XlaRefused(f"parameter {i} of {module.name} is {shape}: the XLA backend "
                             "passes array parameters only")
    arrays = []
    for shape, fitted in zip(shapes, fit_arguments(inputs, shapes, num_devices)):
        if fitted.ndim == len(shape.dims):
            fitted = np.broadcast_to(fitted, (num_devices, *fitted.shape))
        arrays.append(np.ascontiguousarray(fitted))
    return arrays


class XlaCpu:
    """A worker process with ``devices`` XLA:CPU host devices (started on first use)."""

    def __init__(self, devices: int = MIN_DEVICES, run_seconds: float | None = RUN_SECONDS,
                 fast_compile: bool = False) -> None:
        self.devices = devices
        self.fast_compile = fast_compile  # worker.FAST_COMPILE: for campaigns
        self.run_seconds = run_seconds
        self.process: subprocess.Popen | None = None
        self.log: Any = None
        self.info: dict = {}

    def start(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        if not jaxlib_installed():
            raise XlaUnavailable(f"jaxlib is not installed: {install_hint()}")
        environment = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "neuron_sim.xla_cpu.worker", str(self.devices)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=environment)
        status, detail = self._reply(START_SECONDS, "start")
        if status == "unavailable":
            self.close()
            raise XlaUnavailable(f"jax or jaxlib cannot be imported ({detail}): "
                                 f"{install_hint()}")
        self.info = detail

    def _reply(self, seconds: float, what: str) -> tuple[str, Any]:
        process = self.process
        assert process is not None and process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], seconds)
        if not ready:
            self.close()
            raise XlaTimeout(f"XLA:CPU did not {what} within {seconds:g} s")
        try:
            return receive(process.stdout)
        except EOFError:
            last = self._last_words()
            self.close()
            raise XlaRefused(f"XLA:CPU ended while it tried to {what}"
                             + (f": {last}" if last else "")) from None

    def _last_words(self) -> str:
        """The worker's last line on stderr that says something (XLA's check failure)."""
        if self.log is None:
            return ""
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().decode(errors="replace").splitlines()
                 if line.strip()]
        for line in reversed(lines):
            if "Check failed" in line or "error" in line.lower() or line.startswith("F"):
                return " ".join(line.split())[:500]
        return lines[-1][:500] if lines else ""

    def run(self, module: HloModule, arguments: list[np.ndarray], topology: Topology
            ) -> list[np.ndarray]:
        """Compile ``module`` for ``topology`` (cached by text) and run it on ``arguments``
        (one ``[D, *shape]`` array per parameter); one ``[D, *shape]`` array per result leaf.
        Raises XlaRefused with XLA's message."""
        return self.run_text(module.to_text(), arguments, topology)

    def run_text(self, text: str, arguments: list[np.ndarray], topology: Topology
                 ) -> list[np.ndarray]:
        """``run`` for a module given as text."""
        if topology.num_devices > self.devices:
            raise ValueError(f"{topology.num_devices} devices asked of a worker with "
                             f"{self.devices}")
        self.start()
        assert self.process is not None and self.process.stdin is not None
        request = {"hlo": text, "replicas": topology.replica_count,
                   "partitions": topology.num_partitions,
                   "assignment": compact_assignment(topology), "args": arguments,
                   "fast": self.fast_compile}
        try:
            send(self.process.stdin, request)
        except (BrokenPipeError, OSError):
            last = self._last_words()
            self.close()
            raise XlaRefused("XLA:CPU ended before it received the module"
                             + (f": {last}" if last else "")) from None
        status, detail = self._reply(self.run_seconds, "run the module")
        if status != "ok":
            raise XlaRefused(detail)
        return detail

    def run_batch(self, items: Sequence[tuple[HloModule, list[np.ndarray]]], topology: Topology
                  ) -> list[list[np.ndarray] | XlaRefused]:
        """Every module of ``items`` (each with its arguments, all for ``topology``) run by
        one compilation where XLA accepts them together (``batch.merge_modules``); per module
        its outputs or the XlaRefused of running it alone. A refused batch is retried without
        the module XLA's message names, or in halves when it names none."""
        from neuron_sim.xla_cpu.batch import batchable, mentioned_module, merge_modules

        results: list[list[np.ndarray] | XlaRefused | None] = [None] * len(items)

        def alone(i: int) -> None:
            module, arguments = items[i]
            try:
                results[i] = self.run(module, arguments, topology)
            except XlaRefused as error:
                results[i] = error

        def together(indices: list[int]) -> None:
            while len(indices) > 1:
                text, counts = merge_modules([items[i][0] for i in indices])
                arguments = [a for i in indices for a in items[i][1]]
                try:
                    outputs = self.run_text(text, arguments, topology)
                except XlaRefused as error:
                    k = mentioned_module(str(error))
                    if k is None or k >= len(indices):
                        half = len(indices) // 2
                        together(indices[:half])
                        together(indices[half:])
                        return
                    alone(indices[k])
                    indices = indices[:k] + indices[k + 1:]
                    continue
                start = 0
                for i, count in zip(indices, counts):
                    results[i] = outputs[start:start + count]
                    start += count
                return
            for i in indices:
                alone(i)

        together([i for i, (module, _) in enumerate(items) if batchable(module)])
        for i, result in enumerate(results):
            if result is None:
                alone(i)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            for stream in (process.stdin, process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.log is not None:
            self.log.close()
            self.log = None


_SHARED: dict[str, XlaCpu] = {}


def shared_xla(devices: int, fast_compile: bool = False) -> XlaCpu:
    """The process's worker with at least ``devices`` devices (a new, larger one replaces a
    smaller one); closed at exit."""
    current = _SHARED.get("worker")
    if current is None or current.devices < devices:
        if current is not None:
            current.close()
        else:
            atexit.register(lambda: _SHARED["worker"].close() if "worker" in _SHARED else None)
        current = XlaCpu(max(devices, MIN_DEVICES))
        _SHARED["worker"] = current
    current.fast_compile = fast_compile
    return current


def run_on_xla(module: HloModule, inputs: Sequence[Any] | Mapping[str, Any],
               topology: Topology | None = None) -> list[np.ndarray]:
    """``module`` compiled and executed by XLA:CPU on every device of ``topology`` (default:
    the module header's); one ``[D, *shape]`` array per result leaf, row f = flattened id f.
    ``inputs`` as ``neuron_sim.io.fit_arguments`` takes them."""
    topology = topology or Topology(module.replica_count, module.num_partitions)
    arguments = per_device_arguments(module, inputs, topology.num_devices)
    return shared_xla(topology.num_devices).run(module, arguments, topology)
