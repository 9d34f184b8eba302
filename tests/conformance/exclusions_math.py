"""Excluded math conformance cases: regex over the case name -> reason."""

EXCLUDED: dict[str, str] = {}
