"""What the ``Banks``, ``AgentMemory`` and ``Learn`` mixins share when they build requests.

Why this exists: the three client mixins turn Python arguments into request messages the same way:
unset ``optional`` fields are left out so the server's defaults apply, and enum arguments accept the
enum value or its name (any case, ``-`` or ``_``, with or without the enum's prefix).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Union


def msg(cls: Any, **fields: Any) -> Any:
    """``cls(**fields)`` without the ``None`` values: an unset ``optional`` field takes the server's default."""
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
