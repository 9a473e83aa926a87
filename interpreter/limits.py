"""How deep the interpreter nests computations, and the one sentence past it.

The evaluator executes a called computation (call, fusion, while, conditional, a reducer) by
calling itself, and so does the memory estimate; Python's stack bounds both. XLA accepts any
acyclic call graph, so this is our limitation, not the module's fault: a module whose calls nest
deeper than ``MAX_CALL_DEPTH`` is refused up front as unimplemented — ``run`` says so in one
sentence, ``verify`` reports ``ERROR: Unsupported`` — instead of failing with a RecursionError
half-way through. 150 leaves room: chains of 200 nested calls still execute.

The depth is checked on every execute (modules are mutable, so it is not kept), hence walked
cheaply: each computation's callees are collected once, from the attributes that name
computations, instead of through ``HloModule.call_depth``'s per-instruction property calls.
"""

from __future__ import annotations

import sys

from neuron_sim.errors import UserError
from neuron_sim.hlo import HloComputation, HloModule
from neuron_sim.hlo.attributes import COMPUTATION_ATTRIBUTES

from interpreter.errors import Unimplemented

MAX_CALL_DEPTH = 150


class CallDepthExceeded(Unimplemented, UserError):
    """Calls nested deeper than the interpreter executes: unsupported, said in one sentence."""


def require_call_depth(module: HloModule) -> None:
    """Raise CallDepthExceeded if ``module``'s calls nest deeper than MAX_CALL_DEPTH."""
    depth = call_depth(module)
    if depth > MAX_CALL_DEPTH:
        what = "call each other in a cycle" if depth == sys.maxsize else f"nest {depth} calls deep"
        raise CallDepthExceeded("nested calls", f"the computations of module {module.name} {what}; "
                                            f"the interpreter executes at most {MAX_CALL_DEPTH} "
                                            "nested calls")


def call_depth(module: HloModule) -> int:
    """``module.call_depth()``: the longest chain of computations called inside one another from
    the entry (0: the entry calls nothing), ``sys.maxsize`` for a call cycle; a depth-first
    walk without recursion that visits each computation's callees once."""
    entry = module.entry
    if entry is None:
        return 0
    depth: dict[HloComputation, int] = {}
    callees = {entry: _callees(entry)}
    on_path = {entry}
    stack = [(entry, iter(callees[entry]))]
    while stack:
        computation, pending = stack[-1]
        for callee in pending:
            if callee in on_path:
                return sys.maxsize
            if callee not in depth:
                on_path.add(callee)
                callees[callee] = _callees(callee)
                stack.append((callee, iter(callees[callee])))
                break
        else:
            stack.pop()
            on_path.discard(computation)
            depth[computation] = max((depth[c] + 1 for c in callees[computation]), default=0)
    return depth[entry]


def _callees(computation: HloComputation) -> list[HloComputation]:
    """The computations ``computation``'s instructions call (``called_computations``)."""
    called: list[HloComputation] = []
    for inst in computation.instructions:
        attrs = inst.attrs
        if COMPUTATION_ATTRIBUTES.isdisjoint(attrs):
            continue
        for key in COMPUTATION_ATTRIBUTES.intersection(attrs):
            value = attrs[key]
            called.extend(value if isinstance(value, tuple) else (value,))
    return called
