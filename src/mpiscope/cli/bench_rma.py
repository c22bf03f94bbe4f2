"""Passive-target one-sided latency and bandwidth, and IMB-RMA's truly-passive Put test (2 ranks).

  mpiscope bench rma                                   # all operations, IMB's sizes, progress off and on
  mpiscope bench rma --ops truly_passive_put --sizes 0:4M --json -
  mpiscope bench rma --ops put,get,fetch_and_op --async-progress off --plot rma.png

Rank 0 (origin) times Put, Get, Accumulate, Get_accumulate, Fetch_and_op and
Compare_and_swap while rank 1 (target) waits in MPI_Barrier, in three modes:
lock/unlock per operation, lock_all with a flush per operation, and lock_all
with one flush after all operations (bandwidth). Truly_passive_put times Put +
flush while the target (1) waits in MPI_Barrier and (2) computes outside MPI
for as long: t_ovrl/t_pure ≈ 2 means no passive progress, ≈ 1 real progress.
"""

from __future__ import annotations

import argparse

from mpiscope import output
from mpiscope.bench import catalog
from mpiscope.bench.formulas import bandwidth_mb_s
from mpiscope.bench.plot import plot_rma
from mpiscope.bench.rma import MODES, RANKS, RmaConfig, RmaResult, run_rma
from mpiscope.cli.bench_options import add_common, imb_table, measure_and_write, us


def prepare_parser(p: argparse.ArgumentParser) -> None:
    add_common(p, default_ranks=RANKS)


def _label(result: RmaResult, enabled: bool) -> str:
    info = next(s for s in result.settings if s["async_progress"] == enabled)
    return f"async progress {'on' if enabled else 'off'}{' (*)' if info['oversubscribed'] else ''}"


def _latency_table(result: RmaResult, name: str, settings: list[bool]) -> str:
    rows = {(r.bytes, r.mode, r.async_progress): r for r in result.rows if r.op == name}
    headers = ["lock/unlock[usec]", "lock_all+flush[usec]", "aggregate[usec]", "Mbytes/sec"]
    table = []
    for size in sorted({key[0] for key in rows}):
        line = [str(size)]
        for enabled in settings:
            got = [rows.get((size, mode, enabled)) for mode in MODES]
            line += [us(r.t_us) if r else "-" for r in got]
            line.append(f"{bandwidth_mb_s(size, got[-1].t_us):.2f}" if got[-1] else "-")
        table.append(line)
    imb = catalog.RMA_BY_NAME[name].imb_name
    return imb_table(f"Benchmarking {name} (IMB-RMA {imb}); origin rank 0, target rank 1; {result.mpi}", ["#bytes"],
                     [(_label(result, enabled), headers) for enabled in settings], table)


def _passive_table(result: RmaResult, settings: list[bool]) -> str:
    by_key = {(p.bytes, p.async_progress): p for p in result.passive}
    headers = ["#repetitions", "t_pure[usec]", "t_ovrl[usec]", "ratio"]
    table = []
    for size in sorted({p.bytes for p in result.passive}):
        line = [str(size)]
        for enabled in settings:
            p = by_key.get((size, enabled))
            line += [str(p.n_sample), us(p.t_pure_us), us(p.t_ovrlp_us), f"{p.ratio:.2f}"] if p else ["-"] * 4
        table.append(line)
    return imb_table(f"Benchmarking truly_passive_put (IMB-RMA Truly_passive_put); #processes = 2; {result.mpi}",
                     ["#bytes"], [(_label(result, enabled), headers) for enabled in settings], table)


def render(result: RmaResult) -> None:
    settings = [bool(s["async_progress"]) for s in result.settings]
    for name in dict.fromkeys(r.op for r in result.rows):
        output.preformatted(_latency_table(result, name, settings))
    if result.rows:
        output.text("Time per operation at the origin while the target waits in MPI_Barrier. lock/unlock: an "
                    "epoch per operation; lock_all+flush: MPI_Win_flush after each operation (IMB's non-aggregate "
                    "mode); aggregate: one flush after all operations (IMB's aggregate mode), whose rate gives "
                    "Mbytes/sec (10^6 bytes/s).")
    if result.passive:
        output.preformatted(_passive_table(result, settings))
        output.text("t_pure: the target waits in MPI_Barrier; t_ovrl: the target computes outside MPI for t_pure, "
                    "then enters MPI_Barrier. ratio = t_ovrl/t_pure: about 2 means no passive progress (the target "
                    "must call MPI), about 1 means the MPI completes the Put without the target.")


def warn(result: RmaResult) -> None:
    """On stderr, also with --json -: what makes these numbers less trustworthy."""
    for info in result.settings:
        if info["oversubscribed"]:
            output.warn(f"(*) {info['oversubscription_note']}")
    for warning in result.warnings:
        output.warn(warning)


def run(args: argparse.Namespace) -> int:
    config = RmaConfig(ops=catalog.select_ops(args.ops, catalog.RMA_BY_NAME, catalog.RMA_GROUPS, "rma"),
                       ranks=args.ranks, sizes=catalog.parse_sizes(args.sizes), async_progress=args.async_progress,
                       iterations=args.iter, time_per_size_s=args.time, launcher_args=args.launcher_args)
    config.validate()
    result = measure_and_write(args, "bench rma", config.expected_results(),
                               lambda advance: run_rma(config, advance), render, warn, plot_rma)
    for what in result.failed_checks:
        output.warn(f"{what}: the one-sided result was wrong; the MPI's RMA is incorrect here")
    return 1 if result.failed_checks else 0
