"""Grammars for scripts/llm-server.py: llama.cpp GBNF built from a request's `tools` (for `tool_choice`) or its
`response_format`, so that a small model's reply is a well-formed, schema-valid tool call or JSON document.

Why this exists: a 0.5B model asked for a tool call rarely writes one in the format the chat template asks for;
engines that serve trainers constrain decoding instead (vLLM's `tool_choice="required"` and `response_format`
through xgrammar, SGLang through xgrammar, llama.cpp's server through GBNF). This module is the local endpoint's
equivalent, written for this project (no third-party converter): pure Python, so the light test tier can check
it without the llama.cpp runtime.

What a grammar allows (JSON Schema, the subset tool schemas use):
- `type` (one or a list), `enum`, `const`, `anyOf`/`oneOf` (alternatives; oneOf's exclusivity is not enforced),
  `nullable` (OpenAPI's), and no constraint at all (any JSON value);
- objects: `properties` in the schema's order, each written at most once, `required` ones always; extra keys
  only where `additionalProperties` is `true` or a schema. Absent `additionalProperties` means closed, as
  xgrammar's default (vLLM, SGLang) and llama.cpp's converter do. Under `strict` (a function's, or
  `response_format.json_schema.strict`) an object that allows extra keys is refused, as OpenAI's strict mode
  refuses it;
- integers within `minimum`/`maximum` (and the exclusive forms), exactly; numbers within whole-number bounds
  (a fraction is allowed below the upper bound, only zeros at it; no exponent under a bound), a fractional
  bound is refused; at most 15 integer digits;
- strings with `minLength`/`maxLength` (at most 1,000), JSON escapes included; arrays with `items`,
  `minItems`/`maxItems` (at most 1,000);
- annotations (`description`, `title`, `default`, `examples`, `$schema`, `$id`, `$comment`, `deprecated`,
  `readOnly`, `writeOnly`) are ignored; any other keyword (`pattern`, `format`, `$ref`, `allOf`, …) makes the
  grammar impossible to build, and the server answers HTTP 400 naming the keyword's path.

Whitespace between JSON tokens is bounded (at most four spaces, tabs or newlines), so a constrained model
cannot loop on blanks.
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import lru_cache

MAX_DIGITS = 15  # integer digits of an unbounded number: JSON numbers beyond 2^53 lose precision anyway
MAX_REPEAT = 1000  # the largest minLength/maxLength/minItems/maxItems a grammar spells out
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
ANNOTATIONS = {"description", "title", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly"}
KEYWORDS = {
    "type", "enum", "const", "anyOf", "oneOf", "nullable", "properties", "required", "additionalProperties",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "items", "minItems",
    "maxItems",
}
TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")

# The JSON rules every grammar shares.
BASE = r'''ws ::= [ \t\n]{0,4}
json-char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ("0" | [1-9] [0-9]{0,14})
json-number ::= json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws (json-member (ws "," ws json-member)*)? ws "}"
json-member ::= json-string ws ":" ws json-value
json-array ::= "[" ws (json-value (ws "," ws json-value)*)? ws "]"
'''


class SchemaError(Exception):
    """A schema no grammar is built for; `path` names the field (e.g. `tools[0].function.parameters.pattern`)."""

    def __init__(self, message: str, path: str):
        super().__init__(f"{path}: {message}")
        self.path = path


def literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def json_literal(value) -> str:
    """A JSON value, compactly serialized, as a GBNF literal."""
    return literal(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))


def _same_length(lo: str, hi: str) -> list[str]:
    """GBNF sequences matching the decimal numbers from lo to hi, both with the same number of digits."""
    if lo == hi:
        return [literal(lo)]
    if len(lo) == 1:
        return [f"[{lo}-{hi}]"]
    if lo[0] == hi[0]:
        return [f"{literal(lo[0])} ({' | '.join(_same_length(lo[1:], hi[1:]))})"]
    rest = len(lo) - 1
    out = []
    first, last = int(lo[0]), int(hi[0])
    if lo[1:] != "0" * rest:
        out.append(f"{literal(lo[0])} ({' | '.join(_same_length(lo[1:], '9' * rest))})")
        first += 1
    if hi[1:] != "9" * rest:
        tail = f"{literal(hi[0])} ({' | '.join(_same_length('0' * rest, hi[1:]))})"
        last -= 1
    else:
        tail = None
    if first <= last:
        out.append(f"[{first}-{last}] [0-9]{{{rest}}}")
    if tail:
        out.append(tail)
    return out


def natural_range(lo: int, hi: int) -> list[str]:
    """GBNF sequences matching the canonical decimal integers lo..hi (0 <= lo <= hi): no sign, no leading zero."""
    out = []
    for digits in range(len(str(lo)), len(str(hi)) + 1):
        a = max(lo, 10 ** (digits - 1) if digits > 1 else 0)
        b = min(hi, 10**digits - 1)
        if a <= b:
            out.extend(_same_length(str(a), str(b)))
    return out


def integer_range(lo: int, hi: int) -> str:
    """A GBNF expression matching the JSON integers lo..hi (written without a fraction or exponent)."""
    alts = []
    if lo < 0:
        neg = natural_range(max(1, -hi), -lo)
        alts.append(f'"-" ({" | ".join(neg)})')
    if hi >= 0:
        alts.extend(natural_range(max(lo, 0), hi))
    return " | ".join(alts)


class Builder:
    """Collects the rules of one grammar. `rule(schema, path)` returns the name of a rule matching the schema."""

    def __init__(self):
        self.rules: dict[str, str] = {}
        self.by_body: dict[str, str] = {}

    def add(self, hint: str, body: str) -> str:
        """A rule with this body (reused when one exists), named after `hint`."""
        if body in self.by_body:
            return self.by_body[body]
        base = "".join(c if c.isalnum() else "-" for c in hint).strip("-").lower() or "r"
        name, n = base, 1
        while name in self.rules or name in ("root", "ws") or name.startswith("json-"):
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        self.by_body[body] = name
        return name

    def text(self, root: str) -> str:
        return f"root ::= {root}\n" + BASE + "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())

    def rule(self, schema, path: str, hint: str, strict: bool) -> str:
        if schema is True or schema == {}:
            return "json-value"
        if not isinstance(schema, dict):
            raise SchemaError("a schema must be an object or true", path)
        for key in schema:
            if key not in KEYWORDS and key not in ANNOTATIONS:
                raise SchemaError(f"the keyword {key!r} is not supported by this server's grammar builder", f"{path}.{key}")
        alts = self._alternatives(schema, path, hint, strict)
        if schema.get("nullable") is True and "json-null" not in alts:
            alts.append("json-null")
        return alts[0] if len(alts) == 1 else self.add(hint, " | ".join(alts))

    def _alternatives(self, schema: dict, path: str, hint: str, strict: bool) -> list[str]:
        if "const" in schema:
            return [self.add(hint + "-const", json_literal(schema["const"]))]
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise SchemaError("enum must be a non-empty list", f"{path}.enum")
            return [self.add(hint + "-enum", " | ".join(json_literal(v) for v in values))]
        for key in ("anyOf", "oneOf"):
            if key in schema:
                subs = schema[key]
                if not isinstance(subs, list) or not subs:
                    raise SchemaError(f"{key} must be a non-empty list", f"{path}.{key}")
                return [self.rule(s, f"{path}.{key}[{i}]", f"{hint}-{i}", strict) for i, s in enumerate(subs)]
        types = schema.get("type")
        if types is None:
            if "properties" in schema or "additionalProperties" in schema or "required" in schema:
                types = ["object"]
            elif "items" in schema:
                types = ["array"]
            else:
                return ["json-value"]
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not types or not all(t in TYPES for t in types):
            raise SchemaError(f"type must be one of {', '.join(TYPES)} or a list of them", f"{path}.type")
        return [self._typed(t, schema, path, f"{hint}-{t}" if len(types) > 1 else hint, strict) for t in types]

    def _typed(self, t: str, s: dict, path: str, hint: str, strict: bool) -> str:
        if t == "string":
            lo, hi = _repeat(s, "minLength", "maxLength", path)
            if (lo, hi) == (0, None):
                return "json-string"
            return self.add(hint, f'"\\"" json-char{{{lo},{"" if hi is None else hi}}} "\\""')
        if t in ("boolean", "null"):
            return f"json-{t}"
        if t == "integer":
            lo, hi = _bounds(s, path, integer=True)
            if (lo, hi) == (None, None):
                return "json-int"
            cap = 10**MAX_DIGITS - 1
            lo, hi = (-cap if lo is None else lo), (cap if hi is None else hi)
            if lo > hi:
                raise SchemaError(f"no integer lies between {lo} and {hi}", path)
            return self.add(hint, integer_range(lo, hi))
        if t == "number":
            lo, hi = _bounds(s, path, integer=False)
            if (lo, hi) == (None, None):
                return "json-number"
            return self.add(hint, _number_range(lo, hi, path))
        if t == "array":
            item = self.rule(s.get("items", True), f"{path}.items", hint + "-item", strict)
            lo, hi = _repeat(s, "minItems", "maxItems", path)
            if hi == 0:
                return self.add(hint, '"[" ws "]"')
            more = f'(ws "," ws {item}){{{max(lo - 1, 0)},{"" if hi is None else hi - 1}}}'
            body = f'"[" ws {item} {more} ws "]"'
            if lo == 0:
                body += ' | "[" ws "]"'
            return self.add(hint, body)
        return self._object(s, path, hint, strict)

    def _object(self, s: dict, path: str, hint: str, strict: bool) -> str:
        props = s.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", f"{path}.properties")
        required = s.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError("required must be a list of names", f"{path}.required")
        extra = s.get("additionalProperties", False)
        if strict and extra is not False and "additionalProperties" in s:
            raise SchemaError("a strict schema's objects must not allow additional properties", f"{path}.additionalProperties")
        names = list(props) + [r for r in required if r not in props]
        kvs = []
        for name in names:
            value = self.rule(props.get(name, True), f"{path}.properties.{name}", f"{hint}-{name}", strict)
            kvs.append((self.add(f"{hint}-{name}-kv", f'{json_literal(name)} ws ":" ws {value}'), name in required))
        extra_kv = None
        if extra is not False:
            value = self.rule(extra, f"{path}.additionalProperties", f"{hint}-extra", strict)
            extra_kv = self.add(f"{hint}-extra-kv", f'json-string ws ":" ws {value}')
        # after[i]: member i when something is already written (so it starts with a comma), optional or not.
        after = [f' ws "," ws {kv}' if req else f' (ws "," ws {kv})?' for kv, req in kvs]
        tail = f' (ws "," ws {extra_kv})*' if extra_kv else ""
        # cur: the members from i on when nothing is written yet ("" matches only nothing).
        cur = f"({extra_kv}{tail})?" if extra_kv else ""
        for i in range(len(kvs) - 1, -1, -1):
            kv, req = kvs[i]
            with_it = kv + "".join(after[i + 1 :]) + tail
            body = with_it if req else (f"{with_it} | {cur}" if cur else f"({with_it})?")
            cur = self.add(f"{hint}-from-{i}", body)
        inner = cur
        return self.add(hint, f'"{{" ws {inner} ws "}}"' if inner else '"{" ws "}"')


def _repeat(s: dict, lo_key: str, hi_key: str, path: str) -> tuple[int, int | None]:
    lo, hi = s.get(lo_key, 0), s.get(hi_key)
    for key, v in ((lo_key, lo), (hi_key, hi)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > MAX_REPEAT):
            raise SchemaError(f"{key} must be an integer from 0 to {MAX_REPEAT}", f"{path}.{key}")
    if hi is not None and lo > hi:
        raise SchemaError(f"{lo_key} is above {hi_key}", f"{path}.{lo_key}")
    return lo, hi


def _bounds(s: dict, path: str, integer: bool) -> tuple[int | None, int | None]:
    """The inclusive whole-number bounds of an integer or a number (None: unbounded)."""
    out = []
    for key, ex, up in (("minimum", "exclusiveMinimum", False), ("maximum", "exclusiveMaximum", True)):
        bound = None
        for k, exclusive in ((key, False), (ex, True)):
            v = s.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise SchemaError(f"{k} must be a finite number", f"{path}.{k}")
            if integer:
                b = (math.floor(v) - (1 if exclusive and v == math.floor(v) else 0)) if up else (math.ceil(v) + (1 if exclusive and v == math.ceil(v) else 0))
            else:
                if exclusive or v != int(v):
                    raise SchemaError(f"{k}: a number's grammar takes whole-number inclusive bounds only", f"{path}.{k}")
                b = int(v)
            bound = b if bound is None else (min(bound, b) if up else max(bound, b))
        out.append(bound)
    if out[0] is not None and out[1] is not None and out[0] > out[1]:
        raise SchemaError("the lower bound is above the upper bound", path)
    for b in out:
        if b is not None and abs(b) >= 10**MAX_DIGITS:
            raise SchemaError(f"bounds must have at most {MAX_DIGITS} digits", path)
    return out[0], out[1]


def _number_range(lo: int | None, hi: int | None, path: str) -> str:
    """JSON numbers x with lo <= x <= hi (whole-number bounds, None: unbounded): the integer part and a fraction
    of up to 16 digits, a fraction of zeros only at a bound's own integer part; no exponent."""
    cap = 10**MAX_DIGITS - 1
    lo, hi = (-cap if lo is None else lo), (cap if hi is None else hi)
    frac, zeros = '("." [0-9]{1,16})?', '("." "0"{1,16})?'
    alts = []
    # Non-negative values: m.f with lo' <= m.f <= hi, where m is the integer part.
    if hi >= 0:
        a = max(lo, 0)
        if a <= hi - 1:
            alts.append(f"({' | '.join(natural_range(a, hi - 1))}) {frac}")
        alts.append(f"{literal(str(hi))} {zeros}")
    # Negative values: -(m.f) with max(0, -hi) <= m.f <= -lo (m.f > 0, but "-0" is 0, in range anyway).
    if lo < 0:
        a = max(0, -hi)
        if a <= -lo - 1:
            alts.append(f'"-" ({" | ".join(natural_range(a, -lo - 1))}) {frac}')
        alts.append(f'"-" {literal(str(-lo))} {zeros}')
    return " | ".join(alts)


def _canonical(value) -> str:
    """Compact JSON, keys in their given order (a schema's property order is the order the grammar writes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def digest(*parts) -> str:
    """The cache key of a grammar: a hash of the canonical JSON of what it is built from."""
    return hashlib.sha256(_canonical(list(parts)).encode()).hexdigest()[:16]


def _call_rule(b: Builder, tools: list[dict], indexes: list[int]) -> str:
    """One `{"name": ..., "arguments": {...}}` object of one of the tools (as the Hermes/Qwen template writes it)."""
    alts = []
    for i in indexes:
        f = tools[i]["function"]
        params = f.get("parameters", {"type": "object", "properties": {}})
        args = b.rule(params, f"tools[{i}].function.parameters", f"args-{f['name']}", f.get("strict") is True)
        head = literal('{"name": ' + json.dumps(f["name"]) + ', "arguments": ')
        alts.append(b.add(f"call-{f['name']}", f'{head} {args} "}}"'))
    return b.add("call", " | ".join(alts))


@lru_cache(maxsize=256)
def _grammar(tools_json: str | None, names: tuple[str, ...] | None, parallel: bool, lazy: bool, doc_json: str | None, doc: bool, strict: bool) -> str:
    b = Builder()
    alts = []
    if doc:
        if doc_json is None:
            alts.append("json-object")
        else:
            alts.append(b.rule(json.loads(doc_json), "response_format.json_schema.schema", "doc", strict))
    if tools_json is not None:
        tools = json.loads(tools_json)
        indexes = [i for i, t in enumerate(tools) if names is None or t["function"]["name"] in names]
        call = _call_rule(b, tools, indexes)
        block = b.add("block", f"{literal(TOOL_CALL_OPEN + chr(10))} {call} {literal(chr(10) + TOOL_CALL_CLOSE)}")
        more = f" ({literal(chr(10))} {block})*" if parallel else ""
        # Lazy: what follows a `<tool_call>` the model wrote on its own: the rest of that block, then more blocks.
        first = f"{literal(chr(10))} {call} {literal(chr(10) + TOOL_CALL_CLOSE)}" if lazy else block
        alts.append(f"{first}{more}" if not doc else b.add("blocks", f"{first}{more}"))
    return b.text(" | ".join(alts))


def grammar(tools: list[dict] | None = None, names: list[str] | None = None, parallel: bool = True, lazy: bool = False,
            doc: tuple | None = None) -> tuple[str, str]:
    """(GBNF, its hash): a reply that is
    - with `tools`: tool calls in `<tool_call>` blocks, one, or one or more when `parallel`, of the tools named in
      `names` (all when None), each `{"name": ..., "arguments": {...}}` with arguments valid against the tool's
      schema (closed objects under the function's `strict`); `lazy`: only what follows a `<tool_call>` the model
      wrote on its own (`tool_choice` "auto" with `--auto-tool-grammar lazy`);
    - with `doc` = (schema or None, strict): a JSON document, any object when the schema is None
      (`json_object`), else one valid against it (`json_schema`);
    - with both: either.
    Built once per distinct request (cached by the hash of what it is built from). Raises SchemaError naming the
    field of a schema no grammar is built for."""
    tools_json = None if tools is None else _canonical(tools)
    doc_json = None if doc is None or doc[0] is None else _canonical(doc[0])
    strict = doc is not None and doc[1]
    key = (tools_json, tuple(names) if names is not None else None, parallel, lazy, doc_json, doc is not None, strict)
    return _grammar(*key), digest(*key)
