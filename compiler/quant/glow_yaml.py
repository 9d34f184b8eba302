"""Glow's profile format (YAML) in and out, beside Kiln's JSON profile.

Glow writes three YAML documents: `GlowToolsVersion`, `GraphPreLowerHash` (a 64-bit hex hash of
the graph) and a sequence of `{NodeOutputName, Min, Max, Histogram}`, min and max with every
decimal (pytorch/glow lib/Quantization/Serialization.cpp). Kiln writes its own graph hash
there (the first 64 bits of the JSON profile's), so a file exported by Kiln and edited in
Glow's format is checked against the graph like a JSON one. Overrides and keep_float have no
place in Glow's format: exporting folds the overrides into Min and Max.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from compiler.errors import KilnError
from compiler.fileio import atomic_write_bytes
from compiler.quant.profile import Profile, TensorRange, load_profile

GLOW_SUFFIXES = (".yaml", ".yml")


def is_glow(path: str | Path) -> bool:
    """Whether `path` names a Glow YAML profile (by its suffix)."""
    return Path(path).suffix.lower() in GLOW_SUFFIXES


def read_profile(path: str | Path) -> Profile:
    """A profile file in either format, chosen by its suffix (.yaml / .yml: Glow's)."""
    return load_glow(path) if is_glow(path) else load_profile(path)


def write_profile(profile: Profile, path: str | Path) -> None:
    """Write `profile` in the format its file name asks for (.yaml / .yml: Glow's)."""
    if is_glow(path):
        save_glow(profile, path)
    else:
        profile.save(path)


def _float(value: float) -> str:
    """Every decimal of a float32-range value, as Glow prints it (no trailing zeros)."""
    text = f"{value:.17g}"
    return text if any(c in text for c in ".en") else text + ".0"


def save_glow(profile: Profile, path: str | Path) -> None:
    """Write `profile` as Glow's three YAML documents."""
    if profile.equalized:
        raise KilnError(f"{path}: Glow's profile format cannot say the graph was equalized; "
                        f"write the profile as JSON")
    lines = ["---", "GlowToolsVersion: 'kiln'", "...", "---",
             f"GraphPreLowerHash: 0x{profile.graph_hash[:16].upper()}", "...", "---"]
    for name in sorted(profile.tensors):
        low, high = profile.range_of(name)
        counts = ", ".join(str(c) for c in profile.tensors[name].histogram)
        lines += [f"- NodeOutputName:  {yaml.safe_dump(name, default_style=chr(39)).strip()}",
                  f"  Min:             {_float(low)}", f"  Max:             {_float(high)}",
                  f"  Histogram:       [ {counts} ]"]
    lines.append("...")
    atomic_write_bytes(Path(path), ("\n".join(lines) + "\n").encode())


def load_glow(path: str | Path) -> Profile:
    """A Glow YAML profile, or one clear line saying what is wrong with it (KilnError)."""
    path = Path(path)
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except OSError as exc:
        raise KilnError(f"{path}: cannot read the profile ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise KilnError(f"{path}: not a YAML profile ({problem})") from None
    try:
        return _parse(docs, path)
    except (KeyError, TypeError, ValueError) as exc:
        raise KilnError(f"{path}: malformed Glow profile: {exc}") from None


def _parse(docs: list, path: Path) -> Profile:
    if len(docs) != 3 or not isinstance(docs[1], dict) or not isinstance(docs[2], list):
        raise ValueError("expected three documents: GlowToolsVersion, GraphPreLowerHash and "
                         "the list of tensors")
    digest = docs[1]["GraphPreLowerHash"]
    digest = f"{digest:016x}" if isinstance(digest, int) else str(digest).lower().removeprefix(
        "0x")
    tensors = {}
    for entry in docs[2]:
        name = str(entry["NodeOutputName"])
        low, high = float(entry["Min"]), float(entry["Max"])
        if not (math.isfinite(low) and math.isfinite(high)) or low > high:
            raise ValueError(f"tensor {name!r} has the range [{low}, {high}]")
        counts = [int(round(float(c))) for c in entry["Histogram"]]
        if any(c < 0 for c in counts):
            raise ValueError(f"tensor {name!r} has a negative histogram count")
        tensors[name] = TensorRange(low, high, counts)
    bins = max((len(t.histogram) for t in tensors.values()), default=0)
    return Profile(digest, "", {"source": f"Glow profile {path.name}"}, bins, tensors,
                   path=str(path))
