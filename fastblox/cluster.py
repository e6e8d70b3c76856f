"""Cluster model: nodes of GPUs, as per-node numpy arrays.

A cluster spec string is a comma-separated list of groups ``[type:]NODESxGPUS``:
``32x4`` is 32 nodes of 4 GPUs; ``v100:12x4,p100:12x4,k80:12x4`` is heterogeneous. Nodes are
numbered in the order given, GPUs node by node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError

_GROUP = re.compile(r"^(?:(?P<type>[A-Za-z][\w.-]*):)?(?P<nodes>\d+)x(?P<gpus>\d+)$")
MAX_GPUS_PER_NODE = 64  # per-node free masks are one uint64


@dataclass(frozen=True, eq=False)
class Cluster:
    node_gpus: np.ndarray  # int64[num_nodes]
    node_type: np.ndarray  # int64[num_nodes], index into gpu_types
    gpu_types: tuple  # names
    spec: str

    @classmethod
    def parse(cls, spec: "str | Cluster") -> "Cluster":
        """Parse ``[type:]NODESxGPUS[,...]``; raises :class:`ConfigError` naming the bad part."""
        if isinstance(spec, Cluster):
            return spec
        if not isinstance(spec, str) or not spec.strip():
            raise ConfigError(f"--cluster: expected NODESxGPUS like '32x4', got {spec!r}")
        node_gpus, node_type, types = [], [], []
        for part in spec.replace(" ", "").split(","):
            m = _GROUP.match(part)
            if not m:
                raise ConfigError(
                    f"--cluster: cannot read {part!r} in {spec!r}; expected [type:]NODESxGPUS like '32x4' or 'v100:12x4'"
                )
            nodes, gpus = int(m["nodes"]), int(m["gpus"])
            if nodes <= 0 or gpus <= 0:
                raise ConfigError(f"--cluster: {part!r} needs at least one node and one GPU per node")
            if gpus > MAX_GPUS_PER_NODE:
                raise ConfigError(f"--cluster: {part!r} has {gpus} GPUs per node; at most {MAX_GPUS_PER_NODE} are supported")
            t = (m["type"] or "gpu").lower()
            if t not in types:
                types.append(t)
            node_gpus += [gpus] * nodes
            node_type += [types.index(t)] * nodes
        return cls(np.asarray(node_gpus, dtype=np.int64), np.asarray(node_type, dtype=np.int64), tuple(types), spec)

    @property
    def num_nodes(self) -> int:
        return int(self.node_gpus.shape[0])

    @property
    def total_gpus(self) -> int:
        return int(self.node_gpus.sum())

    @property
    def node_base(self) -> np.ndarray:
        """Global id of each node's first GPU."""
        return np.concatenate([[0], np.cumsum(self.node_gpus)[:-1]]).astype(np.int64)

    @property
    def gpu_node(self) -> np.ndarray:
        """Node of each GPU."""
        return np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.node_gpus)

    def __str__(self) -> str:
        return self.spec
