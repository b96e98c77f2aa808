"""``async_concurrency``: where it is declared, and that only async handlers get one."""

from __future__ import annotations

import pytest

from shared.execution.asyncjobs import AsyncConfigError, async_limits
from shared.settings.config import Config, TypeConfig
from shared.execution.handlers import ATTR, Registry, handler
from shared.execution.policy import JobPolicy
from shared.producer.tasks import task


async def _async(payload, job):
    return None


def _sync(payload, job):
    return None


def test_handler_and_task_take_async_concurrency():
    spec = getattr(handler("a", async_concurrency=50)(_async), ATTR)
    assert spec.is_async and spec.async_concurrency == 50

    @task(name="t.async", async_concurrency=7)
    async def fetch(url: str) -> str:
        return url

    assert getattr(fetch, ATTR).async_concurrency == 7 and getattr(fetch, ATTR).is_async


def test_a_plain_function_cannot_have_async_concurrency_naming_the_type():
    with pytest.raises(ValueError, match="'plain'.*async_concurrency=5.*async def"):
        handler("plain", async_concurrency=5)(_sync)
    with pytest.raises(ValueError, match="'t.plain'.*async def"):
        task(name="t.plain", async_concurrency=5)(lambda: None)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", 10_001])
def test_async_concurrency_must_be_a_sensible_integer(bad):
    with pytest.raises(ValueError, match=f"'x': async_concurrency must be an integer.*{bad!r}"):
        handler("x", async_concurrency=bad)


def test_limits_come_from_the_handler_then_the_config():
    reg = Registry(
        [
            getattr(handler("h", async_concurrency=3)(_async), ATTR),
            getattr(handler("c")(_async), ATTR),
            getattr(handler("s")(_sync), ATTR),
        ]
    )
    config = Config(
        types={
            "c": TypeConfig(async_concurrency=9),
            "h": TypeConfig(async_concurrency=1),
            "elsewhere": TypeConfig(async_concurrency=4),
        }
    )
    assert async_limits(config, reg) == {"h": 3, "c": 9, "elsewhere": 4}
    policy = JobPolicy(config, reg)
    assert [policy.async_concurrency(t) for t in ("h", "c", "s", "elsewhere")] == [3, 9, None, 4]


def test_the_config_cannot_give_a_plain_handler_async_concurrency():
    reg = Registry([getattr(handler("s")(_sync), ATTR)])
    with pytest.raises(
        AsyncConfigError,
        match=r'\[types."s"\] async_concurrency = 2: the handler of job type '
        r"'s' \(.*_sync\) is not an async def",
    ):
        async_limits(Config(types={"s": TypeConfig(async_concurrency=2)}), reg)
