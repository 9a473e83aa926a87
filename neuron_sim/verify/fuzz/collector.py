"""The cyclic garbage collector during a campaign: the objects alive before it are left alone.

A campaign makes and drops a few thousand modules, and every module is a cycle (instructions
name their computation, which lists them; operands and users name each other), so the cyclic
collector runs all along. Each of its full passes walks every tracked object of the process,
most of them the imported modules' own (about 45,000), which it can never free: on 400
modules of seed 7 its four full passes cost 0.15 s of CPU, 0.03 s with those objects frozen
(``gc.freeze``), of about 8 s. ``objects_before_frozen`` freezes what is alive when the
campaign starts and unfreezes it when the campaign ends (they are collected as before from
then on); what the campaign makes is collected as before. Nothing a campaign computes depends
on when the collector runs.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["objects_before_frozen"]


@contextlib.contextmanager
def objects_before_frozen() -> Iterator[None]:
    """Within the block the collector skips the objects alive when it began (see the module
    docstring); a block inside another leaves the outer one's to it."""
    if gc.get_freeze_count():  # an enclosing block (or the caller) froze them already
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
