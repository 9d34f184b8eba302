"""Print the conformance counts: passed / claimed / excluded, and each failure's first line."""

from __future__ import annotations

import collections

from compiler import ops
from tests.conformance.test_onnx_backend import CASES, CLAIMED, RUN, excluded_reason, run_case


def main() -> None:
    failures = {}
    for name in RUN:
        try:
            run_case(name)
        except Exception as exc:  # report every kind of failure, not only assertions
            failures[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    per_op = collections.Counter()
    for name in CLAIMED:
        for node in CASES[name].model.graph.node:
            per_op[node.op_type] += 1
    excluded = [n for n in CLAIMED if excluded_reason(n)]
    for name, why in sorted(failures.items()):
        print(f"FAIL {name}: {why[:300]}")
    for name in excluded:
        print(f"EXCLUDED {name}: {excluded_reason(name)}")
    claimed_ops = [o for o in ops.all_ops() if o.onnx]
    print(f"operators claimed: {len(claimed_ops)}; cases per operator: {dict(per_op)}")
    print(f"conformance: {len(RUN) - len(failures)} passed / {len(CLAIMED)} claimed / "
          f"{len(excluded)} excluded; {len(failures)} failed")


if __name__ == "__main__":
    main()
