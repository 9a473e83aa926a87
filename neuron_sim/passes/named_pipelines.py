"""Named pipelines, built from the passes' own slots: ``PIPELINES[name]`` is the ordered tuple of
(``#NN``, registry key).

A pass takes its place in a named pipeline by declaring it (``HloPass.pipelines``, e.g.
``pipelines = {"neuron-closer": 14}``); a pipeline is every registered pass
(``registry.BUILTIN_PASSES``) that names it, in ``#NN`` order. Two passes claiming one slot is an
error at import.

``neuron-closer`` is the Neuron HLO closer of hlo-misc-cleanup-sweep.txt: its passes in
registration order (the ``#NN`` of RegisterHiloHloPasses, which the seed calls a strong proxy
for the default pipeline's order). The seed fixes #21 MetadataNaming, #55 DynamicSliceTranspose,
#65 aws_neuron_default_metadata, #67 ResolveSelfComparison, #69 DeviceAssignmentLegalization,
#90 ConstantSliceClampSimplifier, #93 RewriteScatterPartition, #109
ConstantSliceConvertCanonicalizer, #110 DynamicSliceReshapeCanonicalizer; the other numbers are
our assignment of the slots the seed's abstract lists per group (IO shaping #14–#16, #54, #59;
canonicalizers #17, #24, #66; late #20, #22, #52, #70), placed where its prose puts each pass
(docs/passes.md, "The closer"). InjectNumericalErrors (#22, debug) joins the pipeline only when
its ``targets`` option is given (``HloPass.pipeline_only_with``): the error injector means
something only when asked to plant an error, so the default closer runs without it and says so
(``left_out``); run on its own without targets it still fails with the seed's sentence.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from neuron_sim.errors import UserError
from neuron_sim.passes.base import HloPass
from neuron_sim.passes.options import option_given
from neuron_sim.passes.registry import BUILTIN_PASSES, get_pass, pass_class


def pipelines_of(classes: Sequence[type[HloPass]]) -> dict[str, tuple[tuple[int, str], ...]]:
    """Every pipeline the ``classes`` name in their ``pipelines``, its (``#NN``, key) entries in
    slot order; pipelines in the order the classes first name them. Raises ValueError when two
    passes claim one slot of a pipeline."""
    slots: dict[str, dict[int, str]] = {}
    for cls in classes:
        for pipeline, number in cls.pipelines.items():
            taken = slots.setdefault(pipeline, {})
            if number in taken:
                raise ValueError(f"passes {taken[number]} and {cls.name} both take #{number} of "
                                 f"pipeline {pipeline}")
            taken[number] = cls.name
    return {pipeline: tuple(sorted(entries.items())) for pipeline, entries in slots.items()}


PIPELINES: dict[str, tuple[tuple[int, str], ...]] = pipelines_of(BUILTIN_PASSES)


def pipeline_entries(name: str, skip: Iterable[str] = ()) -> list[tuple[int, str]]:
    """The (``#NN``, key) entries of pipeline ``name`` in order, without the keys in ``skip``.

    An unknown pipeline, or a skipped key that is not in it, is a UserError."""
    if name not in PIPELINES:
        raise UserError(f"unknown pipeline {name!r}; pipelines are: {', '.join(PIPELINES)}")
    entries = list(PIPELINES[name])
    keys = {key for _, key in entries}
    skipped = set(skip)
    unknown = sorted(skipped - keys)
    if unknown:
        raise UserError(f"--skip {unknown[0]}: pipeline {name} has no pass {unknown[0]!r}")
    return [(number, key) for number, key in entries if key not in skipped]


def absent_keys(name: str, given: Mapping[str, str], skip: Iterable[str] = ()) -> list[str]:
    """The keys of pipeline ``name`` (less ``skip``) that stay out because the option they need
    to join (``pipeline_only_with``) is not among the user's options ``given``."""
    absent = []
    for _, key in pipeline_entries(name, skip):
        cls = pass_class(key)
        needed = cls.pipeline_only_with
        if needed and not option_given(given, key, cls.__name__, needed):
            absent.append(key)
    return absent


def left_out(name: str, given: Mapping[str, str], skip: Iterable[str] = ()) -> list[str]:
    """One line per pass ``absent_keys`` names, for a command to report beside its result."""
    return [f"{key}: left out of {name}: no {pass_class(key).pipeline_only_with} given "
            f"(--pass-option {key}.{pass_class(key).pipeline_only_with}=... runs it)"
            for key in absent_keys(name, given, skip)]


def named_pipeline(name: str, skip: Iterable[str] = (),
                   given: Mapping[str, str] | None = None) -> list[HloPass]:
    """New instances of pipeline ``name``'s passes, in order (``pipeline_entries``), less those
    that ``absent_keys`` names for the user's options ``given``."""
    absent = set(absent_keys(name, given or {}, skip))
    return [get_pass(key) for _, key in pipeline_entries(name, skip) if key not in absent]
