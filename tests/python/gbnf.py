"""A small reader of llama.cpp's GBNF, for the tests of scripts/llm_grammar.py: parses a grammar, says whether a
string matches it, and draws random strings from it (a fake model that obeys a grammar).

Why this exists: the light test tier has no llama.cpp runtime, and a grammar is only worth testing by what it
accepts. This reads the subset the builder writes: one rule per line (`name ::= body`), string literals with
`\\n \\t \\r \\" \\\\ \\xHH` escapes, character classes (negated, with ranges and escapes), groups, alternation,
and the quantifiers `? * + {m} {m,} {m,n}`. The real-LLM tier checks that llama.cpp itself parses every grammar.
"""

from __future__ import annotations

import random
import re
import sys

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "[": "[", "]": "]", "/": "/", "-": "-", "^": "^"}


class Parser:
    """Parses one rule body into nodes: ("lit", s) ("cls", negated, [(lo, hi)]) ("ref", name) ("seq", [n])
    ("alt", [n]) ("rep", n, lo, hi or None)."""

    def __init__(self, text: str):
        self.s, self.i = text, 0

    def error(self, what: str):
        raise ValueError(f"GBNF: {what} at {self.i} in {self.s[:80]!r}")

    def space(self):
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def char(self) -> str:
        c = self.s[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = self.s[self.i + 1]
        if e == "x":
            self.i += 4
            return chr(int(self.s[self.i - 2 : self.i], 16))
        if e == "u":
            self.i += 6
            return chr(int(self.s[self.i - 4 : self.i], 16))
        if e not in ESCAPES:
            self.error(f"unknown escape \\{e}")
        self.i += 2
        return ESCAPES[e]

    def alt(self):
        options = [self.seq()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            options.append(self.seq())
        return options[0] if len(options) == 1 else ("alt", options)

    def seq(self):
        items = []
        while True:
            self.space()
            if self.i >= len(self.s) or self.s[self.i] in "|)":
                return ("seq", items)
            items.append(self.quantified(self.primary()))

    def primary(self):
        c = self.s[self.i]
        if c == '"':
            self.i += 1
            out = []
            while self.s[self.i] != '"':
                out.append(self.char())
            self.i += 1
            return ("lit", "".join(out))
        if c == "[":
            self.i += 1
            negated = self.s[self.i] == "^"
            self.i += negated
            ranges = []
            while self.s[self.i] != "]":
                lo = self.char()
                hi = lo
                if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                    self.i += 1
                    hi = self.char()
                ranges.append((lo, hi))
            self.i += 1
            return ("cls", negated, ranges)
        if c == "(":
            self.i += 1
            node = self.alt()
            if self.s[self.i] != ")":
                self.error("missing )")
            self.i += 1
            return node
        m = re.compile(r"[a-zA-Z0-9-]+").match(self.s, self.i)
        if not m:
            self.error("unexpected character")
        self.i = m.end()
        return ("ref", m.group())

    def quantified(self, node):
        if self.i >= len(self.s):
            return node
        c = self.s[self.i]
        if c in "?*+":
            self.i += 1
            return ("rep", node, 1 if c == "+" else 0, 1 if c == "?" else None)
        if c == "{":
            end = self.s.index("}", self.i)
            body = self.s[self.i + 1 : end]
            self.i = end + 1
            if "," not in body:
                return ("rep", node, int(body), int(body))
            lo, hi = body.split(",")
            return ("rep", node, int(lo or 0), int(hi) if hi else None)
        return node


class Grammar:
    def __init__(self, text: str):
        self.rules = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            name, body = line.split(" ::= ", 1)
            p = Parser(body)
            node = p.alt()
            if p.i != len(body):
                p.error("trailing text")
            if name in self.rules:
                raise ValueError(f"GBNF: rule {name} defined twice")
            self.rules[name] = node
        for name in self.rules:
            self._refs(self.rules[name])

    def _refs(self, node):
        kind = node[0]
        if kind == "ref" and node[1] not in self.rules:
            raise ValueError(f"GBNF: undefined rule {node[1]}")
        if kind in ("seq", "alt"):
            for n in node[1]:
                self._refs(n)
        if kind == "rep":
            self._refs(node[1])

    def matches(self, text: str, start: str = "root") -> bool:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20000))
        try:
            return len(text) in self._ends(("ref", start), text, 0, {})
        finally:
            sys.setrecursionlimit(limit)

    def _ends(self, node, s: str, i: int, memo: dict) -> frozenset:
        key = (id(node), i)
        if key in memo:
            return memo[key]
        kind = node[0]
        if kind == "lit":
            out = frozenset([i + len(node[1])]) if s.startswith(node[1], i) else frozenset()
        elif kind == "cls":
            ok = i < len(s) and (any(lo <= s[i] <= hi for lo, hi in node[2]) != node[1])
            out = frozenset([i + 1]) if ok else frozenset()
        elif kind == "ref":
            memo[key] = frozenset()  # no left recursion in these grammars; guards anyway
            out = self._ends(self.rules[node[1]], s, i, memo)
        elif kind == "seq":
            ends = {i}
            for item in node[1]:
                ends = set().union(*(self._ends(item, s, j, memo) for j in ends)) if ends else set()
            out = frozenset(ends)
        elif kind == "alt":
            out = frozenset().union(*(self._ends(n, s, i, memo) for n in node[1]))
        else:
            _, inner, lo, hi = node
            ends, frontier, visited, count = ({i} if lo == 0 else set()), {i}, set(), 0
            while frontier and (hi is None or count < hi):
                nxt = set().union(*(self._ends(inner, s, j, memo) for j in frontier))
                count += 1
                if hi is None and count > lo:
                    nxt -= visited  # a position reached after lo repetitions already is expanded once
                if count >= lo:
                    ends |= nxt
                    if hi is None:
                        visited |= nxt
                frontier = nxt
            out = frozenset(ends)
        memo[key] = out
        return out

    def sample(self, rng: random.Random, start: str = "root", budget: int = 40) -> str:
        """A random string of the grammar (repetitions short, shallow alternatives preferred when deep)."""
        out: list[str] = []
        self._draw(("ref", start), rng, out, budget)
        return "".join(out)

    def _draw(self, node, rng, out, depth):
        kind = node[0]
        if kind == "lit":
            out.append(node[1])
        elif kind == "cls":
            if node[1]:
                choices = [c for c in "aZ q7é-" if not any(lo <= c <= hi for lo, hi in node[2])]
                out.append(rng.choice(choices))
            else:
                lo, hi = rng.choice(node[2])
                out.append(chr(rng.randint(ord(lo), ord(hi))))
        elif kind == "ref":
            self._draw(self.rules[node[1]], rng, out, depth - 1)
        elif kind == "seq":
            for item in node[1]:
                self._draw(item, rng, out, depth)
        elif kind == "alt":
            options = node[1]
            if depth <= 0:  # prefer what cannot recurse: literals, classes, known leaves
                flat = [o for o in options if "json-value" not in repr(o) and "json-object" not in repr(o) and "json-array" not in repr(o)]
                options = flat or options
            self._draw(rng.choice(options), rng, out, depth)
        else:
            _, inner, lo, hi = node
            top = lo + (0 if depth <= 0 else 2)
            n = rng.randint(lo, top if hi is None else min(hi, top))
            for _ in range(n):
                self._draw(inner, rng, out, depth)
