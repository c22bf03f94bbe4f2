"""Simulate a pattern, a recorded trace or an MPI C program on a modelled torus, mesh or fat-tree (SimGrid).

  mpiscope sim --network torus:16x16x16 --bandwidth 5GBps --latency 120ns --pattern bruck:4096 --json -
  mpiscope sim --network torus:16x16x16 --pattern bruck:4096 --map tng.csv --steps
  mpiscope sim --network mesh:4x4 --trace trace-dir --map random:3
  mpiscope sim --network torus:4x4x4 --ranks 64 -- ./app.c arg1 arg2

Patterns (--pattern, --matrix) run through SimGrid's S4U interface, one
host-to-host flow per message (add --smpi to run them through SMPI instead);
traces are replayed and C programs run through SMPI (smpicc, smpirun).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.errors import UsageError
from mpiscope.mapping.patterns import GENERATORS, load_pattern
from mpiscope.output import fmt_bytes
from mpiscope.sim import replay, s4u, smpi
from mpiscope.sim.placement import make_platform, resolve_map
from mpiscope.sim.platform import parse_quantity
from mpiscope.sim.result import SimResult
from mpiscope.trace import open_trace


def prepare_parser(p: argparse.ArgumentParser) -> None:
    net = p.add_argument_group("simulated network")
    net.add_argument("--network", required=True,
                     help="torus:16x16x16, mesh:8x8, or SimGrid's fat-tree:LEVELS;DOWN;UP;COUNT "
                          "(e.g. 'fat-tree:2;4,4;1,2;1,2')")
    net.add_argument("--ranks-per-node", type=int, default=1, metavar="K")
    net.add_argument("--bandwidth", default="5GBps", help="per link and direction (default 5GBps, 001 §7.2)")
    net.add_argument("--latency", default="120ns", help="per link (default 120ns, as 001 §7.2)")
    net.add_argument("--node-speed", default="1Gf",
                     help="host speed; a trace's compute gaps count as 1 Gflop per recorded second "
                          "(default 1Gf)")
    net.add_argument("--map", default="identity",
                     help="identity (x,y,z order), random[:SEED], or a rank,node,coords CSV from "
                          "mpiscope map")
    net.add_argument("--model", choices=["CM02", "LV08", "SMPI"], default="CM02",
                     help="SimGrid network model (default CM02: plain max-min flows; SMPI: only for "
                          "SMPI runs)")
    net.add_argument("--precision", metavar="TIME",
                     help="SimGrid's event-time precision (surf/precision), e.g. 1ns; flows due within it of "
                          "an event finish together, so times come out shorter by up to about that much "
                          "(default: S4U 1/250 of the busiest link's bytes over its bandwidth, at least 1ns; "
                          "SMPI 1ns)")
    src = p.add_argument_group("what runs (exactly one)")
    src.add_argument("--pattern", help="generator: " + ", ".join(GENERATORS))
    src.add_argument("--matrix", type=Path, help="bytes[src][dst]: Matrix Market .mtx, .csv or .npy")
    src.add_argument("--trace", type=Path, help="an mpiscope trace directory, replayed rank by rank (SMPI)")
    src.add_argument("program", nargs="*", help="after --: a C MPI program and its arguments (SMPI)")
    p.add_argument("--steps", action="store_true",
                   help="patterns: step after step, each waiting for the previous (default: all at once)")
    p.add_argument("--smpi", action="store_true", help="patterns: run through SMPI instead of S4U")
    p.add_argument("--ranks", type=int, help="programs: number of ranks (default: every slot of the network)")
    p.add_argument("--measure-compute", action="store_true",
                   help="programs: time their computation and inject it (default: only communication)")
    p.add_argument("--top", type=int, default=10, help="busiest links to show (default 10)")
    p.add_argument("--save-platform", type=Path, metavar="FILE", help="also write the SimGrid platform XML")
    p.add_argument("--force", action="store_true", help="overwrite an existing --save-platform file")
    p.add_argument("--json", metavar="FILE", help="write every figure as JSON (- for stdout)")


def simulate(args: argparse.Namespace) -> SimResult:
    sources = [s for s in ("pattern", "matrix", "trace", "program") if getattr(args, s)]
    if len(sources) != 1:
        raise UsageError("give exactly one thing to simulate: --pattern GENERATOR, --matrix FILE, "
                         "--trace DIR, or -- ./program.c ARGS")
    platform = make_platform(args.network, args.ranks_per_node, args.bandwidth, args.latency, args.node_speed)
    precision = parse_quantity(args.precision, "precision") if args.precision else None
    if args.save_platform:
        if args.save_platform.exists() and not args.force:
            raise UsageError(f"{args.save_platform} exists; choose another --save-platform or add --force")
        output.write_atomic(args.save_platform, platform.xml().encode())
    if args.model == "SMPI" and (args.pattern or args.matrix) and not args.smpi:
        raise UsageError("--model SMPI applies only to SMPI runs; add --smpi, or use --model CM02 or LV08")
    if args.trace:
        trace = open_trace(args.trace)
        node, name = resolve_map(platform, args.map, trace.ranks)
        return smpi.run_actions(platform, replay.trace_actions(trace, ref_flops=1e9), node, name,
                                f"trace {args.trace}", args.model, precision)
    if args.program:
        source = Path(args.program[0])
        nranks = args.ranks or platform.slots
        if nranks < 1:
            raise UsageError(f"--ranks {nranks} must be at least 1")
        node, name = resolve_map(platform, args.map, nranks)
        return smpi.run_program(platform, source, args.program[1:], node, name, args.model,
                                args.measure_compute, precision)
    pattern = load_pattern(args.pattern, args.matrix, None)
    node, name = resolve_map(platform, args.map, pattern.nranks)
    if (warning := s4u.slow_warning(pattern, name, args.steps)) and not args.smpi:
        output.warn(warning)
    if args.smpi:
        return smpi.run_actions(platform, replay.pattern_actions(pattern, args.steps), node, name,
                                f"pattern {pattern.name}", args.model, precision)
    return s4u.run_pattern(platform, pattern, node, name, args.steps, args.model, precision)


def render(r: SimResult, top: int) -> None:
    p = r.platform
    rows = [
        ["simulated time", f"{r.simulated_time_s * 1e3:.6g} ms"],
        ["what", r.what + (f" ({r.extra['mode']})" if "mode" in r.extra else "")],
        ["network", (f"{p.describe()}, {p.bandwidth_Bps / 1e9:g} GB/s, {p.latency_s * 1e9:g} ns, "
                    f"{p.speed_flops / 1e9:g} Gf/s, {p.ranks_per_node} rank(s) per node")],
        ["map", r.map_name],
        ["engine", f"SimGrid {r.engine.upper()}"],
        ["model", r.model],
        ["messages", "-" if r.messages is None else f"{r.messages:,}"],
        ["bytes", "-" if r.bytes_total is None else fmt_bytes(r.bytes_total)],
        ["time precision", _precision_text(r)],
        ["wall time", f"{r.wall_s:.2f} s, peak memory {fmt_bytes(r.peak_memory_bytes)}"],
    ]
    links = r.link_summary(top)
    if links:
        rows += [["links used", f"{links['links_used']:,}"], ["busiest link", fmt_bytes(links["max_bytes"])],
                 ["busiest link busy", f"{100 * (links['max_utilisation'] or 0):.1f} % of the time"]]
    output.table("Simulation", ["", "value"], rows, justify_right_from=2)
    if len(r.step_end_s) > 1:
        output.table("Step ends", ["step", "simulated time"],
                     [[k, f"{v * 1e3:.6g} ms"] for k, v in sorted(r.step_end_s.items())])
    if links and links["busiest"]:
        output.table(f"Busiest links (of {links['links_used']:,})", ["link (node, direction)", "bytes"],
                     [[b["where"], fmt_bytes(b["bytes"])] for b in links["busiest"]])
    output.text(f"routing: {p.routing()}")
    if r.tie_messages:
        output.text(f"  {r.tie_messages:,} messages take a different route than the mapping metrics assume")
    for note in r.notes:
        output.text(f"note: {note}")
    if r.extra.get("program_stdout"):
        output.text(r.extra["program_stdout"].rstrip())


def _precision_text(r: SimResult) -> str:
    text = f"{r.extra['time_precision_s'] * 1e9:g} ns"
    if share := r.extra.get("time_precision_share"):
        text += f" (1/{1 / share:g} of the busiest link's {r.extra['link_bound_s'] * 1e3:.6g} ms)"
    if "simulated_instants" in r.extra:
        text += f", {r.extra['simulated_instants']:,} instants"
    return text


def run(args: argparse.Namespace) -> int:
    result = simulate(args)
    output.show(lambda: render(result, args.top), result.to_json(args.top), args.json)
    return 0
