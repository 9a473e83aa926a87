"""How deep the interpreter nests computations, and the one sentence past it.

The evaluator executes a called computation (call, fusion, while, conditional, a reducer) by
calling itself, and so does the memory estimate; Python's stack bounds both. XLA accepts any
acyclic call graph, so this is our limitation, not the module's fault: a module whose calls nest
deeper than ``MAX_CALL_DEPTH`` is refused up front as unimplemented — ``run`` says so in one
sentence, ``verify`` reports ``ERROR: Unsupported`` — instead of failing with a RecursionError
half-way through. 150 leaves room: chains of 200 nested calls still execute.

The depth is checked on every execute (modules are mutable, so it is not kept);
``HloModule.call_depth`` walks it cheaply, each computation's callees collected once.
"""

from __future__ import annotations

import sys

from neuron_sim.errors import UserError
from neuron_sim.hlo import HloModule

from neuron_sim.interpreter.errors import Unimplemented

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
    """``module.call_depth()`` (kept as the name the evaluator and tests use)."""
    return module.call_depth()
