"""The one distinction every command makes: is an error the user's to fix, or ours?

``UserError`` marks a problem in what the user gave — a file that does not parse, a module that
breaks an HLO rule, a topology or device assignment that does not fit, inputs of the wrong shape,
an unknown pass or option. The command line reports it as one sentence naming the file or the
instruction and exits with 2. Any other exception escaping a command is our own bug: it is
reported as an internal error with a pointer to ``--debug``.

``UserError`` derives from ``ValueError`` so that code catching ``ValueError`` keeps working;
the reverse does not hold — a bare ``ValueError`` is not the user's fault.
"""

from __future__ import annotations


class UserError(ValueError):
    """A mistake in what the user gave us: reported as one sentence, exit code 2."""


class UsageError(UserError):
    """Bad command-line usage: a missing or conflicting option, a value out of range."""
