"""The shop's admin panel (after WebArena's Magento admin) and its task templates, on real
Chromium: every page type, 404s, the signed-out state, form validation, escaping of
hostile text, grids (filters, sorting, pagination), the database it shares with the
shop, then per template one expert success and one plausible failure that must score 0."""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator

import pytest

from webr1_kit.browser import BrowserEnv
from webr1_kit.tasks.arena_templates import admin as admin_templates

from arena_helpers import HOSTILE, episode, episode_db, pristine, reward_after, run_expert, site_url

TEMPLATE_IDS = [t.id for t in admin_templates.TEMPLATES]
START = "admin.sku_stock"  # the template of the episodes the page tests run in


@contextlib.asynccontextmanager
async def _shop_page(browser: Any, env: BrowserEnv) -> AsyncIterator[Any]:
    """A page on the shop in the same episode (the admin task's own tab may only visit the admin)."""
    context = await browser.new_context()
    try:
        await context.add_cookies(await env.context.cookies())
        yield await context.new_page()
    finally:
        await context.close()


def _money(text: str) -> float:
    return float(text.strip().strip("$").replace(",", ""))


# ---------------------------------------------------------------- pages


async def test_every_page_type_loads_and_unknown_routes_are_404(browser):
    async with episode(browser, START) as env:
        page = env.page
        pages = {"/": "Dashboard", "/reports/sales": "Sales Report", "/reports/sales?from=2023-01-01&to=2023-03-31": "Bestsellers",
                 "/orders": "Orders", "/orders?status=pending&sort=total_desc&page=2": "records found", "/orders/1": "Order #",
                 "/products": "Products", "/products?category=2&enabled=1&sort=price_desc": "records found",
                 "/products/1/edit": "Enable Product", "/reviews": "Reviews", "/reviews?status=pending": "records found",
                 "/reviews/1": "Review:", "/customers": "Customers", "/customers?q=austin&sort=since_desc": "records found",
                 "/customers/1": "Orders (", "/customers/1/edit": "Edit Customer"}
        for path, text in pages.items():
            response = await page.goto(site_url("admin", path))
            assert response.status == 200, path
            assert text in await page.inner_text("main"), path
        for path in ("/no/such/page", "/orders/999999", "/products/999999/edit", "/reviews/999999", "/customers/999999"):
            response = await page.goto(site_url("admin", path))
            assert response.status == 404, path


async def test_signed_out_admin_sees_the_sign_in_page(browser):
    async with episode(browser, START) as env:
        episode_db(env, "store").execute("DELETE FROM sessions WHERE site = 'admin'")
        response = await env.page.goto(site_url("admin", "/orders"))
        assert response.status == 401
        assert "please sign in" in (await env.page.inner_text("h1")).lower()
        async with _shop_page(browser, env) as shop:  # the shop's own session is untouched
            response = await shop.goto(site_url("shop", "/"))
            assert response.status == 200 and "Welcome, " in await shop.inner_text("header")


async def test_forms_reject_bad_input_with_messages(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "store")
        await page.goto(site_url("admin", "/products/1/edit"))
        await page.fill("#price", "abc")
        await page.fill("#stock", "-3")
        await page.fill("#name", "")
        await page.click("button:has-text('Save')")
        body = await page.inner_text("main")
        assert "Price must be a number" in body and "Quantity must be between 0 and 99999." in body
        assert "Product name is required." in body
        assert db.execute("SELECT price_cents FROM products WHERE id = 1").fetchone()[0] == pristine("store").execute(
            "SELECT price_cents FROM products WHERE id = 1").fetchone()[0]
        await page.goto(site_url("admin", "/customers/1/edit"))
        await page.fill("#email", pristine("store").execute("SELECT email FROM customers WHERE id = 2").fetchone()[0])
        await page.click("button:has-text('Save Customer')")
        assert "already exists" in await page.inner_text("main")
        await page.fill("#email", "not an email")
        await page.click("button:has-text('Save Customer')")
        assert "Enter a valid email address" in await page.inner_text("main")
        await page.goto(site_url("admin", "/reports/sales?from=2023-13-01&to=2023-01-31"))
        assert "From must be a date" in await page.inner_text("main")
        await page.goto(site_url("admin", "/reports/sales?from=2023-03-01&to=2023-01-31"))
        assert "To must not be before From." in await page.inner_text("main")
        # The status form offers only allowed moves; the server refuses others too.
        oid = db.execute("SELECT id FROM orders WHERE status = 'pending' LIMIT 1").fetchone()[0]
        await page.goto(site_url("admin", f"/orders/{oid}"))
        response = await page.request.post(site_url("admin", f"/orders/{oid}"), form={"status": "complete", "comment": ""})
        assert response.ok and "Choose a valid status." in await response.text()
        assert db.execute("SELECT status FROM orders WHERE id = ?", (oid,)).fetchone()[0] == "pending"


async def test_hostile_text_round_trips_escaped_in_admin_and_shop(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "store")
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await page.goto(site_url("admin", "/products/3/edit"))
        await page.fill("#name", HOSTILE)
        await page.click("button:has-text('Save')")
        assert "You saved the product." in await page.inner_text("body")
        assert db.execute("SELECT name FROM products WHERE id = 3").fetchone()[0] == HOSTILE
        await page.goto(site_url("admin", "/products"))
        await page.fill("#q", "DROP TABLE")
        await page.press("#q", "Enter")
        assert await page.inner_text("#products-grid a") == HOSTILE
        async with _shop_page(browser, env) as shop:  # the shop reads the same database
            await shop.goto(site_url("shop", "/product/3"))
            assert await shop.inner_text("#product-name") == HOSTILE
        assert not dialogs


async def test_grids_filter_sort_and_paginate(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "store")
        await page.goto(site_url("admin", "/orders"))
        await page.select_option("#status", "canceled")
        await page.select_option("#sort", "total_desc")
        await page.click("button:has-text('Search')")
        assert "status=canceled" in page.url and "sort=total_desc" in page.url
        n = db.execute("SELECT COUNT(*) FROM orders WHERE status = 'canceled'").fetchone()[0]
        assert await page.inner_text("#records") == f"{n} records found"
        statuses = await page.locator("#orders-grid tr td:nth-child(6)").all_inner_texts()
        totals = [_money(t) for t in await page.locator("#orders-grid tr td:nth-child(5)").all_inner_texts()]
        assert set(statuses) == {"Canceled"} and totals == sorted(totals, reverse=True)
        # products: a category filter survives pagination
        await page.goto(site_url("admin", "/products?enabled=1&sort=price_asc"))
        first = await page.locator("#products-grid tr td:nth-child(2)").all_inner_texts()
        await page.click("a:has-text('Next')")
        assert "sort=price_asc" in page.url and "page=2" in page.url
        second = await page.locator("#products-grid tr td:nth-child(2)").all_inner_texts()
        assert len(first) == 20 and second and not set(first) & set(second)
        prices = [_money(t) for t in await page.locator("#products-grid tr td:nth-child(5)").all_inner_texts()]
        assert prices == sorted(prices)
        # reviews: the status filter and the column filters combine
        await page.goto(site_url("admin", "/reviews?status=pending&title=a"))
        rows = await page.locator("#reviews-grid tr td:nth-child(3)").all_inner_texts()
        assert rows and set(rows) == {"Pending"}


async def test_admin_and_shop_share_one_database(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "store")
        oid, pid, qty = db.execute("SELECT o.id, oi.product_id, oi.qty FROM orders o JOIN order_items oi"
                                   " ON oi.order_id = o.id WHERE o.customer_id = 1 AND o.status = 'pending' LIMIT 1").fetchone()
        stock = db.execute("SELECT stock FROM products WHERE id = ?", (pid,)).fetchone()[0]
        await page.goto(site_url("admin", f"/orders/{oid}"))
        await page.select_option("#new-status", "canceled")
        await page.fill("#comment", "Customer asked to cancel")
        await page.click("button:has-text('Update Status')")
        assert await page.inner_text("#order-status") == "Canceled"
        assert "Customer asked to cancel" in await page.inner_text("#order-history")
        assert db.execute("SELECT stock FROM products WHERE id = ?", (pid,)).fetchone()[0] == stock + qty
        async with _shop_page(browser, env) as shop:
            await shop.goto(site_url("shop", f"/account/orders/{oid}"))
            assert await shop.inner_text("#order-status") == "Canceled"
        # a review approved in the admin appears on the shop's product page
        rid, rpid, title = db.execute("SELECT id, product_id, title FROM reviews WHERE status = 'pending' LIMIT 1").fetchone()

        async def shown() -> int:
            async with _shop_page(browser, env) as shop:
                await shop.goto(site_url("shop", f"/product/{rpid}"))
                return (await shop.locator(".review h3").all_inner_texts()).count(title)

        before = await shown()
        await page.goto(site_url("admin", f"/reviews/{rid}"))
        await page.click("button:has-text('Approve')")
        assert await page.inner_text("#review-status") == "Approved"
        assert await shown() == before + 1
        await page.goto(site_url("admin", f"/reviews/{rid}"))
        await page.click("button:has-text('Delete Review')")
        assert "The review has been deleted." in await page.inner_text("body")
        assert db.execute("SELECT COUNT(*) FROM reviews WHERE id = ?", (rid,)).fetchone()[0] == 0


# ---------------------------------------------------------------- templates: the expert succeeds


async def test_expert_solves_one_instance_of_every_template(browser):
    _, result = await run_expert(browser, TEMPLATE_IDS)
    rewards = {t.task_id.split("/")[1]: t.reward for t in result.trajectories}
    assert rewards == {t: 1.0 for t in TEMPLATE_IDS}, [
        (t.task_id, t.verdict) for t in result.trajectories if t.reward != 1.0]


# ---------------------------------------------------------------- templates: plausible failures score 0


async def _count_plus_one(page, p, db):
    cid = db.execute("SELECT id FROM customers WHERE first_name || ' ' || last_name = ?", (p["customer"],)).fetchone()[0]
    n = db.execute("SELECT COUNT(*) FROM orders WHERE customer_id = ? AND status = ?", (cid, p["status"])).fetchone()[0]
    return str(n + 1)


async def _runner_up(page, p, db):
    rows = db.execute("""SELECT p.name FROM order_items oi JOIN orders o ON o.id = oi.order_id JOIN products p
                         ON p.id = oi.product_id WHERE o.status != 'canceled' AND o.created BETWEEN ? AND ?
                         GROUP BY p.id ORDER BY SUM(oi.qty) DESC LIMIT 2""", (p["from"], p["to"] + "~")).fetchall()
    return rows[1][0]


async def _stock_plus_one(page, p, db):
    return str(db.execute("SELECT stock FROM products WHERE sku = ?", (p["sku"],)).fetchone()[0] + 1)


async def _status_only(page, p, db):
    other = next(s for s in admin_templates.ORDER_SORTS if s != p["sort"])
    await page.goto(site_url("admin", f"/orders?status={p['status']}&sort={other}"))


async def _price_off_by_a_dollar(page, p, db):
    await page.goto(site_url("admin", f"/products/{p['product_id']}/edit"))
    await page.fill("#price", f"{float(p['price']) + 1:.2f}")
    await page.click("button:has-text('Save')")


async def _disable_another_product(page, p, db):
    await page.goto(site_url("admin", f"/products/{p['product_id'] % 250 + 1}/edit"))
    await page.select_option("#enabled", "0")
    await page.click("button:has-text('Save')")


async def _reject_instead(page, p, db):
    await page.goto(site_url("admin", f"/reviews/{p['review_id']}"))
    await page.click("button:has-text('Reject')")


async def _hold_instead(page, p, db):
    await page.goto(site_url("admin", f"/orders/{p['order_id']}"))
    options = await page.locator("#new-status option").evaluate_all("os => os.map(o => o.value)")
    await page.select_option("#new-status", next(o for o in options if o and o != "canceled"))
    await page.click("button:has-text('Update Status')")


NEGATIVES = {
    "admin.customer_orders": _count_plus_one,
    "admin.top_seller": _runner_up,
    "admin.sku_stock": _stock_plus_one,
    "admin.orders_grid": _status_only,
    "admin.change_price": _price_off_by_a_dollar,
    "admin.disable_product": _disable_another_product,
    "admin.approve_review": _reject_instead,
    "admin.cancel_order": _hold_instead,
}


def test_every_template_has_a_negative_case():
    assert set(NEGATIVES) == set(TEMPLATE_IDS)


@pytest.mark.parametrize("template", TEMPLATE_IDS)
async def test_plausible_failure_scores_zero(browser, template):
    assert await reward_after(browser, template, NEGATIVES[template], "store") == 0.0
