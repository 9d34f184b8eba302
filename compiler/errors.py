"""Errors a user can see: one sentence naming the file, the node and the reason."""

from __future__ import annotations


def one_line(text: str) -> str:
    """Escape control characters (names in a file can hold newlines) so a message stays one line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


class KilnError(Exception):
    """Base of every error Kiln reports to a user as one line instead of a traceback."""


class ModelError(KilnError):
    """A model file (or a graph built from it) cannot be used.

    The message names the file, the node when there is one, and the reason, so the CLI and the
    GUI can show it as it is.
    """

    def __init__(self, reason: str, *, file: str | None = None, node: str | None = None):
        self.reason = reason
        self.file = file
        self.node = node
        super().__init__(self._compose())

    def _compose(self) -> str:
        where = []
        if self.file:
            where.append(self.file)
        if self.node:
            where.append(f"node {self.node}")
        prefix = ": ".join(where)
        return one_line(f"{prefix}: {self.reason}" if prefix else self.reason)

    def with_file(self, file: str) -> ModelError:
        """Return the same error with the file name filled in (callers deep down don't know it)."""
        return ModelError(self.reason, file=self.file or file, node=self.node)


class ShapeError(KilnError):
    """Shape or type inference found inputs an operator cannot accept."""


class UnsupportedError(KilnError):
    """An operator, attribute value or element type Kiln does not implement."""


class VerifyError(KilnError):
    """The graph verifier found a broken invariant (a compiler bug, or a bad manual edit)."""
