#!/usr/bin/python3
"""skipped.py: why each skipped test was skipped, one line each.

Reads the JUnit file ctest wrote (`ctest --output-junit FILE`) and prints,
for every test that did not run, its name and the reason its own output
gives: the last line that says "skip" (the tests print "SKIP: why" or
"NAME: skipped: why" before exiting 77), else its last line.  Then the
parts that skipped of the tests that ran: a suite of several tests that
skipped some of them says so in its output, one line each, as
"SKIP: TEST: why" (the integration harness), "SKIP NAME: why" (the GPU
scripts) or "SKIPPED [N] FILE:LINE: why" (pytest's -rs).  Then ctest's
count again.  `make test` ends with it.

Usage: skipped.py JUNIT.xml"""
import re
import sys
import xml.etree.ElementTree as ET


def reason(out):
    lines = [ln.strip() for ln in (out or "").splitlines() if ln.strip()]
    said = [ln for ln in lines if re.search(r"\bskip", ln, re.I)]
    return (said or lines or ["(it printed nothing)"])[-1]


# A skipped part of a test that ran, as its output says it.
PART = re.compile(r"^(?:SKIP:? |SKIPPED \[\d+\] )(.*\S)")


def parts(out):
    return [m.group(1) for m in map(PART.match, (out or "").splitlines()) if m]


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
    partly = [(tc.get("name", ""), part) for tc in cases if tc not in skipped
              for part in parts(output(tc))]
    if not skipped and not partly:
        print("No test was skipped.")
        print(total)
        return 0
    if skipped:
        print("%d test%s skipped:" % (len(skipped), "" if len(skipped) == 1 else "s"))
        width = max(len(tc.get("name", "")) for tc in skipped)
        for tc in skipped:
            why = reason(output(tc))
            if tc.get("status") == "disabled":
                why = "disabled"
            print("  %-*s  %s" % (width, tc.get("name"), why[:200]))
    if partly:
        print("%d part%s skipped of tests that ran:" % (len(partly), "" if len(partly) == 1 else "s"))
        width = max(len(name) for name, _ in partly)
        for name, part in partly:
            print("  %-*s  %s" % (width, name, part[:200]))
    print(total)
    return 0


def output(tc):
    out = tc.find("system-out")
    return out.text if out is not None else ""


if __name__ == "__main__":
    sys.exit(main())
