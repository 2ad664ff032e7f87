#!/usr/bin/python3
"""skipped.py: why each skipped test was skipped, one line each.

Reads the JUnit file ctest wrote (`ctest --output-junit FILE`) and prints,
for every test that did not run, its name and the reason its own output
gives: the last line that says "skip" (the tests print "SKIP: why" or
"NAME: skipped: why" before exiting 77), else its last line; then ctest's
count again.  `make test` ends with it.

Usage: skipped.py JUNIT.xml"""
import re
import sys
import xml.etree.ElementTree as ET


def reason(out):
    lines = [ln.strip() for ln in (out or "").splitlines() if ln.strip()]
    said = [ln for ln in lines if re.search(r"\bskip", ln, re.I)]
    return (said or lines or ["(it printed nothing)"])[-1]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print("skipped.py: cannot read %s: %s" % (sys.argv[1], e))
        return 1
    cases = list(root.iter("testcase"))
    skipped = [tc for tc in cases if tc.get("status") in ("notrun", "disabled") or tc.find("skipped") is not None]
    failed = [tc for tc in cases
              if tc not in skipped and (tc.find("failure") is not None or tc.get("status") == "fail")]
    # ctest's count, again as the last line (the report would hide its own).
    total = "ctest: %d passed, %d failed, %d skipped" % (len(cases) - len(skipped) - len(failed), len(failed),
                                                         len(skipped))
    if not skipped:
        print("No test was skipped.")
        print(total)
        return 0
    print("%d test%s skipped:" % (len(skipped), "" if len(skipped) == 1 else "s"))
    width = max(len(tc.get("name", "")) for tc in skipped)
    for tc in skipped:
        out = tc.find("system-out")
        why = reason(out.text if out is not None else "")
        if tc.get("status") == "disabled":
            why = "disabled"
        print("  %-*s  %s" % (width, tc.get("name"), why[:200]))
    print(total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
