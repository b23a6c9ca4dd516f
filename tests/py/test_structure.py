"""The include graph between parts: dependencies point one way.

A part is a folder under kernels/, engine/, cache/, schemas/ or consumer/
(its internal/ counts as the part).  Every `#include "x.h"` of a source
names the part that holds x.h; these tests check that

- no two parts reach each other (no circle that crosses a folder), and
- consumer/'s parts are siblings: each depends only on consumer/common
  and consumer/openai (the shared OpenAI mapping), never on another
  command's part; consumer/cli (main.c, the benchmarks and the embedded
  demo) is the one part above the others.

Within a part, the files of the scheduler (engine/sched) and of the wire
format (schemas) also call one way: a function defined in one file and
called from another is a file-level edge, and those edges form no circle
(sched.c -> sched_loop.c -> the parts of a step -> sched_req.c).  Other
parts keep circles on purpose (a backend's op table and its ops, an
interpreter's mutual recursion, an ISA dispatcher and its kernels).
"""
import collections
import os
import re

from conftest import REPO_ROOT

TOPS = ("kernels", "engine", "cache", "schemas", "consumer")
SHARED = {"consumer/common", "consumer/openai"}


def _part(path):
    rel = os.path.relpath(path, REPO_ROOT).split(os.sep)
    if len(rel) > 2 and rel[-2] == "internal":
        rel = rel[:-2] + rel[-1:]
    return "/".join(rel[:2]) if len(rel) > 2 else rel[0]


def _graph():
    headers, sources = {}, []
    for top in TOPS:
        for d, _, names in os.walk(os.path.join(REPO_ROOT, top)):
            for n in names:
                if n.endswith((".c", ".h", ".cu", ".cuh")):
                    p = os.path.join(d, n)
                    sources.append(p)
                    if n.endswith((".h", ".cuh")):
                        headers.setdefault(n, p)
    edges = collections.defaultdict(set)
    for p in sources:
        with open(p, errors="replace") as f:
            text = f.read()
        for m in re.finditer(r'#include "([^"]+)"', text):
            h = headers.get(os.path.basename(m.group(1)))
            if h and _part(h) != _part(p):
                edges[_part(p)].add(_part(h))
    return edges


def _reach(edges, a):
    seen, todo = set(), [a]
    while todo:
        for b in edges.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def test_no_circle_between_parts():
    edges = _graph()
    assert len(edges) > 10, "found almost no includes: is this the repository?"
    circles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a]
                      if a in _reach(edges, b)})
    assert not circles, f"parts that include each other: {circles}"


def test_consumer_parts_are_siblings():
    edges = _graph()
    bad = [f"{a} -> {b}" for a in sorted(edges) for b in sorted(edges[a])
           if a.startswith("consumer/") and b.startswith("consumer/")
           and a != "consumer/cli" and b not in SHARED]
    assert not bad, "a consumer part depends on another command's part:\n" + "\n".join(bad)


ONE_WAY_PARTS = ("engine/sched", "schemas")


def _calls(folder):
    """File-level call edges in folder: a -> b when a.c names a function
    that b.c defines (not static)."""
    texts, defs = {}, {}
    for n in sorted(os.listdir(os.path.join(REPO_ROOT, folder))):
        if not n.endswith(".c"):
            continue
        with open(os.path.join(REPO_ROOT, folder, n), errors="replace") as f:
            t = f.read()
        t = re.sub(r"/\*.*?\*/", "", t, flags=re.S)
        t = re.sub(r"//[^\n]*", "", t)
        texts[n] = t
        for m in re.finditer(r"^(?!static)[a-z][\w \*]*?\b(\w+)\([^;{]*?\)\s*\{", t, re.M):
            defs[m.group(1)] = n
    edges = collections.defaultdict(set)
    for n, t in texts.items():
        for fn, d in defs.items():
            if d != n and re.search(r"\b" + fn + r"\b", t):
                edges[n].add(d)
    return texts, edges


def test_no_call_circle_between_files():
    for folder in ONE_WAY_PARTS:
        texts, edges = _calls(folder)
        assert len(texts) > 3 and edges, f"{folder}: found no files or calls"
        circles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a]
                          if a in _reach(edges, b)})
        assert not circles, f"{folder}: files that call each other: {circles}"
