"""`kiln explore-export`: one point of an exploration as a bundle or a QDQ model."""

from __future__ import annotations

import json
from pathlib import Path

from app.cli.args import UsageError, Warnings, writable_file, writable_folder
from compiler.errors import KilnError


def add_parser(sub) -> None:
    """The `explore-export` command's arguments."""
    e = sub.add_parser("explore-export", help="write one point of an exploration as a bundle "
                                              "or a QDQ ONNX model")
    e.add_argument("exploration", metavar="EXPLORE.json")
    e.add_argument("--point", type=int, required=True, metavar="N", help="the trial number")
    e.add_argument("-o", "--output", required=True, metavar="DIR|OUT.onnx",
                   help="a bundle folder, or an .onnx file for the QDQ model")
    e.add_argument("--force", action="store_true", help="replace a bundle already there")
    e.add_argument("--json", action="store_true", help="print one JSON document")


def run(args) -> int:
    """`kiln explore-export`: one point as a bundle folder or a QDQ ONNX model."""
    from compiler.codegen.bundle_folder import FolderInUse, check_folder
    from compiler.driver import BuildRequest, compilation
    from compiler.explore.apply import apply_point
    from compiler.explore.record import read_record

    if Path(args.output).suffix.lower() == ".onnx":
        writable_file(args.output)
    else:
        writable_folder(args.output)
    doc = read_record(Path(args.exploration))
    point = apply_point(doc, args.point)
    output = Path(args.output)
    if output.suffix.lower() == ".onnx":
        from compiler.frontends.onnx.export import save_onnx

        save_onnx(point.qdq, output)
        if args.json:
            print(json.dumps({"trial": args.point, "written": [str(output)]}))
        else:
            Warnings(args).say(f"wrote trial {args.point}'s QDQ model to {output}")
        return 0
    compiled = compilation(point.qdq)
    options = point.options
    request = BuildRequest(options, point.problem.board, None, point.recipe.to_json(portable=True),
                           {}, point.recipe.model_hash)
    try:
        check_folder(output, options.name, options.target, args.force,
                     example=not options.resolved_target().mcu)
        paths, doc, _ = compiled.export(output, request, force=args.force)
    except FolderInUse as exc:
        raise UsageError(f"{exc}; pass --force to replace it") from None
    except OSError as exc:
        raise KilnError(f"cannot write the bundle to {output}: {exc.strerror}") from None
    if args.json:
        print(json.dumps({"trial": args.point, "written": [str(p) for p in paths],
                          "report": doc}))
        return 0
    for path in paths:
        Warnings(args).say(f"  wrote {path}")
    return 0
