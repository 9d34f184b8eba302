"""The main journey: a float model, calibrated in Kiln, quantized, compiled and run on the board.

For each float model (the shared MLPerf Tiny and MNIST models, the bundled digits CNN and a
built graph holding every operator the quantizer quantizes, once with a layer kept in float),
each schema and each rounding rule: the quantized graph is compiled for the host, Cortex-M7
and Cortex-M55 and run (the host in this process, the M-profile cores under QEMU); every
output element equals Kiln's interpreter on the same integer graph. Each case prints one line
`journey MODEL SCHEMA RULE TARGET: N compared, D differing`.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.driver import compilation, compile_graph
from compiler.interpreter import run
from compiler.quant.quantize import Options, quantize
from tests.codegen import firmware
from tests.journeys.data import (
    MODELS,
    RULES,
    SCHEMAS,
    TARGETS,
    data_of,
    graph_of,
    keep_float,
    profile_of,
)

MACHINES = {t: firmware.board_for(t).qemu_machine for t in ("cortex-m7", "cortex-m55")}
# Float operators that must not survive quantization (a kept-float layer is the exception).
_FLOAT_COMPUTE = ("Conv", "Gemm", "MatMul", "FullyConnected")


def _differing(got: dict, want: dict) -> tuple[int, int]:
    compared = sum(v.size for v in want.values())
    differing = sum(int(np.count_nonzero(np.asarray(got[k]).reshape(-1)
                                         != np.asarray(want[k]).reshape(-1))) for k in want)
    return compared, differing


def _run_on(target: str, prepared, feeds_list: list[dict], wants: list[dict],
            folder) -> tuple[int, int]:
    """(elements compared, elements differing) of the compiled graph against the interpreter's
    outputs `wants` (one per feed).

    The host runs every feed; a QEMU board runs the first (one firmware image per input).
    """
    net = compile_graph(prepared, get_target(target), name="net")
    compared = differing = 0
    if target == "host":
        runner = HostNet(net)
        try:
            for feeds, want in zip(feeds_list, wants):
                c, d = _differing(runner.run(feeds), want)
                compared, differing = compared + c, differing + d
        finally:
            runner.close()
        return compared, differing
    firmware.require_tools()
    feeds = feeds_list[0]
    machine = MACHINES[target]
    elf = firmware.build(net, firmware.main_c(net, feeds), machine, folder)
    stdout, _ = firmware.run(elf, machine)
    return _differing(firmware.parse_outputs(net, stdout), wants[0])


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("model", MODELS)
def test_a_calibrated_float_model_runs_exactly_on_every_target(model, schema, rule, tmp_path):
    graph, profile = graph_of(model), profile_of(model)
    _, held = data_of(model)
    qdq = quantize(graph, profile, Options(requant=rule, schema=schema,
                                           keep_float=keep_float(model)))
    compiled = compilation(qdq)
    kept = [n for n in compiled.final.nodes if n.op in _FLOAT_COMPUTE]
    assert len(kept) == len(keep_float(model)), f"left in float: {[n.name for n in kept]}"
    prepared = compiled.prepared
    feeds_list = held.feeds(0, min(len(held), 6))
    wants = [run(prepared, feeds) for feeds in feeds_list]  # the same for every target
    for target in TARGETS:
        folder = tmp_path / target
        folder.mkdir()
        compared, differing = _run_on(target, prepared, feeds_list, wants, folder)
        print(f"journey {model} {schema} {rule} {target}: {compared} compared, "
              f"{differing} differing")
        assert compared and differing == 0, f"{target}: {differing} of {compared} differ"
