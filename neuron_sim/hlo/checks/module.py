"""Rules about a module as a whole and about the attributes the parser keeps as text: the call
graph has no cycle, control predecessors exist, a custom-call's operand layout constraints fit
its operands, a result accuracy names only the fields XLA knows, an original value gives every
leaf a value.

XLA rejects each of these before or while building the module (its call graph, its parser);
here the parser keeps the text and these rules judge it, one sentence per problem.
"""

from __future__ import annotations

import re

from neuron_sim.hlo.checks.core import HloCheckError, error_for, fmt
from neuron_sim.hlo.attributes import COMPUTATION_ATTRIBUTES
from neuron_sim.hlo.checks.text import raw_text, split_top_level
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.shapes import Shape, TupleShape


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
    calls_none = COMPUTATION_ATTRIBUTES.isdisjoint
    for inst in comp.instructions:
        if calls_none(inst.attrs):  # most instructions name no computation
            continue
        for called in inst.called_computations:
            seen.setdefault(called, None)
    return list(seen)


_NAME = re.compile(r"%?([^\s,{}%]+)")


def check_control_predecessors(comp: HloComputation) -> None:
    """Every name in ``control-predecessors={...}`` is an instruction of the same computation
    (XLA's parser: "'x' is not defined")."""
    if not any("control-predecessors" in inst.attrs for inst in comp.instructions):
        return
    names = {inst.name for inst in comp.instructions}
    for inst in comp.instructions:
        value = inst.attrs.get("control-predecessors")
        if value is None:
            continue
        for name in _NAME.findall(str(value).strip().strip("{}")):
            if name not in names:
                raise error_for(inst, f"control predecessor %{name} is not defined in "
                                      f"computation {comp.name}")


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
        shapes = split_top_level(str(value))
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
    text = raw_text(value)
    try:
        for item in split_top_level(text):
            key, _, rest = item.partition("=")
            key, rest = key.strip(), rest.strip()
            if key == "mode":
                if rest.lower() not in _ACCURACY_MODES:
                    raise error_for(inst, f"result_accuracy mode {rest} is not default or "
                                          f"highest")
            elif key == "tolerance":
                for field in split_top_level(rest):
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


# Compiled on first use (re's cache): few modules have an origin.
_ORIGIN_TOKEN = (r'\s*(?:(?P<punct>[(),])|\{\s*\}|(?P<leaf>\{\s*"(?:[^"\\]|\\.)*"'
                 r'\s*(?:\{[^{}]*\}\s*)?\}))')


def _origin_leaves(text: str) -> tuple[set[tuple[int, ...]], bool] | None:
    """The leaf indices an ``origin={...}`` gives a value, and whether it writes an empty leaf
    ``{}``, read as XLA's ParseOriginalValue walks it (``(`` opens a tuple, ``,`` moves to the
    next element); None if the text is not of that form (the parser's concern)."""
    inner = text.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        return None
    inner, at = inner[1:-1], 0
    index: list[int] = []
    given: set[tuple[int, ...]] = set()
    empty = False
    while at < len(inner.rstrip()):
        match = re.compile(_ORIGIN_TOKEN).match(inner, at)
        if match is None:
            return None
        at = match.end()
        punct = match.group("punct")
        if punct == "(":
            index.append(0)
        elif punct == ")":
            if not index:
                return None
            index.pop()
        elif punct == ",":
            if not index:
                return None
            index[-1] += 1
        elif match.group("leaf") is not None:
            given.add(tuple(index))
        else:
            empty = True
    return given, empty


def leaf_indices(shape: Shape) -> set[tuple[int, ...]]:
    """The tuple index of every array (or token) leaf of ``shape``."""
    leaves: set[tuple[int, ...]] = set()
    stack: list[tuple[Shape, tuple[int, ...]]] = [(shape, ())]
    while stack:
        node, index = stack.pop()
        if isinstance(node, TupleShape):
            stack.extend((e, index + (i,)) for i, e in enumerate(node.elements))
        else:
            leaves.add(index)
    return leaves


def check_original_values(module: HloModule) -> None:
    """Every leaf of an instruction's ``origin={...}`` names the value it came from: no empty
    ``{}`` leaf and no leaf left out (XLA's VerifyOriginalValue: "Leaf nodes in an original
    value is expected to contain values")."""
    for comp in module.computations:
        for inst in comp.instructions:
            value = inst.attrs.get("origin")
            if value is None:
                continue
            read = _origin_leaves(raw_text(value))
            if read is None:
                continue
            given, empty = read
            if empty or not leaf_indices(inst.shape) <= given:
                raise error_for(inst, f"a leaf of its original value origin={raw_text(value)} "
                                      f"names no value")
