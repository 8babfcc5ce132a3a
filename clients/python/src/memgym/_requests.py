"""What the ``Banks``, ``AgentMemory`` and ``Learn`` mixins share when they build requests.

Why this exists: the three client mixins turn Python arguments into request messages the same way:
unset ``optional`` fields are left out so the server's defaults apply, and enum arguments accept the
enum value or its name (any case, ``-`` or ``_``, with or without the enum's prefix).

Text is checked by the server's one text rule (the book's "Errors and limits"); the only part checked here is
the one the server cannot see: a Python ``str`` may hold a lone surrogate (``"\\ud800"``, from
``json.loads`` or ``surrogateescape``), which is not Unicode text and cannot be encoded to protobuf's
UTF-8. Such a value is refused before anything is sent, as ``MemgymError(INVALID_ARGUMENT)`` naming the
field, where protobuf would raise an unrelated encoding error.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

import grpc

from memgym.errors import MemgymError


def lone_surrogate(value: Any, field: str) -> Optional[str]:
    """Why ``value`` (a string, or strings inside lists and mappings) cannot be sent, or ``None``: the first
    lone surrogate, by field, code point and character position (never the value)."""
    if isinstance(value, str):
        for at, c in enumerate(value):
            if "\ud800" <= c <= "\udfff":
                return (
                    f"{field}: holds a lone surrogate U+{ord(c):04X} at character {at}; text must be valid "
                    "Unicode (a surrogate pair is one character)"
                )
        return None
    if isinstance(value, Mapping):
        return next((w for k, v in value.items() if (w := lone_surrogate(v, f"{field}.{k}"))), None)
    if isinstance(value, (list, tuple)):
        return next((w for i, v in enumerate(value) if (w := lone_surrogate(v, f"{field}[{i}]"))), None)
    return None


def msg(cls: Any, **fields: Any) -> Any:
    """``cls(**fields)`` without the ``None`` values: an unset ``optional`` field takes the server's default.
    A string with a lone surrogate is refused (module doc)."""
    for k, v in fields.items():
        why = lone_surrogate(v, k)
        if why:
            raise MemgymError(grpc.StatusCode.INVALID_ARGUMENT, why, method=cls.__name__)
    return cls(**{k: v for k, v in fields.items() if v is not None})


def _canon(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def pick(
    value: Union[None, int, str], names: Mapping[str, int], prefixes: Sequence[str], what: str, default: int = 0
) -> int:
    """The enum value ``value`` names: ``default`` for ``None``, an ``int`` as it is, else a name of ``names``
    (``-`` and ``_`` alike, any case), each of ``prefixes`` removed first. ``ValueError`` for an unknown name."""
    if value is None:
        return default
    if isinstance(value, int):
        return value
    key = _canon(value)
    for prefix in prefixes:
        prefix = _canon(prefix)
        key = key[len(prefix) :] if key.startswith(prefix) else key
    for name, number in names.items():
        if _canon(name) == key:
            return number
    raise ValueError(f"unknown {what} {value!r}; expected one of {sorted(names)}")
