"""The campaign's plan (sources, counts, chunks), its loop and its class counts.

`make test` runs the default plan (1,000 mutants, 820 without the shared models);
KILN_FUZZ_LONG=1 runs ten times as many, KILN_FUZZ_SEED=N another seed. Every eighth mutant
goes through `app.cli.main`, the rest through the library; every fourth is also compiled for
Cortex-M7.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path

from tests.quant_fuzz.check import Record, check_mutant
from tests.quant_fuzz.oracle import Oracle
from tests.quant_fuzz.sources import SOURCE_IDS, make_mutant

SEED = int(os.environ.get("KILN_FUZZ_SEED", "0"))
LONG = os.environ.get("KILN_FUZZ_LONG", "") not in ("", "0")
# Mutants per source: (default campaign, long campaign).
COUNTS = {"qop": (300, 3000), "qdq": (280, 3000), "ad01_int8": (60, 600),
          "kws_ref_model": (40, 400), "tflite-built": (160, 1600), "tflite-bytes": (80, 800),
          "tflite-shared": (80, 800)}
CHUNK = 40
CLI_EVERY, ARM_EVERY = 8, 4
# Failure classes left to an issue of their own (class -> the issue): counted and printed, not
# failed. Empty, so every failure class fails the test.
KNOWN: dict[str, str] = {}
REFUSAL_LINES = 40  # the most frequent refusal classes printed
SLOWEST = 5
assert COUNTS.keys() == SOURCE_IDS.keys()


def chunks(long: bool = LONG) -> list[tuple[str, int, int]]:
    """(source, first index, end) of every chunk, a test each so xdist can spread them."""
    plan = []
    for source, counts in COUNTS.items():
        total = counts[1] if long else counts[0]
        plan += [(source, start, min(start + CHUNK, total)) for start in range(0, total, CHUNK)]
    return plan


def run_chunk(source: str, indices, oracle: Oracle, folder: Path,
              seed: int = SEED) -> list[Record]:
    """Check each mutant of `source` numbered in `indices`; their records."""
    records = []
    for index in indices:
        mutant = make_mutant(source, index, seed)
        work = folder / mutant.label.replace(".", "_")
        work.mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        records.append(check_mutant(mutant, oracle, work, index % CLI_EVERY == 0,
                                    index % ARM_EVERY == 0))
        records[-1].seconds = time.perf_counter() - began
        shutil.rmtree(work, ignore_errors=True)
    return records


def outcome(record: Record) -> str:
    """The one class a mutant's outcome counts under."""
    if record.failures:
        return "failed"
    if record.refusal:
        return f"refused at {record.refusal.split(':')[0]}"
    if record.engines == "agreed":
        return "ran in both engines and agreed"
    return "ran"


def tally(records: list[Record]) -> dict:
    """Class counts of a list of records (JSON-ready), failures with their first example."""
    counts = {key: Counter() for key in ("sources", "paths", "outcomes", "outcomes by source",
                                         "invalid models", "refusals", "refusals naming a node",
                                         "oracle")}
    failures: dict[str, list] = {}
    for r in records:
        m = r.mutant
        counts["sources"][m.source] += 1
        counts["paths"][r.path] += 1
        counts["outcomes"][outcome(r)] += 1
        counts["outcomes by source"][f"{m.source}: {outcome(r)}"] += 1
        if m.must_refuse:
            verdict = "accepted (a failure)" if r.accepted else "refused"
            counts["invalid models"][f"{m.must_refuse}: {verdict}"] += 1
        if r.refusal:
            counts["refusals"][r.refusal] += 1
            counts["refusals naming a node"]["yes" if r.names_node else "no"] += 1
        if r.refusal == "" or r.oracle != "not asked":
            counts["oracle"][r.oracle] += 1
        for cls, detail in r.failures:
            entry = failures.setdefault(cls, [0, m.label, m.how, detail])
            entry[0] += 1
    slowest = sorted(records, key=lambda r: -r.seconds)[:SLOWEST]
    return {**{k: dict(v) for k, v in counts.items()}, "failures": failures,
            "slowest": [[round(r.seconds, 2), r.mutant.label, r.path] for r in slowest]}


def merge(tallies: list[dict]) -> dict:
    """The sum of several tallies."""
    total: dict = {}
    for t in tallies:
        for key, value in t.items():
            if key == "slowest":
                total[key] = sorted(total.get(key, []) + value, key=lambda e: -e[0])[:SLOWEST]
            elif key == "failures":
                into = total.setdefault(key, {})
                for cls, entry in value.items():
                    if cls in into:
                        into[cls][0] += entry[0]
                    else:
                        into[cls] = list(entry)
            else:
                into = total.setdefault(key, Counter())
                into.update(value)
    return total


def format_summary(t: dict) -> str:
    """The tally as text: one block per kind of count, most frequent first."""
    lines = []
    for key in ("sources", "paths", "outcomes", "outcomes by source", "oracle",
                "invalid models", "refusals naming a node", "refusals"):
        values = t.get(key, {})
        lines.append(f"{key} ({sum(values.values())}):")
        ranked = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
        if key in ("outcomes by source", "invalid models"):
            ranked = sorted(values.items())
        for name, count in ranked[:REFUSAL_LINES]:
            lines.append(f"  {count:5d}  {name}")
        if len(ranked) > REFUSAL_LINES:
            rest = sum(count for _, count in ranked[REFUSAL_LINES:])
            lines.append(f"  {rest:5d}  in {len(ranked) - REFUSAL_LINES} more classes")
    lines.append("slowest: " + ", ".join(f"{label} {seconds} s ({path})"
                                         for seconds, label, path in t.get("slowest", [])))
    lines.append(f"failure classes ({len(t.get('failures', {}))}):")
    lines += failure_lines(t)
    return "\n".join(lines)


def failure_lines(t: dict) -> list[str]:
    lines = []
    for cls, (count, label, how, detail) in sorted(t.get("failures", {}).items(),
                                                   key=lambda kv: -kv[1][0]):
        lines.append(f"  {count:5d}  {cls}\n         e.g. {label}: {how}\n         {detail}")
    return lines
