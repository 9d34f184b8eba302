"""`python -m tests.exactness [--long] [--seed N]`: the whole campaign, its counts and times."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.exactness import campaign, tflite_ops
from tests.quant_fuzz.oracle import Oracle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--long", action="store_true", help="the long campaign")
    parser.add_argument("--seed", type=int, default=campaign.SEED)
    parser.add_argument("-o", "--folder", help="where reproducers go (default: a new folder)")
    parser.add_argument("--part", default="1/1", metavar="K/N",
                        help="run the K-th of N shares (N processes run the whole in parallel)")
    args = parser.parse_args()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="kiln-exactness-"))
    oracle = Oracle()
    try:
        began = time.process_time()
        part, parts = (int(v) for v in args.part.split("/"))
        trials = campaign.runnable(campaign.plan(args.long, args.seed))[part - 1::parts]
        outcomes = []
        for trial in trials:  # each named first, so a crash of the process says where
            print(f"trial: {trial.label}", file=sys.stderr, flush=True)
            outcomes.append(campaign.run_trial(trial, folder, oracle))
        print(campaign.summary(outcomes))
        ops = tflite_ops.run_range(range(part - 1, tflite_ops.count(args.long), parts), oracle,
                                   args.seed, args.long)
        print(ops.summary())
        print(f"{time.process_time() - began:.0f} CPU-s in this process (QEMU and the oracle "
              "run in others); reproducers under", folder)
        return 1 if ops.failures or any(o.failures for o in outcomes) else 0
    finally:
        oracle.close()


if __name__ == "__main__":
    raise SystemExit(main())
