"""The walkthrough's HTML: an index of every stage and one page per stage that changed something.

Pages are self-contained (inline CSS, SVG and a few lines of script, no external address), so
the folder opens from a USB stick; the arrow keys step from page to page.
"""

from __future__ import annotations

import json
from html import escape

from compiler.stage_notes import canonical_key
from compiler.walkthrough.stages import Stage
from compiler.walkthrough.svg import region_svg, timeline_svg

MARKER = "walkthrough.json"
LONG_CODE = 400  # lines of LLVM IR or assembly shown before the rest is cut

CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d232b;background:#fff}
header{display:flex;gap:1em;align-items:center;padding:.6em 1.2em;background:#24303f;color:#fff}
header a{color:#cfe3ff}header .where{margin-left:auto;color:#dde4ec}
main{padding:0 1.2em 2em;max-width:1200px}
h1{font-size:1.5em;margin:.7em 0 .3em}h2{font-size:1.1em;margin:1.2em 0 .3em}
.why{color:#44505e}.note{background:#fff6d6;border-left:4px solid #d9a400;padding:.3em 1em}
.pair{display:flex;flex-wrap:wrap;gap:1.2em}.pair figure{margin:0;overflow:auto;max-width:100%}
figcaption{font-weight:600;margin-bottom:.3em}
svg text{font:12px monospace;fill:#1d232b}svg text.node-op{fill:#46505c}
svg text.axis{font:11px sans-serif;fill:#44505e}
.legend span{display:inline-block;padding:0 .5em;margin-right:.4em;border:1px solid #999}
.ok{color:#1b6e20}.bad{color:#b71c1c;font-weight:600}
pre{background:#f4f6f8;border:1px solid #d5dbe1;padding:.5em;max-height:26em;overflow:auto;
font-size:12px}
table{border-collapse:collapse}td,th{padding:.2em .7em;border-bottom:1px solid #e0e4e8;
text-align:left;vertical-align:top}tr.unchanged td{color:#5d6874}
"""

SCRIPT = """
document.addEventListener('keydown', function (e) {
  if (e.altKey || e.ctrlKey || e.metaKey) return;
  var to = e.key === 'ArrowRight' ? document.body.dataset.next
         : e.key === 'ArrowLeft' ? document.body.dataset.prev : '';
  if (to) { window.location.href = to; }
});
"""


def page_name(position: int, stage: Stage) -> str:
    """The file of a stage's page: its position in the walkthrough and its key."""
    return f"{position:02d}-{stage.key.replace('#', '-')}.html"


def note_html(text: str) -> str:
    """A teacher's note as paragraphs (blank lines part them; single breaks are kept)."""
    paragraphs = [p.strip() for p in text.replace("\r\n", "\n").split("\n\n") if p.strip()]
    return "".join("<p>" + escape(p).replace("\n", "<br>") + "</p>" for p in paragraphs)


def _document(title: str, body: str, prev: str, next_: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width">'
            f'<title>{escape(title)}</title><style>{CSS}</style></head>'
            f'<body data-prev="{escape(prev, quote=True)}" '
            f'data-next="{escape(next_, quote=True)}">{body}<script>{SCRIPT}</script>'
            f'</body></html>\n')


def _nav(model: str, prev: str, next_: str, where: str) -> str:
    links = [f'<a rel="prev" href="{prev}">&larr; previous</a>' if prev else "<span></span>",
             '<a href="index.html">all stages</a>',
             f'<a rel="next" href="{next_}">next &rarr;</a>' if next_ else "<span></span>"]
    return (f'<header><strong>{escape(model)}</strong>{"".join(links)}'
            f'<span class="where">{escape(where)}</span></header>')


def _paragraphs(text: str) -> str:
    return "".join(f"<p>{escape(' '.join(p.split()))}</p>" for p in text.split("\n\n")
                   if p.strip())


def _code(text: str) -> str:
    lines = text.splitlines()
    cut = (f"\n... {len(lines) - LONG_CODE} more lines" if len(lines) > LONG_CODE else "")
    return f"<pre>{escape(chr(10).join(lines[:LONG_CODE]) + cut)}</pre>"


def _graph_sections(stage: Stage) -> str:
    region = stage.region
    legend = "".join(f'<span style="background:{color}">{mark}</span>' for mark, color in
                     (("added", "#c8ecc9"), ("removed", "#f6c9c6"), ("modified", "#fbe3a6"),
                      ("neighbour", "#eceff3")))
    figures = "".join(
        f'<figure class="{side}"><figcaption>{side.capitalize()}</figcaption>'
        f'{region_svg(graph, region.ids, region.marks, side)}</figure>'
        for side, graph in (("before", region.before), ("after", region.after)))
    verdict = "ok" if stage.matches else "bad" if stage.matches is False else ""
    return (f'<h2>The region it changed</h2><p class="legend">{legend}</p>'
            f'<div class="pair">{figures}</div>'
            f'<h2>Numeric check</h2><p class="check {verdict}">{escape(stage.check)}</p>')


def _lowering_sections(stage: Stage) -> str:
    before, after = stage.plans
    top = max(before.arena.size, after.arena.size)
    figures = "".join(
        f'<figure class="{side}"><figcaption>{side.capitalize()}: arena {plan.arena.size:,} B'
        f' (lower bound {plan.arena.lower_bound:,} B)</figcaption>'
        f'{timeline_svg(plan, side, top)}</figure>'
        for side, plan in (("before", before), ("after", after)))
    parts = [f'<h2>Memory timeline</h2><div class="pair">{figures}</div>']
    kernel = stage.kernel
    if kernel is not None:
        parts += [f'<h2>One kernel followed down: {escape(kernel.symbol)}</h2>',
                  f'<p>Covers {escape(", ".join(kernel.nodes))}; code for {kernel.target}.'
                  + (f' It calls {len(kernel.helpers)} functions of its own, not shown: '
                     f'{escape(", ".join(kernel.helpers))}.' if kernel.helpers else "")
                  + '</p>',
                  '<h3>Low-level IR</h3>', _code("\n".join(kernel.lowir)),
                  '<h3>LLVM IR</h3>', _code(kernel.llvm_ir),
                  '<h3>Assembly</h3>', _code(kernel.assembly)]
    return "".join(parts)


def stage_page(model: str, stage: Stage, note: str, prev: str, next_: str,
               where: str) -> str:
    """The page of one changed stage."""
    body = [f'<main><h1>{escape(stage.title)}</h1>',
            f'<p class="why"><strong>Why here.</strong> {escape(stage.why)}</p>']
    if note:
        body.append(f'<section class="note"><h2>Teacher\'s note</h2>{note_html(note)}</section>')
    body += [f'<h2>What it does</h2>{_paragraphs(stage.doc)}',
             f'<h2>What it did here</h2><p class="summary">{escape(stage.summary)}</p>']
    if stage.details:
        body.append("<ul>" + "".join(f"<li>{escape(d)}</li>" for d in stage.details) + "</ul>")
    body.append(_graph_sections(stage) if stage.kind == "graph" else _lowering_sections(stage))
    body.append("</main>")
    return _document(f"{stage.title} - {model}", _nav(model, prev, next_, where) + "".join(body),
                     prev, next_)


def index_page(model: str, target: str, stages: list[Stage], pages: dict[str, str],
               notes: dict[str, str], stray: dict[str, str]) -> str:
    """The list of every stage, unchanged ones included (without a link)."""
    first = next(iter(pages.values()), "")
    rows = []
    for number, stage in enumerate(stages, 1):
        name = escape(stage.key)
        link = f'<a href="{pages[stage.key]}">{name}</a>' if stage.key in pages else name
        note = note_html(notes[stage.key]) if stage.key in notes else ""
        rows.append(f'<tr class="{"changed" if stage.changed else "unchanged"}"><td>{number}</td>'
                    f'<td>{"pass" if stage.kind == "graph" else "lowering"}</td><td>{link}</td>'
                    f'<td>{escape(stage.summary)}{note}</td></tr>')
    extra = ""
    if stray:
        extra = ("<h2>Notes on stages this pipeline does not run</h2>"
                 + "".join(f"<h3>{escape(k)}</h3>{note_html(v)}" for k, v in stray.items()))
    body = (f'<main><h1>How Kiln compiles {escape(model)} for {escape(target)}</h1>'
            f'<p>{len(pages)} of {len(stages)} stages changed something: each has a page '
            f'(the arrow keys step through them). The others are listed without one.</p>'
            f'<table><tr><th>#</th><th>kind</th><th>stage</th><th>what it did</th></tr>'
            f'{"".join(rows)}</table>{extra}</main>')
    return _document(f"Walkthrough - {model}", _nav(model, "", first, "index") + body, "", first)


def render(model: str, target: str, stages: list[Stage],
           notes: dict[str, str] | None = None) -> dict[str, bytes]:
    """Every file of the walkthrough folder, by name.

    `notes` maps stage keys to a teacher's text; a key naming no stage is shown on the index.
    """
    notes = {canonical_key(str(k)): str(v) for k, v in (notes or {}).items()
             if str(v).strip()}  # `name#1` is the first run, filed as `name`
    keys = {s.key for s in stages}
    stray = {k: v for k, v in notes.items() if k not in keys}
    shown = [(position, s) for position, s in enumerate(stages, 1) if s.changed]
    pages = {s.key: page_name(position, s) for position, s in shown}
    files = {}
    for i, (_, stage) in enumerate(shown):
        prev = pages[shown[i - 1][1].key] if i else "index.html"
        next_ = pages[shown[i + 1][1].key] if i + 1 < len(shown) else ""
        html = stage_page(model, stage, notes.get(stage.key, ""), prev, next_,
                          f"page {i + 1} of {len(shown)}")
        files[pages[stage.key]] = html.encode("utf-8")
    files["index.html"] = index_page(model, target, stages, pages, notes, stray).encode("utf-8")
    marker = {"kiln_walkthrough": 1, "model": model, "target": target,
              "stages": [{"key": s.key, "kind": s.kind, "changed": s.changed,
                          "page": pages.get(s.key)} for s in stages]}
    files[MARKER] = (json.dumps(marker, indent=1) + "\n").encode("utf-8")
    return files
