"""What check_metrics.py and check_exporter.py share: check() records a
failed check in failures, which the script reads at its end."""

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)
    return cond
