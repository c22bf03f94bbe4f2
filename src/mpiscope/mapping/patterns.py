"""Communication patterns: who sends how many bytes to whom.

A Pattern holds one entry per message (src, dst, bytes, step); mapping only
needs the bytes per ordered pair (`pairs()`). Sources: the generators of
001 §7.2 and SPEC §3 (`parse_pattern`), a matrix file (`load_matrix`) or an
mpiscope trace (`from_trace`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mpiscope.errors import UsageError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# 001 §7.2: the Allgather block is 2048 B, the InfiniBand packet size; the
# other generators use the same default message size.
BASE_BYTES = 2048

GENERATORS = ("bruck:P[:base_bytes[:k0]]", "ring:P[:bytes]", "stencil2d:XxY[:bytes][:periodic]",
              "stencil3d:XxYxZ[:bytes][:periodic]", "alltoall:P[:bytes]", "recursive-doubling:P[:base_bytes]",
              "binomial-bcast:P[:bytes]", "random:P:degree:seed[:bytes]")


@dataclass(frozen=True)
class Pattern:
    name: str
    nranks: int
    src: IntArray
    dst: IntArray
    bytes: npt.NDArray[np.float64] | IntArray
    step: IntArray

    def pairs(self) -> tuple[IntArray, IntArray, FloatArray]:
        """(src, dst, bytes) summed per ordered pair, pairs with no bytes and self-messages dropped."""
        keep = (self.src != self.dst) & (np.asarray(self.bytes) > 0)
        key = self.src[keep] * self.nranks + self.dst[keep]
        uniq, inv = np.unique(key, return_inverse=True)
        total = np.bincount(inv, weights=np.asarray(self.bytes, dtype=np.float64)[keep], minlength=uniq.size)
        return ((uniq // self.nranks).astype(np.int64), (uniq % self.nranks).astype(np.int64),
                total.astype(np.float64))

    @property
    def total_bytes(self) -> float:
        return float(np.asarray(self.bytes, dtype=np.float64).sum())


def _make(name: str, nranks: int, src: npt.ArrayLike, dst: npt.ArrayLike, nbytes: npt.ArrayLike,
          step: npt.ArrayLike | None = None) -> Pattern:
    s = np.asarray(src, dtype=np.int64).ravel()
    d = np.asarray(dst, dtype=np.int64).ravel()
    b = np.broadcast_to(np.asarray(nbytes), s.shape).copy()
    k = np.zeros_like(s) if step is None else np.asarray(step, dtype=np.int64).ravel()
    return Pattern(name, nranks, s, d, b, k)


def _cat(parts: list[IntArray]) -> IntArray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _steps(p: int) -> int:
    return max(1, math.ceil(math.log2(p))) if p > 1 else 0


def bruck(p: int, base: int = BASE_BYTES, k0: int = 0) -> Pattern:
    """001 §7.2 one-step Bruck allgather: at step k rank i sends base·2^(k+k0) B to (i − 2^k) mod P.

    All ceil(log2 P) steps are injected at once, as in the paper. For P not a
    power of two the last step carries only the P − 2^k blocks still missing
    (Bruck et al.); for powers of two this is the paper's 2048·2^k. k0 = 1 is
    the other reading of "2048×2^n at step n" (n from 1), which doubles every size.
    """
    ranks = np.arange(p, dtype=np.int64)
    src, dst, nbytes, step = [], [], [], []
    for k in range(_steps(p)):
        blocks = min(2**k, p - 2**k)
        src.append(ranks)
        dst.append((ranks - 2**k) % p)
        nbytes.append(np.full(p, base * blocks * 2**k0, dtype=np.int64))
        step.append(np.full(p, k, dtype=np.int64))
    return _make(f"bruck:{p}", p, _cat(src), _cat(dst), _cat(nbytes),
                 _cat(step))


def ring(p: int, nbytes: int = BASE_BYTES) -> Pattern:
    r = np.arange(p)
    return _make(f"ring:{p}", p, r, (r + 1) % p, nbytes)


def stencil(dims: tuple[int, ...], nbytes: int = BASE_BYTES, periodic: bool = False) -> Pattern:
    """Halo exchange on a Cartesian grid (rank = x + X·(y + Y·z)): each rank sends to its 2·ndim neighbours."""
    p = int(np.prod(dims))
    ranks = np.arange(p, dtype=np.int64)
    strides = np.concatenate(([1], np.cumprod(dims[:-1]))).astype(np.int64)
    coords = (ranks[:, None] // strides) % np.asarray(dims)
    src, dst = [], []
    for d, size in enumerate(dims):
        for delta in (1, -1):
            c = coords[:, d] + delta
            ok = np.ones(p, dtype=bool) if periodic else (c >= 0) & (c < size)
            if size == 1 or (periodic and size == 2 and delta == -1):
                continue                       # no neighbour, or the same one twice
            src.append(ranks[ok])
            dst.append(ranks[ok] + ((c[ok] % size) - coords[ok, d]) * strides[d])
    kind = f"stencil{len(dims)}d"
    return _make(f"{kind}:{'x'.join(map(str, dims))}", p, _cat(src), _cat(dst), nbytes)


def alltoall(p: int, nbytes: int = BASE_BYTES) -> Pattern:
    s, d = np.divmod(np.arange(p * p, dtype=np.int64), p)
    keep = s != d
    return _make(f"alltoall:{p}", p, s[keep], d[keep], nbytes)


def recursive_doubling(p: int, base: int = BASE_BYTES) -> Pattern:
    """Recursive-doubling allgather: at step k, i exchanges its 2^k gathered blocks with i XOR 2^k."""
    r = np.arange(p, dtype=np.int64)
    src, dst, nbytes, step = [], [], [], []
    for k in range(_steps(p)):
        peer = r ^ (1 << k)
        ok = peer < p
        src.append(r[ok])
        dst.append(peer[ok])
        nbytes.append(np.full(int(ok.sum()), base * 2**k, dtype=np.int64))
        step.append(np.full(int(ok.sum()), k, dtype=np.int64))
    return _make(f"recursive-doubling:{p}", p, _cat(src), _cat(dst),
                 _cat(nbytes), _cat(step))


def binomial_bcast(p: int, nbytes: int = BASE_BYTES) -> Pattern:
    """Binomial broadcast from rank 0: at step k every rank i < 2^k sends the whole buffer to i + 2^k."""
    src, dst, step = [], [], []
    for k in range(_steps(p)):
        s = np.arange(min(2**k, p - 2**k), dtype=np.int64)
        src.append(s)
        dst.append(s + 2**k)
        step.append(np.full(s.size, k, dtype=np.int64))
    return _make(f"binomial-bcast:{p}", p, _cat(src), _cat(dst), nbytes,
                 _cat(step))


def random_pattern(p: int, degree: int, seed: int, nbytes: int = BASE_BYTES) -> Pattern:
    """Each rank sends to `degree` distinct random peers, 1 to 8 times `nbytes` each (uniform)."""
    if degree >= p:
        raise UsageError(f"random pattern degree {degree} must be below the rank count {p}")
    rng = np.random.default_rng(seed)
    offsets = np.array([rng.choice(p - 1, size=degree, replace=False) + 1 for _ in range(p)], dtype=np.int64)
    src = np.repeat(np.arange(p, dtype=np.int64), degree)
    dst = (src + offsets.ravel()) % p
    return _make(f"random:{p}:{degree}:{seed}", p, src, dst, nbytes * rng.integers(1, 9, size=src.size))


def _int(field: str, spec: str, what: str) -> int:
    if not re.fullmatch(r"\d+", field):
        raise UsageError(f"pattern {spec!r}: {what} {field!r} is not a whole number; see --pattern help")
    return int(field)


def parse_pattern(spec: str) -> Pattern:
    """One of GENERATORS, e.g. "bruck:4096", "stencil2d:64x64:periodic", "random:512:6:1"."""
    name, _, rest = spec.strip().partition(":")
    f = rest.split(":") if rest else []
    if not f:
        raise UsageError(f"pattern {spec!r} needs a size, e.g. {name}:64; the generators are: "
                         + ", ".join(GENERATORS))
    if name in ("stencil2d", "stencil3d"):
        ndim = int(name[7])
        dims = tuple(_int(x, spec, "size") for x in f[0].split("x"))
        if len(dims) != ndim or min(dims) < 1:
            raise UsageError(f"pattern {spec!r} needs {ndim} positive sizes, e.g. {name}:" + "x".join(["8"] * ndim))
        extra = f[1:]
        periodic = "periodic" in extra
        extra = [x for x in extra if x != "periodic"]
        nbytes = _int(extra[0], spec, "bytes") if extra else BASE_BYTES
        return stencil(dims, nbytes, periodic)
    p = _int(f[0], spec, "rank count")
    if p < 1:
        raise UsageError(f"pattern {spec!r} needs at least one rank")
    args = [_int(x, spec, "argument") for x in f[1:]]
    simple = {"ring": ring, "alltoall": alltoall, "recursive-doubling": recursive_doubling,
              "binomial-bcast": binomial_bcast}
    if name in simple and len(args) <= 1:
        return simple[name](p, *args)
    if name == "bruck" and len(args) <= 2 and (len(args) < 2 or args[1] in (0, 1)):
        return bruck(p, *args)
    if name == "random" and len(args) in (2, 3):
        return random_pattern(p, *args)
    raise UsageError(f"pattern {spec!r} is not understood; the generators are: " + ", ".join(GENERATORS))


def _from_dense(m: npt.NDArray[np.float64], name: str, path: Path) -> Pattern:
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise UsageError(f"matrix {path} has shape {m.shape}, not square; give bytes[src][dst] for every rank pair")
    s, d = np.nonzero(m)
    return _make(name, m.shape[0], s, d, m[s, d].astype(np.float64))


def _check(p: Pattern, path: Path) -> Pattern:
    b = np.asarray(p.bytes, dtype=np.float64)
    if not np.all(np.isfinite(b)) or (b < 0).any():
        raise UsageError(f"matrix {path} has negative or non-numeric byte counts; every entry must be >= 0")
    if p.src.size and (min(p.src.min(), p.dst.min()) < 0 or max(p.src.max(), p.dst.max()) >= p.nranks):
        raise UsageError(f"matrix {path} names a rank outside 0..{p.nranks - 1}; ranks count from 0")
    return p


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(nan|inf)", re.IGNORECASE)


def _load_csv(path: Path) -> Pattern:
    """A dense square CSV (bytes[src][dst]), or an edge list with a header naming src,dst,bytes."""
    text = path.read_text(errors="replace")
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    try:
        if not all(_NUMBER.fullmatch(x.strip()) for x in first.split(",")):
            cols = [c.strip().lower() for c in first.split(",")]
            if not {"src", "dst", "bytes"} <= set(cols):
                raise ValueError("header")
            data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2, dtype=np.float64)
            s, d, b = (data[:, cols.index(c)] for c in ("src", "dst", "bytes"))
            if (s != np.round(s)).any() or (d != np.round(d)).any():
                raise ValueError("ranks")
            n = int(max(s.max(), d.max())) + 1 if s.size else 0
            return _make(f"matrix:{path.name}", n, s.astype(np.int64), d.astype(np.int64), b)
        m = np.loadtxt(path, delimiter=",", ndmin=2, dtype=np.float64)
    except (ValueError, IndexError) as e:
        raise UsageError(f"matrix {path} is not a numeric CSV ({e}); write a square bytes matrix, or an edge "
                         f"list with the header src,dst,bytes") from e
    return _from_dense(m, f"matrix:{path.name}", path)


def load_matrix(path: str | Path) -> Pattern:
    """bytes between ranks from Matrix Market (.mtx), CSV (.csv) or NumPy (.npy)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"matrix file {path} does not exist; give a .mtx, .csv or .npy file")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        try:
            m = np.load(path, allow_pickle=False)
        except ValueError as e:
            raise UsageError(f"matrix {path} is not a NumPy array file ({e}); save it with numpy.save") from e
        if not np.issubdtype(m.dtype, np.number):
            raise UsageError(f"matrix {path} holds {m.dtype}, not numbers; save a numeric square array")
        return _check(_from_dense(m.astype(np.float64), f"matrix:{path.name}", path), path)
    if suffix == ".mtx":
        import scipy.io
        import scipy.sparse

        try:
            coo = scipy.sparse.coo_matrix(scipy.io.mmread(path))
        except (ValueError, IndexError, TypeError) as e:
            raise UsageError(f"matrix {path} is not valid Matrix Market ({e}); check its header and entries") from e
        if coo.shape[0] != coo.shape[1]:
            raise UsageError(f"matrix {path} has shape {coo.shape}, not square; give one row and column per rank")
        return _check(_make(f"matrix:{path.name}", coo.shape[0], coo.row, coo.col, coo.data.astype(np.float64)),
                      path)
    if suffix == ".csv":
        return _check(_load_csv(path), path)
    raise UsageError(f"matrix {path} has an unknown extension {suffix!r}; use .mtx, .csv or .npy")


def from_trace(directory: str | Path) -> Pattern:
    """Bytes per (src, dst) of the matched point-to-point messages of an mpiscope trace."""
    import polars as pl

    from mpiscope.trace import open_trace

    trace = open_trace(directory)
    m = trace.messages().group_by("src", "dst").agg(pl.col("bytes").sum()).collect()
    return _make(f"trace:{Path(directory).name}", trace.ranks, m["src"].to_numpy(), m["dst"].to_numpy(),
                 m["bytes"].to_numpy().astype(np.int64))


def load_pattern(pattern: str | None = None, matrix: str | Path | None = None,
                 trace: str | Path | None = None) -> Pattern:
    given = [x for x in (pattern, matrix, trace) if x is not None]
    if len(given) != 1:
        raise UsageError("give exactly one communication pattern: --pattern GENERATOR, --matrix FILE or "
                         "--trace DIR")
    if pattern is not None:
        return parse_pattern(pattern)
    if matrix is not None:
        return load_matrix(matrix)
    return from_trace(trace)  # type: ignore[arg-type]
