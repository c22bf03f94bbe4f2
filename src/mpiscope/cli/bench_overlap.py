"""Overlap of nonblocking collectives with computation, measured as IMB-NBC does it.

  mpiscope bench overlap                              # 17 operations, IMB's sizes, progress off and on
  mpiscope bench overlap --ops ialltoall,ibcast -n 4 --sizes 0:64K --json out.json --plot out.png
  mpiscope bench overlap --ops iallreduce --definition osu --test-calls 100

For each operation and size: t_pure (start → MPI_Wait, nothing else), t_CPU
(IMB's CPU_Exploit kernel calibrated to t_pure), t_ovrl (start → the same
computation → MPI_Wait), overlap[%], and beside them the blocking collective
+ t_CPU, with which of the two finished first.
"""

from __future__ import annotations

import argparse

from mpiscope import output
from mpiscope.bench import catalog
from mpiscope.bench.overlap import OverlapConfig, OverlapResult, OverlapRow, run_overlap
from mpiscope.bench.plot import plot_overlap
from mpiscope.cli.bench_options import add_common, imb_table, measure_and_write, us


def prepare_parser(p: argparse.ArgumentParser) -> None:
    add_common(p, default_ranks=2)
    p.add_argument("--kernel-size", type=int, default=10, metavar="N",
                   help="order of CPU_Exploit's single-precision matrix (default 10 as in IMB's source; "
                        "the 002 article describes 100)")
    p.add_argument("--definition", choices=["imb", "osu"], default="imb",
                   help="osu: also compute OSU's overlap (averaged over ranks, MPI_Test time subtracted)")
    p.add_argument("--test-calls", type=int, default=0, metavar="K",
                   help="call MPI_Test every K kernel repetitions during the computation (default 0: never, as IMB)")


def _setting_label(result: OverlapResult, enabled: bool) -> str:
    info = next(s for s in result.settings if s.async_progress == enabled)
    return f"async progress {'on' if enabled else 'off'}{' (*)' if info.oversubscribed else ''}"


def _cells(r: OverlapRow | None, osu: bool) -> list[str]:
    if r is None:
        return ["-"] * (8 if osu else 7)
    p = r.point
    cells = [str(r.n_sample), us(p.t_ovrlp_us), us(p.t_pure_us), us(p.t_cpu_us), f"{p.overlap_pct:.2f}"]
    cells += [f"{p.osu_overlap_pct:.2f}"] if osu else []
    return cells + [us(p.blocking_plus_cpu_us), "NBC" if p.faster == "nonblocking" else "blocking"]


def render(result: OverlapResult) -> None:
    osu = result.config.definition == "osu"
    settings = [s.async_progress for s in result.settings]
    for name in dict.fromkeys(r.op for r in result.rows):
        op = catalog.NBC_BY_NAME[name]
        rows = {(r.bytes, r.async_progress): r for r in result.rows if r.op == name}
        headers = ["#repetitions", "t_ovrl[usec]", "t_pure[usec]", "t_CPU[usec]", "overlap[%]"]
        headers += ["OSU ovl[%]"] if osu else []
        headers += [f"{op.blocking[4:]}+CPU[usec]", "faster"]
        groups = [(_setting_label(result, enabled), headers) for enabled in settings]
        table = [[str(size)] + [c for enabled in settings for c in _cells(rows.get((size, enabled)), osu)]
                 for size in sorted({key[0] for key in rows})]
        reference = f"IMB-NBC {op.imb_name}" if op.imb_name else "mpiscope extension, no IMB reference"
        output.preformatted(imb_table(f"Benchmarking {name} ({reference}); #processes = {result.config.ranks}; "
                                      f"{result.mpi}", ["#bytes"], groups, table))
    mflops = ", ".join(f"{s.kernel_mflops:.0f} (progress {'on' if s.async_progress else 'off'})"
                       for s in result.settings)
    output.text(f"CPU_Exploit ({result.config.kernel_size}x{result.config.kernel_size} float mat-vec) obtains "
                f"{mflops} MFlops. t_ovrl, t_pure, t_CPU come from the rank with the largest t_ovrl, as in IMB; "
                f"+CPU = the blocking collective's time on the slowest rank + that t_CPU; faster = which of "
                f"t_ovrl and blocking+CPU is smaller.")


def warn(result: OverlapResult) -> None:
    """On stderr, also with --json -: what makes these numbers less trustworthy."""
    for info in result.settings:
        if info.oversubscribed:
            output.warn(f"(*) {info.oversubscription_note}")
    for warning in result.warnings:
        output.warn(warning)


def run(args: argparse.Namespace) -> int:
    config = OverlapConfig(
        ops=catalog.select_ops(args.ops, catalog.NBC_BY_NAME, catalog.NBC_GROUPS, "overlap"),
        ranks=args.ranks, sizes=catalog.parse_sizes(args.sizes), async_progress=args.async_progress,
        kernel_size=args.kernel_size, test_calls=args.test_calls, iterations=args.iter,
        time_per_size_s=args.time, definition=args.definition, launcher_args=args.launcher_args)
    config.validate()
    result = measure_and_write(args, "bench overlap", config.expected_results(),
                               lambda advance: run_overlap(config, advance), render, warn, plot_overlap)
    for row in result.failed_checks:
        output.warn(f"{row.op} at {row.bytes} B (progress {'on' if row.async_progress else 'off'}) delivered "
                    f"{row.errors} wrong result elements; the MPI computes this collective incorrectly")
    return 1 if result.failed_checks else 0
