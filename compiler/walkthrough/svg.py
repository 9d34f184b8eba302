"""SVG text for the walkthrough: a graph region as layered boxes, and a memory timeline.

The pictures are drawn here, in `compiler/`, with a small layering of their own rather than
the canvas's layout (`views/`, which `compiler/` may not import): a region is a few dozen nodes
at most, so longest-path layers in graph order read well, and the CLI and the GUI write the
same pages without Qt.
"""

from __future__ import annotations

from html import escape

from compiler.ir.graph import Graph
from compiler.memory.report import MemoryPlan

CHAR_W, BOX_H, GAP_X, GAP_Y, PAD = 7.3, 40, 18, 34, 10
SHELF_W = 1100  # widest row of separate parts before the next part goes below
FILLS = {"added": "#c8ecc9", "removed": "#f6c9c6", "modified": "#fbe3a6", "neighbour": "#eceff3"}
STROKES = {"added": "#2e7d32", "removed": "#c62828", "modified": "#b07800",
           "neighbour": "#8a94a0"}


MAX_CHARS = 34  # as on the canvas: longer names are elided in the middle, kept in full aside


def _attr(text: str) -> str:
    return escape(text, quote=True)


def elide(text: str, limit: int = MAX_CHARS) -> str:
    """Shorten `text` to `limit` characters with an ellipsis in the middle (ends say most)."""
    if len(text) <= limit:
        return text
    keep = limit - 1
    return text[: (keep + 1) // 2] + "…" + text[len(text) - keep // 2:]


def _components(nodes: list, edges: list) -> list[list]:
    """The weakly connected parts of a region, each in graph order."""
    parent = {n.id: n.id for n in nodes}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for s, d in edges:
        parent[root(s.id)] = root(d.id)
    parts: dict[int, list] = {}
    for n in nodes:
        parts.setdefault(root(n.id), []).append(n)
    return list(parts.values())


def _layout(nodes: list, width: dict[int, float]) -> tuple[dict, list, float, float]:
    """Box corners, edges, and the picture's size.

    Each connected part gets longest-path layers (rows centred on the part); parts sit side
    by side on shelves no wider than SHELF_W, so a pass touching many separate places (one
    unit per layer) stays readable.
    """
    producer = {id(out): n for n in nodes for out in n.outputs}
    layer: dict[int, int] = {}
    edges = []
    for n in nodes:  # graph order is topological: producers have their layer already
        sources = [producer[id(v)] for v in n.inputs if v is not None and id(v) in producer]
        layer[n.id] = max((layer[s.id] + 1 for s in sources), default=0)
        edges += [(s, n) for s in dict.fromkeys(sources)]
    place: dict[int, tuple[float, float]] = {}
    x0 = y0 = shelf_h = total_w = 0.0
    for part in _components(nodes, edges):
        rows: dict[int, list] = {}
        for n in part:
            rows.setdefault(layer[n.id], []).append(n)
        base = min(rows)
        row_w = {k: sum(width[n.id] for n in row) + GAP_X * (len(row) - 1)
                 for k, row in rows.items()}
        part_w = max(row_w.values())
        part_h = (max(rows) - base + 1) * (BOX_H + GAP_Y) - GAP_Y
        if x0 and x0 + part_w > SHELF_W:  # a new shelf below
            x0, y0, shelf_h = 0.0, y0 + shelf_h + GAP_Y, 0.0
        for k, row in rows.items():
            x = PAD + x0 + (part_w - row_w[k]) / 2
            for n in row:
                place[n.id] = (x, PAD + y0 + (k - base) * (BOX_H + GAP_Y))
                x += width[n.id] + GAP_X
        x0 += part_w + 2 * GAP_X
        shelf_h = max(shelf_h, part_h)
        total_w = max(total_w, x0 - 2 * GAP_X)
    return place, edges, total_w + 2 * PAD, y0 + shelf_h + 2 * PAD


def region_svg(graph: Graph, ids: set[int], marks: dict[int, str], side: str) -> str:
    """The nodes of `graph` with ids in `ids`, as boxes in layers, with the edges among them.

    Each box holds the node's name (class `node-name`; elided past MAX_CHARS, whole in its
    `data-name` and the box's tooltip) over its operator (class `node-op`); its fill says how
    the pass touched it (`marks`). An empty region is a one-line picture.
    """
    nodes = [n for n in graph.nodes if n.id in ids]
    if not nodes:
        text = "nothing here" if side == "before" else "nothing left here"
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="region" data-side="{side}" '
                f'width="220" height="40" viewBox="0 0 220 40"><text x="10" y="25" '
                f'class="empty">({text})</text></svg>')
    width = {n.id: max(len(elide(n.name)), len(n.op)) * CHAR_W + 2 * PAD for n in nodes}
    place, edges, total_w, total_h = _layout(nodes, width)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="region" data-side="{side}" '
             f'width="{total_w:.0f}" height="{total_h:.0f}" '
             f'viewBox="0 0 {total_w:.0f} {total_h:.0f}">']
    for s, d in edges:
        (sx, sy), (dx, dy) = place[s.id], place[d.id]
        x1, y1 = sx + width[s.id] / 2, sy + BOX_H
        x2, y2 = dx + width[d.id] / 2, dy
        mid = (y1 + y2) / 2
        parts.append(f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} '
                     f'{x2:.1f},{mid:.1f} {x2:.1f},{y2 - 4:.1f}" fill="none" stroke="#6b7480" '
                     f'stroke-width="1.3" marker-end="url(#arrow-{side})"/>')
    parts.insert(1, f'<defs><marker id="arrow-{side}" viewBox="0 0 8 8" refX="7" refY="4" '
                    f'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" '
                    f'fill="#6b7480"/></marker></defs>')
    for n in nodes:
        x, y = place[n.id]
        mark = marks.get(n.id, "neighbour")
        parts.append(f'<g class="node {mark}" data-id="{n.id}"><title>{_attr(n.name)} '
                     f'({_attr(n.op)}): {mark}</title>'
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{width[n.id]:.1f}" height="{BOX_H}" '
                     f'rx="5" fill="{FILLS[mark]}" stroke="{STROKES[mark]}" stroke-width="1.5"/>'
                     f'<text class="node-name" data-name="{_attr(n.name)}" x="{x + PAD:.1f}" '
                     f'y="{y + 16:.1f}">{escape(elide(n.name))}</text>'
                     f'<text class="node-op" x="{x + PAD:.1f}" y="{y + 32:.1f}">'
                     f'{escape(n.op)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def timeline_svg(plan: MemoryPlan, side: str, top: int | None = None) -> str:
    """The arena over the schedule: one bar per buffer, steps across and byte offsets up.

    `top` is the byte height of the picture, so a before and an after share one scale.
    """
    doc = plan.to_json()
    steps = max(plan.lowir.steps, 1)
    top = max(top or doc["activations"], 1)
    w, h, left, bottom = 520, 240, 64, 26
    sx, sy = (w - left - 10) / steps, (h - bottom - 10) / top
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" data-side="{side}" '
             f'width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
             f'<rect x="{left}" y="10" width="{w - left - 10}" height="{h - bottom - 10}" '
             f'fill="#f7f8fa" stroke="#b8c0ca"/>']
    for b in doc["buffers"]:
        x = left + b["first"] * sx
        bw = max((b["last"] - b["first"] + 1) * sx - 1, 1)
        bh = max(b["size"] * sy, 1)
        y = h - bottom - (b["offset"] * sy) - bh
        parts.append(f'<rect class="buffer" x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" '
                     f'height="{bh:.1f}" fill="#8fb8e8" stroke="#2f5f98" stroke-width="0.8">'
                     f'<title>{_attr(b["name"])}: {b["size"]:,} B at {b["offset"]:,}, steps '
                     f'{b["first"]}-{b["last"]}</title></rect>')
    arena_y = h - bottom - doc["activations"] * sy
    parts += [f'<line x1="{left}" x2="{w - 10}" y1="{arena_y:.1f}" y2="{arena_y:.1f}" '
              f'stroke="#c62828" stroke-dasharray="4 3"/>',
              f'<text x="{left - 4}" y="{arena_y + 4:.1f}" text-anchor="end" class="axis">'
              f'{doc["activations"]:,}</text>',
              f'<text x="{left - 4}" y="{h - bottom + 4}" text-anchor="end" class="axis">0</text>',
              f'<text x="{left}" y="{h - 8}" class="axis">step 0</text>',
              f'<text x="{w - 10}" y="{h - 8}" text-anchor="end" class="axis">step '
              f'{steps - 1}</text></svg>']
    return "".join(parts)
