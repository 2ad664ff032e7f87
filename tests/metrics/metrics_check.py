"""What check_metrics.py and check_exporter.py share: check() records a
failed check in failures, verdict() reads them at the script's end."""

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)
    return cond


def verdict(said, ok):
    """The script's exit status: 1 with the daemon's log (said) printed if
    a check failed, else 0 with the line ok."""
    if failures:
        print(said)
        return 1
    print(ok)
    return 0
