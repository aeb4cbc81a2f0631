"""Run coroutines from plain scripts and from inside Jupyter alike.

In a notebook cell, `await` the kit's coroutines directly: Jupyter already runs an
event loop. From a script or the CLI, `run(coro)` does the same job. It also works
when a loop is already running (a notebook calling a synchronous helper), by
re-entering that loop through nest-asyncio, so objects created on the notebook's
loop (a browser, an environment) stay usable.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, TypeVar

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    """Run `coro` to completion and return its result, with or without a running loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_as_coroutine(coro))
    import nest_asyncio

    nest_asyncio.apply(loop)
    return loop.run_until_complete(coro)


async def _as_coroutine(aw: Awaitable[Any]) -> Any:
    return await aw
