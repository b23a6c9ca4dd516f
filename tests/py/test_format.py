"""The C and CUDA sources are in the style .clang-format writes down.

clang-format comes from Debian (deploy/setup.sh installs it with the other
apt packages).  Only one major version is accepted, because clang-format's
output for the same options changes between releases: a file formatted by
another major version would fail here for reasons unrelated to the
change under test.  Re-format with

    git ls-files '*.c' '*.h' '*.cu' '*.cuh' | grep -v -e unicode_tables.c -e jinja_case.c | xargs clang-format -i

engine/tok/unicode_tables.c and engine/tok/jinja_case.c are generated
(tools' output) and stay as written.
"""

import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT, _missing

MAJOR = 14  # Debian bookworm's clang-format
GENERATED = {"engine/tok/unicode_tables.c", "engine/tok/jinja_case.c"}


def _clang_format() -> str:
    exe = shutil.which("clang-format")
    if not exe:
        _missing("clang-format is not installed (deploy/setup.sh apt step)")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"version (\d+)\.", out)
    assert m, f"cannot read clang-format's version from {out!r}"
    if int(m.group(1)) != MAJOR:
        pytest.skip(f"clang-format {m.group(1)} is not {MAJOR}; its output differs")
    return exe


def _sources() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "*.c", "*.h", "*.cu", "*.cuh"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    return [f for f in out if f not in GENERATED and os.path.exists(REPO_ROOT / f)]


def test_style_file_is_the_one_in_use():
    cfg = (REPO_ROOT / ".clang-format").read_text()
    assert re.search(r"^ColumnLimit: 100$", cfg, re.M)
    assert re.search(r"^IndentWidth: 4$", cfg, re.M)


def test_every_source_is_formatted():
    exe = _clang_format()
    files = _sources()
    assert len(files) > 200, f"only {len(files)} C/CUDA files found: is this the repository?"
    bad = []
    for i in range(0, len(files), 64):
        chunk = files[i:i + 64]
        r = subprocess.run([exe, "--dry-run", "--Werror", *chunk],
                           cwd=REPO_ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            bad += sorted({m for m in re.findall(r"^([^:\s]+):\d+:\d+: error", r.stderr, re.M)})
            if not bad:
                pytest.fail(f"clang-format failed: {r.stderr[-2000:]}")
    assert not bad, ("not in .clang-format's style (run the command in this file's "
                     f"docstring): {', '.join(bad[:20])}" + (" ..." if len(bad) > 20 else ""))


def test_every_executable_script_names_its_interpreter():
    """A script without a #! line runs under whatever shell starts it: bash
    runs it as bash, but /bin/sh (dash, as in a container's RUN step) fails on
    bash syntax such as `set -o pipefail`."""
    files = subprocess.run(["git", "ls-files", "-s"], cwd=REPO_ROOT, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    bad = []
    for line in files:
        mode, _, _, path = line.split(maxsplit=3)
        if mode != "100755":
            continue
        with open(os.path.join(REPO_ROOT, path), "rb") as f:
            if f.read(2) != b"#!":
                bad.append(path)
    assert not bad, f"executable without a #! line: {bad}"


# pl_errf(err, errlen, CODE, ...), pl_errwrap(...) and cm_startup_errf(err,
# errlen, CODE): the third argument, possibly on a later line.
_ERR_CALL = re.compile(r"\b(pl_errf|pl_errwrap|cm_startup_errf)\s*\(")


def _third_arg(text: str, start: int) -> str:
    """The third top-level argument of the call whose '(' is at start."""
    depth, args, cur = 0, [], []
    for ch in text[start:]:
        if ch in "([{":
            depth += 1
            if depth == 1:
                continue
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur))
                break
        elif ch == "," and depth == 1:
            args.append("".join(cur))
            cur = []
            if len(args) == 3:
                break
            continue
        cur.append(ch)
    return args[2].strip() if len(args) >= 3 else ""


def test_only_pl_time_reads_the_clock():
    """kernels/base/pl_time.h is the one home for clock reads (its header
    says so): parley's own sources call its helpers (pl_mono_*,
    pl_unix_ms, pl_deadline_ts, pl_clock_us), never the clock itself."""
    bad = []
    pat = re.compile(r"\b(clock_gettime|gettimeofday|timespec_get)\s*\(|\btime\s*\(\s*NULL\s*\)"
                     r"|\bclock\s*\(\s*\)")
    for top in ("kernels", "engine", "cache", "schemas", "consumer"):
        for d, _, names in os.walk(os.path.join(REPO_ROOT, top)):
            for n in names:
                if not n.endswith((".c", ".h", ".cu", ".cuh")) or n == "pl_time.h":
                    continue
                p = os.path.join(d, n)
                with open(p, errors="replace") as f:
                    for k, line in enumerate(f, 1):
                        if pat.search(line):
                            bad.append(f"{os.path.relpath(p, REPO_ROOT)}:{k}: {line.strip()}")
    assert not bad, "clock read outside pl_time.h (use its helpers):\n" + "\n".join(bad)


def test_error_codes_are_named():
    """A literal number is never an error code (kernels/base/pl_err.h): every
    pl_errf / pl_errwrap / cm_startup_errf call names its code."""
    bad = []
    for path in _sources():
        if path.startswith("kernels/base/pl_err.") or path.startswith("tests/"):
            continue
        with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as f:
            text = f.read()
        for m in _ERR_CALL.finditer(text):
            if text[max(0, m.start() - 4):m.start()].endswith("int "):
                continue  # the declaration or definition
            code = _third_arg(text, m.end() - 1)
            if re.fullmatch(r"[-+()\s\d]+", code):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path}:{line}: {code}")
    assert not bad, "literal error codes:\n" + "\n".join(bad)


# Every repository path and worker configuration key the docs name exists:
# a doc sentence made false by a rename or a removed key fails here, in the
# change that made it false.
CONFIG_KEY = re.compile(r"(cache|gateway|model|redis|scheduler|worker)\.[a-z0-9_]+")
FILE_EXT = re.compile(r"\.(sh|conf|md|c|h|py|json|txt|yaml|yml|toml|gguf|service)$")
DOC_REF = re.compile(r"`([^`\s]+)`|\]\(([^)\s]+)\)")


def _tracked(pattern: str = "") -> list[str]:
    args = ["git", "ls-files"] + ([pattern] if pattern else [])
    return subprocess.run(args, cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def test_docs_name_only_paths_and_keys_that_exist():
    tracked = _tracked()
    tops = {f.split("/")[0] for f in tracked if "/" in f}
    docs = [f for f in _tracked("*.md") if f != "consumer/CONFIG.md"]
    assert "README.md" in docs and len(docs) > 10, docs
    config = (REPO_ROOT / "consumer/CONFIG.md").read_text()
    keys = set(re.findall(r"^\| `([a-z_]+\.[a-z0-9_.]+)`", config, re.M))
    assert len(keys) > 50, "consumer/CONFIG.md lists too few keys: is its table format new?"
    bad = []
    for doc in docs:
        text = (REPO_ROOT / doc).read_text()
        for m in DOC_REF.finditer(text):
            ref, link = m.group(1) or m.group(2), m.group(2) is not None
            if ref.startswith(("http:", "https:", "mailto:", "#")):
                continue
            path = re.sub(r":\d+(-\d+)?$", "", ref.split("#")[0])
            if CONFIG_KEY.fullmatch(path) and not FILE_EXT.search(path):
                if path not in keys:
                    bad.append(f"{doc}: configuration key `{path}` is not in consumer/CONFIG.md")
                continue
            if not path or any(c in path for c in "*<>{}$=|,"):
                continue
            if link or ("/" in path and path.split("/")[0] in tops):
                here = (REPO_ROOT / doc).parent / path
                if not here.exists() and not (REPO_ROOT / path).exists():
                    bad.append(f"{doc}: `{ref}` does not exist")
    assert not bad, "\n".join(bad)


# Every measured figure in these docs says when it was measured (and with
# what, in the same sentence or paragraph): a figure without a date cannot be
# checked against the code it describes (issue 43 §4).
FIGURE_DOCS = ["docs/known-gaps.md", "docs/kernels.md"]
FIGURE = re.compile(r"\d(?:[\d.,]*\d)?\s*(?:tok/s|GB/s|GMAC/s|ms\b|%|nats\b)"
                    r"|\d(?:\.\d+)?[x×](?!\w)")
DATE = re.compile(r"20\d\d-\d\d-\d\d")


def _doc_units(text: str) -> list[str]:
    """Paragraphs (blocks between blank lines), each bullet in them ("- " and
    its indented continuation lines) a unit of its own."""
    units = []
    for block in re.split(r"\n\s*\n", text):
        cur: list[str] = []
        for line in block.splitlines():
            if line.startswith("- ") and cur:
                units.append("\n".join(cur))
                cur = []
            cur.append(line)
        if cur:
            units.append("\n".join(cur))
    return units


def test_doc_figures_carry_a_date():
    bad = []
    for doc in FIGURE_DOCS:
        units = _doc_units((REPO_ROOT / doc).read_text())
        assert len(units) > 5, f"{doc}: too few paragraphs: is this the repository?"
        for unit in units:
            m = FIGURE.search(unit)
            if m and not DATE.search(unit):
                bad.append(f"{doc}: {m.group(0)!r} in: {unit.strip()[:100]} ...")
    assert not bad, ("figures without the date they were measured (add it, with the "
                     "command, or 'command not recorded'):\n" + "\n".join(bad))
