"""The shop's admin panel ("One Stop Market Admin", after WebArena's Magento admin).

It serves the same "store" database as the shop, so a price changed here is the price
the shop shows, and an order placed in the shop appears in the orders grid here.

Pages: dashboard and sales report, orders grid and order view with status changes
(sales.py); products grid and product form, reviews grid and moderation (catalog.py);
customers grid, customer view and customer form (customers.py). Every grid filters
and sorts from fixed maps and paginates; every form validates and shows its errors.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, g, render_template, request

from .. import SiteSpec
from ..shop.data import money, nice_date, status_label
from . import catalog, customers, sales
from .common import current_admin


def register(app: Flask) -> None:
    app.jinja_env.filters["money"] = money
    app.jinja_env.filters["nice_date"] = nice_date
    app.jinja_env.filters["status_label"] = status_label

    @app.before_request
    def _signed_in() -> Any:
        # Runs after the episode is chosen (make_app's hook is registered first).
        if "db" in g and request.endpoint != "static" and current_admin() is None:
            return render_template("signin.html"), 401
        return None

    @app.context_processor
    def _admin_globals() -> dict[str, Any]:
        return {"admin_user": current_admin() if "db" in g else None}

    sales.register(app)
    catalog.register(app)
    customers.register(app)


SITE = SiteSpec(name="admin", title="One Stop Market Admin", db="store", placeholder="__SHOPPING_ADMIN__",
                register=register)
