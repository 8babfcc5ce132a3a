"""A JSON-schema check of the subset scripts/llm_grammar.py builds grammars for, so the tests can say whether a
constrained reply is valid without a third-party validator: `type` (one or a list), `enum`, `const`,
`anyOf`/`oneOf`, `nullable`, object `properties`/`required`/`additionalProperties` (closed when absent, as the
grammars are), number bounds, string lengths, array `items` and sizes.
"""

from __future__ import annotations


def valid(schema, v) -> bool:
    """Whether v is valid against schema (the subset the builder reads; objects closed unless opened)."""
    if schema is True or schema == {}:
        return True
    if "const" in schema:
        return v == schema["const"] and type(v) is type(schema["const"])
    if "enum" in schema:
        return any(v == e and type(v) is type(e) for e in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return any(valid(s, v) for s in schema[key])
    if v is None and schema.get("nullable"):
        return True
    types = schema.get("type", ["object"] if "properties" in schema else None)
    if types is None:
        return True
    types = [types] if isinstance(types, str) else types
    return any(_valid_typed(t, schema, v) for t in types)


def _valid_typed(t, s, v) -> bool:
    if t == "null":
        return v is None
    if t == "boolean":
        return isinstance(v, bool)
    if t in ("integer", "number"):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (t == "integer" and not isinstance(v, int)):
            return False
        return all(
            [
                "minimum" not in s or v >= s["minimum"],
                "maximum" not in s or v <= s["maximum"],
                "exclusiveMinimum" not in s or v > s["exclusiveMinimum"],
                "exclusiveMaximum" not in s or v < s["exclusiveMaximum"],
            ]
        )
    if t == "string":
        return isinstance(v, str) and s.get("minLength", 0) <= len(v) <= s.get("maxLength", 10**9)
    if t == "array":
        return (
            isinstance(v, list)
            and s.get("minItems", 0) <= len(v) <= s.get("maxItems", 10**9)
            and all(valid(s.get("items", True), x) for x in v)
        )
    if not isinstance(v, dict):
        return False
    props = s.get("properties", {})
    if any(r not in v for r in s.get("required", [])):
        return False
    extra = s.get("additionalProperties", False)
    for k, x in v.items():
        if k in props:
            if not valid(props[k], x):
                return False
        elif extra is False or not valid(extra, x):
            return False
    return True
