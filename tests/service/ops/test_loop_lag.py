"""The event-loop lag probe (``service.ops.loop_lag``): a loop held by a callback shows in
``lorentztron_event_loop_lag_seconds`` as one late wake-up of about the time it was held,
and a free loop's wake-ups are on time; the app's lifespan runs the probe."""

import asyncio
import time

from fastapi.testclient import TestClient

from service.main import create_app
from service.ops.loop_lag import LoopLag
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


def test_the_app_observes_its_loop():
    app = create_app()
    with TestClient(app) as client:
        deadline = time.monotonic() + 10
        while not (counts(app.state.metrics)["+Inf"] or 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert f"{NAME}_count" in client.get("/metrics").text
    assert counts(app.state.metrics)["+Inf"] >= 1
