"""The code-hosting site ("CodeHub", after WebArena's GitLab).

URLs follow GitLab's: the dashboard at /, /explore, user and group pages at /<namespace>,
projects at /<namespace>/<project> with their pages under /-/ (issues, merge_requests,
project_members, labels, milestones, starrers). Every page reads and writes the
episode's "code" database through `g.db`; the signed-in user is the one named by its
`sessions` row (byteblaze in the seed data).

Route modules: projects.py (dashboard, explore, profiles, project, stars, members),
issues.py, merge_requests.py, planning.py (labels, milestones).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, g, url_for

from .. import SiteSpec
from . import issues, merge_requests, planning, projects
from .common import current_user, role_name


def register(app: Flask) -> None:
    """Add the code site's routes, filters and template globals to `app`."""
    app.jinja_env.filters["role_name"] = role_name

    def purl(endpoint: str, p: Any, **kwargs: Any) -> str:
        """url_for a project page: p is a project row (with its namespace path as `ns`)."""
        return url_for(endpoint, ns=p["ns"], proj=p["path"], **kwargs)

    app.jinja_env.globals["purl"] = purl

    @app.context_processor
    def _code_globals() -> dict[str, Any]:
        return {"me": current_user() if "db" in g else None}

    # Fixed paths first in the file for readers; werkzeug prefers them over /<ns> anyway.
    projects.register(app)
    issues.register(app)
    merge_requests.register(app)
    planning.register(app)


SITE = SiteSpec(name="code", title="CodeHub", db="code", placeholder="__GITLAB__", register=register)
