#!/usr/bin/python3
"""Counts test results for scripts/test.sh from the machine-readable logs the runners write.

    test-results.py meson BUILD/meson-logs/testlog.json
    test-results.py junit RESULTS.xml

Prints one line per failed test ("FAIL <name>: <reason>"), one per skipped test ("SKIP <name>:
<reason>") and then a last line "<passed> <failed> <skipped>". A missing or unreadable log is
reported as one failure, since it means the runner itself broke.

A meson test is one cmocka program. cmocka counts a skipped case with the passes and the program
exits 0, so a program that skipped cases is not counted as a pass: each skipped case counts as a
skip, listed with the reason test_skip() printed (tests/unit/test-skip.h). A pytest xfail (an
expected failure that did fail) counts as a pass.
"""

import json
import re
import sys
import xml.etree.ElementTree as ET

MESON_PASS = {"OK", "EXPECTEDFAIL"}
MESON_SKIP = {"SKIP"}
CMOCKA_SKIPPED = re.compile(r"^\[  SKIPPED \] (\S+)$")
CMOCKA_REASON = re.compile(r"^skipped: (.*)$")


def cmocka_skips(output):
    """[(case, reason)] for each case a cmocka program's output reports skipped."""
    skips, reason = {}, None
    for line in output.splitlines():
        m = CMOCKA_REASON.match(line)
        if m:
            reason = m.group(1)
            continue
        m = CMOCKA_SKIPPED.match(line)
        if m and m.group(1) not in skips:
            skips[m.group(1)] = reason or "no reason printed"
        reason = None
    return list(skips.items())


def meson(path):
    passed, failed, skipped = 0, [], []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)
            name = t.get("name", "?")
            result = t.get("result", "ERROR")
            cases = cmocka_skips(t.get("stdout") or "")
            if result in MESON_PASS and cases:
                skipped += [(f"{name} {case}", why) for case, why in cases]
            elif result in MESON_PASS:
                passed += 1
            elif result in MESON_SKIP:
                skipped.append((name, "the whole program"))
            else:
                failed.append((name, result))
    return passed, failed, skipped


def junit(path):
    passed, failed, skipped = 0, [], []
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '?')}".lstrip(":")
        bad = [c for c in case if c.tag in ("failure", "error")]
        skip = [c for c in case if c.tag == "skipped"]
        if bad:
            message = (bad[0].get("message") or bad[0].tag).splitlines()
            failed.append((name, message[0][:200] if message else bad[0].tag))
        elif skip and skip[0].get("type") == "pytest.xfail":
            passed += 1
        elif skip:
            reason = (skip[0].get("message") or "no reason given").splitlines() or ["?"]
            skipped.append((name, reason[0][:200]))
        else:
            passed += 1
    return passed, failed, skipped


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("meson", "junit"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    kind, path = sys.argv[1:]
    try:
        passed, failed, skipped = (meson if kind == "meson" else junit)(path)
    except (OSError, ValueError, ET.ParseError) as exc:
        passed, failed, skipped = 0, [(path, f"no usable results: {exc}")], []
    for name, reason in failed:
        print(f"FAIL {name}: {reason}")
    for name, reason in skipped:
        print(f"SKIP {name}: {reason}")
    print(passed, len(failed), len(skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
