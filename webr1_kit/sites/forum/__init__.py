"""The forum ("Postmill", after WebArena's Reddit clone).

Pages: the front page and forum listings sorted hot/new/top with pagination, the list
of forums, post pages with one level of nested comments and vote buttons, submitting,
editing and deleting your own posts, comments and replies, subscriptions, user pages,
search, and the logged-in user's profile. Everything reads and writes the episode's
"forum" database through `g.db`; routes live in pages.py (reading) and actions.py
(forms).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, g

from .. import SiteSpec
from . import actions, pages
from .common import current_user, here, post_url, slugify


def register(app: Flask) -> None:
    """Add the forum's routes and template helpers to `app`."""
    app.jinja_env.globals.update(post_url=post_url, slugify=slugify, here=here)

    @app.context_processor
    def _forum_globals() -> dict[str, Any]:
        return {"me": current_user() if "db" in g else None}

    pages.register(app)
    actions.register(app)


SITE = SiteSpec(name="forum", title="Postmill", db="forum", placeholder="__REDDIT__", register=register)
