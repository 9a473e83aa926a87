"""Execution threads: a computation runs on the thread its ``execution_thread="..."`` names
(``main`` when none is written) and may only call computations of its own thread, except
through an asynchronous op, which starts work on the thread it names.

XLA's InstructionVerifier (``xla/service/hlo_verifier.cc``): Preprocess holds every
``to_apply`` to its caller's thread; HandleFusion, HandleWhile, HandleCall,
HandleConditional and HandleCustomCall hold the called computations, and what those call in
turn (CheckCallableInstructionThreadName, CheckNestedComputationThreadNameEqual), to it; and
the async ops hold their ``async_execution_thread`` to the wrapped computation's
(CheckAsyncOpComputationThreadName).
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import error_for
from neuron_sim.hlo.checks.pairing import ASYNC_OPS
from neuron_sim.hlo.checks.text import MAIN_THREAD, execution_thread, raw_text, unquote
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode

# Callers whose called computations (and theirs, async ops excepted unless noted) share the
# caller's thread; True: async ops nested in them are held too (fusion only).
_CALLABLE = {Opcode.FUSION: True, Opcode.WHILE: False, Opcode.CALL: False,
             Opcode.CONDITIONAL: False, Opcode.CUSTOM_CALL: False}


def _async_thread(inst: HloInstruction) -> str | None:
    """The thread an async op names, if it names one."""
    value = inst.attrs.get("async_execution_thread")
    return None if value is None else unquote(raw_text(value))


def execution_threads(module: HloModule) -> dict[HloComputation, str]:
    """Each computation's thread: the one written after it, else the thread of the async op
    wrapping it (the parser's wrapped computations of ``custom-call-start(...),
    async_execution_thread=...`` carry no text of their own), else main."""
    threads: dict[HloComputation, str] = {}
    for comp in module.computations:
        for inst in comp.instructions:
            thread = _async_thread(inst) if inst.opcode in ASYNC_OPS else None
            if thread is None:
                continue
            for called in inst.called_computations:
                threads.setdefault(called, thread)
                if called.syntax_sugar:
                    _inherit_thread(called, thread, threads)
    for comp in module.computations:
        written = execution_thread(comp)
        if written is not None:
            threads[comp] = written
        threads.setdefault(comp, MAIN_THREAD)
    return threads


def _inherit_thread(wrapped: HloComputation, thread: str,
                    threads: dict[HloComputation, str]) -> None:
    """What the op of a sugared async wrapper (``call-start(...), to_apply=f,
    async_execution_thread="t"``) calls runs on the async thread, transitively: XLA's parser
    sets the thread with SetThreadName over the wrapped computation's callees, async ops and
    what they call aside (hlo_rematerialization_test AsyncComputation)."""
    stack = [wrapped]
    while stack:
        for inst in stack.pop().instructions:
            if inst.opcode in ASYNC_OPS:
                continue
            for called in inst.called_computations:
                if called not in threads:
                    threads[called] = thread
                    stack.append(called)


def _check_nested(comp: HloComputation, threads: dict[HloComputation, str], *,
                  skip_async: bool) -> None:
    """Everything ``comp`` calls, transitively, runs on ``comp``'s thread (async ops and what
    they call skipped with ``skip_async``). Iterative: call chains may be deep."""
    stack, seen = [comp], {comp}
    while stack:
        caller = stack.pop()
        for inst in caller.instructions:
            if skip_async and inst.opcode in ASYNC_OPS:
                continue
            for called in inst.called_computations:
                if threads[called] != threads[caller]:
                    raise error_for(inst, f"it calls {called.name} on thread "
                                          f"{threads[called]} from computation {caller.name} "
                                          f"on thread {threads[caller]}")
                if called not in seen:
                    seen.add(called)
                    stack.append(called)


def check_execution_threads(module: HloModule) -> None:
    """Callers and called computations agree on their execution thread, as XLA's verifier
    holds them (see the module docstring); one sentence naming the instruction otherwise."""
    threads = execution_threads(module)
    for comp in module.computations:
        for inst in comp.instructions:
            to_apply = inst.attrs.get("to_apply")
            if isinstance(to_apply, HloComputation) and threads[to_apply] != threads[comp]:
                raise error_for(inst, f"its to_apply {to_apply.name} runs on thread "
                                      f"{threads[to_apply]}, not on its computation's thread "
                                      f"{threads[comp]}")
            nested_async = _CALLABLE.get(inst.opcode)
            if nested_async is not None:
                for called in inst.called_computations:
                    if threads[called] != threads[comp]:
                        raise error_for(inst, f"it calls {called.name} on thread "
                                              f"{threads[called]}, not on its computation's "
                                              f"thread {threads[comp]}")
                    _check_nested(called, threads, skip_async=not nested_async)
            if inst.opcode is Opcode.ASYNC_START:
                thread = _async_thread(inst) or MAIN_THREAD
                for called in inst.called_computations:
                    if threads[called] != thread:
                        raise error_for(inst, f"its async_execution_thread {thread} differs "
                                              f"from the thread {threads[called]} of the "
                                              f"wrapped computation {called.name}")
                    _check_nested(called, threads, skip_async=False)

