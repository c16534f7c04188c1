"""Cancellation that leaves nothing half done, for the local scheduler (Ctrl-C in the CLI, a timeout
in the Python API, a service stopping): work already started is waited for, whatever more cancels
arrive, and the caller raises the cancel once it has counted what finished."""

from __future__ import annotations

import asyncio
from typing import Any


async def wait_through_cancel(fut: asyncio.Future[Any]) -> bool:
    """Wait until `fut` is done, whatever cancels arrive meanwhile; True when one arrived (the caller
    raises CancelledError once it has used the result). The future's own exception is left in it."""
    cancelled = False
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancelled = True
        except Exception:  # noqa: BLE001 - read from the future by the caller
            pass
    return cancelled


async def stop_tasks(tasks: set[asyncio.Task[Any]]) -> None:
    """Cancel the tasks and wait until they are gone, whatever more cancels arrive (a second Ctrl-C
    must not leave tasks writing while the run reports and cleans up)."""
    for t in list(tasks):
        t.cancel()
    pending = asyncio.gather(*tasks, return_exceptions=True)
    while not pending.done():
        try:
            await asyncio.shield(pending)
        except asyncio.CancelledError:
            continue
