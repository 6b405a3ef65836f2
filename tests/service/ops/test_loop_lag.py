"""The event-loop lag probe (``service.ops.loop_lag``): a loop held by a callback shows in
``lorentztron_event_loop_lag_seconds`` as one late wake-up of about the time it was held,
and a free loop's wake-ups are on time; a hold over the stall threshold is counted once and
logged with the callback that held it, a shorter one is not; garbage collections are timed
by generation; the app's lifespan runs the probe, the watchdog and the timer."""

import asyncio
import gc
import logging
import time

from fastapi.testclient import TestClient

from service.main import create_app
from service.ops.loop_lag import CollectionTimer, LoopLag
from service.ops.metrics import Metrics

NAME = "lorentztron_event_loop_lag_seconds"


def counts(metrics: Metrics) -> dict[str, float]:
    """The cumulative bucket counts by bound (``le``)."""
    get = metrics.registry.get_sample_value
    return {le: get(f"{NAME}_bucket", {"le": le}) for le in ("0.002", "0.05", "0.1", "+Inf")}


def test_a_held_loop_is_one_late_wake_up_of_the_time_it_was_held():
    metrics = Metrics()

    async def run() -> None:
        lag = LoopLag(metrics.loop_lag, period=0.005)
        lag.start()
        await asyncio.sleep(0.1)  # free: on time
        time.sleep(0.07)  # the loop held for 70 ms
        await asyncio.sleep(0.05)
        await lag.stop()

    asyncio.run(run())
    found = counts(metrics)
    assert found["+Inf"] >= 10  # a wake-up every 5 ms (and the time to run it)
    assert found["+Inf"] - found["0.05"] >= 1  # the held one, 65 to 70 ms late
    # the others were all but on time (a loaded machine may delay a few)
    assert found["0.002"] >= found["+Inf"] - 4


def timers() -> int:
    return sum(isinstance(c, CollectionTimer) for c in gc.callbacks)


def test_the_app_observes_its_loop():
    installed = timers()  # (apps of other tests in this process may have theirs)
    app = create_app()
    with TestClient(app) as client:
        deadline = time.monotonic() + 10
        while not (counts(app.state.metrics)["+Inf"] or 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        text = client.get("/metrics").text
        assert f"{NAME}_count" in text
        assert "lorentztron_event_loop_stalls_total" in text
        gc.collect()
        assert 'lorentztron_gc_seconds_count{generation="2"}' in client.get("/metrics").text
    assert counts(app.state.metrics)["+Inf"] >= 1
    assert timers() == installed  # its own removed at shutdown


def held_briefly(seconds: float) -> None:
    time.sleep(seconds)  # a callback that does not give the loop back


def held_long(seconds: float) -> None:
    time.sleep(seconds)


def test_a_hold_over_the_threshold_is_counted_once_with_the_stack_that_held_it(caplog):
    metrics = Metrics()

    async def run() -> None:
        lag = LoopLag(metrics.loop_lag, metrics.loop_stalls, stall=0.15)
        lag.start()
        await asyncio.sleep(0.1)
        held_briefly(0.02)  # well under the threshold: not a stall
        await asyncio.sleep(0.1)
        held_long(0.5)  # one stall, however long it lasts
        await asyncio.sleep(0.1)
        await lag.stop()

    with caplog.at_level(logging.WARNING, logger="lorentztron.loop"):
        asyncio.run(run())
    assert metrics.registry.get_sample_value("lorentztron_event_loop_stalls_total") == 1
    [record] = [r for r in caplog.records if r.name == "lorentztron.loop"]
    assert "event loop held" in record.getMessage()
    assert "held_long" in record.getMessage()  # where the loop thread was


def test_holds_before_the_process_is_armed_are_not_stalls():
    metrics, armed = Metrics(), []

    async def run() -> None:
        lag = LoopLag(metrics.loop_lag, metrics.loop_stalls, stall=0.15, armed=lambda: armed)
        lag.start()
        held_long(0.5)  # start-up (kernels compiled): not reported
        await asyncio.sleep(0.1)
        armed.append(True)
        held_long(0.5)
        await asyncio.sleep(0.1)
        await lag.stop()

    asyncio.run(run())
    assert metrics.registry.get_sample_value("lorentztron_event_loop_stalls_total") == 1


def test_no_watchdog_without_a_threshold():
    metrics = Metrics()

    async def run() -> None:
        lag = LoopLag(metrics.loop_lag, metrics.loop_stalls, stall=0.0)
        lag.start()
        held_long(0.1)
        await asyncio.sleep(0.02)
        await lag.stop()
        return lag

    lag = asyncio.run(run())
    assert lag._watchdog is None
    assert metrics.registry.get_sample_value("lorentztron_event_loop_stalls_total") == 0


def test_collections_are_timed_by_generation():
    metrics = Metrics()
    timer = CollectionTimer(metrics.gc_seconds)
    timer.install()
    try:
        gc.collect(2)
        gc.collect(0)
    finally:
        timer.remove()
    timer.remove()  # (twice: a no-op)
    assert timer not in gc.callbacks
    get = metrics.registry.get_sample_value
    assert get("lorentztron_gc_seconds_count", {"generation": "2"}) >= 1
    assert get("lorentztron_gc_seconds_count", {"generation": "0"}) >= 1
    seen = get("lorentztron_gc_seconds_count", {"generation": "2"})
    gc.collect(2)  # removed: no longer timed
    assert get("lorentztron_gc_seconds_count", {"generation": "2"}) == seen
