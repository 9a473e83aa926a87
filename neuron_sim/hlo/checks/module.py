"""Rules about a module as a whole and about the attributes the parser keeps as text: the call
graph has no cycle, control predecessors exist, a custom-call's operand layout constraints fit
its operands, a result accuracy names only the fields XLA knows.

XLA rejects each of these before or while building the module (its call graph, its parser);
here the parser keeps the text and these rules judge it, one sentence per problem.
"""

from __future__ import annotations

import re

from neuron_sim.hlo.attributes import Raw
from neuron_sim.hlo.checks.core import HloCheckError, error_for, fmt
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule


def check_call_graph(module: HloModule) -> None:
    """No computation calls itself, directly or through others (XLA's CallGraph is a DAG; a
    cycle would make every walk of the module endless). Iterative, so deep call chains are
    fine. Raises HloCheckError naming the computations of the first cycle found."""
    state: dict[HloComputation, int] = {}
    for root in module.computations:
        if root in state:
            continue
        path = [root]
        state[root] = 1
        stack = [iter(_callees(root))]
        while stack:
            callee = next(stack[-1], None)
            if callee is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(callee) == 1:
                cycle = path[path.index(callee):] + [callee]
                names = " -> ".join(c.name for c in cycle)
                if len(cycle) == 2:
                    reason = f"computation {callee.name} calls itself"
                else:
                    reason = f"computations call each other in a cycle: {names}"
                raise HloCheckError(reason, computation=callee.name)
            if callee not in state:
                state[callee] = 1
                path.append(callee)
                stack.append(iter(_callees(callee)))


def _callees(comp: HloComputation) -> list[HloComputation]:
    seen: dict[HloComputation, None] = {}
    for inst in comp.instructions:
        for called in inst.called_computations:
            seen.setdefault(called, None)
    return list(seen)


_NAME = re.compile(r"%?([^\s,{}%]+)")


def check_control_predecessors(comp: HloComputation) -> None:
    """Every name in ``control-predecessors={...}`` is an instruction of the same computation
    (XLA's parser: "'x' is not defined")."""
    names = {inst.name for inst in comp.instructions}
    for inst in comp.instructions:
        value = inst.attrs.get("control-predecessors")
        if value is None:
            continue
        for name in _NAME.findall(str(value).strip().strip("{}")):
            if name not in names:
                raise error_for(inst, f"control predecessor %{name} is not defined in "
                                      f"computation {comp.name}")


def _split_top_level(text: str) -> list[str]:
    """The comma-separated items of ``{a, b, ...}`` that are not nested in brackets."""
    inner = text.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        raise ValueError(text)
    inner = inner[1:-1]
    items, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    items.append(inner[start:])
    return [item.strip() for item in items if item.strip()]


_LAYOUT = re.compile(r"\{[^{}]*\}")


def _without_layouts(shape_text: str) -> str:
    """A shape's text with its layouts and spaces dropped: ``f32[2,3]{1,0}`` -> ``f32[2,3]``."""
    text = re.sub(r"\s+", "", shape_text)
    while True:
        stripped = _LAYOUT.sub("", text)
        if stripped == text:
            return text
        text = stripped


def check_operand_layout_constraints(inst: HloInstruction) -> None:
    """A custom-call's ``operand_layout_constraints`` give one shape per operand, each the
    operand's shape up to its layout (XLA's parser counts them; HandleCustomCall checks each
    is compatible with its operand)."""
    value = inst.attrs.get("operand_layout_constraints")
    if value is None:
        return
    try:
        shapes = _split_top_level(str(value))
    except ValueError:
        raise error_for(inst, f"operand_layout_constraints={value} is not a list of "
                              f"shapes") from None
    if len(shapes) != len(inst.operands):
        raise error_for(inst, f"operand_layout_constraints gives {len(shapes)} shape"
                              f"{'s' * (len(shapes) != 1)} but there are {len(inst.operands)} "
                              f"operands")
    for i, (shape, operand) in enumerate(zip(shapes, inst.operands)):
        if _without_layouts(shape) != _without_layouts(str(operand.shape)):
            raise error_for(inst, f"operand layout constraint {i} {shape} does not fit "
                                  f"operand %{operand.name} of shape {fmt(operand.shape)}")


# xla_data.proto's ResultAccuracy: a mode (DEFAULT or HIGHEST) or a tolerance.
_ACCURACY_MODES = ("default", "highest")
_TOLERANCE_FIELDS = ("atol", "rtol", "ulps")


def check_result_accuracy(inst: HloInstruction) -> None:
    """``result_accuracy={mode=highest}`` or ``{tolerance={atol=.., rtol=.., ulps=..}}`` and
    nothing else (the fields of xla_data.proto's ResultAccuracy and its Tolerance)."""
    value = inst.attrs.get("result_accuracy")
    if value is None:
        return
    text = value.text if isinstance(value, Raw) else str(value)
    try:
        for item in _split_top_level(text):
            key, _, rest = item.partition("=")
            key, rest = key.strip(), rest.strip()
            if key == "mode":
                if rest.lower() not in _ACCURACY_MODES:
                    raise error_for(inst, f"result_accuracy mode {rest} is not default or "
                                          f"highest")
            elif key == "tolerance":
                for field in _split_top_level(rest):
                    name, _, number = field.partition("=")
                    if name.strip() not in _TOLERANCE_FIELDS:
                        raise error_for(inst, f"result_accuracy tolerance has no field "
                                              f"{name.strip()} (only atol, rtol and ulps)")
                    float(number)
            else:
                raise error_for(inst, f"result_accuracy has no field {key} (only mode or "
                                      f"tolerance)")
    except HloCheckError:
        raise
    except ValueError:
        raise error_for(inst, f"result_accuracy={text} is not a mode or a tolerance") from None
