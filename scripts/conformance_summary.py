#!/usr/bin/env python3
"""Tally an MCP conformance run: conformance_summary.py OUTDIR [--success N --failure N --warning N]
[--expected-failures FILE]

The harness's own summary hides warnings and error messages, so this reads every
OUTDIR/server-<scenario>-<timestamp>/checks.json it wrote (`conformance server ... -o OUTDIR`),
prints SUCCESS/FAILURE/WARNING per scenario and every check that is not SUCCESS with its message,
then the totals. Exit 0 only when the totals are exactly the expected ones: by default 47/0/0, the
best possible score of @modelcontextprotocol/conformance 0.1.16 with `--suite all` (32 scenarios;
server-sse-polling's 3 SHOULD checks are the ones that can turn into warnings). Fewer successes
fail too: a scenario that silently stopped running must not pass.

``--expected-failures FILE`` is the harness's baseline file (``server:`` then ``- scenario`` or
``- scenario:check-id`` lines): the checks it names are listed as "expected" and left out of the
totals, so the totals are those of everything that must already pass.
"""
import argparse
import json
import re
import sys
from pathlib import Path

EXPECTED = {"SUCCESS": 47, "FAILURE": 0, "WARNING": 0}
DIR_NAME = re.compile(r"^server-(?P<scenario>.+)-(?P<started>\d{4}-\d\d-\d\dT.+)$")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    for status, n in EXPECTED.items():
        parser.add_argument(f"--{status.lower()}", type=int, default=n, help=f"expected {status} total")
    parser.add_argument("--expected-failures", type=Path, help="the harness baseline file")
    args = parser.parse_args(argv)
    expected = {s: getattr(args, s.lower()) for s in EXPECTED}
    baseline = read_baseline(args.expected_failures) if args.expected_failures else set()

    totals = dict.fromkeys(EXPECTED, 0)
    scenarios = 0
    runs = [(m, p) for p in args.outdir.iterdir() if p.is_dir() and (m := DIR_NAME.match(p.name))]
    for m, folder in sorted(runs, key=lambda run: run[0]["started"]):  # in the order they ran
        scenarios += 1
        try:
            checks = json.loads((folder / "checks.json").read_text())
        except (OSError, ValueError) as exc:
            print(f"{m['scenario']:32s} unreadable checks.json: {exc}")
            totals["FAILURE"] += 1  # a scenario without results counts as failed
            continue
        listed = m["scenario"] in baseline
        kept = [c for c in checks if not listed and f"{m['scenario']}:{c.get('id')}" not in baseline]
        counts = {s: sum(c.get("status") == s for c in kept) for s in EXPECTED}
        for s in EXPECTED:
            totals[s] += counts[s]
        note = "  (expected to fail: all of it)" if listed else ""
        print(f"{m['scenario']:32s} success={counts['SUCCESS']} failure={counts['FAILURE']} "
              f"warning={counts['WARNING']}{note}")
        for c in checks:
            if c.get("status") != "SUCCESS":
                message = c.get("errorMessage") or c.get("description", "")
                message = " ".join(str(message).split())[:400]  # errors can hold whole HTML pages
                mark = "" if c in kept else " (expected)"
                print(f"    {c.get('status')}{mark} {c.get('id')}: {message}")

    ok = totals == expected and scenarios > 0
    print(f"\nscenarios={scenarios} totals: " + " ".join(f"{s}={n}" for s, n in totals.items()))
    print("expected:      " + " ".join(f"{s}={n}" for s, n in expected.items()))
    print("CONFORMANCE OK" if ok else "CONFORMANCE MISMATCH")
    return 0 if ok else 1


def read_baseline(path: Path) -> set:
    """The entries of the ``server:`` list of a baseline file (the harness's YAML, one
    ``- entry`` per line; comments allowed)."""
    entries, in_server = set(), False
    for line in path.read_text().splitlines():
        text = line.split("#", 1)[0].rstrip()
        if not text:
            continue
        if not text.startswith((" ", "-")):
            in_server = text.strip() == "server:"
        elif in_server and text.strip().startswith("- "):
            entries.add(text.strip()[2:].strip().strip("'\""))
    return entries


if __name__ == "__main__":
    sys.exit(main())
