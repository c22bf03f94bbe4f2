"""`mpiscope` command line: one module per verb, each with prepare_parser() and run().

main() is the only place that turns an MpiscopeError into `error: <message>`
and an exit code; a traceback appears only with -vv.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import logging
import os
import sys
import tokenize
from pathlib import Path
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


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every verb; only the verb argv names is imported and given its options (the
    others' help comes from their docstrings). A verb's module imports what its work needs
    (Polars, pyarrow, SciPy, plotting): importing all fourteen made every command start in 0.9 s."""
    parser = argparse.ArgumentParser(prog="mpiscope", description="See, diagnose and fix MPI communication.")
    parser.add_argument("--version", action="version", version=f"mpiscope {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v: info, -vv: debug and tracebacks")
    parser.add_argument("-q", "--quiet", action="store_true", help="no tables or progress, only errors and JSON")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    chosen = _verb_named(sys.argv[1:] if argv is None else argv)
    for verb, module in VERBS.items():
        name = f"mpiscope.cli.{module}"
        doc = importlib.import_module(name).__doc__ if verb == chosen else _docstring(name)
        p = sub.add_parser(verb, help=doc.strip().splitlines()[0] if doc else None,
                           description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
        if verb == chosen:
            mod = sys.modules[name]
            # -v and -q after the verb too (mpiscope stats t -q); absent there, the ones before it hold
            p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
            p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
            mod.prepare_parser(p)
            p.set_defaults(handler=mod.run)
    return parser


def _verb_named(argv: Sequence[str]) -> str | None:
    """The verb of a command line: its first word that is not an option (the options before the
    verb take no value)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in VERBS else None


def _docstring(module: str) -> str | None:
    """A module's docstring, read from its source without importing it: its first token, where that
    is a string (parsing the thirteen other verbs' sources took 36 ms of every command's start, this 6)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    with open(spec.origin, "rb") as f:
        for token in tokenize.tokenize(f.readline):
            if token.type not in (tokenize.ENCODING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
                return inspect.cleandoc(ast.literal_eval(token.string)) if token.type == tokenize.STRING else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
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
    except BrokenPipeError:
        # the reader of the output stopped early (| head): nothing more to say, as cat and grep do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:
        damaged = _damaged_table(e, args)
        if damaged is None or args.verbose >= 2:
            raise
        print(f"error: {damaged}", file=sys.stderr)
        return damaged.exit_code


def _damaged_table(error: Exception, args: argparse.Namespace) -> MpiscopeError | None:
    """The sentence for a Parquet file of the verb's trace found damaged only when its rows were
    read (a footer that reads, pages that do not): the verbs check what they open, not every page."""
    trace = getattr(args, "trace_dir", None) or getattr(args, "trace", None)
    if trace is None or not type(error).__module__.startswith(("polars", "pyarrow")) \
            or "parquet" not in str(error).lower():
        return None
    from mpiscope.trace import unreadable

    return unreadable(Path(trace), None, error)
