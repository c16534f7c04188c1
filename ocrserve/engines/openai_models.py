"""The openai engine and the server's model list (GET /v1/models): readiness, the preflight's checks
(the server reachable, OpenAI-compatible, the API key accepted, the model served), the profile the
served model calls for, and the model a request names when none was given (with its max_model_len)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ocrserve.engines.base import EngineError
from ocrserve.engines.http import httpx
from ocrserve.engines.openai_http import RETRYABLE_STATUS, Fatal, Retry, error_message
from ocrserve.profiles import PROFILES, Profile, served_profile

log = logging.getLogger(__name__)


class Unreachable(EngineError):
    """The server did not answer its /models (refused, timed out, a 5xx): down, not misconfigured."""


async def models_ready(client: httpx.AsyncClient) -> bool:
    """True when the server answers GET /v1/models (readiness)."""
    try:
        r = await client.get("/models", timeout=10.0)
    except httpx.HTTPError:
        return False
    return r.status_code == 200


async def preflight_card(
    client: httpx.AsyncClient, base_url: str, served_model: str | None, timeout: float, attempts: int = 3
) -> dict[str, Any]:
    """The /v1/models card of the model the engine will use (`served_model`, else the first listed).
    EngineError with the reason when the server cannot be used at all: unreachable, not an
    OpenAI-compatible server, the API key refused, or no such served model."""
    last = ""
    for n in range(attempts):
        try:
            r = await client.get("/models", timeout=timeout)
        except httpx.HTTPError as e:
            last = f"cannot reach {base_url}: {type(e).__name__}: {e or 'connection failed'}"
            await asyncio.sleep(min(4.0, 0.5 * 2**n))
            continue
        if r.status_code in (401, 403):
            raise EngineError(f"{base_url} refused the request (HTTP {r.status_code}): check --api-key")
        if r.status_code >= 500 or r.status_code in RETRYABLE_STATUS:
            last = f"{base_url}/models answered HTTP {r.status_code}"
            await asyncio.sleep(min(4.0, 0.5 * 2**n))
            continue
        if r.status_code != 200:
            raise EngineError(
                f"{base_url}/models answered HTTP {r.status_code}: is this an OpenAI-compatible "
                f"server (vLLM)? {error_message(r)}"
            )
        try:
            ids = [m.get("id") for m in r.json().get("data", [])]
        except (ValueError, AttributeError):
            raise EngineError(f"{base_url}/models did not answer JSON: not an OpenAI-compatible server") from None
        if served_model and served_model not in ids:
            raise EngineError(f"{base_url} serves {ids}, not {served_model!r} (--served-model)")
        if not ids:
            raise EngineError(f"{base_url} serves no model")
        cards: list[dict[str, Any]] = r.json().get("data", [])
        return next((c for c in cards if c.get("id") == served_model), cards[0])
    raise Unreachable(last or f"cannot reach {base_url}")


def profile_for_card(card: dict[str, Any], profile: Profile, chosen: bool, base_url: str) -> Profile:
    """The profile to speak to the server with, from the model it lists: a chosen built-in profile that
    is not the served model is an EngineError; without a chosen one, the served model's profile (kept:
    the default, chandra-2, when the server's model is none of the known ones). A chosen profile that is
    no built-in one (a profile file) is kept as it is."""
    served = served_profile(card if isinstance(card, dict) else {})
    what = card.get("root") or card.get("id") if isinstance(card, dict) else None
    if served is None:
        if not chosen:
            log.warning(
                "%s serves %r, which is no known Chandra checkpoint: using the %s profile (--model chooses another)",
                base_url,
                what,
                profile.name,
            )
        return profile
    if not chosen:
        return served if served.name != profile.name else profile
    if profile.name in PROFILES and served.name != profile.name:
        raise EngineError(
            f"{base_url} serves {what} ({served.name}), but the model profile is "
            f"{profile.name}: pass --model {served.name}, or leave --model out to follow the server"
        )
    return profile


async def first_served(client: httpx.AsyncClient, base_url: str, timeout: float) -> tuple[str, int | None]:
    """(the name of the first model the server lists, its max_model_len when it says): what a request
    names when no model was given. Retry when a retry may help, Fatal when not."""
    try:
        r = await client.get("/models", timeout=timeout)
    except httpx.HTTPError as e:
        raise Retry(f"cannot reach {base_url}/models: {type(e).__name__}: {e}", down=True) from None
    if r.status_code >= 500 or r.status_code in RETRYABLE_STATUS:
        raise Retry(f"GET /models answered HTTP {r.status_code}: {error_message(r)}", down=r.status_code >= 500)
    if r.status_code != 200:
        hint = " (check --api-key)" if r.status_code in (401, 403) else ""
        raise Fatal(f"GET {base_url}/models answered HTTP {r.status_code}{hint}: {error_message(r)}", r.status_code)
    try:
        cards = r.json()["data"]
        name = str(cards[0]["id"])
        mml = cards[0].get("max_model_len")
    except (ValueError, KeyError, IndexError, TypeError):
        raise Fatal(f"{base_url}/models lists no model; pass --served-model") from None
    return name, mml if isinstance(mml, int) and mml > 0 else None
