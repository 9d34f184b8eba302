"""`kiln walkthrough`: the pass-by-pass lesson of a model as a folder of HTML pages.

The pages come from `compiler.walkthrough`; a session file (`--session`) brings the teacher's
notes typed in the Passes panel.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.cli.args import (
    Warnings,
    add_model_args,
    add_pipeline_arg,
    add_target_args,
    compilation_of,
    target_options,
    writable_folder,
)
from compiler.errors import KilnError


def add_parser(sub) -> None:
    """The `walkthrough` subcommand's arguments."""
    walk = sub.add_parser("walkthrough", help="a pass-by-pass lesson as HTML pages (one per "
                                              "pass that changed something)")
    add_model_args(walk)
    add_target_args(walk)
    add_pipeline_arg(walk)
    walk.add_argument("--session", metavar="SESSION.kiln",
                      help="a saved session whose teacher's notes go on their stages' pages")
    walk.add_argument("-o", "--output", required=True, metavar="DIR",
                      help="the folder to write (new, empty, or a walkthrough with --force)")
    walk.add_argument("--force", action="store_true", help="replace a walkthrough in DIR")
    walk.add_argument("--json", action="store_true", help="print one JSON document")


def session_notes(path: str | Path) -> dict[str, str]:
    """The notes of a `.kiln` session (stage key -> text); a session without notes has none."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KilnError(f"cannot read the session {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise KilnError(f"{path} is not a Kiln session: {exc}") from None
    if not isinstance(doc, dict) or "kiln_session" not in doc:
        raise KilnError(f"{path} is not a Kiln session")
    notes = doc.get("notes", {}) or {}
    if not isinstance(notes, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in notes.items()):
        raise KilnError(f"{path}: its \"notes\" must map stage names to text")
    return notes


def run(args) -> int:
    """`kiln walkthrough`."""
    from compiler.walkthrough import check_folder, walkthrough_files, write_walkthrough

    writable_folder(args.output)
    check_folder(args.output, args.force)  # before any work: a refused folder fails fast
    notes = session_notes(args.session) if args.session else {}
    options, _ = target_options(args)
    files = walkthrough_files(compilation_of(args), options, Path(args.model).name, notes)
    write_walkthrough(args.output, files, force=args.force)
    pages = sum(1 for name in files if name[:1].isdigit())
    if args.json:
        print(json.dumps({"pages": pages, "folder": str(args.output),
                          "index": str(Path(args.output) / "index.html"),
                          "files": sorted(files)}))
        return 0
    Warnings(args).say(f"wrote {pages} pages and an index to {args.output} (open "
          f"{Path(args.output) / 'index.html'})")
    return 0
