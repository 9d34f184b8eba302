"""The memory timeline as SVG text: one rectangle per arena buffer over steps and offsets.

Drawn from the `kiln memory --json` document, so it needs no Qt and shows the plan the report
quotes: steps run left to right, arena offsets top to bottom, a dashed line marks the lower
bound. Each rectangle carries a tooltip (its buffer, node, bytes, offset and steps).
"""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 880, 300
LEFT, RIGHT, TOP, BOTTOM = 78, 16, 14, 40
# Light fills: the labels drawn on them stay dark and readable.
FILLS = ("#9ecae1", "#fdd0a2", "#a1d99b", "#dadaeb", "#fcbba1", "#c7e9c0", "#fee391",
         "#d9d9d9", "#bcbddc", "#c6dbef")


def _ticks(top: int, count: int = 5) -> list[int]:
    """Round tick values from 0 to `top` (at most about `count` + 1 of them)."""
    if top <= 0:
        return [0]
    raw = top / count
    magnitude = 10 ** (len(str(int(raw))) - 1)
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return list(range(0, top + 1, max(1, step)))


def timeline_svg(memory: dict, title: str = "Memory timeline") -> str:
    """The SVG element (text) of the plan in `memory` (a `kiln memory --json` document)."""
    buffers = memory["buffers"]
    arena = max(memory["activations"], 1)
    steps = max([len(memory.get("live_bytes", ()))] + [b["last"] + 1 for b in buffers] + [1])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(step: float) -> float:
        return LEFT + plot_w * step / steps

    def y(offset: float) -> float:
        return TOP + plot_h * offset / arena

    parts = [f'<svg class="timeline" role="img" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
             f'aria-label="{escape(title)}">',
             f"<title>{escape(title)}</title>",
             f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" '
             'fill="#ffffff" stroke="#555" stroke-width="1"/>']
    for index, b in enumerate(buffers):
        x0, x1 = x(b["first"]), x(b["last"] + 1)
        y0, y1 = y(b["offset"]), y(b["offset"] + b["size"])
        tip = (f"{b['name']} (made by {b['node']}): {b['size']:,} B at offset "
               f"{b['offset']:,}, steps {b['first']}-{b['last']}")
        parts.append(f'<g class="buffer"><title>{escape(tip)}</title>'
                     f'<rect x="{x0:.2f}" y="{y0:.2f}" width="{max(x1 - x0, 1):.2f}" '
                     f'height="{max(y1 - y0, 1):.2f}" fill="{FILLS[index % len(FILLS)]}" '
                     'stroke="#333" stroke-width="0.6"/>')
        label = b["name"]
        if x1 - x0 > 7 * len(label) * 0.62 and y1 - y0 >= 13:
            parts.append(f'<text x="{x0 + 3:.2f}" y="{y0 + 11:.2f}" font-size="10" '
                         f'fill="#111">{escape(label)}</text>')
        parts.append("</g>")
    bound = memory["lower_bound"]
    if 0 < bound <= arena:
        yb = y(bound)
        parts.append(f'<line x1="{LEFT}" y1="{yb:.2f}" x2="{LEFT + plot_w}" y2="{yb:.2f}" '
                     'stroke="#b30000" stroke-width="1.2" stroke-dasharray="6 4"/>')
        parts.append(f'<text x="{LEFT + plot_w - 4}" y="{yb - 3:.2f}" font-size="10" '
                     f'text-anchor="end" fill="#b30000">lower bound {bound:,} B</text>')
    for value in _ticks(arena):
        parts.append(f'<text x="{LEFT - 6}" y="{y(value) + 3.5:.2f}" font-size="10" '
                     f'text-anchor="end" fill="#333">{value:,}</text>')
    for step in _ticks(steps - 1, 10):
        parts.append(f'<text x="{x(step + 0.5):.2f}" y="{TOP + plot_h + 14}" font-size="10" '
                     f'text-anchor="middle" fill="#333">{step}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" font-size="11" '
                 'text-anchor="middle" fill="#333">step of the schedule</text>')
    parts.append(f'<text transform="translate(14 {TOP + plot_h / 2}) rotate(-90)" '
                 'font-size="11" text-anchor="middle" fill="#333">arena offset (B)</text>')
    parts.append("</svg>")
    return "\n".join(parts)
