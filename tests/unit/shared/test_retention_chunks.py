"""The pacer of an engine with row locks (``shared.engines.sql.Chunks``): no pauses, and a chunk
size that follows the time chunks take, so a big purge is not mostly round trips and commits."""

from __future__ import annotations

from shared.engines.sql import Chunks


class TimedStore:
    """Runs ``_paced`` at once; each chunk takes the next of ``takes`` seconds on the given timer."""

    def __init__(self, box: list[float], takes: list[float]) -> None:
        self.box, self.takes = box, takes

    def _paced(self, fn):
        out = fn(None)
        self.box[0] += self.takes.pop(0)
        return out


def test_chunks_double_while_quick_halve_when_slow_and_stay_within_their_bounds():
    box, sizes = [0.0], []
    takes = [0.001, 0.001, 0.001, 0.001, 0.001, 0.030, 0.200, 0.200, 0.200, 0.200, 0.040]
    pacer = Chunks(500, hold=0.050, least=100, most=4000, timer=lambda: box[0])
    store = TimedStore(box, list(takes))
    for _ in takes:
        pacer.chunk(store, lambda c, rows: sizes.append(rows))
    # quick: 500 -> 1000 -> 2000 -> 4000 (most); 30 ms (within the hold) keeps it; 200 ms halves it
    assert sizes == [500, 1000, 2000, 4000, 4000, 4000, 4000, 2000, 1000, 500, 250]
    assert pacer.rows == 250  # 40 ms: between half the hold and the hold, kept


def test_chunks_start_within_their_bounds_and_return_what_the_chunk_returned():
    assert Chunks(5, least=50).rows == 50 and Chunks(10**6, most=20_000).rows == 20_000
    pacer = Chunks(3, least=1, timer=lambda: 0.0)
    assert pacer.chunk(TimedStore([0.0], [0.0]), lambda c, rows: ("done", rows)) == ("done", 3)
