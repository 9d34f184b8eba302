"""Run the whole campaign in one process and print its class counts, or rebuild one mutant.

    python -m tests.quant_fuzz [--long] [--seed N] [--source NAME]
    python -m tests.quant_fuzz replay LABEL [--seed N]     (e.g. LABEL qdq-17: writes qdq-17.onnx)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.quant_fuzz.campaign import SEED, chunks, format_summary, merge, run_chunk, tally
from tests.quant_fuzz.oracle import Oracle
from tests.quant_fuzz.sources import make_mutant, source_available


def _replay(label: str, seed: int) -> int:
    source, _, index = label.rsplit(".", 1)[0].rpartition("-")
    mutant = make_mutant(source, int(index), seed)
    Path(mutant.label).write_bytes(mutant.data)
    print(f"wrote {mutant.label}: {mutant.how}")
    if mutant.feeds:
        print(f"inputs standing for former constants: {sorted(mutant.feeds)}")
    if mutant.must_refuse:
        print(f"must be refused: {mutant.must_refuse}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.quant_fuzz")
    parser.add_argument("replay", nargs="*", help="replay LABEL: write that mutant's file")
    parser.add_argument("--long", action="store_true", help="the long campaign")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--source", action="append", help="only these sources")
    args = parser.parse_args(argv)
    if args.replay:
        return _replay(args.replay[1], args.seed)
    oracle = Oracle()
    tallies, start = [], time.process_time()
    try:
        with tempfile.TemporaryDirectory(prefix="kiln-quant-fuzz-") as folder:
            for source, first, end in chunks(args.long):
                if (args.source and source not in args.source) or not source_available(source):
                    continue
                tallies.append(tally(run_chunk(source, range(first, end), oracle, Path(folder),
                                               args.seed)))
                print(f"{source} {first}..{end - 1} done", file=sys.stderr)
    finally:  # what was counted is printed even when the campaign stops half-way
        oracle.close()
        total = merge(tallies)
        print(format_summary(total))
        print(f"CPU time in this process: {time.process_time() - start:.0f} s")
    return 1 if total.get("failures") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
