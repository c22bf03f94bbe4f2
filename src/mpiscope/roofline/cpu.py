"""Theoretical peak of this machine's CPU, estimated from /proc/cpuinfo and cpufreq.

peak = cores x clock x SIMD width (doubles) x 2 if FMA x FMA units per core; the clock is the
faster of the listed one and the one measured by `roofline_mm clock`.
Linux does not expose the number of FMA pipes; 2 is what current server
cores have (Intel since Haswell, AMD since Zen 2, Arm Neoverse), so it is an
assumption, stated with the estimate, and `--fma-units` overrides it.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, replace
from pathlib import Path

from mpiscope.errors import UsageError

CPUINFO = Path("/proc/cpuinfo")
MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")


@dataclass(frozen=True)
class CpuPeak:
    model: str
    cores: int              # physical cores of the host (SMT siblings share the FP units)
    ghz: float
    clock_source: str
    simd_doubles: int
    fma: bool
    fma_units: int

    @property
    def gflops_per_core(self) -> float:
        return self.ghz * self.simd_doubles * (2 if self.fma else 1) * self.fma_units

    def describe(self, cores: int) -> str:
        return (f"estimate: {cores} core(s) x {self.ghz:.3g} GHz ({self.clock_source}) x {self.simd_doubles} "
                f"doubles per SIMD op x {2 if self.fma else 1} (FMA) x {self.fma_units} FP unit(s) per core "
                f"[{self.model}]")


def _blocks(text: str) -> list[dict[str, str]]:
    out = []
    for block in text.strip().split("\n\n"):
        entry = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip().lower()] = value.strip()
        if entry:
            out.append(entry)
    return out


def parse_cpuinfo(text: str, max_khz: str | None = None, fma_units: int = 2) -> CpuPeak:
    procs = [b for b in _blocks(text) if "processor" in b]
    if not procs:
        raise UsageError("/proc/cpuinfo lists no processor; give the peak yourself with --peak-gflops")
    cores = len({(p.get("physical id", "0"), p.get("core id", p["processor"])) for p in procs})
    first = procs[0]
    flags = set((first.get("flags") or first.get("features") or "").split())
    if "avx512f" in flags:
        width = 8
    elif "avx" in flags:
        width = 4
    else:  # SSE2 on x86-64, NEON (asimd) on aarch64: 128 bits
        width = 2
    fma = bool(flags & {"fma", "asimd", "fphp"}) or platform.machine() == "aarch64"
    if max_khz and max_khz.strip().isdigit():
        ghz, source = int(max_khz) / 1e6, "cpufreq maximum"
    elif "cpu mhz" in first:
        ghz, source = float(first["cpu mhz"]) / 1e3, "/proc/cpuinfo, current clock"
    else:
        raise UsageError("no clock frequency in /proc/cpuinfo or cpufreq; give the peak with --peak-gflops")
    model = first.get("model name") or first.get("cpu part") or platform.processor() or "unknown CPU"
    return CpuPeak(model, cores, ghz, source, width, fma, fma_units)


def with_clock(cpu: CpuPeak, measured_ghz: float) -> CpuPeak:
    """Use the measured core clock where it is faster than the listed one (boost clocks; a VM's
    /proc/cpuinfo often lists only the TSC rate), so that the peak stays an upper bound."""
    if measured_ghz <= cpu.ghz:
        return cpu
    return replace(cpu, ghz=measured_ghz,
                   clock_source=f"measured with a dependent add chain; {cpu.clock_source} says {cpu.ghz:.3g} GHz")


def read_cpu(fma_units: int = 2) -> CpuPeak:
    try:
        text = CPUINFO.read_text()
    except OSError as e:
        raise UsageError(f"cannot read {CPUINFO} ({e.strerror}); give the peak with --peak-gflops") from e
    max_khz = MAX_FREQ.read_text() if MAX_FREQ.is_file() else None
    return parse_cpuinfo(text, max_khz, fma_units)
