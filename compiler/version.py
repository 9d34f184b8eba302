"""Kiln's own version: one place for the CLI, the About box and what bundles record."""

from __future__ import annotations

from importlib import metadata


def kiln_version() -> str:
    """The installed package's version ("unknown" when run from a tree never installed)."""
    try:
        return metadata.version("kiln")
    except metadata.PackageNotFoundError:
        return "unknown"
