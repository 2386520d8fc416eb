#!/usr/bin/python3
"""Checks capsule's dependency lines: no static library uses a symbol that only a library above
it defines. The linker cannot tell (meson links static libraries in one group), so this looks
at the archives themselves with nm.

Usage: check-layers.py NAME=ARCHIVE[:BELOW,BELOW...] ...  (BELOW: the names it may use)
Exits 1 naming each library, the one above it that it uses, and the symbols."""

import subprocess
import sys


def symbols(archive, flag):
    out = subprocess.run(["nm", "-g", flag, archive], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines()
            if line.strip() and not line.endswith(":")}


def main(args):
    libs, below = {}, {}
    for arg in args:
        name, rest = arg.split("=", 1)
        path, _, allowed = rest.partition(":")
        libs[name] = path
        below[name] = set(filter(None, allowed.split(",")))
    defined = {n: symbols(p, "--defined-only") for n, p in libs.items()}
    bad = 0
    for name, path in libs.items():
        used = symbols(path, "-u")
        for other in libs:
            if other == name or other in below[name]:
                continue
            wrong = sorted(used & defined[other])
            if wrong:
                bad += 1
                print(f"{name} uses {other}, which is not below it: {', '.join(wrong[:10])}")
    print(f"{len(libs)} libraries, {bad} crossing{'s' if bad != 1 else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
