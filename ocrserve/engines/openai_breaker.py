"""A circuit breaker for one server of the openai engine: a dead server is taken out and put back when
it answers again.

- closed: requests go to the server. `threshold` failed requests in a row that the server did not
  answer (refused, reset, past their deadline, a 5xx) open it, once the server has also not answered
  for `cooldown_s`: the pages in flight that fail together at one hiccup (a dropped connection each)
  do not take out a server that answered a moment ago; any answer resets the count.
- open: no request goes there for `cooldown_s` (pages go to another server, or, when none is left,
  fail at once: the fallback takes them, no backoff ladder a page).
- half-open: after the cooldown one request is let through as a probe (a real page); an answer closes
  the breaker, a failure opens it again for twice the cooldown (at most `max_cooldown_s`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Breaker:
    """The breaker of one server (`name`, its URL): `ready()` and `take()` before a request, then
    `answered()`, `failed(reason, probe)` or `release(probe)` after it."""

    def __init__(
        self,
        name: str,
        threshold: int = 3,
        cooldown_s: float = 2.0,
        max_cooldown_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.threshold = max(1, threshold)
        self.base_cooldown_s = self.cooldown_s = cooldown_s
        self.max_cooldown_s = max(cooldown_s, max_cooldown_s)
        self.clock = clock
        self.closed = True
        self.failures = 0  # failed requests in a row
        self.until = 0.0  # open: no request before this
        self.probing = False  # half-open: the probe is out
        self.last = ""  # the last failure
        self.answered_at = clock()  # the last answer (or the start)

    def ready(self) -> bool:
        """A request may go now: closed, or open past its cooldown with no probe out."""
        return self.closed or (not self.probing and self.clock() >= self.until)

    def take(self) -> bool:
        """A request goes now (after `ready()`); True when it is the half-open probe."""
        if self.closed:
            return False
        self.probing = True
        return True

    def answered(self) -> None:
        """The server answered (an answer of any kind: it is up)."""
        if not self.closed:
            log.warning("%s answers again: back in use", self.name)
        self.closed, self.failures, self.probing, self.cooldown_s = True, 0, False, self.base_cooldown_s
        self.answered_at = self.clock()

    def failed(self, reason: str, probe: bool = False) -> None:
        """A request the server did not answer."""
        self.failures += 1
        self.last = reason
        if probe:
            self.probing = False
            self.cooldown_s = min(self.max_cooldown_s, self.cooldown_s * 2)
            self._open()
        elif (
            self.closed and self.failures >= self.threshold and self.clock() - self.answered_at >= self.base_cooldown_s
        ):
            self._open()
            log.warning(
                "%s is down (%d failed requests in a row; last: %s): no pages go to it for %g s, then one to probe it",
                self.name,
                self.failures,
                reason,
                self.cooldown_s,
            )

    def trip(self, reason: str) -> None:
        """Open now (the server did not answer before the run)."""
        self.failures, self.last = max(self.failures, self.threshold), reason
        self._open()

    def release(self, probe: bool) -> None:
        """A request that ended with no verdict on the server (cancelled)."""
        if probe:
            self.probing = False

    def _open(self) -> None:
        self.closed = False
        self.until = self.clock() + self.cooldown_s

    def why(self) -> str:
        """Why no request goes to the server now."""
        wait = max(0.0, self.until - self.clock())
        return (
            f"{self.name} is down ({self.failures} failed requests in a row; last: {self.last}); "
            f"probed again in {wait:.0f} s"
        )
