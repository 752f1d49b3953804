"""A job's place in a workflow as the job page draws it: its parents, itself and its children
in three columns of an inline SVG; and a batch's progress as one bar of its members by status.

Each side shows at most SHOWN jobs, each read by its id (one query a job): a fan-out of
thousands is a batch, whose members the batch's list pages through instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..queue import Queue
from ..records import JobRecord, Status

# The most parents, and children, a job's graph draws; the rest are counted.
SHOWN = 12
# The graph's geometry, in SVG units (pixels at 100 %).
NODE_WIDTH = 220
NODE_HEIGHT = 26
ROW = 34
COLUMN = 270
# The order a batch's bar and its legend give the statuses in: ended first.
BAR_ORDER = (
    Status.COMPLETED,
    Status.FAILED,
    Status.EXPIRED,
    Status.CANCELLED,
    Status.IN_PROGRESS,
    Status.PENDING,
    Status.WAITING,
)
BAR_WIDTH = 400
ENDED = {Status.COMPLETED, Status.FAILED, Status.EXPIRED, Status.CANCELLED}
# What the templates draw with.
SIZES = {"node_width": NODE_WIDTH, "node_height": NODE_HEIGHT, "bar_width": BAR_WIDTH}


@dataclass(frozen=True)
class Node:
    """One job in the graph, where it is drawn; `then`: a batch's `then` job."""

    id: int
    type: str
    status: str
    x: int
    y: int
    then: bool = False


@dataclass(frozen=True)
class Graph:
    parents: list[Node]
    job: Node
    children: list[Node]
    more_parents: int
    more_children: int
    width: int
    height: int


@dataclass(frozen=True)
class Segment:
    status: str
    count: int
    x: float
    width: float


@dataclass(frozen=True)
class Progress:
    """A batch's members by status, as a bar: `ended` of `total` have ended."""

    total: int
    ended: int
    segments: list[Segment]


def graph(queue: Queue, record: JobRecord) -> Graph | None:
    """The job with its parents and children; None for a job in no workflow."""
    parents, children = queue.parents(record.id), queue.dependents(record.id)
    if not parents and not children:
        return None
    rows = max(len(parents[:SHOWN]), len(children[:SHOWN]), 1)
    height = rows * ROW
    middle = (height - NODE_HEIGHT) // 2
    left = column(queue, parents[:SHOWN], 0, height)
    right = column(queue, children[:SHOWN], 2 * COLUMN, height)
    job = Node(record.id, record.type, str(record.status), COLUMN, middle)
    return Graph(
        left,
        job,
        right,
        more_parents=max(len(parents) - SHOWN, 0),
        more_children=max(len(children) - SHOWN, 0),
        width=2 * COLUMN + NODE_WIDTH,
        height=height,
    )


def column(queue: Queue, ids: Sequence[int], x: int, height: int) -> list[Node]:
    """The jobs of one side, centred in the graph's height; a job gone (deleted) is left out."""
    records = [found for found in (queue.get(each) for each in ids) if found is not None]
    top = (height - len(records) * ROW) // 2 + (ROW - NODE_HEIGHT) // 2
    return [
        Node(
            each.id,
            each.type,
            str(each.status),
            x,
            top + row * ROW,
            then=any(queue.batch_status(each.id).values()),
        )
        for row, each in enumerate(records)
    ]


def progress(counts: Mapping[str, int]) -> Progress | None:
    """A batch's bar from Queue.batch_status; None for a job that is no batch's `then`."""
    total = sum(counts.values())
    if not total:
        return None
    segments, x = [], 0.0
    for status in BAR_ORDER:
        n = counts.get(str(status), 0)
        if n:
            width = BAR_WIDTH * n / total
            segments.append(Segment(str(status), n, x, width))
            x += width
    ended = sum(counts.get(str(status), 0) for status in ENDED)
    return Progress(total, ended, segments)
