"""MetadataNaming (key ``aws_neuron_metadata_naming``, seed #21).

Seed: hlo-misc-cleanup-sweep.txt §1 (registry row #21, in the late metadata/legalization group)
and its NOTE: "MetadataNaming (#21) is plain-XLA op-naming, distinct from
aws_neuron_default_metadata (#65, an OpExpander that attaches default OpMetadata)". Nothing
more; the algorithm is inferred.

Our reading: XLA names an op by its OpMetadata ``op_type`` (the operation's kind) and
``op_name`` (its hierarchical name, e.g. ``jit(f)/add``). For every instruction that *has*
metadata, the missing one of the two is filled in: ``op_type`` with the opcode's spelling,
``op_name`` with the instruction's name. Fields already present are never changed, other fields
(``source_file``, ``stack_frame_id``...) are kept as written, and the two names go first, in
XLA's printing order. An instruction without metadata is aws_neuron_default_metadata's to
handle. Contract exact: metadata never changes a value. Known unsafety: none.

The metadata is kept in the IR as the text the parser read (``Raw``); ``metadata_fields`` and
``metadata_text`` are its reader and writer, and the printer prints the result verbatim.
"""

from __future__ import annotations

import re

from neuron_sim.errors import UserError
from neuron_sim.hlo.attributes import Raw
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext

_FIELD = re.compile(r'\s*([A-Za-z_]\w*)=("(?:[^"\\]|\\.)*"|[^\s}]+)')
NAMING_FIELDS = ("op_type", "op_name")


class MetadataSyntaxError(UserError):
    """Metadata text that is not ``{key=value ...}``."""


def metadata_fields(text: str) -> dict[str, str]:
    """``{op_name="a/b" stack_frame_id=3}`` -> ``{"op_name": '"a/b"', "stack_frame_id": "3"}``
    (values as written, quotes included)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise MetadataSyntaxError(f"metadata {text!r} is not in braces")
    body = body[1:-1]
    fields: dict[str, str] = {}
    at = 0
    while body[at:].strip():
        match = _FIELD.match(body, at)
        if match is None:
            raise MetadataSyntaxError(f"metadata {text!r} has no key=value at {body[at:]!r}")
        fields[match.group(1)] = match.group(2)
        at = match.end()
    return fields


def metadata_text(fields: dict[str, str]) -> str:
    """The inverse of ``metadata_fields``: op_type and op_name first, as XLA prints them."""
    ordered = [k for k in NAMING_FIELDS if k in fields] + \
        [k for k in fields if k not in NAMING_FIELDS]
    return "{" + " ".join(f"{k}={fields[k]}" for k in ordered) + "}"


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def default_naming(inst: HloInstruction) -> dict[str, str]:
    """The op_type and op_name an instruction gets when it has none."""
    return {"op_type": quoted(inst.opcode.spelling), "op_name": quoted(inst.name)}


class MetadataNaming(HloPass):
    """Fill in a missing op_type / op_name in every instruction's existing metadata."""

    name = "aws_neuron_metadata_naming"
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §1 #21 (and its NOTE: plain-XLA op-naming)"
    summary = ("metadata without op_type / op_name gets them (opcode, instruction name); "
               "other fields and instructions without metadata untouched")
    pipelines = {"neuron-closer": 21}
    seed_says = "#21, \"plain-XLA op-naming\", distinct from #65"
    our_reading = ("metadata without `op_type` / `op_name` gets them (opcode spelling, "
                   "instruction name); present fields and instructions without metadata untouched")
    known_unsafety = "none (metadata never changes a value)"

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        changed = False
        for inst in module.instructions():
            if not inst.has("metadata"):
                continue
            try:
                fields = metadata_fields(str(inst.get("metadata")))
            except MetadataSyntaxError as exc:
                raise MetadataSyntaxError(f"%{inst.name}: {exc}") from None
            missing = {k: v for k, v in default_naming(inst).items() if k not in fields}
            if not missing:
                continue
            inst.set_attr("metadata", Raw(metadata_text({**missing, **fields})))
            self.record(f"%{inst.name} metadata += {', '.join(sorted(missing))}")
            changed = True
        return changed
