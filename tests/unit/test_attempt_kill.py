"""Reading an attempt's hold: a torn read falls back to the last whole value."""

from __future__ import annotations

from jobq.supervisor.keeper import Keeper
from jobq.worker.fence import SEQ, FenceTable, Hold


def test_a_torn_read_falls_back_to_the_last_whole_value() -> None:
    table = FenceTable(1)
    slot = table.allocate()
    assert slot is not None
    hold = Hold(1, 2, 3, 40.0)
    slot.worker.write(hold)
    keeper = Keeper(table, safety_margin=1.0)
    assert [h for _, h, _ in keeper.held()] == [hold]
    # A writer stopped halfway (its counter odd): the section reads as torn...
    SEQ.pack_into(table.memory, slot.worker.offset, 7)
    assert slot.worker.read() is None
    # ...and the keeper keeps the deadline it last read whole.
    assert [h for _, h, _ in keeper.held()] == [hold]
