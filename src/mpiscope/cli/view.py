"""Serve the report page of a trace too big for one HTML file from a local server, every event at every zoom.

  mpiscope view trace                  # prints the URL and opens it in a browser
  mpiscope view trace --port 8050 --no-browser

The server listens on 127.0.0.1 only, and answers only requests carrying the
random token of the URL it prints. The first start indexes the trace once into
trace/.mpiscope/view/ (again whenever the tables change). Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import webbrowser
from pathlib import Path

from mpiscope import output
from mpiscope.errors import UsageError
from mpiscope.report import cache, html, server
from mpiscope.report.build import open_merged
from mpiscope.report.store import Store


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_dir", type=Path, metavar="TRACE")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-browser", action="store_true", help="only print the URL")


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    # Ctrl-C, and a kill (a job script, a service manager) stop it the same clean way, even where
    # the shell started it in the background with SIGINT ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)
    trace = open_merged(args.trace_dir)
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port; give 1-65535, or leave it out for a free one")
    srv = server.bind(args.port)  # before indexing: a port in use fails at once, with nothing written
    store = None
    try:
        if not cache.is_current(trace):
            output.info(f"view: indexing {args.trace_dir} once into {cache.cache_dir(trace)}")
            cache.build(trace)
        store = Store(cache.cache_dir(trace))
        page = html.render(json.loads(store.data_json)).encode()
        srv.app = server.App(store, page, server.new_token())
        print(f"mpiscope view: {srv.url}  (Ctrl-C stops it)", flush=True)
        if not args.no_browser:
            webbrowser.open(srv.url)
        srv.serve_forever()
    except KeyboardInterrupt:
        print("mpiscope view: stopped", file=sys.stderr)
    finally:
        srv.server_close()
        if store is not None:
            store.close()
    return 0
