"""Which server of a fleet takes the next request: least outstanding first, down ones cooled off.

Every HTTP request of the ``openai`` backend borrows a server with ``acquire`` and gives it back
with ``release``. The choice is the healthy server with the fewest requests in flight (ties go
round-robin, so a sequential caller still spreads its load), never more than ``max_outstanding``
on one server. A server that fails (connection refused, retries used up) is marked down for
``cooloff_s`` seconds and skipped meanwhile; after that it is tried again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# How often a thread waiting for a free slot looks again at the clock, so a server whose
# cool-off ends while all others are busy is picked up without anyone calling release().
_WAIT_POLL_S = 0.5


@dataclass(eq=False)  # identity: two records are never "equal" servers
class Server:
    """One server of the fleet and its counters.

    Attributes:
        url: its base URL (``http://host:port/v1``).
        outstanding: requests in flight on it now.
        answered: requests it answered.
        failures: times it was marked down.
        down_until: clock time before which it is skipped (0: healthy).
    """

    url: str
    outstanding: int = 0
    answered: int = 0
    failures: int = 0
    down_until: float = 0.0


class Fleet:
    """Thread-safe least-outstanding choice over a list of servers.

    Args:
        urls: the servers' base URLs (at least one).
        max_outstanding: requests in flight on one server at most; ``acquire`` waits beyond.
        cooloff_s: seconds a failed server is skipped before it is tried again.
        clock: a monotonic clock (tests pass a fake one).
    """

    def __init__(
        self,
        urls: list[str],
        *,
        max_outstanding: int,
        cooloff_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("a fleet needs at least one server URL")
        self.servers = [Server(url) for url in urls]
        self.max_outstanding = max_outstanding
        self.cooloff_s = cooloff_s
        self.clock = clock
        self._cursor = 0
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return len(self.servers)

    def acquire(self, exclude: Collection[str] = ()) -> Server | None:
        """Borrow the best server for one request, waiting while every candidate is full.

        Args:
            exclude: URLs this request already failed on.

        Returns:
            The server (give it back with ``release``), or ``None`` when every server is excluded.
        """
        with self._cond:
            while True:
                candidates = [s for s in self.servers if s.url not in exclude]
                if not candidates:
                    return None
                now = self.clock()
                healthy = [s for s in candidates if s.down_until <= now]
                # When all candidates are cooling off, try them anyway: one may be back, and a
                # request should fail only after it has itself tried every server.
                pool = healthy or candidates
                server = self._least_outstanding(pool)
                if server is not None:
                    server.outstanding += 1
                    return server
                self._cond.wait(timeout=_WAIT_POLL_S)

    def release(self, server: Server, *, ok: bool) -> None:
        """Give a server back; ``ok`` says whether it answered (a success also ends a cool-off)."""
        with self._cond:
            server.outstanding -= 1
            if ok:
                server.answered += 1
                if server.down_until:
                    log.info("server %s answers again; back in the fleet", server.url)
                    server.down_until = 0.0
            self._cond.notify_all()

    def mark_down(self, server: Server, reason: str) -> None:
        """Skip ``server`` for ``cooloff_s`` seconds (``reason`` must already be redacted)."""
        with self._cond:
            already = server.down_until > self.clock()
            server.down_until = self.clock() + self.cooloff_s
            server.failures += 1
        if not already and len(self.servers) > 1:
            log.warning(
                "server %s is down (%s); its requests move to the other servers, "
                "retrying it in %.0f s",
                server.url,
                reason,
                self.cooloff_s,
            )

    def stats(self) -> list[dict[str, Any]]:
        """Per-server counters: url, answered, outstanding, failures, down (bool)."""
        with self._cond:
            now = self.clock()
            return [
                {
                    "url": s.url,
                    "answered": s.answered,
                    "outstanding": s.outstanding,
                    "failures": s.failures,
                    "down": s.down_until > now,
                }
                for s in self.servers
            ]

    def _least_outstanding(self, pool: list[Server]) -> Server | None:
        # Scan from a rotating cursor so equal loads are broken round-robin.
        n = len(self.servers)
        order = [self.servers[(self._cursor + i) % n] for i in range(n)]
        free = [s for s in order if s in pool and s.outstanding < self.max_outstanding]
        if not free:
            return None
        best = min(free, key=lambda s: s.outstanding)  # min keeps the first of equals
        self._cursor = (self.servers.index(best) + 1) % n
        return best
