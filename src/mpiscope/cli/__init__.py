"""`mpiscope` command line: one module per verb, each with prepare_parser() and run().

main() is the only place that turns an MpiscopeError into `error: <message>`
and an exit code; a traceback appears only with -vv.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from mpiscope import __version__
from mpiscope.errors import MpiscopeError

# verb -> module in mpiscope.cli; add a line to add a verb.
VERBS = {
    "run": "run",
    "merge": "merge",
    "stats": "stats",
    "doctor": "doctor",
    "demo": "demo",
    "map": "map",
    "roofline": "roofline",
    "sim": "sim",
    "bench": "bench",
    "rebalance": "rebalance",
    "diagnose": "diagnose",
    "export": "export",
    "report": "report",
    "view": "view",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mpiscope", description="See, diagnose and fix MPI communication.")
    parser.add_argument("--version", action="version", version=f"mpiscope {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v: info, -vv: debug and tracebacks")
    parser.add_argument("-q", "--quiet", action="store_true", help="no tables or progress, only errors and JSON")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb, module in VERBS.items():
        mod = importlib.import_module(f"mpiscope.cli.{module}")
        p = sub.add_parser(verb, help=mod.__doc__.strip().splitlines()[0] if mod.__doc__ else None,
                           description=mod.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.prepare_parser(p)
        p.set_defaults(handler=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                        format="%(levelname)s %(name)s: %(message)s")
    from mpiscope import output

    output.set_quiet(args.quiet)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args))
    except MpiscopeError as e:
        if args.verbose >= 2:
            raise
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
