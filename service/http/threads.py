"""The request handlers' thread pool: one hop from the event loop to a thread and back.

Routes that run kernels hand the whole request (validation, kernels, response building) to
a thread in one trip, so the event loop never runs a kernel. The pool is a plain
``ThreadPoolExecutor`` owned by the app (created by its lifespan, shut down after it), and
the hop is ``loop.run_in_executor``: a queue put, a thread wake-up and one
``call_soon_threadsafe`` back. anyio's ``to_thread.run_sync`` (what FastAPI's
``run_in_threadpool`` uses) adds a capacity limiter, a cancel scope and its own worker
bookkeeping, about twice the CPU per hop (``deploy/loadtest/cost_breakdown.py``).

Unlike anyio, the hop does not copy the caller's ``contextvars`` into the thread (the
handlers use none), and a cancelled caller does not wait for the thread to finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

#: predict and feedback bodies up to this size may be handled on the event loop (when the
#: model is free and the work is small: ``LiveModel.quick``, ``INLINE_WORK``); larger ones
#: go to a handler thread
INLINE_BODY_BYTES = 16 * 1024


def make_executor(threads: int) -> ThreadPoolExecutor:
    """The app's pool of at most ``threads`` handler threads (started on demand)."""
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lorentztron-handler")


async def run_sync(executor: Executor | None, function: Callable[..., T], *args) -> T:
    """``function(*args)`` in a thread of ``executor`` (None: the loop's default pool)."""
    return await asyncio.get_running_loop().run_in_executor(executor, function, *args)


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel a background task and wait until it has stopped (None: nothing to do)."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
