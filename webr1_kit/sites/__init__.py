"""The arena: small but real self-hosted websites modelled on WebArena's.

    arena = get_arena(world_seed=0)     # builds the world and starts every site on 127.0.0.1
    arena.urls                          # {"shop": "http://127.0.0.1:PORT", ...}
    episode = arena.new_episode()       # fresh copies of every database, in milliseconds

Each site is a server-rendered Flask app on its own port (as WebArena's sites each have
their own origin), serving each request from the databases of the episode named by
the request's cookie (see state.py). The sites start in daemon threads of this process,
so they also run inside a Jupyter kernel; `webr1 sites serve` runs them for people.

Site URLs appear in task files as WebArena-style placeholders (__SHOPPING__, ...),
which the arena suite replaces with these URLs.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass
from typing import Callable

from .state import EPISODE_COOKIE, StateStore

__all__ = ["Arena", "SiteSpec", "site_specs", "get_arena", "EPISODE_COOKIE"]


@dataclass(frozen=True)
class SiteSpec:
    """One arena site: its name, the database it serves, and its task-file placeholder."""

    name: str
    title: str
    db: str
    placeholder: str
    register: Callable
    """register(app): add the site's routes to a Flask app made by web.make_app."""


def site_specs() -> tuple[SiteSpec, ...]:
    """Every arena site, in a fixed order."""
    from . import code as code_site
    from . import admin, forum, shop

    return (shop.SITE, admin.SITE, forum.SITE, code_site.SITE)


def _databases() -> dict[str, Callable]:
    """Database name -> build(conn, seed), for every database the sites use."""
    from .code import data as code_data
    from .forum import data as forum_data
    from .shop import data as shop_data

    return {"store": shop_data.build, "forum": forum_data.build, "code": code_data.build}


class Arena:
    """The arena's world (seed state) and its running sites."""

    def __init__(self, world_seed: int = 0, ports: dict[str, int] | None = None, max_episodes: int = 256):
        self.world_seed = world_seed
        self.ports = dict(ports or {})
        self.max_episodes = max_episodes
        self.store: StateStore | None = None
        self.servers: dict = {}
        self.build_seconds = 0.0

    def start(self) -> "Arena":
        """Build the world (deterministic from the seed) and start every site."""
        from .web import SiteServer, make_app

        if self.servers:
            return self
        t0 = time.perf_counter()
        builders = {name: functools.partial(build, seed=self.world_seed) for name, build in _databases().items()}
        self.store = StateStore(builders, max_episodes=self.max_episodes)
        self.build_seconds = time.perf_counter() - t0
        try:
            for spec in site_specs():
                app = make_app(spec, self.store, lambda: self.urls)
                self.servers[spec.name] = SiteServer(app, self.ports.get(spec.name, 0))
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def urls(self) -> dict[str, str]:
        """Base URL of every running site."""
        return {name: server.url for name, server in self.servers.items()}

    @property
    def placeholders(self) -> dict[str, str]:
        """Task-file placeholder -> base URL (e.g. "__SHOPPING__" -> "http://127.0.0.1:PORT")."""
        urls = self.urls
        return {spec.placeholder: urls[spec.name] for spec in site_specs() if spec.name in urls}

    def new_episode(self) -> str:
        """Fresh copies of every database; returns the episode id for the cookie."""
        assert self.store is not None, "start() the arena first"
        return self.store.new_episode()

    def release(self, episode: str) -> None:
        if self.store is not None:
            self.store.release(episode)

    def db(self, episode: str | None, name: str):
        """An episode's database connection (for evaluators and tests)."""
        assert self.store is not None, "start() the arena first"
        return self.store.episode(episode).dbs[name]

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.servers = {}

    def __enter__(self) -> "Arena":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_arenas: dict[int, Arena] = {}
_lock = threading.Lock()


def get_arena(world_seed: int = 0) -> Arena:
    """The process-wide arena for a world seed, started on first use (free ports)."""
    with _lock:
        arena = _arenas.get(world_seed)
        if arena is None:
            arena = _arenas[world_seed] = Arena(world_seed).start()
        return arena
