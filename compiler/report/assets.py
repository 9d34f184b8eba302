"""The report page's style sheet and table-sorting script, inlined so the file needs no network."""

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto;
  max-width: 1400px; padding: 0 16px; color: #1b1b1b; background: #fafafa; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 2px solid #d0d7de; padding-bottom: 4px; }
.subtitle { color: #444; margin-top: 0; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 14px;
  min-width: 150px; }
.card .label { color: #555; font-size: 0.85em; }
.card .value { font-size: 1.25em; font-weight: 600; font-variant-numeric: tabular-nums; }
table { border-collapse: collapse; background: #fff; margin: 8px 0; font-size: 0.85em; }
th, td { border: 1px solid #d0d7de; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th { cursor: pointer; user-select: none; white-space: nowrap; }
table.sortable th[aria-sort="ascending"]::after { content: " \\25B2"; }
table.sortable th[aria-sort="descending"]::after { content: " \\25BC"; }
tfoot td { background: #f5f5f5; font-weight: 600; }
tfoot tr.extra td { font-weight: normal; color: #444; }
.bar { background: #e6e6e6; border-radius: 3px; width: 220px; height: 12px; display: inline-block;
  vertical-align: middle; }
.bar span { display: block; height: 12px; border-radius: 3px; background: #3b7dd8; }
.bar span.over { background: #c62828; }
.note { color: #444; font-size: 0.9em; }
.absent li { color: #6a4a00; }
.unchanged { color: #555; font-size: 0.9em; }
code { font-size: 0.95em; }
.scroll { overflow-x: auto; }
#layers td:nth-child(4), #pass-table td:nth-child(3) { white-space: nowrap; }
#layers .nodes { color: #555; font-size: 0.85em; }
svg.timeline { background: #fff; border: 1px solid #d0d7de; max-width: 100%; height: auto; }
@media print { body { background: #fff; } table.sortable th { cursor: auto; } }
"""

# Click a header: sort the rows of its table's body by that column, ascending then descending.
# Numeric cells carry data-value; empty values sort last either way.
SCRIPT = """
(function () {
  function key(row, index) {
    var cell = row.cells[index];
    var value = cell.getAttribute('data-value');
    if (value === null) { return cell.textContent.trim().toLowerCase(); }
    return value === '' ? null : parseFloat(value);
  }
  function sortBy(table, th) {
    var index = th.cellIndex;
    var descending = th.getAttribute('aria-sort') === 'ascending';
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, index), y = key(b, index);
      if (x === y) { return 0; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      var order = x < y ? -1 : 1;
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
      cell.removeAttribute('aria-sort');
    });
    th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.title = 'Sort by this column';
      th.addEventListener('click', function () { sortBy(table, th); });
    });
  });
})();
"""
