"""Socialformer's graph partition into "friend circles" (node-level and edge-level).

Greedy, as the paper: up to ``max_circles`` times, the node of highest degree in what is left of
the graph becomes a centre and forms a circle with (up to ``max_nodes`` − 1 of) its neighbours.

* ``node``: the circle's nodes, centre included, are removed from the graph. Invariant: circles
  are pairwise disjoint; circle t is {c_t} ∪ N ⊆ {c_t} ∪ neighbours of c_t in the graph induced on
  the nodes outside circles 1..t−1, and c_t has maximal degree in that induced graph.
* ``edge``: only the edges with both ends in the circle are removed; nodes stay and may join (or
  head) later circles. Invariant: the graph after circle t is the graph before it minus exactly the
  edges inside circle t; c_t has maximal degree in the graph before circle t, the rest of the circle
  are neighbours of c_t there.

When the centre has more than ``max_nodes`` − 1 neighbours, the ones with the highest current
degree are kept (ties: earlier position). Ties between centres go to the earlier position. The
partition stops early when no edge is left (the returned list is then shorter; ``circle_index``
pads). Degrees are kept in an int64 vector and updated with one gather per circle; the loop runs
over circles only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

PARTITIONS = ("node", "edge")


@dataclass
class Partition:
    circles: list[Tensor]  # token positions of each circle, sorted, int64
    centres: Tensor  # (len(circles),) int64: the centre of each circle
    graph: Tensor  # bool (n, n): node-level: the input graph; edge-level: the graph left
    alive: Tensor  # bool (n,): nodes in no circle (node-level) or all true (edge-level)

    @property
    def remaining(self) -> Tensor:
        """The graph left after the last removal (computed on demand)."""
        return self.graph & self.alive[:, None] & self.alive[None, :]


def _column_counts(rows: Tensor) -> Tensor:
    """Number of true entries in each column of a 2-D bool tensor, as int64.

    bool.sum() (or uint8 summed into int64) converts the whole matrix first; instead blocks of at
    most 255 rows are summed in uint8 (no overflow possible), then the block sums in int64. For a
    symmetric adjacency matrix the column counts are the degrees.
    """
    data = rows.view(torch.uint8)
    total = torch.zeros(data.shape[1], dtype=torch.int64, device=rows.device)
    for start in range(0, data.shape[0], 255):
        total += data[start : start + 255].sum(0, dtype=torch.uint8)
    return total


def partition_graph(adjacency: Tensor, max_nodes: int = 128, max_circles: int = 16, mode: str = "node") -> Partition:
    """Split a symmetric bool adjacency matrix (no self-loops; not checked) into friend circles.

    The input is not modified (edge-level works on a copy).
    """
    if mode not in PARTITIONS:
        raise ValueError(f"partition must be one of {', '.join(PARTITIONS)}, got {mode!r}")
    if max_nodes < 2 or max_circles < 1:
        raise ValueError(f"need max_nodes >= 2 and max_circles >= 1, got {max_nodes} and {max_circles}")
    if adjacency.dim() != 2 or adjacency.shape[0] != adjacency.shape[1] or adjacency.dtype != torch.bool:
        raise ValueError(f"adjacency must be a square bool matrix, got {adjacency.dtype} {tuple(adjacency.shape)}")
    n = adjacency.shape[0]
    graph = adjacency.clone(memory_format=torch.contiguous_format) if mode == "edge" else adjacency.contiguous()
    degree = _column_counts(graph)
    alive = torch.ones(n, dtype=torch.bool, device=graph.device)
    circles: list[Tensor] = []
    centres: list[int] = []
    for _ in range(max_circles):
        if n == 0:
            break
        centre = int(torch.argmax(degree))  # first maximum: ties go to the earlier position
        if int(degree[centre]) <= 0:
            break
        neighbours = graph[centre] & alive if mode == "node" else graph[centre]
        members = neighbours.nonzero().squeeze(1)
        if members.numel() > max_nodes - 1:
            key = degree[members] * n + (n - 1 - members)  # higher degree first, then earlier position
            members = members[torch.topk(key, max_nodes - 1).indices]
        members = torch.cat([members, members.new_tensor([centre])]).sort().values
        if mode == "node":
            degree -= _column_counts(graph.index_select(0, members))  # symmetric: rows = columns
            alive[members] = False
            degree[members] = -1
        else:
            pairs = (members[:, None] * n + members[None, :]).view(-1)  # flat indices of the circle's pairs
            inner = graph.view(-1).index_select(0, pairs).view(members.numel(), members.numel())
            degree[members] -= _column_counts(inner)
            graph.view(-1).index_fill_(0, pairs, False)
        circles.append(members)
        centres.append(centre)
    return Partition(circles, torch.tensor(centres, dtype=torch.int64, device=adjacency.device), graph, alive)


def circle_index(circles: list[Tensor], max_circles: int, max_nodes: int, pad: int = -1) -> Tensor:
    """Circles as a (max_circles, max_nodes) int64 tensor of positions, padded with ``pad``."""
    if len(circles) > max_circles:
        raise ValueError(f"{len(circles)} circles do not fit into max_circles={max_circles}")
    device = circles[0].device if circles else None
    index = torch.full((max_circles, max_nodes), pad, dtype=torch.int64, device=device)
    for row, circle in enumerate(circles):
        if circle.numel() > max_nodes:
            raise ValueError(f"circle {row} has {circle.numel()} nodes, more than max_nodes={max_nodes}")
        index[row, : circle.numel()] = circle
    return index
