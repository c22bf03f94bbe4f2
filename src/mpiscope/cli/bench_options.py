"""Options and output handling shared by the `mpiscope bench` sub-commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from mpiscope import output
from mpiscope.bench.plot import check_plot_path
from mpiscope.errors import UsageError


def add_common(p: argparse.ArgumentParser, default_ranks: int) -> None:
    p.add_argument("--ops", action="append", metavar="OP[,OP...]",
                   help="operations to measure (default: all); repeat or separate with commas")
    p.add_argument("-n", "--ranks", type=int, default=default_ranks, help=f"MPI ranks (default {default_ranks})")
    p.add_argument("--sizes", metavar="LIST",
                   help="message sizes in bytes: 0,1K,64K or power-of-two ranges like 0:4M "
                        "(default: IMB's 0 and 1 B … 4 MiB)")
    p.add_argument("--async-progress", choices=["off", "on", "both"], default="both",
                   help="asynchronous progress off, on, or both side by side (default both)")
    p.add_argument("--iter", type=int, default=1000, metavar="N",
                   help="repetitions per size at most (IMB -iter; default 1000, fewer for large sizes)")
    p.add_argument("--time", type=float, default=10.0, metavar="SECONDS",
                   help="time budget per size of IMB's dynamic iteration policy (IMB -time; default 10)")
    p.add_argument("--launcher-args", default="", metavar="ARGS",
                   help="extra mpiexec arguments, e.g. \"-f hosts -ppn 2\"")
    p.add_argument("--json", metavar="FILE", help="write every figure as JSON (- for stdout)")
    p.add_argument("--csv", metavar="FILE", type=Path, help="write one CSV row per operation, size and setting")
    p.add_argument("--plot", metavar="FILE", type=Path, help="write a figure (.png, .svg or .pdf)")
    p.add_argument("--force", action="store_true", help="overwrite existing --json/--csv/--plot files")


def check_outputs(args: argparse.Namespace) -> None:
    """Before measuring: refuse to overwrite results unless --force, and reject unknown plot formats."""
    if args.plot is not None:
        check_plot_path(args.plot)
    targets = [Path(args.json)] if args.json not in (None, "-") else []
    targets += [p for p in (args.csv, args.plot) if p is not None]
    for path in targets:
        if path.exists() and not args.force:
            raise UsageError(f"{path} already exists; choose another file or add --force to replace it")


def write_outputs(args: argparse.Namespace, payload: dict[str, Any], csv_text: str,
                  plot: Callable[[Path], None]) -> None:
    output.emit_json(payload, args.json)
    if args.csv is not None:
        output.write_atomic(args.csv, csv_text.encode())
    if args.plot is not None:
        plot(args.plot)


@contextmanager
def measuring(description: str, total: int) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A progress bar advanced once per result record."""
    with output.progress(description, total=total) as bar:
        def advance(record: dict[str, Any]) -> None:
            bar.advance()
            bar.update(description=f"{description}: {record['op']} {record['bytes']} B")

        yield advance


class _Result(Protocol):
    def to_json(self) -> dict[str, Any]: ...
    def csv_text(self) -> str: ...


R = TypeVar("R", bound=_Result)


def measure_and_write(args: argparse.Namespace, description: str, expected_results: int,
                      measure: Callable[[Callable[[dict[str, Any]], None]], R], render: Callable[[R], None],
                      warn: Callable[[R], None], plot: Callable[[R, Path], None]) -> R:
    """The steps every bench sub-command shares: check the output files before the (long) measurement,
    measure with a progress bar, show the table unless the JSON goes to stdout, then write the files."""
    check_outputs(args)
    runs = 1 if args.async_progress != "both" else 2
    with measuring(description, expected_results * runs) as advance:
        result = measure(advance)
    if args.json != "-":
        render(result)
    warn(result)
    write_outputs(args, result.to_json(), result.csv_text(), lambda path: plot(result, path))
    return result


def imb_table(title: str, lead: list[str], groups: list[tuple[str, list[str]]], rows: list[list[str]]) -> str:
    """IMB's layout: a '#' banner, right-aligned columns, and a label over each group of columns
    (one group per asynchronous-progress setting, side by side)."""
    headers = lead + [h for _, group in groups for h in group]
    widths = [max(11, len(h) + 2, *(len(r[i]) + 2 for r in rows)) for i, h in enumerate(headers)]
    rule = "#" + "-" * (max(sum(widths), len(title) + 2) - 1)
    lines = [rule, f"# {title}", rule]
    labels = " " * sum(widths[:len(lead)])
    col = len(lead)
    for label, group in groups:
        span = sum(widths[col:col + len(group)])
        labels += " " + f" {label} ".center(span - 1, "-")
        col += len(group)
    lines.append(labels)
    lines.append("".join(h.rjust(w) for h, w in zip(headers, widths)))
    lines += ["".join(v.rjust(w) for v, w in zip(row, widths)) for row in rows]
    return "\n".join(lines) + "\n"


def us(value: float) -> str:
    """IMB's time columns: µs with two decimals."""
    return f"{value:.2f}"
