#!/usr/bin/env python3
"""Checks the documentation as a reader would use it: every link resolves, and every command block runs.

Why this exists: the README and the book (docs/book/src) show commands that users copy. A block that is
never run drifts from the code unnoticed, and a moved section leaves links pointing nowhere. The test
command runs this after it builds the binary and the book.

Links: every inline link ``[text](target)`` in README.md, ARCHITECTURE.md, clients/python/README.md and
the book must resolve: a relative path must exist (from the file's folder), and an ``#anchor`` must be a
heading of the target Markdown file (ids as mdBook and GitHub make them). Web links are not fetched.

Command blocks: every ```` ```sh ```` / ```` ```bash ```` / ```` ```python ```` block in README.md and the
book runs, in a fresh temporary directory, unless the line above it is a marker:

- ``<!-- not run: REASON -->``: not run, and counted with its reason (a GPU, a hosted API, hours of CPU);
- ``<!-- run: background -->``: a server command; it runs in the background until 127.0.0.1:PORT answers a
  gRPC health check (at most 120 s), then it is stopped;
- ``<!-- run: expect-fail -->``: the block must exit non-zero (a documented refusal);
- ``<!-- run: venv=NAME -->``: its ``python`` commands run with the protocols tier's venv NAME
  (``--protocols-venv``/NAME: ``openenv``, ``mcp``, ``mcp1``, ``trl`` or ``verifiers``), whose released clients cannot share one venv;
  with ``MEMGYM_PROTOCOLS=skip`` (the tier skipped) such a block is counted as not run.

A block whose next block is a ```` ```text ```` block marked ``<!-- output -->`` must print each non-empty
line of it, in order (a line ``...`` skips any number of lines; leading and trailing spaces are ignored).

What is substituted, so that the blocks run as written against the build under test and not a second
release build: ``cargo run --release --`` and a leading ``memgym`` are the binary under test
(``--memgym``); ``127.0.0.1:50051`` is a server the checker starts (``--banks-dir`` in a temporary
directory), and ``127.0.0.1:8000`` / ``127.0.0.1:8001`` / ``127.0.0.1:8002`` / ``127.0.0.1:8003`` are its OpenEnv, MCP, ORS and NeMo Gym
faces; ``grpcurl`` is ``--grpcurl``; ``python`` blocks run with ``--python`` (the client's venv) and
``MEMGYM_ADDRESS`` set to that server. Each block runs in a fresh temporary directory that links the
repository's ``data``, ``docs``, ``scripts``, ``examples``, ``clients`` and ``proto``, so a block reads
the repository's files as a user in its root would and writes only into the temporary directory.

Prints one line per block and a summary: how many blocks ran, how many passed, how many are marked not run.
Exits 1 on a broken link or a failed block.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Set

ROOT = Path(__file__).resolve().parent.parent
RUNNABLE = {"sh", "bash", "python"}
MARKER = re.compile(r"^<!--\s*(not run|run|output)\s*(?::\s*(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)(.*)$")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]+(?:\([^()\s]*\))?[^()\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")


@dataclass
class Block:
    file: Path
    line: int
    lang: str
    code: str
    marker: Optional[str]
    reason: str
    output: Optional[str]


def doc_files() -> List[Path]:
    book = sorted((ROOT / "docs/book/src").rglob("*.md"))
    return [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "clients/python/README.md"] + book


def run_files() -> List[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs/book/src").rglob("*.md"))


# ---- parsing -----------------------------------------------------------------------------------------


def split_blocks(path: Path):
    """(prose lines with their numbers, code blocks): fences are tracked so links inside code are not read."""
    lines = path.read_text(encoding="utf-8").split("\n")
    prose, blocks = [], []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            fence, lang = m.group(2), m.group(3).lower()
            start = i
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence[:3]):
                body.append(lines[i])
                i += 1
            marker_line = lines[start - 1].strip() if start > 0 else ""
            blocks.append((start + 1, lang, "\n".join(body), marker_line))
            i += 1
            continue
        prose.append((i + 1, lines[i]))
        i += 1
    return prose, blocks


def heading_ids(path: Path) -> Set[str]:
    """The ids mdBook (and GitHub) give the headings of `path`, repeated ones suffixed -1, -2, …; plus
    explicit `<a id=…>` / `{#id}` anchors."""
    prose, _ = split_blocks(path)
    seen: Dict[str, int] = {}
    ids: Set[str] = set()
    for _, line in prose:
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            ids.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
        for a in re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line):
            ids.add(a)
    return ids


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    out = []
    for ch in text:
        if ch.isalnum() or ch in "_-":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
        elif unicodedata.category(ch).startswith("M"):
            out.append(ch)
    return "".join(out)


def strip_code_spans(line: str) -> str:
    return re.sub(r"`+[^`]*`+", "", line)


def check_links() -> List[str]:
    errors: List[str] = []
    ids_cache: Dict[Path, Set[str]] = {}
    for path in doc_files():
        prose, _ = split_blocks(path)
        for n, line in prose:
            for target in LINK.findall(strip_code_spans(line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (path.parent / file_part).resolve() if file_part else path
                where = f"{path.relative_to(ROOT)}:{n}"
                if not dest.exists():
                    errors.append(f"{where}: {target}: no such file")
                    continue
                if anchor and dest.suffix == ".md":
                    ids = ids_cache.setdefault(dest, heading_ids(dest))
                    if anchor not in ids:
                        errors.append(f"{where}: {target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return errors


def collect_blocks() -> List[Block]:
    out: List[Block] = []
    for path in run_files():
        _, blocks = split_blocks(path)
        for k, (line, lang, code, marker_line) in enumerate(blocks):
            if lang not in RUNNABLE:
                continue
            m = MARKER.match(marker_line)
            marker, reason = (m.group(1), (m.group(2) or "")) if m else (None, "")
            if marker == "output":
                marker = None
            output = None
            if k + 1 < len(blocks):
                nline, nlang, ncode, nmarker = blocks[k + 1]
                om = MARKER.match(nmarker)
                if nlang == "text" and om and om.group(1) == "output":
                    output = ncode
            out.append(Block(path, line, lang, code, marker, reason, output))
    return out


# ---- running -----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(grpcurl: str, addr: str) -> bool:
    r = subprocess.run([grpcurl, "-plaintext", "-max-time", "2", addr, "grpc.health.v1.Health/Check"], capture_output=True, text=True)
    return r.returncode == 0 and "SERVING" in r.stdout


def substitute(code: str, memgym: str, grpcurl: str, addrs: Dict[str, str]) -> str:
    code = re.sub(r"cargo run --release --(?=\s)", memgym, code)
    code = re.sub(r"(?m)^(\s*)memgym(?=\s)", lambda m: m.group(1) + memgym, code)
    for documented, actual in addrs.items():
        code = code.replace(documented, actual)
    code = re.sub(r"(?m)(^|[|;&(]\s*|\$\(\s*)grpcurl(?=\s)", lambda m: m.group(1) + grpcurl, code)
    return code


def output_matches(expected: str, actual: str) -> Optional[str]:
    """None when every non-empty expected line appears in order (``...`` skips); else the first missing line."""
    got = [l.strip() for l in actual.split("\n")]
    at = 0
    for want in (l.strip() for l in expected.split("\n")):
        if not want or want == "...":
            continue
        while at < len(got) and got[at] != want:
            at += 1
        if at == len(got):
            return want
        at += 1
    return None


def run_block(b: Block, args, addrs: Dict[str, str], env: Dict[str, str]) -> Optional[str]:
    """None when the block passed, else why it failed."""
    work = tempfile.mkdtemp(prefix="memgym-doc-")
    for name in ("data", "docs", "scripts", "examples", "clients", "proto"):
        os.symlink(ROOT / name, Path(work) / name)
    try:
        addr = addrs["127.0.0.1:50051"]
        code = substitute(b.code, args.memgym, args.grpcurl, addrs)
        python = args.python
        if b.marker == "run" and b.reason.startswith("venv="):
            python = str(Path(args.protocols_venv) / b.reason[len("venv=") :] / "bin" / "python")
            if not Path(python).exists():
                return f"no {python} (the protocols tier's venvs: scripts/install-protocols.sh)"
            code = re.sub(r"(?m)^(\s*)python3?(?=\s)", lambda m: m.group(1) + python, code)
        if b.lang == "python":
            cmd = [python, "-c", code]
        else:
            cmd = ["bash", "-euo", "pipefail", "-c", code]
        if b.marker == "run" and b.reason == "background":
            port = free_port()
            bg_addr = f"127.0.0.1:{port}"
            # The server is the block's last command; it listens on its own free port.
            bg = code.replace(addr, bg_addr)
            for face in ("127.0.0.1:8000", "127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003"):  # its own faces, not the checker's
                bg = bg.replace(addrs[face], f"127.0.0.1:{free_port()}")
            if "--addr" not in bg:
                lines = bg.rstrip().split("\n")
                cmd_part, hash_, comment = lines[-1].partition(" #")  # the flag goes before a trailing comment
                lines[-1] = f"{cmd_part.rstrip()} --addr {bg_addr}" + (f"  #{comment}" if hash_ else "")
                bg = "\n".join(lines)
            p = subprocess.Popen(
                ["bash", "-euo", "pipefail", "-c", bg],
                cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            )
            try:
                deadline = time.time() + 120
                while time.time() < deadline:
                    if p.poll() is not None:
                        return f"exited with {p.returncode} before answering health: {p.stdout.read()[-2000:]}"
                    if healthy(args.grpcurl, bg_addr):
                        return None
                    time.sleep(0.5)
                return "no health answer within 120 s"
            finally:
                for sig in (15, 9):
                    try:
                        os.killpg(p.pid, sig)
                        p.wait(timeout=20)
                        break
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        continue
        r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=args.timeout)
        out = r.stdout + r.stderr
        if b.marker == "run" and b.reason == "expect-fail":
            return None if r.returncode != 0 else "exited 0 where a refusal is documented"
        if r.returncode != 0:
            return f"exit {r.returncode}: {out[-3000:]}"
        if b.output is not None:
            missing = output_matches(b.output, out)
            if missing is not None:
                return f"the shown output has {missing!r}, which the command did not print:\n{out[-3000:]}"
        return None
    except subprocess.TimeoutExpired:
        return f"timed out after {args.timeout} s"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memgym", help="the memgym binary under test")
    ap.add_argument("--grpcurl", help="grpcurl")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs python blocks (with memgym-client)")
    ap.add_argument("--links-only", action="store_true", help="check the links, run nothing")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per block")
    ap.add_argument(
        "--protocols-venv",
        default=os.environ.get("MEMGYM_PROTOCOLS_VENV", str(Path.home() / ".cache/memgym/protocols-venv")),
        help="the protocols tier's venvs (openenv, mcp, mcp1, trl, verifiers), for blocks marked venv=NAME",
    )
    args = ap.parse_args()

    failures = 0
    errors = check_links()
    for e in errors:
        print(f"BROKEN LINK {e}")
    failures += len(errors)
    files = doc_files()
    print(f"docs-check: links in {len(files)} files, {len(errors)} broken")
    if args.links_only:
        return 1 if failures else 0
    if not args.memgym or not args.grpcurl:
        ap.error("--memgym and --grpcurl are required unless --links-only")

    blocks = collect_blocks()
    addr, openenv, mcp, ors, nemo_gym = (f"127.0.0.1:{free_port()}" for _ in range(5))
    addrs = {"127.0.0.1:50051": addr, "127.0.0.1:8000": openenv, "127.0.0.1:8001": mcp, "127.0.0.1:8002": ors, "127.0.0.1:8003": nemo_gym}
    banks = tempfile.mkdtemp(prefix="memgym-doc-banks-")
    env = dict(os.environ)
    env.update(MEMGYM_ADDRESS=addr, PATH=f"{ROOT / 'scripts'}:{Path(args.grpcurl).parent}:{env.get('PATH', '')}")
    server = subprocess.Popen(
        [args.memgym, "serve", "--addr", addr, "--banks-dir", banks, "--openenv-addr", openenv, "--mcp-addr", mcp, "--ors-addr", ors,
         "--nemo-gym-addr", nemo_gym],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ran = passed = not_run = 0
    try:
        deadline = time.time() + 120
        while not healthy(args.grpcurl, addr):
            if time.time() > deadline or server.poll() is not None:
                print("docs-check: the test server did not start")
                return 1
            time.sleep(0.3)
        for b in blocks:
            where = f"{b.file.relative_to(ROOT)}:{b.line}"
            venv = b.reason[len("venv=") :] if b.marker == "run" and b.reason.startswith("venv=") else None
            if venv and os.environ.get("MEMGYM_PROTOCOLS") == "skip":
                not_run += 1
                print(f"not run  {where} (MEMGYM_PROTOCOLS=skip: the {venv} venv is not installed)")
                continue
            if b.marker == "not run":
                not_run += 1
                print(f"not run  {where} ({b.reason or 'no reason given'})")
                if not b.reason:
                    failures += 1
                continue
            ran += 1
            started = time.monotonic()
            why = run_block(b, args, addrs, env)
            took = f"{time.monotonic() - started:.0f} s"
            if why is None:
                passed += 1
                print(f"ok       {where} ({took})")
            else:
                failures += 1
                print(f"FAILED   {where} ({took}): {why}")
    finally:
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(banks, ignore_errors=True)
    print(f"docs-check: {ran} command blocks ran, {passed} passed, {ran - passed} failed; {not_run} marked not run")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
