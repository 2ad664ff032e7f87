#!/usr/bin/python3
"""make-profile.py: deploy/kubernetes/seccomp/cudackptd.json from the unit.

The DaemonSet's seccomp profile allows what systemd/cudackptd.service.in's
SystemCallFilter= allows, and nothing else: each group it names (@system-
service, less @privileged) expanded by `systemd-analyze syscall-filter`,
then the calls it names one by one (bpf, perf_event_open: the process
index).  Read in order, as systemd reads them: a "~" line takes its calls
out of what the lines before allowed, a later line puts calls back.
Everything else fails with EPERM (SystemCallErrorNumber=EPERM), where the
daemon and the driver report it rather than die.

  make-profile.py UNIT [PROFILE]   write PROFILE (default: print it)

tests/deploy/check_manifests.py runs the same expansion and fails when the
profile and the unit disagree; run this again after changing either (or on
a newer systemd, whose groups may hold more calls)."""
import json
import re
import subprocess
import sys

# The architectures the profile is for: the native ones of the nodes
# (SystemCallArchitectures=native: no 32-bit calls).
ARCHITECTURES = ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"]
EPERM = 1


def groups():
    """{"@group": [member, ...]} as this machine's systemd defines them."""
    out = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True,
                         check=True).stdout
    g, cur = {}, None
    for line in out.splitlines():
        if line.startswith("@"):
            cur = line.strip()
            g[cur] = []
        elif cur and line.strip() and not line.strip().startswith("#"):
            g[cur].append(line.strip())
    return g


def expand(name, g):
    if not name.startswith("@"):
        return {name}
    return set().union(*(expand(m, g) for m in g[name]))


def unit_filter(unit_text):
    """The unit's SystemCallFilter= lines: [(deny, [names or @groups])]."""
    lines = []
    for value in re.findall(r"^SystemCallFilter=(.*)$", unit_text, re.M):
        value = value.strip()
        deny = value.startswith("~")
        lines.append((deny, value.lstrip("~").split()))
    return lines


def allowed(unit_text, g):
    """What the unit's filter lets through (it starts with an allow line)."""
    lines = unit_filter(unit_text)
    if not lines or lines[0][0]:
        raise ValueError("the unit's first SystemCallFilter= is not an allow list")
    calls = set()
    for deny, words in lines:
        these = set().union(*(expand(w, g) for w in words))
        calls = calls - these if deny else calls | these
    return calls


def by_name(unit_text):
    """The calls the unit names one by one, not through a group."""
    return {w for deny, words in unit_filter(unit_text) if not deny for w in words if not w.startswith("@")}


def profile(unit_text, g):
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": EPERM,
        "architectures": ARCHITECTURES,
        "syscalls": [{
            "names": sorted(allowed(unit_text, g)),
            "action": "SCMP_ACT_ALLOW",
            "comment": "systemd/cudackptd.service.in: SystemCallFilter=@system-service ~@privileged "
                       "bpf perf_event_open, as expanded by systemd-analyze syscall-filter "
                       "(deploy/kubernetes/seccomp/make-profile.py)",
        }],
    }


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        text = json.dumps(profile(f.read(), groups()), indent=2) + "\n"
    if len(sys.argv) == 3:
        with open(sys.argv[2], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
