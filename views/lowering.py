"""The lowering stage view: one lowering pass's memory timeline before and after, and why.

Shown in place of the canvas while the user steps through the lowering passes of the Passes
panel: a banner naming the pass and its effect, what it does and what steered it, where it
applied, and the arena before and after drawn by the Memory Timeline's own widget.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from views.timeline import Bar, MemoryTimeline


@dataclass
class PlanPicture:
    """A memory plan as the timeline draws it."""

    bars: list[Bar]
    live: list[int]
    lower_bound: int
    arena: int
    steps: int


class LoweringView(QWidget):
    """Two timelines (before and after a lowering pass) under a banner, with the pass's story.

    Signals:
        backRequested(): the user asked to return to the model (button or Esc).
    """

    backRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.banner = QLabel()
        self.banner.setStyleSheet("color: #5a3b00; font-weight: bold;")
        self.banner.setWordWrap(True)
        back = QPushButton("Back to the model")
        back.setToolTip("Leave the lowering view and edit the model again (Esc)")
        back.clicked.connect(self.backRequested)
        bar = QFrame()
        bar.setObjectName("loweringBanner")
        bar.setStyleSheet("#loweringBanner { background: #ffe9b0; "
                          "border-bottom: 1px solid #e0b040; }")
        row = QHBoxLayout(bar)
        row.setContentsMargins(10, 4, 6, 4)
        row.addWidget(self.banner, 1)
        row.addWidget(back)
        self.story = QTextBrowser()
        self.story.setOpenLinks(False)
        self.story.setMinimumHeight(60)
        self.before_title, self.after_title = QLabel(), QLabel()
        self.before, self.after = MemoryTimeline(), MemoryTimeline()
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.story)
        for title, timeline in ((self.before_title, self.before),
                                (self.after_title, self.after)):
            pane = QWidget()
            box = QVBoxLayout(pane)
            box.setContentsMargins(6, 2, 6, 2)
            title.setStyleSheet("font-weight: bold;")
            box.addWidget(title)
            box.addWidget(timeline, 1)
            split.addWidget(pane)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 2)
        split.setStretchFactor(2, 2)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(bar)
        column.addWidget(split, 1)
        escape_key = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        escape_key.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        escape_key.activated.connect(self.backRequested)

    def show_pass(self, banner: str, story_html: str, before: PlanPicture,
                  after: PlanPicture) -> None:
        """Show one lowering pass: its banner line, its story and both plans."""
        self.banner.setText(banner)
        self.story.setHtml(story_html)
        for title, timeline, picture, when in ((self.before_title, self.before, before,
                                                "Before"),
                                               (self.after_title, self.after, after, "After")):
            title.setText(f"{when}: arena {picture.arena:,} B · lower bound "
                          f"{picture.lower_bound:,} B · {picture.steps} steps")
            timeline.set_plan(picture.bars, picture.live, picture.lower_bound, picture.arena)
