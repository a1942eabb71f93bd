#!/usr/bin/env python
"""search_tools' cost for a large catalog (issue 41: "well under a millisecond for 1,000 tools").

    .venv/bin/python bench/discovery.py [--tools 1000] [--queries 2000]

Registers ``--tools`` tools like a project with many models makes (``<model>_<verb>`` with a
description and parameters, in a fresh registry), builds the index once (timed), then runs
``--queries`` plain queries through ``discovery.search`` (the whole answer: every tool's
permission check for the caller, the ranking, the definitions) and through the index alone.
Prints one JSON line: the build, and per-search p50/p99/mean in microseconds.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VERBS = {"list": "List {p}: filter, search, sort; pages follow nextCursor.", "get": "One {s} by its id.",
         "create": "Create one {s}.", "update": "Change one {s}: only the fields given change.",
         "delete": "Delete one {s}."}
QUERIES = ["change a book's title", "who is the caller", "sales report for a day", "delete an invoice",
           "list the customers of a shop", "create an order line", "find a product by its id"]


def catalog(count: int):
    """``count`` tool specs over count/5 models, each with a few parameters."""
    from mcp_transport.methods.registry import make_tool

    def func(**_):
        return None

    specs = []
    for number in range(count):
        model, verb = f"entity{number // len(VERBS)}", list(VERBS)[number % len(VERBS)]
        schema = {"type": "object", "properties": {
            "id": {"type": "integer", "description": f"The {model}'s id."},
            "name": {"type": "string", "description": f"The {model}'s name."},
            "notes": {"type": "string", "description": "Free text about it."}}}
        specs.append(make_tool(func, name=f"{model}_{verb}", input_schema=schema,
                               description=VERBS[verb].format(p=model + "s", s=model)))
    return specs


def timed(function, rounds: int) -> dict:
    samples = []
    for number in range(rounds):
        started = time.perf_counter()
        function(QUERIES[number % len(QUERIES)])
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return {"p50_us": round(samples[len(samples) // 2], 1), "p99_us": round(samples[int(len(samples) * 0.99)], 1),
            "mean_us": round(statistics.fmean(samples), 1)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=2000)
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpserver.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench")
    import django

    django.setup()
    from mcp_transport.methods import discovery
    from mcp_transport.methods.specs import CountedDict

    discovery.registry.tools = CountedDict((spec.name, spec) for spec in catalog(options.tools))
    started = time.perf_counter()
    specs, index = discovery.index()
    build_ms = (time.perf_counter() - started) * 1e3
    caller = SimpleNamespace(principal=None)  # no user: every tool's permission is checked, as for anyone
    everyone = [True] * len(specs)
    result = {"tools": len(specs), "terms": len(index.postings), "build_ms": round(build_ms, 1),
              "search_tools": timed(lambda query: discovery.search({"query": query}, caller), options.queries),
              "index_only": timed(lambda query: index.search(query, everyone, 5), options.queries)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
