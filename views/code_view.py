"""The code views: low-level IR of the whole function, LLVM IR and assembly of one kernel.

Read-only monospace text with light syntax colouring, so a student can follow what a node
became; the target is picked in a combo next to the kernel's one-line description. With "Link
lines" the three show the whole network side by side, each kernel's lines tinted alike.
"""

from __future__ import annotations

import re

from PySide6.QtCore import QRegularExpression, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QSyntaxHighlighter,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from views import style

LOWIR, LLVM_IR, ASSEMBLY = range(3)
CURRENT_LINE = "#fff3c4"  # the selected node's line: the search highlight, paler
# Linked lines: per kernel a pale tint, and the stronger shade of the selected kernel's lines.
# Pale enough for every syntax colour to stay readable on both (tests check the contrast).
LINK_COLOURS = (
    ("#fde9e9", "#fbd0d0"), ("#e3effc", "#c3ddf8"), ("#e2f2e2", "#bfe4bf"),
    ("#fbeccf", "#f7d696"), ("#f5eafd", "#e9d2fa"), ("#e0f2f0", "#bae2de"),
    ("#fde9f4", "#facee7"), ("#edf0d6", "#dadea9"), ("#ededfd", "#d7d7fb"),
    ("#fcebde", "#f9d3b7"),
)
COMMENT = "#4f5a64"  # the muted text colour, a little darker: readable on every tint


def _format(color: str, bold: bool = False, italic: bool = False) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(color))
    if bold:
        fmt.setFontWeight(QFont.Weight.Bold)
    fmt.setFontItalic(italic)
    return fmt


# (pattern, format), applied in order: later rules win where they overlap (comments last).
_NUMBER = (r"\b-?(0x[0-9a-fA-F]+|\d+(\.\d+)?(e[-+]?\d+)?)\b", _format("#8a4526"))
_STRING = (r'"[^"]*"', _format("#22622a"))
RULES = {
    "llvm": [
        _NUMBER,
        (r"\b(define|declare|call|ret|br|switch|phi|select|icmp|fcmp|getelementptr|load|store|"
         r"alloca|bitcast|inbounds|align|nounwind|noalias|nocapture|readonly|writeonly|"
         r"internal|private|external|constant|global|attributes|to|label|tail|nuw|nsw|fast|"
         r"contract|exact)\b", _format("#7b1fa2", bold=True)),
        (r"\b(fmul|fadd|fsub|fdiv|fneg|add|sub|mul|shl|lshr|ashr|and|or|xor|zext|sext|trunc|"
         r"sitofp|fptosi|extractelement|insertelement|shufflevector)\b", _format("#0f4fa0")),
        (r"@llvm\.[\w.]+", _format("#a81c1c", bold=True)),
        (r"\b(fma|fmuladd)\b", _format("#a81c1c", bold=True)),
        (r"\b(void|i1|i8|i16|i32|i64|float|double|half|ptr)\b|<\d+ x \w+>", _format("#005f69")),
        (r"[%@][\w.$\"-]+", _format("#37474f")),
        (r"^\w[\w.]*:", _format("#5d4037", bold=True)),
        _STRING,
        (r";.*$", _format(COMMENT, italic=True)),
    ],
    "asm": [
        _NUMBER,
        (r"^\s+\.\w+", _format("#7b1fa2")),
        (r"^\s+[a-z][\w.]*", _format("#0f4fa0", bold=True)),
        (r"^\s+(v?fma|vfmadd|vfma|vfms|vmla|vmls|vfnma)\w*(\.\w+)?",
         _format("#a81c1c", bold=True)),
        (r"%\w+|\b[rsdqxwv]\d+\b|\b(sp|lr|pc)\b", _format("#005f69")),
        (r"^[\w.$]+:", _format("#5d4037", bold=True)),
        _STRING,
        (r"(?:^|\s)[#@;]\s.*$|//.*$", _format(COMMENT, italic=True)),
    ],
    "lowir": [
        _NUMBER,
        (r"\b(alloc|dealloc)\b", _format(COMMENT, bold=True)),
        (r"^\s*\d+\s+\S+", _format("#0f4fa0", bold=True)),
        (r"\b(in|out|inout)\b", _format("#7b1fa2")),
        (r"^(input|output)\b", _format("#22622a", bold=True)),
    ],
}


class Highlighter(QSyntaxHighlighter):
    """Colours one language of RULES (keywords, types, registers, comments)."""

    def __init__(self, document: QTextDocument, language: str):
        super().__init__(document)
        self.language = language
        self.rules = [(QRegularExpression(p), f) for p, f in RULES[language]]

    def highlightBlock(self, text: str) -> None:  # noqa: D102 (Qt override)
        for regex, fmt in self.rules:
            it = regex.globalMatch(text)
            while it.hasNext():
                m = it.next()
                self.setFormat(m.capturedStart(), m.capturedLength(), fmt)


def link_colour(number: int, strong: bool = False) -> QColor:
    """The tint of link `number` (the palette repeats), or its selected shade."""
    return QColor(LINK_COLOURS[number % len(LINK_COLOURS)][1 if strong else 0])


class CodeText(QPlainTextEdit):
    """Read-only monospace text that can mark and scroll to one line, or tint spans of lines.

    Signals:
        lineClicked(line): a click (not a drag) on line `line` (0-based).
    """

    lineClicked = Signal(int)

    def __init__(self, language: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setPointSizeF(max(8.0, font.pointSizeF()))
        self.setFont(font)
        self.setTabStopDistance(4 * self.fontMetrics().horizontalAdvance(" "))
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.highlighter = Highlighter(self.document(), language)
        self.marked = -1
        self._pending = False
        self._tints: list[QTextEdit.ExtraSelection] = []
        self._marks: list[QTextEdit.ExtraSelection] = []
        self.highlighted: set[int] = set()
        self._focus = -1  # the line scrolled to the middle (-1: the top)

    def show_text(self, text: str, line: int = -1) -> None:
        """Replace the text; mark line `line` (0-based) and scroll it to the middle."""
        self.setPlainText(text)
        self.mark_line(line)

    def mark_line(self, line: int) -> None:
        """Give line `line` a background and bring it into view (-1: top, nothing marked)."""
        self.marked = line if 0 <= line < self.blockCount() else -1
        block = self.document().findBlockByNumber(max(self.marked, 0))
        cursor = QTextCursor(block)
        self._tints, self.highlighted = [], set()
        self._marks = [self._span(self.marked, self.marked, QColor(CURRENT_LINE))] \
            if self.marked >= 0 else []
        self.setExtraSelections(self._marks)
        self.setTextCursor(cursor)
        self._focus = self.marked
        self._scroll()
        # A hidden tab has no viewport size yet: scroll again when it is first shown.
        self._pending = not self.isVisible()

    def _span(self, first: int, last: int, colour: QColor) -> QTextEdit.ExtraSelection:
        """A full-width background on lines `first`..`last`."""
        doc = self.document()
        cursor = QTextCursor(doc.findBlockByNumber(first))
        end = doc.findBlockByNumber(min(last, self.blockCount() - 1))
        if last > first:
            cursor.setPosition(end.position() + max(end.length() - 1, 0),
                               QTextCursor.MoveMode.KeepAnchor)
        extra = QTextEdit.ExtraSelection()
        extra.format.setBackground(colour)
        extra.format.setProperty(QTextCharFormat.Property.FullWidthSelection, True)
        extra.cursor = cursor
        return extra

    def set_tints(self, spans) -> None:
        """Tint each (first, last, link number) span of lines with its link's colour."""
        self._tints = [self._span(first, last, link_colour(n)) for first, last, n in spans]
        self.setExtraSelections(self._tints + self._marks)

    def highlight(self, spans, number: int, scroll: bool) -> None:
        """Give the (first, last) spans link `number`'s strong shade; scroll to the first."""
        self.marked = -1
        self._marks = [self._span(first, last, link_colour(number, strong=True))
                       for first, last in spans]
        self.highlighted = {i for first, last in spans for i in range(first, last + 1)}
        self.setExtraSelections(self._tints + self._marks)
        if scroll and spans:
            self._focus = spans[0][0]
            self.setTextCursor(QTextCursor(self.document().findBlockByNumber(self._focus)))
            self._scroll()
            self._pending = not self.isVisible()

    def mouseReleaseEvent(self, event) -> None:  # noqa: D102 (Qt override)
        super().mouseReleaseEvent(event)
        if event.button() == Qt.MouseButton.LeftButton and not self.textCursor().hasSelection():
            line = self.cursorForPosition(event.position().toPoint()).blockNumber()
            self.lineClicked.emit(line)

    def _scroll(self) -> None:
        if self._focus >= 0:
            self.centerCursor()
        else:
            self.verticalScrollBar().setValue(0)
        self.horizontalScrollBar().setValue(0)

    def showEvent(self, event) -> None:  # noqa: D102 (Qt override)
        super().showEvent(event)
        if self._pending:
            self._pending = False
            self._scroll()

    def marked_text(self) -> str:
        """The marked line's text ("" when nothing is marked)."""
        if self.marked < 0:
            return ""
        return self.document().findBlockByNumber(self.marked).text()

    def first_visible_line(self) -> int:
        """Number of the top line on screen (tests check what is scrolled to)."""
        return self.firstVisibleBlock().blockNumber()


class ElidedLabel(QLabel):
    """One line that ends in "…" when too narrow (long ONNX node names); the tooltip has all."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

    def setText(self, text: str) -> None:  # noqa: D102 (Qt override)
        self._full = text
        self.setToolTip(text)
        self._elide()

    def text(self) -> str:
        """The whole text, not the elided one on screen."""
        return self._full

    def resizeEvent(self, event) -> None:  # noqa: D102 (Qt override)
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        margins = self.contentsMargins()
        width = self.width() - margins.left() - margins.right()
        super().setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideMiddle,
                                                      max(width, 40)))


class CodeView(QWidget):
    """Tabs with the low-level IR, the LLVM IR and the assembly, under a description line.

    With "Link lines" checked the tabs give way to the three views side by side, so the
    lines of one kernel can be seen together.

    Signals:
        targetChanged(name): the user picked another target in the combo.
        linkToggled(on): "Link lines" was checked or unchecked.
        lineClicked(view, line): a click on line `line` of view LOWIR, LLVM_IR or ASSEMBLY.
    """

    targetChanged = Signal(str)
    linkToggled = Signal(bool)
    lineClicked = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("CodeView")
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        # One row: the description (elided when narrow) and the target; the tabs keep the width.
        row = QHBoxLayout()
        row.setContentsMargins(6, 4, 4, 0)
        self.status = ElidedLabel()
        row.addWidget(self.status, 1)
        self.link_box = QCheckBox("Link lines")
        self.link_box.setToolTip("Show the whole network with each kernel's low-level IR, LLVM "
                                 "IR and assembly lines in one colour (kernels kept apart, as "
                                 "for per-layer counts); a click on a line selects its kernel")
        self.link_box.toggled.connect(self._link_toggled)
        row.addWidget(self.link_box)
        row.addWidget(QLabel("Target:"))
        self.target_combo = QComboBox()
        self.target_combo.setToolTip("CPU the kernel is compiled for")
        self.target_combo.currentTextChanged.connect(self._target_changed)
        row.addWidget(self.target_combo)
        column.addLayout(row)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.lowir = CodeText("lowir")
        self.llvm_ir = CodeText("llvm")
        self.assembly = CodeText("asm")
        self.tabs.addTab(self.lowir, "Low-level IR")
        self.tabs.addTab(self.llvm_ir, "LLVM IR")
        self.tabs.addTab(self.assembly, "Assembly")
        self.titles = ("Low-level IR", "LLVM IR", "Assembly")
        self.side_by_side = QSplitter(Qt.Orientation.Horizontal)
        self.panes = []
        for title in self.titles:
            pane = QWidget()
            layout = QVBoxLayout(pane)
            layout.setContentsMargins(0, 0, 0, 0)
            layout.setSpacing(1)
            layout.addWidget(QLabel(f"<b>{title}</b>"))
            self.side_by_side.addWidget(pane)
            self.panes.append(pane)
        self.pages = QStackedWidget()
        self.pages.addWidget(self.tabs)
        self.pages.addWidget(self.side_by_side)
        column.addWidget(self.pages, 1)
        for number, view in enumerate(self.texts()):
            view.lineClicked.connect(lambda line, n=number: self.lineClicked.emit(n, line))
        self._quiet = False
        self._tab = 0
        self.set_message("Select a node to see its kernel.")

    def texts(self) -> tuple[CodeText, CodeText, CodeText]:
        """The views in the order LOWIR, LLVM_IR, ASSEMBLY."""
        return self.lowir, self.llvm_ir, self.assembly

    def linked(self) -> bool:
        """True while "Link lines" is checked."""
        return self.link_box.isChecked()

    def _link_toggled(self, on: bool) -> None:
        # The same three views move between the tabs and the side-by-side panes.
        if on:
            self._tab = self.tabs.currentIndex()  # shown again when the tabs come back
        for number, view in enumerate(self.texts()):
            if on:
                self.panes[number].layout().addWidget(view, 1)
                view.show()  # the tabs hid all but their current page
            else:
                self.tabs.insertTab(number, view, self.titles[number])
        if not on:
            self.tabs.setCurrentIndex(max(self._tab, 0))
        self.pages.setCurrentWidget(self.side_by_side if on else self.tabs)
        self.linkToggled.emit(on)

    def set_linked(self, texts, tints) -> None:
        """The whole network's listings (LOWIR, LLVM_IR, ASSEMBLY order) and their tints."""
        for view, text, spans in zip(self.texts(), texts, tints):
            view.show_text(text)
            view.set_tints(spans)

    def highlight(self, spans, number: int, clicked: int = -1) -> None:
        """Mark each view's spans of link `number`; all but the `clicked` view scroll to them."""
        for view_number, (view, own) in enumerate(zip(self.texts(), spans)):
            view.highlight(own, number, scroll=view_number != clicked)

    def set_targets(self, names: list[str], current: str) -> None:
        """Fill the target combo without announcing a change."""
        self._quiet = True
        self.target_combo.clear()
        self.target_combo.addItems(names)
        self.target_combo.setCurrentText(current)
        self._quiet = False

    def target(self) -> str:
        """The target picked in the combo."""
        return self.target_combo.currentText()

    def _target_changed(self, name: str) -> None:
        if not self._quiet and name:
            self.targetChanged.emit(name)

    def set_message(self, text: str, error: bool = False) -> None:
        """The one-line description (or error) above the tabs."""
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {style.PROBLEM};" if error else "")

    def set_lowir(self, text: str, line: int = -1) -> None:
        """The whole function's low-level IR, with the selected node's line marked."""
        self.lowir.show_text(text, line)

    def set_busy(self, text: str = "compiling…") -> None:
        """Say the kernel is being compiled; the kernel tabs show the same until it arrives."""
        self.set_message(text)
        for view in (self.llvm_ir, self.assembly):
            view.show_text(f"; {text}")

    def set_kernel(self, llvm_ir: str, assembly: str, symbol: str) -> None:
        """One kernel's code, each scrolled to where `symbol` is defined."""
        self.llvm_ir.show_text(llvm_ir, _line_of(llvm_ir, rf"^define\b.*@\"?{re.escape(symbol)}"))
        self.assembly.show_text(assembly, _line_of(assembly, rf"^\"?{re.escape(symbol)}\"?:"))

    def clear_kernel(self, text: str = "") -> None:
        """No kernel to show (nothing selected, a view node, or an error)."""
        for view in (self.llvm_ir, self.assembly):
            view.show_text(f"; {text}" if text else "")


def _line_of(text: str, pattern: str) -> int:
    """First line matching `pattern` (-1 if none)."""
    regex = re.compile(pattern)
    return next((i for i, line in enumerate(text.splitlines()) if regex.search(line)), -1)
