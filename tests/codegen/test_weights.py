"""Weights placement: embedded (patched into the object) and external (the caller's blob).

External weights must give the same outputs as embedded ones and as onnxruntime, the object
must then hold no weight data, both modes must be deterministic, and the C include must hold
exactly the bytes of NET.weights.bin.
"""

from __future__ import annotations

import io
import subprocess

import numpy as np
import onnx
import pytest
from elftools.elf.elffile import ELFFile

from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.codegen.weights import WEIGHT_ALIGNMENT, WeightTable, array_bytes, weights_files
from compiler.driver import compile_graph
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.ir.graph import Constant, Graph
from compiler.ir.types import TensorType
from compiler.lowir.ir import Fusion
from compiler.passes.runner import run_pipeline
from tests.conftest import ROOT, SAMPLE_MODEL, shared_models
from tests.helpers import assert_close, ort_run


def _graph(model: onnx.ModelProto):
    return run_pipeline(load_onnx(model), snapshots=False).graph


@pytest.fixture(scope="module")
def sample():
    model = onnx.load(SAMPLE_MODEL)
    return model, _graph(model)


def _feeds(graph, seed=0):
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs}


def _elf(obj: bytes) -> ELFFile:
    return ELFFile(io.BytesIO(obj))


def _symbol_bytes(obj: bytes, name: str) -> bytes:
    """The bytes of the object's data symbol `name` (in a relocatable object)."""
    elf = _elf(obj)
    sym = elf.get_section_by_name(".symtab").get_symbol_by_name(name)[0]
    section = elf.get_section(sym["st_shndx"])
    return section.data()[sym["st_value"]:sym["st_value"] + sym["st_size"]]


def _check_both_modes(model: onnx.ModelProto, graph, feeds):
    """Embedded and external weights agree exactly and match onnxruntime."""
    target = get_target("host")
    embedded = compile_graph(graph, target)
    external = compile_graph(graph, target, weights="external")
    assert external.weights == "external" and len(external.constant) > 0
    assert embedded.weights == "embedded" and embedded.constant == b""
    runs = []
    for net in (embedded, external):
        host = HostNet(net)
        runs.append(host.run(feeds))
        host.close()
    for value, want in zip(graph.outputs, ort_run(model, feeds)):
        np.testing.assert_array_equal(runs[1][value.name], runs[0][value.name])
        assert_close(runs[1][value.name], want, what=f"{value.name} vs onnxruntime")
    return embedded, external


def test_sample_external_matches_embedded_and_onnxruntime(sample):
    model, graph = sample
    _check_both_modes(model, graph, _feeds(graph))


def test_pretrained_resnet_external():
    model = onnx.load(shared_models() / "onnx" / "pretrainedResnet.onnx")
    graph = _graph(model)
    embedded, external = _check_both_modes(model, graph, _feeds(graph, 1))
    fused = [k for k in external.kernels if k.fusion is Fusion.RESIDUAL_ADD]
    assert fused and all(len(k.nodes) == 2 for k in fused)


@pytest.mark.parametrize("target", ["host", "cortex-m7"])
def test_embedded_bytes_are_the_external_blob(sample, target):
    """Both modes share one layout: the embedded symbol holds exactly the external blob."""
    _, graph = sample
    embedded = compile_graph(graph, get_target(target), name="digits")
    external = compile_graph(graph, get_target(target), name="digits", weights="external")
    assert _symbol_bytes(embedded.object, "digits.weights") == external.constant
    elf = _elf(embedded.object)
    sym = elf.get_section_by_name(".symtab").get_symbol_by_name("digits.weights")[0]
    section = elf.get_section(sym["st_shndx"])
    assert section["sh_type"] == "SHT_PROGBITS"
    assert not section["sh_flags"] & 0x1  # SHF_WRITE: read-only data, flash on an MCU
    assert section["sh_addralign"] >= WEIGHT_ALIGNMENT
    assert sym["st_value"] % WEIGHT_ALIGNMENT == 0


@pytest.mark.parametrize("target", ["host", "cortex-m4"])
def test_external_object_holds_no_weights(sample, target):
    _, graph = sample
    weights = sum(c.data.nbytes for c in graph.used_constants())
    net = compile_graph(graph, get_target(target), weights="external")
    assert len(net.constant) >= weights
    elf = _elf(net.object)
    data = sum(s["sh_size"] for s in elf.iter_sections()
               if s["sh_flags"] & 0x2 and s["sh_type"] != "SHT_NOBITS"  # SHF_ALLOC
               and not s["sh_flags"] & 0x4)  # not SHF_EXECINSTR
    assert data < weights // 10, f"{data} bytes of data in an object without weights"
    assert not elf.get_section_by_name(".symtab").get_symbol_by_name("net.weights")


@pytest.mark.parametrize("weights", ["embedded", "external"])
def test_deterministic(sample, weights, monkeypatch):
    monkeypatch.setenv("KILN_NO_CACHE", "1")  # LLVM itself, twice, not the object cache
    _, graph = sample
    target = get_target("cortex-m7")
    first = compile_graph(graph, target, weights=weights)
    second = compile_graph(_graph(onnx.load(SAMPLE_MODEL)), target, weights=weights)
    assert first.object == second.object
    assert first.constant == second.constant
    assert first.kernels == second.kernels


_DIGEST = """import hashlib, onnx
from compiler.driver import compile_graph
from compiler.codegen.targets import get_target
from compiler.frontends.onnx import load_onnx
from compiler.passes.runner import run_pipeline
graph = run_pipeline(load_onnx(onnx.load({model!r})), snapshots=False).graph
net = compile_graph(graph, get_target("cortex-m7"), weights={weights!r})
print(hashlib.sha256(net.object + net.constant).hexdigest())
"""


@pytest.mark.parametrize("weights", ["embedded", "external"])
def test_deterministic_across_processes(sample, weights, monkeypatch):
    """Another interpreter with another hash seed writes the same bytes."""
    monkeypatch.setenv("KILN_NO_CACHE", "1")  # both compile with LLVM
    import hashlib
    import os
    import sys

    net = compile_graph(sample[1], get_target("cortex-m7"), weights=weights)
    code = _DIGEST.format(model=str(SAMPLE_MODEL), weights=weights)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == hashlib.sha256(net.object + net.constant).hexdigest()


def test_constant_offsets_are_aligned_and_deduplicated():
    table = WeightTable()
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    c = rng.standard_normal(7).astype(np.float32)
    offsets = [table.add(x) for x in (a, b, a.copy(), c, b.copy(), a)]
    assert offsets[0] == offsets[2] == offsets[5]
    assert offsets[1] == offsets[4] != offsets[0]
    assert len(set(offsets)) == 3 and all(o % WEIGHT_ALIGNMENT == 0 for o in offsets)
    blob = table.blob()
    assert len(blob) % WEIGHT_ALIGNMENT == 0
    for x, o in zip((a, b, c), (offsets[0], offsets[1], offsets[3])):
        assert blob[o:o + x.nbytes] == array_bytes(x).tobytes()


def test_identical_weights_are_stored_once():
    """Two constants with equal contents (distinct arrays) take one slot of the blob."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((32, 32)).astype(np.float32)
    graph = Graph("twins")
    x = graph.add_input("x", TensorType((1, 32), "float32"))
    w1, w2 = graph.add_constant("w1", w), graph.add_constant("w2", w.copy())
    a = graph.add_node("FullyConnected", [x, w1], [TensorType((1, 32))], {"activation": "Relu"})
    y = graph.add_node("FullyConnected", [a.output, w2], [TensorType((1, 32))],
                       {"activation": ""})
    graph.outputs.append(y.output)
    net = compile_graph(graph, get_target("host"), weights="external")
    assert len(net.constant) < 2 * w.nbytes
    assert [k.weight_bytes for k in net.kernels] == [w.nbytes, w.nbytes]
    feeds = {"x": rng.standard_normal((1, 32)).astype(np.float32)}
    host = HostNet(net)
    assert_close(host.run(feeds)[y.output.name], run(graph, feeds)[y.output.name])
    host.close()


def test_kernel_map(sample):
    _, graph = sample
    net = compile_graph(graph, get_target("host"), name="digits", weights="external")
    ops = [i for i in net.plan.lowir.instrs if i.kind == "op"]
    assert [k.nodes for k in net.kernels] == [tuple(i.nodes) for i in ops]
    names = {n.name: n for n in graph.nodes}
    for kernel in net.kernels:
        assert f'@"{kernel.symbol}"' in net.llvm_ir
        node = names[kernel.nodes[0]]
        assert kernel.op.split("+")[0] == node.op
        consts = sum(v.data.nbytes for v in node.inputs if isinstance(v, Constant))
        assert kernel.weight_bytes >= consts
    assert sum(k.weight_bytes for k in net.kernels) >= len(net.constant.rstrip(b"\0")) - 64


def test_unknown_weights_mode_is_refused(sample):
    with pytest.raises(KilnError, match="weights must be one of"):
        compile_graph(sample[1], get_target("host"), weights="flash")


def test_weights_files_only_for_external(sample, tmp_path):
    _, graph = sample
    assert weights_files(compile_graph(graph, get_target("host"))) == {}
    net = compile_graph(graph, get_target("cortex-m7"), name="digits", weights="external")
    files = weights_files(net)
    assert set(files) == {"digits.weights.bin", "digits.weights.h"}
    assert files["digits.weights.bin"] == net.constant


@pytest.mark.usefixtures("c_compiler")
@pytest.mark.parametrize("size", [0, 5, 16, 1000])
def test_c_include_compiles_to_the_bin_bytes(tmp_path, size):
    """`cc -c` of the include gives an aligned array holding exactly the .bin bytes."""
    from types import SimpleNamespace

    blob = np.random.default_rng(size).permutation(np.arange(size) % 256).astype(
        np.uint8).tobytes()  # every byte value once size reaches 256
    net = SimpleNamespace(name="tiny", weights="external", constant=blob)
    files = weights_files(net)
    (tmp_path / "tiny.weights.h").write_bytes(files["tiny.weights.h"])
    (tmp_path / "use.c").write_text('#include "tiny.weights.h"\n'
                                    "const uint8_t *tiny_blob(void) { return tiny_weights; }\n"
                                    "unsigned long tiny_size(void) "
                                    "{ return TINY_CONSTANT_SIZE; }\n")
    done = subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-c", "use.c", "-o", "use.o"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    obj = (tmp_path / "use.o").read_bytes()
    got = _symbol_bytes(obj, "tiny_weights")
    assert got[:len(blob)] == blob and files["tiny.weights.bin"] == blob
    sym = _elf(obj).get_section_by_name(".symtab").get_symbol_by_name("tiny_weights")[0]
    assert sym["st_value"] % WEIGHT_ALIGNMENT == 0
    assert _elf(obj).get_section(sym["st_shndx"])["sh_addralign"] >= WEIGHT_ALIGNMENT


def test_c_include_of_real_weights(sample, tmp_path):
    """The include of the sample network's weights parses back to the .bin bytes."""
    _, graph = sample
    net = compile_graph(graph, get_target("cortex-m7"), name="digits", weights="external")
    text = weights_files(net)["digits.weights.h"].decode()
    body = text[text.index("= {") + 3:text.index("};")]
    values = bytes(int(t, 16) for t in body.replace("\n", " ").replace(",", " ").split())
    assert values == net.constant
    assert f"#define DIGITS_CONSTANT_SIZE {len(net.constant)}" in text


_MAIN_C = """#include <stdio.h>
#include "digits.weights.h"
int digits(const uint8_t *constant_weights, uint8_t *mutable_weights, uint8_t *activations);
static uint8_t mut[MUT_SIZE + 1] __attribute__((aligned(ALIGN)));
static uint8_t act[ACT_SIZE + 1] __attribute__((aligned(ALIGN)));
int main(void) {
    if (fread(mut + IN_OFFSET, 1, IN_BYTES, stdin) != IN_BYTES) return 2;
    if (digits(digits_weights, mut, act)) return 3;
    return fwrite(mut + OUT_OFFSET, 1, OUT_BYTES, stdout) == OUT_BYTES ? 0 : 4;
}
"""


@pytest.mark.usefixtures("c_compiler")
def test_c_program_with_compiled_in_weights(sample, tmp_path):
    """A C program linking NET.o and compiling NET.weights.h in matches onnxruntime."""
    model, graph = sample
    net = compile_graph(graph, get_target("host"), name="digits", weights="external")
    (tmp_path / "digits.o").write_bytes(net.object)
    (tmp_path / "digits.weights.h").write_bytes(weights_files(net)["digits.weights.h"])
    (tmp_path / "main.c").write_text(_MAIN_C)
    (src,), (dst,) = net.inputs, net.outputs
    assert src.region == dst.region == "mutable"
    nbytes = lambda t: int(np.prod(t.shape)) * 4  # noqa: E731
    defines = {"MUT_SIZE": net.plan.mutable, "ACT_SIZE": net.plan.arena.size,
               "ALIGN": net.plan.alignment, "IN_OFFSET": src.offset, "IN_BYTES": nbytes(src),
               "OUT_OFFSET": dst.offset, "OUT_BYTES": nbytes(dst)}
    done = subprocess.run(["cc", "-std=c99", "-O1", *(f"-D{k}={v}" for k, v in defines.items()),
                           "main.c", "digits.o", "-lm", "-o", "run"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    feeds = _feeds(graph, 3)
    ran = subprocess.run([str(tmp_path / "run")], input=feeds[src.name].tobytes(),
                         capture_output=True)
    assert ran.returncode == 0
    got = np.frombuffer(ran.stdout, np.float32).reshape(dst.shape)
    assert_close(got, ort_run(model, feeds)[0], what="C program vs onnxruntime")
