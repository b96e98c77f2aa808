"""shared.producer.threadstores: each thread gets its own store (the engine's ``for_thread``);
the queue's thread keeps the queue's; closing closes every store lent, from any thread."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from shared.engines import open_store
from shared.model.errors import StoreUnavailable
from shared.producer.threadstores import ThreadStores
from shared.settings.config import Config


@pytest.fixture
def stores(tmp_path):
    made = ThreadStores(open_store(Config(database=str(tmp_path / "q.db"))))
    yield made
    made.close()


def test_each_thread_gets_a_store_of_its_own(stores):
    mine = stores.current()
    with ThreadPoolExecutor(2) as pool:
        theirs = pool.submit(stores.current).result()
        again = pool.submit(stores.current).result()
        assert pool.submit(lambda: stores.counts()).result() == {}
    assert mine is not theirs and theirs in (again, pool)
    assert stores.counts() == {}  # attributes are the calling thread's store's


def test_closing_from_another_thread_closes_every_store(stores):
    box = {}
    t = threading.Thread(target=lambda: box.update(store=stores.current(), n=stores.counts()))
    t.start()
    t.join()
    closer = threading.Thread(target=stores.close)
    closer.start()
    closer.join()
    assert stores.closed and box["store"].closed
    with pytest.raises(StoreUnavailable, match="closed"):
        stores.counts()
