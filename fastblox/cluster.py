"""Cluster model: nodes of GPUs (count, GPU type, rack), as per-node numpy arrays.

A cluster spec is either a string or a file:

* ``[type:]NODESxGPUS[,...]``: ``32x4`` is 32 nodes of 4 GPUs; ``v100:12x4,p100:12x4,k80:12x4``
  is heterogeneous. Nodes are numbered in the order given, GPUs node by node. A trailing
  ``@K`` groups the nodes into racks of ``K`` consecutive nodes (``v100:16x8@4``: 4 racks);
  without it the cluster is one rack.
* a CSV file with one row per node, columns ``gpus`` (required), ``gpu_type`` and ``rack``
  (optional) — or Tiresias' cluster spec (``num_switch,num_node_p_switch,num_gpu_p_node,...``;
  a switch is a rack).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ConfigError

_GROUP = re.compile(r"^(?:(?P<type>[A-Za-z][\w.-]*):)?(?P<nodes>\d+)x(?P<gpus>\d+)$")
MAX_GPUS_PER_NODE = 64  # per-node free masks are one uint64
#: the largest cluster a spec may describe (per-GPU state is a few words: 4M GPUs ~ 100 MB)
MAX_NODES = 1 << 20
MAX_GPUS = 1 << 22


@dataclass(frozen=True, eq=False)
class Cluster:
    node_gpus: np.ndarray  # int64[num_nodes]
    node_type: np.ndarray  # int64[num_nodes], index into gpu_types
    gpu_types: tuple  # names, lower case, in order of first appearance
    spec: str
    node_rack: np.ndarray | None = None  # int64[num_nodes]; None: one rack

    @classmethod
    def parse(cls, spec: "str | Cluster") -> "Cluster":
        """Parse a spec string or read a cluster file; raises :class:`ConfigError` naming the bad part."""
        if isinstance(spec, Cluster):
            return spec
        if isinstance(spec, Path) or (isinstance(spec, str) and spec.strip().lower().endswith(".csv")):
            return cls.read(spec)
        if not isinstance(spec, str) or not spec.strip():
            raise ConfigError(f"--cluster: expected NODESxGPUS like '32x4', got {spec!r}")
        body, rack_nodes = spec.replace(" ", ""), None
        if "@" in body:
            body, _, k = body.rpartition("@")
            if not k.isdigit() or int(k) <= 0:
                raise ConfigError(f"--cluster: '@{k}' in {spec!r} must be a positive number of nodes per rack, e.g. '@4'")
            rack_nodes = int(k)
        node_gpus, node_type, types = [], [], []
        for part in body.split(","):
            m = _GROUP.match(part)
            if not m:
                raise ConfigError(
                    f"--cluster: cannot read {part!r} in {spec!r}; expected [type:]NODESxGPUS[@NODES_PER_RACK] "
                    "like '32x4', 'v100:12x4,k80:12x4' or '64x8@8'"
                )
            nodes, gpus = int(m["nodes"]), int(m["gpus"])
            if nodes <= 0 or gpus <= 0:
                raise ConfigError(f"--cluster: {part!r} needs at least one node and one GPU per node")
            if gpus > MAX_GPUS_PER_NODE:
                raise ConfigError(f"--cluster: {part!r} has {gpus} GPUs per node; at most {MAX_GPUS_PER_NODE} are supported")
            if len(node_gpus) + nodes > MAX_NODES or (sum(node_gpus) + nodes * gpus) > MAX_GPUS:
                raise ConfigError(f"--cluster: {spec!r} is too large: at most {MAX_NODES:,} nodes and {MAX_GPUS:,} GPUs are supported")
            t = (m["type"] or "gpu").lower()
            if t not in types:
                types.append(t)
            node_gpus += [gpus] * nodes
            node_type += [types.index(t)] * nodes
        n = len(node_gpus)
        rack = None if rack_nodes is None else np.arange(n, dtype=np.int64) // rack_nodes
        return cls(np.asarray(node_gpus, dtype=np.int64), np.asarray(node_type, dtype=np.int64), tuple(types), spec, rack)

    @classmethod
    def read(cls, path) -> "Cluster":
        """A cluster from a CSV file: one row per node (``gpus[,gpu_type][,rack]``) or Tiresias'
        spec (``num_switch,num_node_p_switch,num_gpu_p_node,...``)."""
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"--cluster: no file {str(p)!r}")
        with open(p, newline="") as f:
            rows = list(csv.reader(f))
        rows = [r for r in rows if any(c.strip() for c in r)]
        if len(rows) < 2:
            raise ConfigError(f"{p}: a cluster file needs a header and at least one row")
        head = [h.strip().lower() for h in rows[0]]
        body = rows[1:]

        def num(r, i, col, lineno, lo=1):
            try:
                v = int(r[i].strip())
            except (ValueError, IndexError):
                raise ConfigError(f"{p}: row {lineno}, column {col!r}: expected a whole number, got {r[i] if i < len(r) else ''!r}") from None
            if v < lo:
                raise ConfigError(f"{p}: row {lineno}, column {col!r}: must be at least {lo}, got {v}")
            return v

        if "num_switch" in head:  # Tiresias
            need = ("num_switch", "num_node_p_switch", "num_gpu_p_node")
            ix = {c: head.index(c) for c in need if c in head}
            missing = [c for c in need if c not in ix]
            if missing:
                raise ConfigError(f"{p}: Tiresias cluster spec lacks column(s) {missing}")
            r = body[0]
            sw, nps, gpn = (num(r, ix[c], c, 2) for c in need)
            if gpn > MAX_GPUS_PER_NODE:
                raise ConfigError(f"{p}: row 2, column 'num_gpu_p_node': at most {MAX_GPUS_PER_NODE} GPUs per node are supported")
            n = sw * nps
            return cls(np.full(n, gpn, dtype=np.int64), np.zeros(n, dtype=np.int64), ("gpu",), str(p),
                       np.arange(n, dtype=np.int64) // nps)
        if "gpus" not in head:
            raise ConfigError(f"{p}: a cluster file needs a 'gpus' column (one row per node), or Tiresias' "
                              f"'num_switch,num_node_p_switch,num_gpu_p_node' columns; found {head}")
        gi = head.index("gpus")
        ti = head.index("gpu_type") if "gpu_type" in head else None
        ri = head.index("rack") if "rack" in head else None
        gpus, types, tcode, racks = [], [], [], []
        for k, r in enumerate(body, start=2):
            g = num(r, gi, "gpus", k)
            if g > MAX_GPUS_PER_NODE:
                raise ConfigError(f"{p}: row {k}, column 'gpus': at most {MAX_GPUS_PER_NODE} GPUs per node are supported, got {g}")
            gpus.append(g)
            t = (r[ti].strip().lower() if ti is not None and ti < len(r) else "") or "gpu"
            if t not in types:
                types.append(t)
            tcode.append(types.index(t))
            racks.append(num(r, ri, "rack", k, lo=0) if ri is not None else 0)
        return cls(np.asarray(gpus, dtype=np.int64), np.asarray(tcode, dtype=np.int64), tuple(types), str(p),
                   np.asarray(racks, dtype=np.int64) if ri is not None else None)

    @property
    def num_nodes(self) -> int:
        return int(self.node_gpus.shape[0])

    @property
    def total_gpus(self) -> int:
        return int(self.node_gpus.sum())

    @property
    def racks(self) -> np.ndarray:
        """Rack of each node (all 0 when the cluster is one rack)."""
        return np.zeros(self.num_nodes, dtype=np.int64) if self.node_rack is None else self.node_rack

    @property
    def num_racks(self) -> int:
        return int(self.racks.max()) + 1 if self.num_nodes else 0

    @property
    def node_base(self) -> np.ndarray:
        """Global id of each node's first GPU."""
        return np.concatenate([[0], np.cumsum(self.node_gpus)[:-1]]).astype(np.int64)

    @property
    def gpu_node(self) -> np.ndarray:
        """Node of each GPU."""
        return np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.node_gpus)

    def gpus_of_type(self) -> np.ndarray:
        """GPUs of each type, in ``gpu_types`` order."""
        return np.bincount(self.node_type, weights=self.node_gpus, minlength=len(self.gpu_types)).astype(np.int64)

    def largest_gang(self) -> int:
        """The most GPUs one job can hold: all the GPUs of its largest type (a gang never mixes types)."""
        return int(self.gpus_of_type().max())

    def __str__(self) -> str:
        return self.spec
