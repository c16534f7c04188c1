"""The fallback of a run's pages, for both schedulers: a model engine is wrapped in FallbackEngine
(`Rescue.wrap`), and the fallback engine (lite) is made when a page first needs it, or is a service's
shared one (its factory's, never closed here).

The wrapped engine holds the Rescue, never the Converter or the Ray stage that owns it, so dropping
the owner drops its engines (a Ray stage closes them in __del__)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ocrserve.engines import Engine, FallbackEngine, create_fallback
from ocrserve.profiles import Profile
from ocrserve.settings import Settings


class Rescue:
    """The fallback engine of one run (or one Ray engine actor). `profile` is the one the fallback is
    made for: set it again when the run settles on another (the profile a server serves)."""

    def __init__(
        self, profile: Profile, settings: Settings, shared: Callable[[], Awaitable[Engine]] | None = None
    ) -> None:
        self.profile = profile
        self.settings = settings
        self.shared = shared  # a service's fallback engine, shared by its runs: not closed here
        self.engine: Engine | None = None

    def wrap(self, engine: Engine) -> Engine:
        """`engine` with its failed pages rescued, when a model reads its pages (lite is not wrapped)."""
        return FallbackEngine(engine, self.get) if engine.innermost().model_engine else engine

    async def get(self) -> Engine:
        """The fallback engine, made (or asked of the shared factory) when first needed."""
        if self.engine is None:
            self.engine = (
                await self.shared() if self.shared is not None else create_fallback(self.profile, self.settings)
            )
        return self.engine

    def owned(self) -> Engine | None:
        """The fallback engine this run made and so closes (None: none made, or a shared one)."""
        return self.engine if self.shared is None else None

    async def aclose(self) -> None:
        engine, self.engine = self.owned(), None
        if engine is not None:
            await engine.aclose()
