"""The report as one self-contained HTML page: inline style, SVG and script, no network request.

The page opens from a USB stick: nothing in it refers to another file or address. Numbers are
printed from the `Report` as they are; the layer table's cells carry their raw values in
`data-value` so the script sorts numbers as numbers.
"""

from __future__ import annotations

import math
from html import escape

from compiler.codegen.bundle import weights_label
from compiler.report.assets import CSS, SCRIPT
from compiler.report.figures import TIME_NOTE, Layer, Report
from compiler.report.timeline_svg import timeline_svg


def _n(value) -> str:
    """A count with thousands separators; an em dash for a missing one."""
    return "—" if value is None else f"{value:,}"


def _card(label: str, value: str, ident: str = "", raw=None) -> str:
    attrs = f' id="{ident}"' if ident else ""
    attrs += f' data-value="{raw}"' if raw is not None else ""
    return (f'<div class="card"><div class="label">{escape(label)}</div>'
            f'<div class="value"{attrs}>{escape(value)}</div></div>')


def _num(value, text: str | None = None) -> str:
    """A numeric cell: raw value for sorting, formatted text for reading."""
    raw = "" if value is None or (isinstance(value, float) and math.isnan(value)) else value
    if isinstance(raw, float) and math.isinf(raw):
        raw = "1e308" if raw > 0 else "-1e308"
    shown = text if text is not None else _n(value)
    return f'<td class="num" data-value="{raw}">{escape(shown)}</td>'


def _shapes(shapes) -> str:
    return ", ".join("×".join(str(d) for d in s) or "scalar" for s in shapes)


def _summary(report: Report) -> str:
    s = report.summary
    ops = ", ".join(f"{op} {count}" for op, count in s["ops"].items())
    io = "".join(f"<tr><td>{kind}</td><td>{escape(t['name'])}</td><td>{escape(t['dtype'])}</td>"
                 f"<td>{escape(_shapes([t['shape']]))}</td></tr>"
                 for kind, key in (("input", "inputs"), ("output", "outputs")) for t in s[key])
    return ('<h2 id="summary">Model</h2><div class="cards">'
            + _card("nodes", _n(s["nodes"]), "nodes", s["nodes"])
            + _card("parameters", _n(s["params"]), "params", s["params"])
            + _card("parameter bytes", f"{s['param_bytes']:,} B", "param-bytes",
                    s["param_bytes"])
            + _card("MACs", _n(s["macs"]), "macs", s["macs"]) + "</div>"
            f'<p><b>Operators:</b> {escape(ops)}</p>'
            f"<table><thead><tr><th></th><th>tensor</th><th>type</th><th>shape</th></tr>"
            f"</thead><tbody>{io}</tbody></table>")


def _usage_bar(used: int, budget: int) -> str:
    share = used / budget if budget else 0
    over = ' class="over"' if used > budget else ""
    return (f'<span class="bar"><span{over} style="width:{min(share, 1) * 100:.1f}%"></span>'
            f"</span> {100 * share:.1f}%")


def _sizes(report: Report) -> str:
    b = report.bundle
    s, r = b["sections"], b["regions"]
    rows = "".join(f'<tr><td>{name}</td><td class="num" id="section-{name}">{s[name]:,} B</td>'
                   f"<td>{where}</td></tr>"
                   for name, where in (("text", "flash: code"), ("rodata", "flash: read-only "
                                       "data (weights embedded here)"),
                                       ("data", "flash and RAM: initialized data"),
                                       ("bss", "RAM: zeroed data")))
    rows += "".join(f'<tr><td>{label}</td><td class="num">{r[key]:,} B</td><td>{where}</td></tr>'
                    for label, key, where in (
                        ("mutable region", "mutable", "RAM: inputs and outputs"),
                        ("activation arena", "activations", "RAM: the planned arena"),
                        ("external weights", "constant", "flash: the caller places them")))
    if not report.mcu:  # a hosted CPU: no flash, the loader maps the sections
        for word in ("flash and RAM: ", "flash: ", "RAM: "):
            rows = rows.replace(f"<td>{word}", "<td>")
    html = (f'<h2 id="sizes">Flash and RAM</h2><p class="note">Object for '
            f"{escape(b['target'])} ({escape(b['triple'])}), weights {escape(weights_label(b))}; "
            f"as `kiln compile --json` "
            f"reports them.</p><table><thead><tr><th>section / region</th><th>bytes</th>"
            f"<th>where</th></tr></thead><tbody>{rows}</tbody></table>")
    board = b.get("board")
    if board:
        html += (f"<table id=\"board\"><thead><tr><th>{escape(board['name'])}</th><th>used</th>"
                 f"<th>budget</th><th>use</th></tr></thead><tbody>")
        for label, key in (("flash", "flash"), ("RAM", "ram")):
            used, budget = board[f"{key}_used"], board[key]
            html += (f'<tr><td>{label}</td><td class="num">{used:,} B</td>'
                     f'<td class="num">{budget:,} B</td><td>{_usage_bar(used, budget)}</td></tr>')
        html += "</tbody></table>"
        html += "".join(f'<p class="note">Hint: {escape(h)}</p>' for h in board["hints"])
    return html


def _memory(report: Report) -> str:
    m = report.memory
    strategies = "".join(f'<tr><td>{escape(k)}</td><td class="num">{v:,} B</td></tr>'
                         for k, v in m["strategies"].items())
    whole = m["whole_tensor_bound"]
    streamed = (f'<p class="note">Row-streamed chains: with whole tensors the lower bound '
                f"would be {whole:,} B.</p>" if whole != m["lower_bound"] else "")
    return ('<h2 id="memory">Activation memory</h2><div class="cards">'
            + _card("arena", f"{m['activations']:,} B", "arena", m["activations"])
            + _card("lower bound", f"{m['lower_bound']:,} B", "lower-bound", m["lower_bound"])
            + _card("efficiency", f"{m['efficiency']:.3f}", "efficiency", m["efficiency"])
            + _card("mutable (inputs, outputs)", f"{m['mutable']:,} B", "mutable", m["mutable"])
            + _card("schedule peak", f"{m['schedule_peak']:,} B", "schedule-peak",
                    m["schedule_peak"])
            + f"</div>{streamed}<p class=\"note\">Scheduler {escape(m['scheduler'])}, "
            f"alignment {m['alignment']} B; efficiency = lower bound / arena. The same plan as "
            f"`kiln memory --json`.</p>"
            + timeline_svg(m, f"Memory timeline of {report.model} on {report.target}")
            + f"<table><thead><tr><th>packing strategy</th><th>arena</th></tr></thead>"
            f"<tbody>{strategies}</tbody></table>")


COLUMNS = (("#", "num", "index"), ("kernel", "", "kernel"), ("operator and nodes", "", "op"),
           ("in → out", "", "shapes"), ("type", "", "dtype"),
           ("MACs", "num", "macs"), ("weight bytes", "num", "weight_bytes"),
           ("as float32", "num", "float_weight_bytes"), ("output bytes", "num",
                                                         "activation_bytes"),
           ("instructions", "num", "instructions"), ("instructions / MAC", "num", "per_mac"),
           ("est. time (µs)", "num", "time_us"),
           ("SQNR (dB)", "num", "sqnr_db"))


def _layer_row(index: int, layer: Layer, clock: float) -> str:
    time = layer.time_us(clock)
    sqnr = layer.sqnr_db
    if layer.nodes:
        what = (f'{escape(layer.op)}<div class="nodes">{escape(", ".join(layer.nodes))}</div>'
                f"</td><td>{escape(_shapes(layer.inputs))} → {escape(_shapes(layer.outputs))}")
    else:  # a chain's driver: it walks the chain's rows, no tensor of its own
        what = f"{escape(layer.op)}</td><td>"
    return ('<tr class="layer">' + _num(index, str(index))
            + f"<td><code>{escape(layer.label)}</code></td><td>{what}</td>"
            f"<td>{escape(layer.dtype)}</td>"
            + _num(layer.macs) + _num(layer.weight_bytes) + _num(layer.float_weight_bytes)
            + _num(layer.activation_bytes) + _num(layer.instructions)
            + _num(layer.per_mac(), "—" if layer.per_mac() is None else f"{layer.per_mac():.3f}")
            + _num(time, "—" if time is None else f"{time:,.1f}")
            + _num(sqnr, "—" if sqnr is None else f"{sqnr:.1f}") + "</tr>")


def _bound(target: str) -> str:
    """The sentence on the product bound the instructions-per-MAC column is read against."""
    from compiler.codegen.targets import get_target
    from compiler.mcu.bound import products_per_instruction

    rate = products_per_instruction(get_target(target))
    return (f"Instructions / MAC: the products alone need {1 / rate:.4g} on this core (its "
            f"widest multiply-accumulate does {rate} a instruction).")


def _foot_row(label: str, cls: str, cells: dict[str, str]) -> str:
    out = f'<tr class="{cls}"><td colspan="5">{escape(label)}</td>'
    for _, _, key in COLUMNS[5:]:
        out += cells.get(key, '<td class="num"></td>')
    return out + "</tr>"


def _layers(report: Report) -> str:
    clock = report.clock_mhz
    head = "".join(f'<th class="{cls}" data-key="{key}">{escape(title)}</th>'
                   for title, cls, key in COLUMNS)
    body = "".join(_layer_row(i, layer, clock) for i, layer in enumerate(report.layers, 1))
    totals = report.totals()
    ins = report.instructions
    foot = ""
    if ins is not None:
        foot += _foot_row("entry point and calls (per-layer build, outside every kernel)",
                          "extra", {"instructions": _num(ins.outside)})
        foot += _foot_row("saved by inlining (shipped build minus per-layer build)", "extra",
                          {"instructions": _num(ins.inlined)})
    total_time = None if ins is None else ins.total / clock
    foot += _foot_row("total", "total", {
        "macs": _num(totals["macs"]), "weight_bytes": _num(totals["weight_bytes"]),
        "float_weight_bytes": _num(totals["float_weight_bytes"]),
        "instructions": _num(totals["instructions"]).replace(
            "<td ", '<td id="total-instructions" ', 1),
        "time_us": _num(total_time, "—" if total_time is None else f"{total_time:,.1f}")})
    counted = (f"Instructions: executed on {escape(ins.target)} under QEMU "
               f"{escape(ins.machine)}, per layer from the build with separate kernels, the "
               f"total as shipped (`kiln bench --target {escape(ins.target)}`). "
               f"{escape(_bound(ins.target))}"
               if ins is not None else "Instructions: not counted for this target.")
    return (f'<h2 id="layers-title">Layers</h2><p class="note">One row per kernel, as '
            f"`kiln bench --target` lists them; click a column header to sort. {counted} "
            + (f"Estimated time at {clock:g} MHz: {escape(TIME_NOTE)}. " if ins is not None
               else "") + "Weight bytes as stored "
            f"and as float32 (4 bytes an element); output bytes are the tensors the kernel "
            f"writes, whole.</p>"
            f'<div class="scroll"><table id="layers" class="sortable"><thead><tr>{head}</tr>'
            f"</thead><tbody>{body}</tbody><tfoot>{foot}</tfoot></table></div>")


def _quantization(report: Report) -> str:
    q = report.quantization
    if q is None:
        return ""
    types = ", ".join(f"{count} {dtype}" for dtype, count in q.dtypes.items())
    rows = [("tensors", types), ("quantized per tensor", _n(q.per_tensor)),
            ("quantized per channel", _n(q.per_channel))]
    if q.origin == "profile":
        p = q.profile
        rows += [("method", q.method), ("schema", q.schema),
                 ("profile of", f"{p.get('model', '')} on {p.get('data', {}).get('samples', '?')}"
                                f" samples of {p.get('data', {}).get('source', '?')}"),
                 ("histogram bins", _n(p.get("bins"))),
                 ("equalized", "yes" if p.get("equalized") else "no"),
                 ("ranges set by hand", _n(p.get("overrides"))),
                 ("kept float", ", ".join(p.get("keep_float") or []) or "none"),
                 ("weights", "per channel" if p.get("per_channel", True) else "per tensor"),
                 ("biases corrected", _n(p.get("corrections", 0)))]
    if q.float_layers:
        rows.append(("warning: layers left float", "; ".join(
            f"{layer} ({size:,} B of float32 weights)" for layer, size in q.float_layers)))
    else:
        rows.append(("origin", "the model came quantized"))
    if q.samples:
        rows.append(("measured on", f"{q.samples} samples of {q.data}"))
        rows += [(f"output {name} SQNR", f"{value:.1f} dB") for name, value in
                 q.output_sqnr.items()]
        if q.top1_agreement is not None:
            rows.append(("top-1 agreement with float", f"{100 * q.top1_agreement:.1f} %"))
    body = "".join(f"<tr><td>{escape(k)}</td><td>{escape(str(v))}</td></tr>" for k, v in rows)
    return (f'<h2 id="quantization">Quantization</h2><table><tbody>{body}</tbody></table>')


def _passes(report: Report) -> str:
    changed = [p for p in report.passes if p["changed"]]
    unchanged = [p["name"] for p in report.passes if not p["changed"]]
    rows = "".join(
        f"<tr><td><code>{escape(p['name'])}</code></td><td>{escape(p['category'])}</td>"
        f'<td class="num">{p["nodes_before"]:,} → {p["nodes_after"]:,}</td>'
        f'<td class="num">{p["added"]}</td><td class="num">{p["removed"]}</td>'
        f'<td class="num">{p["modified"]}</td><td>{escape(p["does"])}</td>'
        f"<td>{escape(p['why_here'])}</td></tr>" for p in changed)
    return (f'<h2 id="passes">Pipeline</h2><p class="note">{len(report.passes)} passes ran; '
            f"{len(changed)} changed the graph.</p>"
            f'<table id="pass-table"><thead><tr><th>pass</th><th>kind</th><th>nodes</th>'
            f"<th>added</th><th>removed</th><th>modified</th><th>what it does</th>"
            f"<th>why it runs there</th></tr></thead><tbody>{rows}</tbody></table>"
            + (f'<p class="unchanged">Changed nothing: {escape(", ".join(unchanged))}.</p>'
               if unchanged else ""))


def render_html(report: Report) -> str:
    """The whole page."""
    absent = "".join(f"<li>{escape(a)}</li>" for a in report.absent)
    title = f"{report.model} on {report.target}"
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Kiln report: {escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(report.model)}</h1>",
        f'<p class="subtitle">Kiln analysis report for {escape(report.target)} '
        f"({escape(report.triple)})" + (
            f", estimated times at {report.clock_mhz:g} MHz.</p>" if report.instructions
            else " (no times: instructions are counted on Cortex-M targets only).</p>"),
        _summary(report), _sizes(report), _memory(report), _layers(report),
        _quantization(report), _passes(report),
        (f'<h2 id="absent">Not in this report</h2><ul class="absent">{absent}</ul>'
         if absent else ""),
        f"<script>{SCRIPT}</script>", "</body></html>", ""])
