"""Throughput model for heterogeneous clusters: iterations/s of a job type on n GPUs of a GPU type.

A job's progress is ``throughput × time``. :class:`ThroughputTable` holds measured whole-gang
throughputs (iterations/s of the whole job on ``num_gpus`` GPUs, not per GPU) per (model, GPU type,
GPU count) and turns them into dense per-cluster rate arrays for the engine::

    from fastblox.throughput import ThroughputTable
    tab = ThroughputTable.builtin()                  # Gavel's published table (v100, p100, k80)
    r = tab.rates(cluster.gpu_types, max_gpus=8)     # float64 [M, T, 9], iterations/s
    codes = tab.model_codes(workload.extra["model"]) # int64, -1 = model not in the table
    speed = tab.type_speed(cluster.gpu_types)        # for jobs whose model is unknown

Between measured GPU counts the per-GPU throughput is interpolated linearly; beyond the largest
(below the smallest) measured count it is held at that count's per-GPU value (``docs/throughput.md``).
NaN always means "not measured / unknown", never zero.
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import ConfigError

#: the built-in table, generated from Gavel's file (recipe in datasets/README.md)
BUILTIN_FILE = "gavel_throughputs.csv.gz"
GAVEL_COMMIT = "c4fa40097339e9608ab71fd64c8bdea96a5e4a4c"
GAVEL_SOURCE = (
    "Gavel (Narayanan et al., 'Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning Workloads', "
    f"OSDI 2020): stanford-futuredata/gavel scheduler/simulation_throughputs.json at commit {GAVEL_COMMIT}, "
    "MIT License; isolated ('null') throughputs; <type>_unconsolidated entries as multi-node throughputs"
)

REQUIRED_COLUMNS = ("model", "gpu_type", "num_gpus", "iters_per_s")
OPTIONAL_COLUMNS = ("multi_node_iters_per_s", "multi_node_factor")
CSV_COLUMNS = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
UNCONSOLIDATED = "_unconsolidated"  # Gavel's suffix for a worker type whose gang spans servers
_SPACE = re.compile(r"\s+")


def model_key(name) -> str | None:
    """The matching key of a model name: case folded, whitespace collapsed; None if not a string."""
    if not isinstance(name, str):
        return None
    key = _SPACE.sub(" ", name).strip().casefold()
    return key or None


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.setflags(write=False)
    return a


def _interp_at(iters_1d: np.ndarray, sizes: np.ndarray, n: np.ndarray, first: int = 1) -> np.ndarray:
    """Whole-gang rates at GPU counts ``n`` (float64, each >= 1) from one (model, type)'s [S]
    measurements: per-GPU throughput interpolated linearly between measured sizes >= ``first`` and
    held at the nearest one's per-GPU value outside them (np.interp's end behaviour); measured sizes
    exact. All NaN when nothing is measured."""
    ok = np.isfinite(iters_1d) & (sizes >= first)
    if not ok.any():
        return np.full(n.shape, np.nan)
    xs = sizes[ok].astype(np.float64)
    ys = iters_1d[ok]
    out = n * np.interp(n, xs, ys / xs)
    # measured sizes exact (n * (y / n) may differ from y in the last bit)
    hit = np.searchsorted(xs, n)
    hit_ok = hit < xs.shape[0]
    hit_ok[hit_ok] = xs[hit[hit_ok]] == n[hit_ok]
    out[hit_ok] = ys[hit[hit_ok]]
    return out


def _interp_rates(iters: np.ndarray, sizes: np.ndarray, max_gpus: int, first: int = 1) -> np.ndarray:
    """[M, T, max_gpus + 1] whole-gang rates from [M, T, S] measurements (NaN = not measured) by
    :func:`_interp_at`; n = 0 -> 0."""
    m_, t_, _ = iters.shape
    out = np.full((m_, t_, max_gpus + 1), np.nan)
    out[:, :, 0] = 0.0
    n = np.arange(1, max_gpus + 1, dtype=np.float64)
    for m in range(m_):
        for t in range(t_):
            out[m, t, 1:] = _interp_at(iters[m, t], sizes, n, first)
    return out


@dataclass(frozen=True, eq=False)
class ThroughputTable:
    """Measured whole-gang throughputs per (model, GPU type, GPU count); NaN = not measured."""

    models: tuple[str, ...]        # M job types, names as in the source ("ResNet-18 (batch size 32)")
    gpu_types: tuple[str, ...]     # T GPU type names, lower case ("v100", "p100", "k80")
    sizes: tuple[int, ...]         # S measured GPU counts, ascending (Gavel: 1, 2, 4, 8)
    iters_per_s: np.ndarray        # float64 [M, T, S]: whole-gang iterations/s on sizes[s] GPUs of type t; NaN = not measured
    multi_node_factor: np.ndarray  # float64 [M]: throughput multiplier when the gang spans >1 node; NaN = unknown
    source: str                    # citation
    #: float64 [M, T, S]: whole-gang iterations/s when the sizes[s] GPUs span more than one node
    #: (Gavel's ``<type>_unconsolidated``); NaN = not measured. None -> all NaN.
    multi_node_iters_per_s: np.ndarray | None = None
    _codes: dict = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        def bad(msg):
            raise ConfigError(f"ThroughputTable: {msg}")

        models = tuple(str(m) for m in self.models)
        types = tuple(str(t) for t in self.gpu_types)
        sizes = tuple(int(s) for s in self.sizes)
        m_, t_, s_ = len(models), len(types), len(sizes)
        if not (m_ and t_ and s_):
            bad(f"needs at least one model, GPU type and size (has {m_}, {t_}, {s_})")
        if any(s < 1 for s in sizes) or any(b <= a for a, b in zip(sizes, sizes[1:])):
            bad(f"sizes must be whole GPU counts >= 1, strictly ascending; got {sizes}")
        if any(t != t.strip().lower() or not t for t in types) or len(set(types)) != t_:
            bad(f"gpu_types must be distinct, non-empty, lower case; got {types}")
        codes = {}
        for i, name in enumerate(models):
            key = model_key(name)
            if key is None:
                bad(f"model {i} has an empty name")
            if key in codes:
                bad(f"models {models[codes[key]]!r} and {name!r} are the same name (case and spaces are ignored)")
            codes[key] = i
        it = np.array(self.iters_per_s, dtype=np.float64)
        mn = np.full_like(it, np.nan) if self.multi_node_iters_per_s is None else np.array(
            self.multi_node_iters_per_s, dtype=np.float64)
        f = np.array(self.multi_node_factor, dtype=np.float64).reshape(-1) if np.ndim(self.multi_node_factor) \
            else np.full(m_, float(self.multi_node_factor))
        for what, a in (("iters_per_s", it), ("multi_node_iters_per_s", mn)):
            if a.shape != (m_, t_, s_):
                bad(f"{what} has shape {a.shape}; expected (models, gpu_types, sizes) = {(m_, t_, s_)}")
            with np.errstate(invalid="ignore"):
                if (np.isinf(a) | (a <= 0)).any():
                    idx = tuple(int(i) for i in np.argwhere(np.isinf(a) | (a <= 0))[0])
                    bad(f"{what}[{models[idx[0]]!r}, {types[idx[1]]!r}, {sizes[idx[2]]}] = {a[idx]!r}; "
                        "throughputs must be > 0 and finite (NaN = not measured)")
        if f.shape != (m_,):
            bad(f"multi_node_factor has shape {f.shape}; expected ({m_},)")
        with np.errstate(invalid="ignore"):
            if (~np.isnan(f) & ~((f > 0) & (f <= 1))).any():
                i = int(np.flatnonzero(~np.isnan(f) & ~((f > 0) & (f <= 1)))[0])
                bad(f"multi_node_factor of {models[i]!r} is {f[i]!r}; it must be in (0, 1] (NaN = unknown)")
        orphan = np.isfinite(mn) & np.isnan(it)
        if orphan.any():
            idx = tuple(int(i) for i in np.argwhere(orphan)[0])
            bad(f"{models[idx[0]]!r} on {sizes[idx[2]]} {types[idx[1]]} GPU(s) has a multi-node throughput "
                "but no iters_per_s")
        meas = np.isfinite(it)
        for axis, names, what in ((0, models, "model"), (1, types, "GPU type"), (2, sizes, "size")):
            other = tuple(a for a in range(3) if a != axis)
            empty = ~meas.any(axis=other)
            if empty.any():
                bad(f"{what} {names[int(np.flatnonzero(empty)[0])]!r} has no measurement")
        set_ = object.__setattr__
        set_(self, "models", models)
        set_(self, "gpu_types", types)
        set_(self, "sizes", sizes)
        set_(self, "iters_per_s", _readonly(it))
        set_(self, "multi_node_iters_per_s", _readonly(mn))
        set_(self, "multi_node_factor", _readonly(f))
        set_(self, "source", str(self.source))
        set_(self, "_codes", codes)

    @property
    def name(self) -> str:
        """Short label for run summaries: ``"gavel"`` for the built-in table, else :attr:`source`."""
        return "gavel" if self.source == GAVEL_SOURCE else self.source

    # ------------------------------------------------------------------ construction
    @classmethod
    def builtin(cls) -> "ThroughputTable":
        """Gavel's published throughputs (v100, p100, k80), from the bundled data file; cached."""
        return _builtin()

    @classmethod
    def read(cls, path) -> "ThroughputTable":
        """A table from a CSV (``model,gpu_type,num_gpus,iters_per_s[,multi_node_iters_per_s]
        [,multi_node_factor]``, gzip allowed) or Gavel's throughputs JSON; ConfigError names the
        file, line and column of the first problem."""
        data = _read_bytes(path)
        text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
        if not text.strip():
            raise ConfigError(f"{path}: is empty; expected a CSV with columns {','.join(REQUIRED_COLUMNS)}"
                              f"[,{','.join(OPTIONAL_COLUMNS)}] or Gavel's throughputs JSON")
        if text.lstrip()[:1] == "{":
            return _from_gavel_json(path, text)
        return _from_csv(path, data)

    def subset(self, gpu_types=None, models=None) -> "ThroughputTable":
        """The table restricted to (and ordered as) the given GPU types and/or models; rows, types and
        sizes left without any measurement are dropped."""
        ti = list(range(len(self.gpu_types))) if gpu_types is None else list(self._type_index(gpu_types))
        if models is None:
            mi = list(range(len(self.models)))
        else:
            names = [models] if isinstance(models, str) else list(models)
            codes = self.model_codes(names)
            if (codes < 0).any():
                raise ConfigError(f"model {names[int(np.flatnonzero(codes < 0)[0])]!r} is not in the throughput "
                                  f"table; it has {len(self.models)} models, e.g. {', '.join(self.models[:3])}")
            mi = codes.tolist()
        it = self.iters_per_s[np.ix_(mi, ti)]
        mn = self.multi_node_iters_per_s[np.ix_(mi, ti)]
        keep_m = np.isfinite(it).any(axis=(1, 2))
        keep_s = np.isfinite(it[keep_m]).any(axis=(0, 1))
        keep_t = np.isfinite(it[keep_m][:, :, keep_s]).any(axis=(0, 2))
        mi2 = np.flatnonzero(keep_m)
        return ThroughputTable(
            models=tuple(self.models[mi[i]] for i in mi2),
            gpu_types=tuple(self.gpu_types[ti[j]] for j in np.flatnonzero(keep_t)),
            sizes=tuple(s for s, k in zip(self.sizes, keep_s) if k),
            iters_per_s=it[keep_m][:, keep_t][:, :, keep_s],
            multi_node_factor=self.multi_node_factor[mi][keep_m],
            source=self.source,
            multi_node_iters_per_s=mn[keep_m][:, keep_t][:, :, keep_s],
        )

    # ------------------------------------------------------------------ output
    def to_csv_text(self) -> str:
        """The table in the CSV format :meth:`read` takes: one row per measured (model, type, GPUs),
        in table order; numbers printed exactly (shortest round-trip repr); NaN as an empty cell."""
        def num(x: float) -> str:
            return "" if math.isnan(x) else repr(float(x))

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for m, model in enumerate(self.models):
            for t, gtype in enumerate(self.gpu_types):
                for s, size in enumerate(self.sizes):
                    v = float(self.iters_per_s[m, t, s])
                    if not math.isnan(v):
                        w.writerow([model, gtype, size, num(v), num(float(self.multi_node_iters_per_s[m, t, s])),
                                    num(float(self.multi_node_factor[m]))])
        return buf.getvalue()

    def to_gavel_dict(self) -> dict:
        """The table in Gavel's JSON layout (``{type: {"('model', n)": {"null": steps/s}}}``, multi-node
        figures under ``<type>_unconsolidated``); :meth:`read` takes it back. multi_node_factor is not kept."""
        out: dict = {}
        for suffix, arr in (("", self.iters_per_s), (UNCONSOLIDATED, self.multi_node_iters_per_s)):
            for t, gtype in enumerate(self.gpu_types):
                entries = {str((model, size)): {"null": float(arr[m, t, s])}
                           for m, model in enumerate(self.models) for s, size in enumerate(self.sizes)
                           if not math.isnan(arr[m, t, s])}
                if entries:
                    out[gtype + suffix] = entries
        return out

    def write_csv(self, path) -> Path:
        """Write :meth:`to_csv_text` to ``path`` (gzip when it ends in .gz, byte-reproducible)."""
        p = Path(path)
        raw = self.to_csv_text().encode()
        p.write_bytes(gzip.compress(raw, mtime=0) if p.name.endswith(".gz") else raw)
        return p

    def equals(self, other: "ThroughputTable") -> bool:
        """Same names and the same numbers (NaN equal to NaN); the source text is not compared."""
        return (self.models == other.models and self.gpu_types == other.gpu_types and self.sizes == other.sizes
                and all(np.array_equal(a, b, equal_nan=True) for a, b in (
                    (self.iters_per_s, other.iters_per_s),
                    (self.multi_node_iters_per_s, other.multi_node_iters_per_s),
                    (self.multi_node_factor, other.multi_node_factor))))

    # ------------------------------------------------------------------ lookups
    def model_codes(self, names) -> np.ndarray:
        """int64 index into :attr:`models` per name (same shape as ``names``); -1 when unknown or not a
        string. Case and whitespace are ignored."""
        arr = np.asarray(names, dtype=object)
        flat = arr.reshape(-1)
        out = np.full(flat.shape[0], -1, dtype=np.int64)
        memo: dict = {}
        codes = self._codes
        for i, x in enumerate(flat):
            c = memo.get(x) if isinstance(x, str) else None
            if c is None:
                c = codes.get(model_key(x), -1)
                if isinstance(x, str):
                    memo[x] = c
            out[i] = c
        return out.reshape(arr.shape)

    def _type_index(self, gpu_types) -> np.ndarray:
        """Index into :attr:`gpu_types` of each given type (names or a Cluster); ConfigError if unknown."""
        if hasattr(gpu_types, "gpu_types") and not isinstance(gpu_types, str):
            gpu_types = gpu_types.gpu_types  # a fastblox.Cluster
        names = [gpu_types] if isinstance(gpu_types, str) else list(gpu_types)
        idx = []
        for name in names:
            key = str(name).strip().lower()
            if key not in self.gpu_types:
                hint = (" (an untyped cluster like '32x4' has type 'gpu'; name the types, e.g. "
                        f"'{self.gpu_types[0]}:12x4')" if key == "gpu" else "")
                raise ConfigError(f"GPU type {str(name)!r} is not in the throughput table; it has "
                                  f"{', '.join(self.gpu_types)}{hint}")
            idx.append(self.gpu_types.index(key))
        return np.asarray(idx, dtype=np.int64)

    @staticmethod
    def _check_max_gpus(max_gpus) -> int:
        if isinstance(max_gpus, bool) or not isinstance(max_gpus, (int, np.integer)) or max_gpus < 0:
            raise ConfigError(f"max_gpus must be a whole number >= 0, got {max_gpus!r}")
        return int(max_gpus)

    def rates(self, gpu_types, max_gpus: int) -> np.ndarray:
        """float64 [M, len(gpu_types), max_gpus + 1]: iterations/s of model m on n = 0..max_gpus GPUs of
        each given type (a cluster's types, in its order), the gang on one node.

        n = 0 -> 0.0; measured sizes exact; per-GPU throughput interpolated linearly between measured
        sizes and held at the nearest measured size's per-GPU value outside them; a model with no
        measurement on a type -> NaN for that type. Unknown type -> ConfigError listing the table's."""
        ti = self._type_index(gpu_types)
        n = self._check_max_gpus(max_gpus)
        return _interp_rates(self.iters_per_s[:, ti], np.asarray(self.sizes, dtype=np.int64), n)

    def rates_at(self, codes, num_gpus, gpu_type: str) -> np.ndarray:
        """float64 per job: iterations/s of model ``codes[i]`` (from :meth:`model_codes`) on
        ``num_gpus[i]`` GPUs of ``gpu_type``, by the rule of :meth:`rates` (equal to its entries).
        NaN where the code is -1, the model has no measurement on the type, or num_gpus is not a
        whole number >= 1; 0.0 where num_gpus is 0."""
        t = int(self._type_index([gpu_type])[0])
        codes = np.asarray(codes, dtype=np.int64)
        n = np.asarray(num_gpus, dtype=np.float64)
        codes, n = np.broadcast_arrays(codes, n)
        out = np.full(codes.shape, np.nan)
        with np.errstate(invalid="ignore"):
            whole = np.isfinite(n) & (n == np.round(n))
        out[whole & (n == 0)] = 0.0
        sizes = np.asarray(self.sizes, dtype=np.int64)
        valid = whole & (n >= 1) & (codes >= 0) & (codes < len(self.models))
        for c in np.unique(codes[valid]):
            sel = valid & (codes == c)
            out[sel] = _interp_at(self.iters_per_s[c, t], sizes, n[sel])
        return out

    def multi_node_rates(self, gpu_types, max_gpus: int) -> np.ndarray:
        """float64 [M, len(gpu_types), max_gpus + 1]: iterations/s when the gang spans more than one node.

        From :attr:`multi_node_iters_per_s` (sizes >= 2, same interpolation rule as :meth:`rates`)
        where a (model, type) has such measurements; else ``rates × multi_node_factor``; else NaN
        (unknown). n = 0 -> 0.0; n = 1 -> the single-GPU rate (one GPU cannot span nodes)."""
        ti = self._type_index(gpu_types)
        n = self._check_max_gpus(max_gpus)
        sizes = np.asarray(self.sizes, dtype=np.int64)
        base = _interp_rates(self.iters_per_s[:, ti], sizes, n)
        out = _interp_rates(self.multi_node_iters_per_s[:, ti], sizes, n, first=2)
        fallback = base * self.multi_node_factor[:, None, None]
        none = np.isnan(out[:, :, -1:]) if n else np.zeros(out.shape[:2] + (1,), dtype=bool)
        out = np.where(none, fallback, out)
        out[:, :, 0] = 0.0
        if n >= 1:
            out[:, :, 1] = base[:, :, 1]
        return out

    def type_speed(self, gpu_types, reference: str = "v100") -> np.ndarray:
        """float64 [len(gpu_types)]: single-GPU speed of each type relative to ``reference`` (1.0 for
        the reference itself): geometric mean over models with a 1-GPU rate on both of rate(t) / rate(ref).
        For jobs whose model is unknown. NaN when no model has a rate on both."""
        ti = self._type_index(gpu_types)
        ri = self._type_index([reference])
        one = _interp_rates(self.iters_per_s[:, np.concatenate([ti, ri])], np.asarray(self.sizes, dtype=np.int64), 1)
        one = one[:, :, 1]
        ref = one[:, -1]
        out = np.full(len(ti), np.nan)
        for j in range(len(ti)):
            ok = np.isfinite(one[:, j]) & np.isfinite(ref)
            if ok.any():
                out[j] = float(np.exp(np.mean(np.log(one[ok, j] / ref[ok]))))
        return out


# ---------------------------------------------------------------------------------------- readers
@functools.lru_cache(maxsize=1)
def _builtin() -> ThroughputTable:
    from .datasets import HERE

    tab = ThroughputTable.read(HERE / BUILTIN_FILE)
    return ThroughputTable(tab.models, tab.gpu_types, tab.sizes, tab.iters_per_s, tab.multi_node_factor,
                           GAVEL_SOURCE, tab.multi_node_iters_per_s)


def _read_bytes(path) -> bytes:
    p = Path(str(path))
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such throughput file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a throughput file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise ConfigError(f"{path}: not a readable gzip file ({e}); is it truncated?") from None
    return data


def _where(path, line, column) -> str:
    return f"{path}, line {line}, column {column!r}"


def _first(path, lines, mask, column, what, raw=None) -> None:
    """Raise for the first row in ``mask`` (if any), quoting its raw cell and counting the others."""
    if not mask.any():
        return
    rows = np.flatnonzero(mask)
    i = int(rows[0])
    cell = "" if raw is None else " (empty)" if not raw[i] else f" ({raw[i]!r})"
    more = f"; {len(rows) - 1} more row(s) like it" if len(rows) > 1 else ""
    raise ConfigError(f"{_where(path, int(lines[i]), column)}: {what}{cell}{more} "
                      "(line numbers count the header as line 1)")


def _to_float(cells) -> np.ndarray:
    """float64 per cell; NaN where empty or not a number (Python's float(): exact, correctly rounded)."""
    out = np.full(len(cells), np.nan)
    for i, c in enumerate(cells):
        try:
            out[i] = float(c)
        except ValueError:
            pass
    return out


def _from_csv(path, data: bytes) -> ThroughputTable:
    # throughput tables hold hundreds of rows: the csv module parses them in well under a millisecond
    # and keeps `import polars` off the builtin() path
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    try:
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        header = None
        rows, lines = [], []
        for rec in reader:
            if header is None:
                header = [c.strip() for c in rec]
                continue
            if not any(c.strip() for c in rec):
                continue  # a blank line holds no measurement
            if len(rec) != len(header):
                raise ConfigError(f"{path}, line {reader.line_num}: has {len(rec)} field(s); the header has "
                                  f"{len(header)} ({','.join(header)})")
            rows.append([c.strip() for c in rec])
            lines.append(reader.line_num)
    except csv.Error as e:
        raise ConfigError(f"{path}, line {reader.line_num}: cannot parse as CSV ({e})") from None
    cols = header or []
    unknown = [c for c in cols if c not in CSV_COLUMNS]
    if unknown:
        import difflib

        hints = [f"{c!r} (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(c.lower(), CSV_COLUMNS, 1, 0.6))
                 else repr(c) for c in unknown]
        raise ConfigError(f"{path}, line 1: unknown column(s) {', '.join(hints)}; a throughput CSV has columns "
                          f"{', '.join(REQUIRED_COLUMNS)} and optionally {', '.join(OPTIONAL_COLUMNS)}")
    if len(set(cols)) != len(cols):
        dup = next(c for c in cols if cols.count(c) > 1)
        raise ConfigError(f"{path}, line 1, column {dup!r}: appears twice in the header")
    missing = [c for c in REQUIRED_COLUMNS if c not in cols]
    if missing:
        raise ConfigError(f"{path}, line 1: missing column(s) {', '.join(map(repr, missing))}; it has "
                          f"{', '.join(map(repr, cols))}")
    if not rows:
        raise ConfigError(f"{path}: has a header but no rows")
    raw = {c: [r[j] for r in rows] for j, c in enumerate(cols)}
    lines = np.asarray(lines, dtype=np.int64)
    n = len(rows)

    model, gtype = raw["model"], raw["gpu_type"]
    _first(path, lines, np.array([model_key(x) is None for x in model]), "model", "empty model name")
    _first(path, lines, np.array([not x for x in gtype]), "gpu_type", "empty GPU type")
    gpus = _to_float(raw["num_gpus"])
    it = _to_float(raw["iters_per_s"])
    with np.errstate(invalid="ignore"):
        _first(path, lines, ~np.isfinite(gpus) | (gpus < 1) | (gpus != np.round(gpus)) | (gpus > 2**31),
               "num_gpus", "must be a whole number of GPUs >= 1", raw["num_gpus"])
        _first(path, lines, ~np.isfinite(it), "iters_per_s",
               "must be a number of iterations/s (empty, NaN, infinite or not a number)", raw["iters_per_s"])
        _first(path, lines, it <= 0, "iters_per_s", "must be > 0 (leave the row out when not measured)",
               raw["iters_per_s"])
        mn = np.full(n, np.nan)
        if "multi_node_iters_per_s" in cols:
            cells = raw["multi_node_iters_per_s"]
            mn = _to_float(cells)
            given = np.array([bool(x) for x in cells])
            _first(path, lines, given & ~np.isfinite(mn), "multi_node_iters_per_s",
                   "must be a number of iterations/s or empty (not measured)", cells)
            _first(path, lines, given & (mn <= 0), "multi_node_iters_per_s", "must be > 0 or empty (not measured)",
                   cells)
        fac = np.full(n, np.nan)
        if "multi_node_factor" in cols:
            cells = raw["multi_node_factor"]
            fac = _to_float(cells)
            given = np.array([bool(x) for x in cells])
            _first(path, lines, given & ~((fac > 0) & (fac <= 1)), "multi_node_factor",
                   "must be a number in (0, 1] or empty (unknown)", cells)

    # names -> codes in order of first appearance (deterministic for a given file)
    mkeys = [model_key(x) for x in model]
    tkeys = [x.lower() for x in gtype]
    m_index: dict = {}
    models: list = []
    for k, name in zip(mkeys, model):
        if k not in m_index:
            m_index[k] = len(models)
            models.append(_SPACE.sub(" ", name).strip())
    t_index: dict = {}
    for k in tkeys:
        t_index.setdefault(k, len(t_index))
    sizes = sorted({int(g) for g in gpus})
    s_index = {s: i for i, s in enumerate(sizes)}
    mi = np.array([m_index[k] for k in mkeys], dtype=np.int64)
    ti = np.array([t_index[k] for k in tkeys], dtype=np.int64)
    si = np.array([s_index[int(g)] for g in gpus], dtype=np.int64)

    seen: dict = {}
    for r, key in enumerate(zip(mi.tolist(), ti.tolist(), si.tolist())):
        if key in seen:
            raise ConfigError(
                f"{_where(path, int(lines[r]), 'num_gpus')}: duplicate row: ({model[r]!r}, {gtype[r]!r}, "
                f"{int(gpus[r])} GPUs) is already on line {int(lines[seen[key]])} (model names ignore case and spaces)")
        seen[key] = r
    f = np.full(len(models), np.nan)
    f_line = np.zeros(len(models), dtype=np.int64)
    for r in np.flatnonzero(~np.isnan(fac)):
        m = mi[r]
        if np.isnan(f[m]):
            f[m], f_line[m] = fac[r], lines[r]
        elif fac[r] != f[m]:
            raise ConfigError(f"{_where(path, int(lines[r]), 'multi_node_factor')}: {float(fac[r])!r} for "
                              f"{model[r]!r}, which has {float(f[m])!r} on line {int(f_line[m])}; "
                              "a model has one factor")
    shape = (len(models), len(t_index), len(sizes))
    iters = np.full(shape, np.nan)
    multi = np.full(shape, np.nan)
    iters[mi, ti, si] = it
    multi[mi, ti, si] = mn
    return ThroughputTable(tuple(models), tuple(t_index), tuple(sizes), iters, f, f"file {path}", multi)


def _from_gavel_json(path, text: str) -> ThroughputTable:
    """Gavel's layout ``{worker_type: {"('job_type', scale_factor)": {"null": steps/s, ...}}}``.

    Only the isolated ("null") throughput is kept; ``<type>_unconsolidated`` worker types become the
    multi-node throughputs of ``<type>``; Gavel's 0.0 (a combination it cannot run) becomes NaN, a
    multi-node figure whose consolidated counterpart is 0.0 or absent is dropped with it, and job
    types, worker types and sizes left without any figure are left out."""
    import ast

    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{path}: cannot read as JSON ({e})") from None
    if not isinstance(doc, dict) or not doc:
        raise ConfigError(f"{path}: a Gavel throughputs JSON maps worker types to tables; this one is empty")
    entries = {}  # (base type, multi?) -> {(model, sf): value}
    models: list = []
    m_index: dict = {}
    for wtype, table in doc.items():
        base = str(wtype).strip().lower()
        multi = base.endswith(UNCONSOLIDATED)
        base = base[: -len(UNCONSOLIDATED)] if multi else base
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: worker type {wtype!r}: expected {{\"('job_type', scale_factor)\": "
                              "{'null': steps/s, ...}}, got " + type(table).__name__)
        got = entries.setdefault((base, multi), {})
        for key, val in table.items():
            where = f"{path}: worker type {wtype!r}, entry {key!r}"
            try:
                jt, sf = ast.literal_eval(key)
                jt, sf_f = str(jt), float(sf)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise ConfigError(f"{where}: the key is not \"('job_type', scale_factor)\"") from None
            if model_key(jt) is None or not math.isfinite(sf_f) or sf_f < 1 or sf_f != round(sf_f):
                raise ConfigError(f"{where}: needs a job type name and a whole scale_factor >= 1")
            v = val.get("null") if isinstance(val, dict) else val
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ConfigError(f"{where}, field 'null': expected the isolated throughput in steps/s, got {v!r}")
            v = float(v)
            if not math.isfinite(v) or v < 0:
                raise ConfigError(f"{where}, field 'null': throughput {v!r} must be >= 0 and finite "
                                  "(0 = Gavel's 'cannot run')")
            k = model_key(jt)
            if k not in m_index:
                m_index[k] = len(models)
                models.append(_SPACE.sub(" ", jt).strip())
            if (k, int(sf_f)) in got:
                raise ConfigError(f"{where}: duplicate entry for ({jt!r}, {int(sf_f)}) (names ignore case and spaces)")
            got[(k, int(sf_f))] = v
    types = [b for (b, multi) in entries if not multi]
    for (b, multi) in entries:
        if multi and b not in types:
            raise ConfigError(f"{path}: worker type {b + UNCONSOLIDATED!r} has no consolidated worker type {b!r}")
    if not types:
        raise ConfigError(f"{path}: no worker types (only {UNCONSOLIDATED} ones)")
    # sizes and job types with a non-zero throughput somewhere (Gavel's 0.0 = cannot run)
    sizes = sorted({sf for (b, multi), table in entries.items() if not multi for (_, sf), v in table.items() if v > 0})
    if not sizes:
        raise ConfigError(f"{path}: has no non-zero throughput (Gavel writes 0.0 for what it cannot run)")
    shape = (len(models), len(types), len(sizes))
    iters = np.full(shape, np.nan)
    mnode = np.full(shape, np.nan)
    for (b, multi), table in entries.items():
        dest = mnode if multi else iters
        t = types.index(b)
        for (k, sf), v in table.items():
            if v > 0 and sf in sizes:
                dest[m_index[k], t, sizes.index(sf)] = v
    mnode[np.isnan(iters)] = np.nan  # a multi-node figure without the consolidated one is not usable
    keep = np.isfinite(iters).any(axis=(1, 2))  # a job type Gavel could run nowhere is left out
    keep_t = np.isfinite(iters).any(axis=(0, 2))
    try:
        return ThroughputTable(tuple(m for m, k in zip(models, keep) if k),
                               tuple(t for t, k in zip(types, keep_t) if k),
                               tuple(sizes), iters[keep][:, keep_t], np.full(int(keep.sum()), np.nan), f"file {path}",
                               mnode[keep][:, keep_t])
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


__all__ = ["ThroughputTable", "BUILTIN_FILE", "CSV_COLUMNS", "GAVEL_SOURCE", "model_key"]
