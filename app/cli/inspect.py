"""`kiln inspect`: operators, parameters, MACs, inputs and outputs of a model."""

from __future__ import annotations

import json
from pathlib import Path

from app.cli.args import (
    add_model_args,
    load_graph,
)


def add_parser(sub) -> None:
    """The `inspect` command's arguments."""
    inspect = sub.add_parser("inspect", help="operators, parameters, MACs, inputs and outputs")
    add_model_args(inspect)
    inspect.add_argument("--json", action="store_true", help="print one JSON document")
    inspect.add_argument("--dump", action="store_true", help="also print the graph, a line a node")



def run(args) -> int:
    """`kiln inspect`."""
    from compiler.qmath.summary import summary
    from compiler.stats import compute_stats

    graph = load_graph(args)
    stats = compute_stats(graph)
    quant = summary(graph)
    if args.json:
        print(json.dumps({**stats.to_json(), "dtypes": quant["dtypes"],
                          "quantized": {**quant["quantized"], "values": quant["values"]}}))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{Path(args.model).name}[/bold]: graph {graph.name!r}, opset "
                  f"{graph.opset}, {stats.nodes} nodes, {stats.params:,} parameters "
                  f"({stats.param_bytes:,} bytes), {stats.macs:,} MACs")
    types = ", ".join(f"{count} {dtype}" for dtype, count in quant["dtypes"].items())
    console.print(f"tensors: {types}; quantized: {quant['quantized']['per_tensor']} per tensor,"
                  f" {quant['quantized']['per_channel']} per channel", markup=False)
    table = Table("input/output", "name", "type", "shape")
    for kind, items in (("input", stats.inputs), ("output", stats.outputs)):
        for item in items:
            table.add_row(kind, item["name"], item["dtype"], str(item["shape"]))
    console.print(table)
    ops_table = Table("operator", "count")
    for op, count in stats.ops.items():
        ops_table.add_row(op, str(count))
    console.print(ops_table)
    if args.dump:
        from compiler.ir.dump import dump

        console.print(dump(graph), markup=False, highlight=False)
    return 0
