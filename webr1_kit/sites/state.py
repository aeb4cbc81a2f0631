"""Per-episode site state: every episode gets its own copy of every site database.

A *world* is the seed state of the arena: one SQLite database per data store
("store" for the shop and its admin, "forum", "code"), generated deterministically
from a world seed and kept in memory, pristine. `new_episode()` copies each pristine
database into a fresh in-memory database with SQLite's backup API (a few
milliseconds) and returns an episode id. The browser context carries that id in a
cookie, and the sites serve each request from that episode's copies, so parallel
episodes never see each other's writes and a reset never touches the disk.

Requests without an episode cookie (a person browsing `webr1 sites serve`) share
one "public" episode.
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
from collections import OrderedDict
from typing import Callable

EPISODE_COOKIE = "webr1_episode"
SITES_COOKIE = "webr1_sites"
"""The task's sites joined by "+": pages link to the other ones on multi-site tasks."""
PUBLIC = "public"


class UnknownEpisode(KeyError):
    """The episode id is not (or no longer) held by the store."""


def _connect() -> sqlite3.Connection:
    # One connection per (episode, database) is used by several server threads, one
    # request at a time (guarded by the episode's lock), so thread checks are off.
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class Episode:
    """One episode's databases and the lock that serialises its requests."""

    def __init__(self, dbs: dict[str, sqlite3.Connection]):
        self.dbs = dbs
        self.lock = threading.RLock()

    def close(self) -> None:
        for conn in self.dbs.values():
            conn.close()


class StateStore:
    """Pristine world databases plus an LRU of per-episode copies."""

    def __init__(self, builders: dict[str, Callable[[sqlite3.Connection], None]], max_episodes: int = 256):
        """`builders` maps a database name to a function that creates and fills it."""
        self.pristine: dict[str, sqlite3.Connection] = {}
        for name, build in builders.items():
            conn = _connect()
            build(conn)
            conn.commit()
            self.pristine[name] = conn
        self.max_episodes = max_episodes
        self._episodes: OrderedDict[str, Episode] = OrderedDict()
        self._lock = threading.Lock()
        self._episodes[PUBLIC] = self._copy()

    def _copy(self) -> Episode:
        dbs = {}
        for name, src in self.pristine.items():
            dst = _connect()
            src.backup(dst)
            dbs[name] = dst
        return Episode(dbs)

    def new_episode(self) -> str:
        """A fresh copy of the world; returns its episode id."""
        episode = self._copy()
        key = secrets.token_hex(8)
        with self._lock:
            self._episodes[key] = episode
            while len(self._episodes) > self.max_episodes + 1:  # +1: the public episode stays
                old_key = next(k for k in self._episodes if k != PUBLIC)
                self._episodes.pop(old_key).close()
        return key

    def episode(self, key: str | None) -> Episode:
        """The episode for a cookie value (None: the public episode). Raises UnknownEpisode."""
        key = key or PUBLIC
        with self._lock:
            try:
                episode = self._episodes[key]
            except KeyError:
                raise UnknownEpisode(key) from None
            self._episodes.move_to_end(key)
            return episode

    def release(self, key: str) -> None:
        """Drop an episode's state (its id stops working)."""
        if key == PUBLIC:
            return
        with self._lock:
            episode = self._episodes.pop(key, None)
        if episode is not None:
            episode.close()

    def __len__(self) -> int:
        return len(self._episodes) - 1
