"""Options a pass declares, and the user's ``NAME=VALUE`` / ``PASSKEY.NAME=VALUE`` for them.

A pass lists its options (``HloPass.options``: name, type, default, help). The user gives them
as text, from the command line (``--pass-option NAME=VALUE``, repeatable) or in a
``PassContext``. ``NAME`` goes to every pass in the pipeline that declares it; ``key.NAME`` to
the pass with registry key (or class name) ``key`` only. An option no pass declares is an error,
not silently ignored, as with a compiler flag nobody reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from neuron_sim.errors import UserError


class UnknownPassOptionError(UserError):
    """A pass option that no pass of the pipeline declares, malformed, or with a bad value."""


def boolean(text: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``), any case."""
    value = {"true": True, "1": True, "yes": True, "on": True,
             "false": False, "0": False, "no": False, "off": False}.get(text.strip().lower())
    if value is None:
        raise ValueError("expected true or false")
    return value


@dataclass(frozen=True)
class PassOption:
    """One option a pass declares: ``type`` converts the user's text to its value."""

    name: str
    type: Callable[[str], Any]
    default: Any
    help: str

    @property
    def type_name(self) -> str:
        """The type as ``neuron-sim passes --json`` and docs/passes.md name it (``int``,
        ``boolean``: the converter's name)."""
        return getattr(self.type, "__name__", str(self.type))

    def convert(self, value: Any, owner: str) -> Any:
        """``value`` (text from the user, or already typed) as this option's value."""
        if not isinstance(value, str):
            return value
        try:
            return self.type(value)
        except (ValueError, TypeError) as exc:
            kind = getattr(self.type, "__name__", "value")
            raise UnknownPassOptionError(
                f"pass option {owner}.{self.name}={value} is not a valid {kind}: {exc}") from exc


def split_option_name(name: str) -> tuple[str | None, str]:
    """``"dce.keep"`` -> ("dce", "keep"); ``"keep"`` -> (None, "keep")."""
    key, dot, option = name.partition(".")
    return (key, option) if dot else (None, name)


def option_given(given: Mapping[str, str], key: str, class_name: str, option: str) -> bool:
    """Whether the user's options ``given`` set ``option`` of the pass with registry ``key`` and
    class ``class_name`` (as ``NAME``, ``key.NAME`` or ``ClassName.NAME``), to a non-empty value."""
    return any(given.get(name, "").strip() for name in (option, f"{key}.{option}",
                                                         f"{class_name}.{option}"))


def parse_pass_option_args(values: Sequence[str]) -> dict[str, str]:
    """The ``--pass-option`` values (``NAME=VALUE`` or ``PASSKEY.NAME=VALUE``) as a mapping;
    a later value for the same name wins. Raises UnknownPassOptionError if one is malformed."""
    options: dict[str, str] = {}
    for text in values:
        name, equals, value = text.partition("=")
        key, option = split_option_name(name.strip())
        if not equals or not option or key == "":
            raise UnknownPassOptionError(f"--pass-option {text!r} is not NAME=VALUE or "
                                         "PASSKEY.NAME=VALUE")
        options[name.strip()] = value
    return options


def _listing(declared: Mapping[str, Sequence[PassOption]]) -> str:
    names = [f"{key}.{option.name}" for key, options in declared.items() for option in options]
    return ", ".join(names) if names else "none"


def check_option_names(declared: Mapping[str, Sequence[PassOption]], aliases: Mapping[str, str],
                       given: Mapping[str, str]) -> None:
    """Raise UnknownPassOptionError for a given option no pass of ``declared`` (key -> its
    options; ``aliases`` maps class names to keys) takes."""
    for name in given:
        key, option = split_option_name(name)
        if key is None:
            if not any(o.name == option for options in declared.values() for o in options):
                raise UnknownPassOptionError(
                    f"unknown pass option {name!r}: no pass of {', '.join(declared) or 'none'} "
                    f"declares it (declared options: {_listing(declared)})")
            continue
        key = aliases.get(key, key)
        if key not in declared:
            raise UnknownPassOptionError(
                f"pass option {name!r} names pass {key!r}, which is not among the passes run "
                f"({', '.join(declared) or 'none'})")
        if not any(o.name == option for o in declared[key]):
            raise UnknownPassOptionError(
                f"pass {key} declares no option {option!r} (its options: "
                f"{', '.join(o.name for o in declared[key]) or 'none'})")


def resolved_values(options: Sequence[PassOption], key: str, class_name: str,
                    given: Mapping[str, str], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Each declared option's value for the pass ``key``: its default, replaced by an unqualified
    given value, then a qualified one (``key.NAME`` or ``ClassName.NAME``), then ``overrides``
    (the constructor's). Given names the pass does not declare are not its business."""
    values: dict[str, Any] = {}
    for option in options:
        value: Any = option.default
        for name in (option.name, f"{class_name}.{option.name}", f"{key}.{option.name}"):
            if name in given:
                value = option.convert(given[name], key)
        if option.name in overrides:
            value = option.convert(overrides[option.name], key)
        values[option.name] = value
    return values
