"""The walkthrough: one page per stage that changed, the right regions, notes, a safe folder."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

from compiler.driver import Compilation, Options
from compiler.errors import KilnError
from compiler.frontends.load import load_model
from compiler.walkthrough import MARKER, walkthrough_files, write_walkthrough
from compiler.walkthrough.svg import elide
from tests.conftest import SAMPLE_MODEL, shared_models


def _changed_keys(path: Path, target: str) -> list[str]:
    """Stage keys of the changed pipeline entries and lowering passes, from fresh records."""
    compiled = Compilation(load_model(path))
    runs: dict[str, int] = {}
    keys = []
    for record in compiled.passes().records:
        runs[record.name] = runs.get(record.name, 0) + 1
        if record.changed:
            keys.append(record.name if runs[record.name] == 1
                        else f"{record.name}#{runs[record.name]}")
    keys += [r.name for r in compiled.lowering(Options(target)) if r.changed]
    return keys


def expected_region(before, after, record) -> tuple[list[str], list[str]]:
    """Names shown before and after: touched nodes and their direct neighbours, either side."""
    touched = set(record.added) | set(record.removed) | set(record.modified)
    ids = set(touched)
    for graph in (before, after):
        for node in graph.nodes:
            if node.id not in touched:
                continue
            ids |= {v.producer.id for v in node.inputs if v is not None and v.producer}
            ids |= {user.id for out in node.outputs for user, _ in graph.users(out)}
    return ([n.name for n in before.nodes if n.id in ids],
            [n.name for n in after.nodes if n.id in ids])


def _models():
    return [(SAMPLE_MODEL, "host"),
            (shared_models() / "onnx" / "kws_ref_model.onnx", "cortex-m7")]


@pytest.mark.parametrize("which", [0, 1], ids=["digits", "kws-int8"])
def test_one_page_per_changed_stage(which):
    path, target = _models()[which]
    files = walkthrough_files(Compilation(load_model(path)), Options(target), path.name)
    marker = json.loads(files[MARKER])
    paged = [s["key"] for s in marker["stages"] if s["page"]]
    assert paged == _changed_keys(path, target)
    assert sorted(n for n in files if n.endswith(".html") and n != "index.html") == \
        sorted(s["page"] for s in marker["stages"] if s["page"])
    index = files["index.html"].decode()
    for stage in marker["stages"]:  # every stage is listed; only changed ones are links
        assert f">{stage['key']}<" in index
        assert (f'href="{stage["page"]}"' in index) == bool(stage["page"])


def test_regions_are_the_touched_nodes_and_their_neighbours():
    compiled = Compilation(load_model(SAMPLE_MODEL))
    result = compiled.passes(snapshots=True)
    files = walkthrough_files(compiled, Options("host"), "digits")
    pages = {s["key"]: s["page"] for s in json.loads(files[MARKER])["stages"]}
    before = result.initial
    runs: dict[str, int] = {}
    for record in result.records:
        runs[record.name] = runs.get(record.name, 0) + 1
        key = record.name if runs[record.name] == 1 else f"{record.name}#{runs[record.name]}"
        if record.changed:
            html = files[pages[key]].decode()
            shown = []
            for side in ("before", "after"):
                svg = re.search(rf'<svg [^>]*data-side="{side}".*?</svg>', html).group(0)
                texts = re.findall(r'class="node-name" data-name="([^"]*)"[^>]*>([^<]*)<', svg)
                assert all(unescape(t) == elide(unescape(n)) for n, t in texts)
                shown.append([unescape(n) for n, _ in texts])
            want = expected_region(before, record.snapshot, record)
            assert [sorted(s) for s in shown] == [sorted(w) for w in want], key
            assert want[0] or want[1]
            assert "match the reference" in html  # the stage's numeric check
        before = record.snapshot


def test_lowering_page_follows_a_kernel_to_assembly():
    path = shared_models() / "onnx" / "kws_ref_model.onnx"
    compiled = Compilation(load_model(path))
    files = walkthrough_files(compiled, Options("cortex-m7"), path.name)
    stages = json.loads(files[MARKER])["stages"]
    lowering = [s for s in stages if s["kind"] == "lowering" and s["page"]]
    assert lowering
    records = {r.name: r for r in compiled.lowering(Options("cortex-m7"))}
    for stage in lowering:
        html = unescape(files[stage["page"]].decode())
        symbol = re.search(r"One kernel followed down: (\S+)</h2>", html).group(1)
        ir, asm = html.split("<h3>LLVM IR</h3>")[1].split("<h3>Assembly</h3>")
        assert f"@{symbol}(" in ir or f'@"{symbol}"(' in ir
        assert symbol in asm and ".thumb_func" in asm
        assert html.count('class="timeline"') == 2
        record = records[stage["key"]]
        assert f"arena {record.after.arena.size:,} B" in html


def test_notes_are_escaped_kept_in_paragraphs_and_filed_by_stage():
    notes = {"to_nhwc": "Watch the <Transpose> nodes.\n\nThen count them.\nAll of them.",
             "dce#2": "The second clean-up.", "remove_identity": "Nothing to remove here.",
             "no_such_pass": "A stray note."}
    compiled = Compilation(load_model(SAMPLE_MODEL))
    files = walkthrough_files(compiled, Options("host"), "digits", notes)
    pages = {s["key"]: s["page"] for s in json.loads(files[MARKER])["stages"]}
    nhwc = files[pages["to_nhwc"]].decode()
    assert ("<p>Watch the &lt;Transpose&gt; nodes.</p><p>Then count them.<br>All of them.</p>"
            in nhwc)
    assert "The second clean-up." in files[pages["dce#2"]].decode()
    assert "The second clean-up." not in files[pages["dce"]].decode()
    index = files["index.html"].decode()
    assert pages["remove_identity"] is None and "Nothing to remove here." in index
    assert "A stray note." in index


def _files(text: str) -> dict[str, bytes]:
    return {"index.html": text.encode(), MARKER: b"{}"}


def test_folder_is_replaced_whole_and_only_when_allowed(tmp_path):
    folder = tmp_path / "lesson"
    write_walkthrough(folder, _files("one"))
    with pytest.raises(KilnError, match="already holds a walkthrough"):
        write_walkthrough(folder, _files("two"))
    (folder / "old-page.html").write_text("stale")

    def cancel():
        raise KilnError("cancelled")

    with pytest.raises(KilnError, match="cancelled"):
        write_walkthrough(folder, _files("two"), force=True, check=cancel)
    assert (folder / "index.html").read_text() == "one"
    write_walkthrough(folder, _files("two"), force=True)
    assert sorted(p.name for p in folder.iterdir()) == ["index.html", MARKER]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lesson"]  # no temporary left
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("keep")
    with pytest.raises(KilnError, match="not a walkthrough"):
        write_walkthrough(mine, _files("x"), force=True)
    assert (mine / "thesis.txt").read_text() == "keep"
