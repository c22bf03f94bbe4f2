"""The report page and its data: `mpiscope report` (one offline HTML file) and `mpiscope view`.

Python bins and encodes everything, the page (templates/, assets/) only decodes and draws;
docs/report-protocol.md is the contract between the two.

  source.py   the trace's tables as the page sees them (relative times, codes)
  frame.py    the "MSF1" frame file every tile is
  density.py  the pyramid of bins (time share per family, bytes, messages per rank and bin)
  timeline.py event tiles: the calls, messages and collectives of a time window
  tiles.py    tiles by key: bin levels, event tiles of chosen windows
  payload.py  meta, summary, statistics of the page
  budget.py   what a report of --max-size MB embeds
  baseline.py the earlier run of --baseline
  build.py    a report from a trace;  html.py  the page rendered with Jinja2
  cache.py    the view's index beside the trace;  store.py  tiles answered from it
  server.py   the loopback HTTP server of `view`
"""
