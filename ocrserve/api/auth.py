"""API keys: `Authorization: Bearer <key>`, keys from OCRSERVE_API_KEYS (comma-separated) or a keys file.

With no key configured the API is open (a warning is logged at start). A request is identified by a
short fingerprint of its key (never the key itself) so jobs and limits can be kept per key.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from pathlib import Path

from ocrserve.api.errors import Unauthorized
from ocrserve.errors import OcrserveError
from ocrserve.settings import Settings

log = logging.getLogger(__name__)

OPEN = "open"


class KeyFileError(OcrserveError, ValueError):
    """The keys file cannot be read."""


def load_keys(settings: Settings) -> list[str]:
    """Keys from settings.api_keys (comma-separated) and settings.api_keys_file (one a line, # comments)."""
    keys = [k.strip() for k in (settings.api_keys or "").split(",") if k.strip()]
    if settings.api_keys_file:
        path = Path(settings.api_keys_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise KeyFileError(f"API keys file {path}: cannot read it ({e.strerror or e})") from None
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                keys.append(line)
    return list(dict.fromkeys(keys))


def fingerprint(key: str) -> str:
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


class Auth:
    """The configured keys: a request's Authorization header -> the caller's identity (a key's fingerprint)."""

    def __init__(self, keys: list[str]) -> None:
        self._keys = [(k.encode(), fingerprint(k)) for k in keys]
        self.open = not keys

    def identify(self, header: str | None) -> str | None:
        if self.open:
            return OPEN
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        given = token.strip().encode()
        found = None
        for key, fp in self._keys:  # compare with every key in constant time
            if hmac.compare_digest(given, key):
                found = fp
        return found

    def caller(self, header: str | None) -> str:
        """The caller's identity for an Authorization header; Unauthorized (401) when there is none."""
        who = self.identify(header)
        if who is None:
            raise Unauthorized("missing API key: send Authorization: Bearer <key>" if not header else "invalid API key")
        return who
