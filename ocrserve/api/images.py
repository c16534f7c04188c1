"""Page images kept for the viewer (GET /v1/pages/{token}.png), under unguessable tokens.

Bounded by bytes, not count (a page image is 10 KB or 3 MB): the oldest go first once the total passes
`max_bytes`. Each image remembers who made it; with API keys configured only that key may fetch it.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict


class PageImages:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self.bytes = 0
        self._items: OrderedDict[str, tuple[bytes, str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, png: bytes, owner: str = "") -> str | None:
        """Keep png for owner; its token, or None when the image alone is over the bound (not kept)."""
        if len(png) > self.max_bytes:
            return None
        token = secrets.token_urlsafe(18)
        self._items[token] = (png, owner)
        self.bytes += len(png)
        while self.bytes > self.max_bytes:
            _, (old, _) = self._items.popitem(last=False)
            self.bytes -= len(old)
        return token

    def get(self, token: str, owner: str | None = None) -> bytes | None:
        """The image under token; None when unknown, dropped, or (owner given) made by someone else."""
        item = self._items.get(token)
        if item is None or (owner is not None and item[1] != owner):
            return None
        return item[0]
