"""The XLA worker process: ``python -m neuron_sim.xla_cpu.worker DEVICES``.

It starts XLA's CPU client with DEVICES host devices (a count fixed for the life of a client,
which is why XLA runs here and not in the caller), then answers requests from
``client.XlaCpu`` until its stdin closes. A request is a dict: ``hlo`` (module text),
``replicas``, ``partitions``, ``assignment`` (rows of device ids in 0..DEVICES-1, one per
replica), ``fast`` (``FAST_COMPILE``'s options), ``args`` (one ``[D, *shape]`` array per entry parameter, row f = flattened id f). The
reply is ``("ok", outputs)`` (one ``[D, *shape]`` array per result leaf), ``("refused", text)``
(XLA would not parse, compile or run it) or ``("error", text)``.

The module is compiled as it is: it is parsed by XLA's own HLO parser, converted to StableHLO
(what ``compile_and_load`` takes) and compiled with the topology's replica and partition
counts and device assignment. A module with partitions is already partitioned (it uses
``partition-id`` itself), but XLA:CPU compiles ``num_partitions > 1`` only with SPMD
partitioning on; the sharding-propagation and SPMD-partitioning passes are therefore disabled
(``xla_disable_hlo_passes``), so each device runs the module's instructions as written.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections import OrderedDict
from typing import Any

import numpy as np

from neuron_sim.xla_cpu.protocol import receive, send

# Passes that would re-partition an already partitioned module (GSPMD and Shardy).
DISABLED_PASSES = "sharding-propagation,spmd-partitioning,shardy-xla"
CACHED_EXECUTABLES = 16
# A campaign's compile options: LLVM at -O0, the classic elemental emitters instead of the
# fusion emitters, dots by XLA's own kernels instead of YNNPACK fusions. They cut a compile
# about four times; the HLO pipeline (where XLA decides what an HLO computes) is unchanged.
FAST_COMPILE = [("xla_backend_optimization_level", 0), ("xla_cpu_use_fusion_emitters", False),
                ("xla_cpu_experimental_ynn_fusion_type", "")]
# jaxlib refuses a debug option it does not have (jaxlib 0.12 has no
# xla_cpu_use_fusion_emitters): such a speed option is dropped, never the module.
UNKNOWN_OPTION = re.compile(r"No such compile option: '([\w.]+)'")


class Worker:
    """One XLA CPU client and its compiled executables (most recently used first kept)."""

    def __init__(self, devices: int) -> None:
        import jax

        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", devices)
        jax.config.update("jax_enable_x64", True)  # 64-bit inputs stay 64-bit
        from jax._src import xla_bridge
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        from jaxlib import _hlo, _jax

        self.jax = jax
        self.hlo = _hlo
        self.xla = _jax
        self.mesh_sharding = lambda devices: NamedSharding(Mesh(np.array(devices), ("d",)),
                                                           PartitionSpec())
        self.backend = xla_bridge.get_backend("cpu")
        self.devices = self.backend.devices()
        self.executables: OrderedDict[tuple, Any] = OrderedDict()
        self.unknown: set[str] = set()  # FAST_COMPILE options this jaxlib does not know

    def executable(self, text: str, replicas: int, partitions: int,
                   assignment: tuple[tuple[int, ...], ...], fast: bool = False) -> Any:
        key = (hashlib.sha1(text.encode()).hexdigest(), replicas, partitions, assignment, fast)
        cached = self.executables.get(key)
        if cached is not None:
            self.executables.move_to_end(key)
            return cached
        module = self.hlo.hlo_module_from_text(text)
        stablehlo = self.xla.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
        options = self.xla.CompileOptions()
        options.num_replicas = replicas
        options.num_partitions = partitions
        build = options.executable_build_options
        build.num_replicas = replicas
        build.num_partitions = partitions
        overrides = list(FAST_COMPILE) if fast else []
        if partitions > 1:
            build.use_spmd_partitioning = True
            build.use_shardy_partitioner = False
            overrides.append(("xla_disable_hlo_passes", DISABLED_PASSES))
        options.device_assignment = self.xla.DeviceAssignment.create(
            np.array(assignment, dtype=np.int64).reshape(replicas, partitions))
        devices = self.xla.DeviceList(tuple(self.devices[d] for row in assignment for d in row))
        while True:
            options.env_option_overrides = [o for o in overrides if o[0] not in self.unknown]
            try:
                executable = self.backend.compile_and_load(stablehlo, devices, options)
                break
            except Exception as error:  # a speed option this jaxlib does not have: drop it
                unknown = UNKNOWN_OPTION.search(str(error))
                if unknown is None or unknown.group(1) not in {n for n, _ in FAST_COMPILE}:
                    raise
                self.unknown.add(unknown.group(1))
        self.executables[key] = executable
        if len(self.executables) > CACHED_EXECUTABLES:
            self.executables.popitem(last=False)
        return executable

    def run(self, request: dict) -> list[np.ndarray]:
        replicas, partitions = request["replicas"], request["partitions"]
        assignment = tuple(tuple(row) for row in request["assignment"])
        executable = self.executable(request["hlo"], replicas, partitions, assignment,
                                     request.get("fast", False))
        flat = [d for row in assignment for d in row]
        flattened_of = {device: f for f, device in enumerate(flat)}
        order = [d.id for d in executable.local_devices()]
        devices = [self.devices[d] for d in order]
        sharding = self.mesh_sharding(devices)
        arguments = []
        for array in request["args"]:
            shards = [self.jax.device_put(array[flattened_of[d]], self.devices[d])
                      for d in order]
            arguments.append(self.jax.make_array_from_single_device_arrays(
                array.shape[1:], sharding, shards))
        results = executable.execute_sharded(arguments)
        outputs = []
        for shards in results.disassemble_into_single_device_arrays():
            rows: list[Any] = [None] * len(flat)
            for shard in shards:
                (device,) = shard.devices()
                rows[flattened_of[device.id]] = np.asarray(shard)
            outputs.append(np.stack(rows))
        return outputs


def one_line(error: BaseException) -> str:
    """XLA's message as one line: its first line (with the next when it ends in a colon, as
    the parser's 'Syntax error ...:' does), whitespace collapsed."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    text = lines[0]
    if text.rstrip().endswith(":") and len(lines) > 1:
        text += " " + lines[1]
    return " ".join(text.split())


def serve(argv: list[str]) -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Anything else written to stdout (a library's print) must not corrupt the replies.
    sys.stdout = sys.stderr
    try:
        worker = Worker(int(argv[0]))
    except ImportError as error:
        send(stdout, ("unavailable", one_line(error)))
        return 0
    send(stdout, ("ready", {"devices": len(worker.devices), "jaxlib": worker.jax.__version__}))
    while True:
        try:
            request = receive(stdin)
        except EOFError:
            return 0
        try:
            reply = ("ok", worker.run(request))
        except worker.xla.JaxRuntimeError as error:
            reply = ("refused", one_line(error))
        except Exception as error:  # noqa: BLE001 - reported to the client, the worker lives on
            reply = ("refused", f"{type(error).__name__}: {one_line(error)}")
        send(stdout, reply)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(serve(sys.argv[1:]))
