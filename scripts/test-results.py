#!/usr/bin/python3
"""Counts test results for scripts/test.sh from the machine-readable logs the runners write.

    test-results.py meson BUILD/meson-logs/testlog.json
    test-results.py junit RESULTS.xml

Prints one line per failed test ("FAIL <name>: <reason>") and then a last line
"<passed> <failed> <skipped>". A missing or unreadable log is reported as one failure, since it
means the runner itself broke.
"""

import json
import sys
import xml.etree.ElementTree as ET

MESON_PASS = {"OK", "EXPECTEDFAIL"}
MESON_SKIP = {"SKIP"}


def meson(path):
    passed, failed, skipped = 0, [], 0
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)
            result = t.get("result", "ERROR")
            if result in MESON_PASS:
                passed += 1
            elif result in MESON_SKIP:
                skipped += 1
            else:
                failed.append((t.get("name", "?"), result))
    return passed, failed, skipped


def junit(path):
    passed, failed, skipped = 0, [], 0
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '?')}".lstrip(":")
        bad = [c for c in case if c.tag in ("failure", "error")]
        if bad:
            message = (bad[0].get("message") or bad[0].tag).splitlines()
            failed.append((name, message[0][:200] if message else bad[0].tag))
        elif any(c.tag == "skipped" for c in case):
            skipped += 1
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
        passed, failed, skipped = 0, [(path, f"no usable results: {exc}")], 0
    for name, reason in failed:
        print(f"FAIL {name}: {reason}")
    print(passed, len(failed), skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
