"""Shared fixtures: one real headless Chromium and one local HTTP server per test session.

Async tests run on one session-wide event loop (see pyproject.toml), because
Playwright objects belong to the loop that created them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio

from webr1_kit.browser import Browser
from webr1_kit.tasks.miniwob import StaticServer

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def fixture_server():
    """tests/fixtures/ served on 127.0.0.1 (free port)."""
    server = StaticServer(FIXTURES)
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="session")
async def browser():
    """One Chromium for the whole session; each environment gets its own context."""
    b = Browser()
    await b.start()
    yield b
    await b.close()
