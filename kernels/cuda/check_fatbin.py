#!/usr/bin/env python3
"""check_fatbin.py -- show which GPU code a CUDA object or static library
holds, and fail unless it holds a cubin assembled for the wanted arch (and,
with --ptx, PTX for the wanted virtual arch in every object that has GPU
code).

The CUDA wheels parley builds with carry no cuobjdump, so this reads the
formats directly: an ar archive (or one ELF object) -> its .nv_fatbin
section -> the fat binary's entries (kind 1 = PTX, 2 = cubin ELF; each
header names the SM number) -> for each cubin, the .note.nv.tkinfo note in
which ptxas records its command line ("-arch sm_90a ...").

usage: check_fatbin.py FILE [--arch sm_90a] [--ptx compute_80]
Exit 0 when some cubin was assembled with "-arch <arch>" and (with --ptx)
every object holding GPU code also holds PTX for that compute capability;
1 otherwise.
"""

import argparse
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2


def elf_sections(data: bytes) -> dict:
    """Section name -> bytes of a little-endian ELF64 image."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or len(data) < 64:
        raise ValueError("not an ELF64 image")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise ValueError("truncated ELF section table")

    def header(i):
        h = shoff + i * shentsize
        name, _type = struct.unpack_from("<II", data, h)
        off, size = struct.unpack_from("<QQ", data, h + 0x18)
        return name, off, size

    _, str_off, str_size = header(shstrndx)
    strtab = data[str_off:str_off + str_size]
    out = {}
    for i in range(shnum):
        name, off, size = header(i)
        end = strtab.find(b"\0", name)
        out[strtab[name:end].decode("ascii", "replace")] = data[off:off + size]
    return out


def ar_members(data: bytes):
    """(name, bytes) of each member of a System V ar archive."""
    pos, longnames = 8, b""
    while pos + 60 <= len(data):
        name = data[pos:pos + 16].decode("ascii", "replace").strip()
        size = int(data[pos + 48:pos + 58].decode("ascii").strip())
        body = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if name == "//":  # GNU table of long member names
            longnames = body
            continue
        if name[:1] == "/" and name[1:].isdigit():
            start = int(name[1:])
            name = longnames[start:longnames.find(b"/\n", start)].decode("ascii", "replace")
        yield name.rstrip("/"), body


def fatbin_entries(fat: bytes):
    """(kind, sm, payload) for each entry of every fat binary in a section."""
    pos = 0
    while pos + 16 <= len(fat):
        magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", fat, pos)
        if magic != FATBIN_MAGIC:
            raise ValueError(f"bad fatbin magic {magic:#x} at offset {pos}")
        entry, end = pos + hsize, pos + hsize + fsize
        while entry + 32 <= end:
            kind, _flags, ehsize, psize = struct.unpack_from("<HHIQ", fat, entry)
            sm = struct.unpack_from("<I", fat, entry + 28)[0]
            yield kind, sm, fat[entry + ehsize:entry + ehsize + psize]
            entry += ehsize + psize
        pos = (end + 7) & ~7


def ptxas_options(cubin: bytes) -> str:
    """The tool command line recorded in a cubin's .note.nv.tkinfo."""
    note = elf_sections(cubin).get(".note.nv.tkinfo", b"")
    # Strings in the note's descriptor are NUL-separated; the options are
    # the one that starts with "-".
    for s in note.split(b"\0"):
        text = s.decode("ascii", "replace")
        if "-arch" in text:
            return text[text.index("-"):].strip()
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--ptx", default=None, help="also require PTX for this arch, e.g. compute_80")
    args = ap.parse_args()
    want_ptx = int(args.ptx.split("_")[1]) if args.ptx else None
    missing_ptx = []
    data = open(args.file, "rb").read()
    objects = list(ar_members(data)) if data.startswith(b"!<arch>\n") else [(args.file, data)]
    found = False
    for name, obj in objects:
        if obj[:4] != b"\x7fELF":
            continue
        fat = elf_sections(obj).get(".nv_fatbin")
        if not fat:
            continue
        has_ptx = False
        for kind, sm, payload in fatbin_entries(fat):
            if kind == KIND_ELF:
                opts = ptxas_options(payload)
                ok = f"-arch {args.arch}" in " ".join(opts.split())
                found |= ok
                print(f"{name}: cubin sm_{sm}, ptxas options '{opts}'"
                      + (f"  <- {args.arch}" if ok else ""))
            elif kind == KIND_PTX:
                has_ptx |= sm == want_ptx
                print(f"{name}: PTX for compute_{sm} ({len(payload)} bytes, JIT fallback)"
                      + (f"  <- {args.ptx}" if sm == want_ptx else ""))
        if want_ptx is not None and not has_ptx:
            missing_ptx.append(name)
    if not found:
        print(f"no cubin assembled for {args.arch} in {args.file}", file=sys.stderr)
        return 1
    if missing_ptx:
        print(f"no PTX for {args.ptx} in: {', '.join(missing_ptx)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
