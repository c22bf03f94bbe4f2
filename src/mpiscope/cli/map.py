"""Rank placement for a mesh/torus network (RMATT, 001): BISEM + simulated annealing, launcher files.

  mpiscope map --network torus:16x16x16 --pattern bruck:4096 --time-limit 300 --compare --out tng --json -
  mpiscope map --network torus:8x8 --matrix comm.mtx --workers 2 --out placement
  mpiscope map --network torus:8x8 --pattern stencil2d:8x8 --evaluate placement.csv
  mpiexec -n 3 mpiscope map --network torus:8x8x8 --pattern bruck:512 --time-limit 60   (MPI workers)
  mpiscope map --network torus:16x16x16 --pattern bruck:4096 --verify   (simulate identity and result, SimGrid)
"""

from __future__ import annotations

import argparse
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mpiscope import output, parallel
from mpiscope.errors import UsageError
from mpiscope.mapping import anneal as sa
from mpiscope.mapping.baselines import Baseline, baselines
from mpiscope.mapping.bisem import bisem, default_levels
from mpiscope.mapping.launchers import default_hosts, output_paths, read_hosts, write_launchers
from mpiscope.mapping.mapfile import read_map
from mpiscope.mapping.metrics import Metrics, evaluate, link_loads
from mpiscope.mapping.patterns import GENERATORS, Pattern, load_pattern
from mpiscope.mapping.topology import ROUTING, Network, parse_network

IntArray = npt.NDArray[np.int64]


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--network", required=True, help="torus:16x16x16, mesh:8x8, ... (any number of dimensions)")
    p.add_argument("--ranks-per-node", type=int, default=1, metavar="K")
    src = p.add_argument_group("communication pattern (exactly one)")
    src.add_argument("--pattern", help="generator: " + ", ".join(GENERATORS))
    src.add_argument("--matrix", type=Path, help="bytes[src][dst]: Matrix Market .mtx, .csv or .npy")
    src.add_argument("--trace", type=Path, help="an mpiscope trace directory")
    p.add_argument("--evaluate", type=Path, metavar="MAPFILE", help="only print the metrics of this rank,node CSV")
    p.add_argument("--compare", action="store_true", help="also compute the baselines, side by side")
    p.add_argument("--levels", type=int, help="BISEM bisections, MAX_ITRS (default: areas of 8 nodes)")
    p.add_argument("--start", choices=["best", "bisem"], default="best",
                   help="map the annealing starts from: BISEM's (001), or the best of BISEM's and the "
                        "--compare baselines' by the objective (default)")
    p.add_argument("--objective", choices=["eval", "hopbytes", "maxlink"], default="eval",
                   help="eval = sum of hops x maxlink (001, default)")
    p.add_argument("--window", help="RANGE, e.g. 3x3x3 (default: a BISEM area plus one node per dimension)")
    p.add_argument("--num-swaps", type=int, help="NUM_SWAPS, ranks permuted per move (default 2)")
    p.add_argument("--tries", type=int, help="permutations evaluated per round, the best kept (default 1)")
    p.add_argument("--time-limit", type=float, metavar="S", help="stop after S seconds in all (default: at convergence)")
    p.add_argument("--max-rounds", type=int, default=0, help="stop after this many rounds")
    p.add_argument("--target", type=float, help="stop when the objective reaches this value")
    p.add_argument("--cooling", type=float, default=0.95, help="T <- cooling x T every K rounds (default 0.95)")
    p.add_argument("--rounds-per-step", type=int, default=0, metavar="K",
                   help="K (default: 180 cooling steps over the time limit, else 20000)")
    p.add_argument("--t0", type=float, default=0.0, help="initial temperature (default: 50%% uphill acceptance)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (under mpiexec: the MPI ranks)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", metavar="PREFIX", help="write PREFIX.csv, .rankfile, .machinefile, .slurm-hosts, "
                                                   ".links.png and the state PREFIX.state.npz")
    p.add_argument("--hosts", type=Path, help="host name of each node (one per line in node order, or x:y:z name)")
    p.add_argument("--resume", type=Path, metavar="STATE", help="continue from a saved state")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.add_argument("--json", metavar="FILE", help="write every figure as JSON (- for stdout)")
    sim = p.add_argument_group("--verify: simulate the identity (x,y,z order) map and the result (SimGrid S4U)")
    sim.add_argument("--verify", action="store_true", help="print both simulated times and their ratio")
    sim.add_argument("--bandwidth", default="5GBps", help="per link and direction (default 5GBps, 001 §7.2)")
    sim.add_argument("--latency", default="120ns", help="per link (default 120ns, 001 §7.2)")
    sim.add_argument("--verify-steps", action="store_true",
                     help="simulate step after step instead of all steps at once (001 §7.2's one-step model)")


@dataclass
class MapRun:
    """The result of `mpiscope map`: what --verify (simulation) and the renderers use."""
    network: Network
    pattern: Pattern
    node_of_rank: IntArray
    metrics: Metrics
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    loads: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)


def _metrics(network: Network, pattern: Pattern, node: IntArray) -> tuple[Metrics, npt.NDArray[np.float64]]:
    return evaluate(network, pattern, node), link_loads(network, node, *pattern.pairs())


def _window(args: argparse.Namespace, network: Network, area: tuple[int, ...]) -> tuple[int, ...]:
    if args.window:
        try:
            w = tuple(int(x) for x in args.window.lower().split("x"))
        except ValueError:
            w = ()
        if len(w) != network.ndim or min(w) < 1:
            raise UsageError(f"--window {args.window} needs {network.ndim} positive sizes, e.g. "
                             + "x".join(["3"] * network.ndim))
        return w
    # SPEC §3 default RANGE: a BISEM area plus one node per dimension (001 §4.4: "slightly larger").
    return tuple(min(a + 1, d) for a, d in zip(area, network.dims))


def _check_outputs(args: argparse.Namespace) -> None:
    if not args.out or args.force:
        return
    paths = [*output_paths(args.out).values(), Path(args.out + ".links.png"), Path(args.out + ".state.npz")]
    existing = [str(p) for p in paths if p.exists() and (not args.resume or p != args.resume)]
    if existing:
        raise UsageError(f"{existing[0]} exists; choose another --out or add --force to overwrite")


def _engine(args: argparse.Namespace, problem: parallel.Problem, params: sa.AnnealParams) -> sa.Engine:
    if parallel.mpi_size() > 1:
        return parallel.MpiEngine(problem, params.window, params.num_swaps, params.seed)
    if args.workers > 1:
        return parallel.ProcessEngine(problem, args.workers, params.window, params.num_swaps, params.seed)
    return sa.LocalEngine(problem.kernel(params.seed), params)


def compute_map(args: argparse.Namespace) -> MapRun:
    """Everything `mpiscope map` computes, without printing; the final map is MapRun.node_of_rank."""
    t_start = time.monotonic()
    network = parse_network(args.network, args.ranks_per_node)
    pattern = load_pattern(args.pattern, args.matrix, args.trace)
    if pattern.nranks > network.slots:
        raise UsageError(f"the pattern has {pattern.nranks} ranks but {network.spec} with {network.ranks_per_node} "
                         f"rank(s) per node has {network.slots} slots; use a larger network or --ranks-per-node")
    hosts = read_hosts(args.hosts, network) if args.hosts else default_hosts(network)
    info: dict[str, Any] = {"hosts": hosts}
    if args.evaluate:
        node = read_map(args.evaluate, network, pattern.nranks)
        m, map_loads = _metrics(network, pattern, node)
        run = MapRun(network, pattern, node, m, info=info, loads={"map": map_loads})
        if args.compare:
            ident, iloads = _metrics(network, pattern, np.arange(pattern.nranks) // network.ranks_per_node)
            run.baselines["identity"] = ident.to_json()
            run.loads["identity"] = iloads
        return run
    _check_outputs(args)
    levels = default_levels(network) if args.levels is None else args.levels
    if levels < 0:
        raise UsageError(f"--levels {levels} must be 0 or more")
    t = time.monotonic()
    init, areas = bisem(network, pattern, levels, args.seed)
    info["bisem"] = {"levels": levels, "areas": len(areas), "area_size": list(areas[0].size),
                     "time_s": time.monotonic() - t}
    workers = parallel.mpi_size() - 1 if parallel.mpi_size() > 1 else args.workers
    params = sa.AnnealParams(objective=args.objective, window=_window(args, network, areas[0].size),
                             num_swaps=args.num_swaps or 2, tries=args.tries or 1, cooling=args.cooling,
                             rounds_per_step=args.rounds_per_step, t0=args.t0, seed=args.seed)
    if params.num_swaps < 2 or params.num_swaps > 64 or params.tries < 1:
        raise UsageError("--num-swaps must be 2..64 and --tries at least 1")
    found: dict[str, dict[str, Any]] = {}
    loads: dict[str, npt.NDArray[np.float64]] = {}
    info["start"] = "bisection"
    if args.compare:
        t = time.monotonic()
        with output.progress("baselines", total=None) as bar:
            maps = baselines(network, pattern, init, args.seed, on_start=lambda n: bar.update(description=n))
        for b in maps:
            found[b.name] = _baseline_json(network, pattern, b, loads)
        info["baselines_time_s"] = time.monotonic() - t
        if args.start == "best":
            # mpiscope default, not in 001: anneal from the best map at hand, so that the time limit is
            # spent improving on it rather than re-finding it.
            key = {"hopbytes": "hop_bytes"}.get(args.objective, args.objective)
            top = min((b for b in maps if b.node_of_rank is not None), key=lambda b: found[b.name][key])
            if found[top.name][key] < found["bisection"][key] and top.node_of_rank is not None:
                init, info["start"] = top.node_of_rank, top.name
    fingerprint = f"{network.spec}/{network.ranks_per_node}/{pattern.name}/{pattern.nranks}/{params.objective}"
    resumed = sa.AnnealState.load(args.resume, fingerprint) if args.resume else None
    if resumed:
        resumed.params.rounds_per_step = args.rounds_per_step or resumed.params.rounds_per_step
        params = resumed.params
    src, dst, w = pattern.pairs()
    problem = parallel.Problem(network, pattern.nranks, src, dst, w, resumed.current if resumed else init,
                               params.objective, params.tries)
    engine = _engine(args, problem, params)
    try:
        if resumed:
            state = resumed
            sa.resume_kernel(engine.kernel, state)
        else:
            state = sa.start_state(engine.kernel, params, init, refine=info["start"] != "bisection")
        deadline = None
        if args.time_limit is not None:
            # Keep a margin for the final metrics, the histogram and the files.
            deadline = t_start + args.time_limit - max(2.0, 0.03 * args.time_limit)
        scale = engine.kernel.scale
        with output.progress("annealing", total=1.0) as bar:
            def show(st: sa.AnnealState, temp: float) -> None:
                gain = 1 - st.best_objective / st.initial_objective if st.initial_objective else 0.0
                done = ((time.monotonic() - t_start) / args.time_limit if args.time_limit
                        else st.step / max(1, sa.COOLING_STEPS))
                bar.update(completed=min(done, 1.0), description=f"annealing: {args.objective} "
                           f"{st.best_objective / scale:.4g} (-{100 * gain:.1f}%), T {temp / scale:.3g}")
            t = time.monotonic()
            state = sa.anneal(engine, state, deadline=deadline, max_rounds=args.max_rounds, target=(
                args.target * scale if args.target is not None else None), on_progress=show)
        info["anneal"] = sa.summary(state, scale) | {"time_s": time.monotonic() - t, "workers": workers,
                                                      "window": list(params.window), "num_swaps": params.num_swaps,
                                                      "tries": params.tries}
        if args.out:
            state.save(args.out + ".state.npz", fingerprint)
            info["state"] = args.out + ".state.npz"
    finally:
        engine.close()
    best = state.best
    m, result_loads = _metrics(network, pattern, best)
    run = MapRun(network, pattern, best, m, baselines=found, info=info, loads={"result": result_loads} | loads)
    info["wall_time_s"] = time.monotonic() - t_start
    return run


def _baseline_json(network: Network, pattern: Pattern, b: Baseline,
                   loads: dict[str, npt.NDArray[np.float64]]) -> dict[str, Any]:
    if b.node_of_rank is None:
        return {"available": False, "note": b.note}
    m, link = _metrics(network, pattern, b.node_of_rank)
    if b.name in ("identity", "bisection", "scotch"):
        loads[b.name] = link
    return m.to_json() | {"available": True, "note": b.note}


def reductions(result: Metrics, identity: dict[str, Any]) -> dict[str, float]:
    """Fractional reduction of each metric against the identity (x,y,z order) map."""
    return {k: 1 - getattr(result, k) / identity[k] if identity[k] else 0.0 for k in ("hop_bytes", "maxlink", "eval")}


def to_json(run: MapRun, run_id: str) -> dict[str, Any]:
    info = {k: v for k, v in run.info.items() if k != "hosts"}
    payload: dict[str, Any] = {
        "schema": "mpiscope.map/1", "run_id": run_id, "network": run.network.spec,
        "ranks_per_node": run.network.ranks_per_node, "pattern": run.pattern.name, "ranks": run.pattern.nranks,
        "routing": ROUTING, "result": run.metrics.to_json(), "baselines": run.baselines, **info}
    if "identity" in run.baselines:
        payload["reduction_vs_identity"] = reductions(run.metrics, run.baselines["identity"])
    return payload


def _change(value: float, ref: float) -> str:
    return f"{100 * (value / ref - 1):+.1f}%" if ref else "-"


def render(run: MapRun, payload: dict[str, Any]) -> None:
    rows = [("result", run.metrics.to_json())] + list(run.baselines.items())
    ident = run.baselines.get("identity")
    table, notes = [], []
    for name, m in rows:
        if m.get("note"):
            notes.append(f"{name}: {m['note']}")
        if not m.get("available", True):
            table.append([name, "-", "-", "-", "-", "-", "-"])
            continue
        table.append([name, f"{m['hop_bytes']:.4g}", output.fmt_bytes(m["maxlink"]), f"{m['eval']:.4g}",
                      f"{m['avg_dilation']:.2f}", _change(m["maxlink"], ident["maxlink"]) if ident else "-",
                      _change(m["eval"], ident["eval"]) if ident else "-"])
    output.table(f"Rank map of {run.pattern.name} on {run.network.spec} ({run.pattern.nranks} ranks)",
                 ["map", "hop-bytes", "maxlink", "eval", "dilation", "maxlink vs id", "eval vs id"], table)
    for n in notes:
        output.text(n)
    output.text(f"routing: {ROUTING}")
    if "reduction_vs_identity" in payload:
        red = payload["reduction_vs_identity"]
        output.text(f"result vs identity: maxlink {-100 * red['maxlink']:+.1f}%, eval {-100 * red['eval']:+.1f}%, "
                    f"hop-bytes {-100 * red['hop_bytes']:+.1f}%")
    if "anneal" in payload:
        a = payload["anneal"]
        output.text(f"took {payload['wall_time_s']:.1f} s: BISEM {payload['bisem']['time_s']:.1f} s, "
                    f"baselines {payload.get('baselines_time_s', 0):.1f} s, annealing {a['time_s']:.1f} s "
                    f"({a['moves_evaluated']:,} moves evaluated, {a['moves_accepted']:,} accepted; "
                    f"stopped: {a['stop_reason']})")
    for kind, path in payload.get("outputs", {}).items():
        output.text(f"{kind}: {path}")
    if "verify" in payload:
        v, paper = payload["verify"], payload["verify"]["paper"]
        output.table(f"Simulated ({v['mode']}, SimGrid S4U, {v['network']}, {v['bandwidth_Bps'] / 1e9:g} GB/s, "
                     f"{v['latency_s'] * 1e9:g} ns)", ["map", "simulated time", "paper: 4096-rank Bruck, OpenNSIM"],
                     [["identity (x,y,z order)", f"{v['identity_time_s'] * 1e3:.4g} ms",
                       f"{paper['identity_time_s'] * 1e3:g} ms"],
                      ["result", f"{v['optimised_time_s'] * 1e3:.4g} ms", f"{paper['optimised_time_s'] * 1e3:g} ms"],
                      ["ratio", f"{v['ratio']:.3f}", f"{paper['ratio']:.3f}"]])
        output.text(f"simulated in {v['wall_s']:.1f} s; {v['model']}; routing: {v['identity']['routing']}")


def run(args: argparse.Namespace) -> int:
    if parallel.mpi_size() > 1 and parallel.mpi_rank() != 0:
        parallel.mpi_worker()
        return 0
    try:
        run_ = compute_map(args)
    finally:
        if parallel.mpi_size() > 1:
            parallel.mpi_release_workers()      # no-op once the annealing engine has let them go
    payload = to_json(run_, uuid.uuid4().hex[:12])
    if args.out and not args.evaluate:
        paths = write_launchers(args.out, run_.network, run_.node_of_rank, run_.info["hosts"])
        from mpiscope.mapping.plot import link_histogram_png

        png = Path(args.out + ".links.png")
        link_histogram_png(png, run_.loads, ROUTING)
        payload["outputs"] = {k: str(v) for k, v in paths.items()} | {"histogram": str(png)}
        if "state" in payload:
            payload["outputs"]["state"] = payload.pop("state")
    if args.verify:
        payload["verify"] = _verify(args, run_)
    output.show(lambda: render(run_, payload), payload, args.json)
    return 0


def _verify(args: argparse.Namespace, run_: MapRun) -> dict[str, Any]:
    """SPEC §4: the x,y,z-order map and the result through the simulator, both times and their ratio."""
    from mpiscope.sim.placement import make_platform
    from mpiscope.sim.s4u import slow_warning
    from mpiscope.sim.verify import verify_map

    platform = make_platform(args.network, args.ranks_per_node, args.bandwidth, args.latency)
    if warning := slow_warning(run_.pattern, "optimised", args.verify_steps):
        output.warn(warning)
    return verify_map(platform, run_.pattern, run_.node_of_rank, steps=args.verify_steps)[2]
