"""The global options (-v, -q) work before the verb and after it."""

from __future__ import annotations

import pytest

from mpiscope.cli import build_parser


@pytest.mark.parametrize("argv, verbose, quiet", [
    (["stats", "t"], 0, False), (["-q", "stats", "t"], 0, True), (["stats", "t", "-q"], 0, True),
    (["-vv", "stats", "t"], 2, False), (["stats", "t", "-vv"], 2, False), (["stats", "-v", "t", "--quiet"], 1, True),
])
def test_global_options_anywhere(argv, verbose, quiet):
    args = build_parser(argv).parse_args(argv)
    assert (args.verbose, args.quiet, str(args.trace_dir)) == (verbose, quiet, "t")
