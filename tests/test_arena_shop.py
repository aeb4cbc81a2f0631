"""The online shop (One Stop Market, after WebArena's Magento storefront) and its task
templates, on real Chromium: every page type, 404s, form validation, escaping of hostile
text, pagination, the checkout flow, then per template one expert success and one
plausible failure that must score 0."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from webr1_kit.sites.shop import data
from webr1_kit.tasks.arena_templates import shop as shop_templates

from arena_helpers import HOSTILE, do_nothing, episode, episode_db, pristine, reward_after, run_expert, site_url

TEMPLATE_IDS = [t.id for t in shop_templates.TEMPLATES]
START = "shop.product_price"  # the template of the episodes the page tests run in


async def _add_to_cart(page: Any, pid: int, qty: int) -> None:
    await page.goto(site_url("shop", f"/product/{pid}"))
    await page.fill("#qty", str(qty))
    await page.click("button:has-text('Add to Cart')")


async def _checkout(page: Any, street: str, city: str, state: str, zip_code: str, payment: str) -> None:
    await page.goto(site_url("shop", "/checkout"))
    await page.fill("#street", street)
    await page.fill("#city", city)
    await page.select_option("#state", state)
    await page.fill("#zip", zip_code)
    await page.select_option("#payment", payment)
    await page.click("button:has-text('Place Order')")


# ---------------------------------------------------------------- the seed data


def test_seed_data_is_deterministic_and_realistic():
    a, b = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    data.build(a, 0)
    data.build(b, 0)
    assert list(a.iterdump()) == list(b.iterdump())
    db = pristine("store")
    counts = {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
              for t in ("products", "customers", "reviews", "orders", "order_items")}
    assert counts["products"] > 250 and counts["customers"] >= 150 and counts["reviews"] > 500 and counts["orders"] > 300
    # Prices fit the product: tents are never pocket money, snacks never cost hundreds.
    tents = db.execute("SELECT MIN(price_cents) FROM products WHERE name LIKE '%Tent%'").fetchone()[0]
    snacks = db.execute("SELECT MAX(price_cents) FROM products p JOIN categories c ON c.id = p.category_id"
                        " WHERE c.name = 'Snacks'").fetchone()[0]
    assert tents >= 6000 and snacks <= 2500
    assert not db.execute("SELECT 1 FROM products WHERE name LIKE '%Tent%Unscented%'").fetchall()
    # Every order's total is its items plus shipping, and order items predate nothing.
    bad = db.execute("""SELECT o.id FROM orders o JOIN order_items oi ON oi.order_id = o.id GROUP BY o.id
                        HAVING o.total_cents != SUM(oi.qty * oi.price_cents) + o.shipping_cents""").fetchall()
    assert not bad
    assert db.execute("SELECT COUNT(*) FROM orders WHERE customer_id = 1").fetchone()[0] == data.SHOP_CUSTOMER_ORDERS


# ---------------------------------------------------------------- pages


async def test_every_page_type_loads_and_unknown_routes_are_404(browser):
    async with episode(browser, START) as env:
        page = env.page
        pid = episode_db(env, "store").execute("SELECT id FROM products WHERE stock > 5 ORDER BY id LIMIT 1").fetchone()[0]
        await _add_to_cart(page, pid, 1)
        pages = {"/": "Welcome to One Stop Market", "/category/sports-outdoors": "Sports & Outdoors",
                 "/category/camping?sort=price_asc&page=2": "Camping", "/search?q=tent": "Search results for",
                 "/product/1": "Customer reviews", "/cart": "Shopping Cart", "/checkout": "Checkout",
                 "/account": "My Account", "/account/edit": "Edit Account Information", "/account/orders": "My Orders",
                 "/account/orders/1": "Order #", "/account/wishlist": "My Wish List"}
        for path, heading in pages.items():
            response = await page.goto(site_url("shop", path))
            assert response.status == 200, path
            assert heading in await page.inner_text("main"), path
        other = pristine("store").execute("SELECT id FROM orders WHERE customer_id != 1 LIMIT 1").fetchone()[0]
        for path in ("/no/such/page", "/product/999999", "/category/nope", f"/account/orders/{other}",
                     "/checkout/success/999999"):
            response = await page.goto(site_url("shop", path))
            assert response.status == 404, path


async def test_checkout_places_the_order_empties_the_cart_and_takes_stock(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "store")
        pid, stock = db.execute("SELECT id, stock FROM products WHERE stock > 5 ORDER BY id LIMIT 1").fetchone()
        await _add_to_cart(page, pid, 2)
        await _checkout(page, "1 Test Way", "Boston", "MA", "02134", "PayPal")
        assert "Thank you for your purchase!" in await page.inner_text("h1")
        number = await page.inner_text("#order-number")
        row = db.execute("SELECT * FROM orders WHERE number = ?", (number,)).fetchone()
        assert row["status"] == "pending" and row["ship_city"] == "Boston" and row["payment"] == "PayPal"
        assert db.execute("SELECT stock FROM products WHERE id = ?", (pid,)).fetchone()[0] == stock - 2
        assert db.execute("SELECT COUNT(*) FROM cart_items").fetchone()[0] == 0
        await page.click("#order-number")
        assert await page.inner_text("#order-total") == data.money(row["total_cents"])
        assert "1 Test Way" in await page.inner_text("#shipping-address")
        await page.goto(site_url("shop", "/account/orders"))  # the newest order comes first in the history
        assert await page.inner_text("#my-orders tr:nth-child(2) td:first-child") == number


async def test_wish_list_saves_moves_and_removes_products(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "store")
        saved = db.execute("SELECT COUNT(*) FROM wishlist_items WHERE customer_id = 1").fetchone()[0]
        pid, name = db.execute("SELECT id, name FROM products WHERE stock > 5 AND id NOT IN"
                               " (SELECT product_id FROM wishlist_items WHERE customer_id = 1) LIMIT 1").fetchone()
        await page.goto(site_url("shop", f"/product/{pid}"))
        await page.click("button:has-text('Add to Wish List')")
        assert page.url.endswith("/account/wishlist")
        assert await page.locator("#wishlist tr[data-product]").count() == saved + 1
        await page.click(f"#wishlist tr[data-product='{pid}'] button:has-text('Add to Cart')")
        assert db.execute("SELECT qty FROM cart_items WHERE customer_id = 1 AND product_id = ?", (pid,)).fetchone()[0] == 1
        await page.goto(site_url("shop", "/account/wishlist"))
        await page.click(f"#wishlist tr[data-product='{pid}'] button:has-text('Remove')")
        assert "removed from your Wish List" in await page.inner_text(".flash")
        assert name not in await page.inner_text("main")
        assert (await page.request.post(site_url("shop", "/wishlist/add/999999"))).status == 404


async def test_forms_reject_bad_input_with_messages(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "store")
        await page.goto(site_url("shop", "/account/edit"))
        await page.fill("#zip", "12ab")
        await page.fill("#city", "")
        await page.click("button:has-text('Save')")
        body = await page.inner_text("main")
        assert "ZIP code must be 5 digits" in body and "City is required." in body
        assert db.execute("SELECT zip FROM customers WHERE id = 1").fetchone()[0] != "12ab"
        # checkout without a payment method places no order and keeps the cart
        await _add_to_cart(page, db.execute("SELECT id FROM products WHERE stock > 5 LIMIT 1").fetchone()[0], 1)
        await page.goto(site_url("shop", "/checkout"))
        await page.click("button:has-text('Place Order')")
        assert "Choose a valid payment method." in await page.inner_text("main")
        assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == pristine("store").execute(
            "SELECT COUNT(*) FROM orders").fetchone()[0]
        assert db.execute("SELECT COUNT(*) FROM cart_items").fetchone()[0] == 1
        # a review without a rating is refused
        await page.goto(site_url("shop", "/product/2"))
        await page.fill("#title", "Nice")
        await page.fill("#body", "Nice product")
        await page.click("button:has-text('Submit Review')")
        assert "Rating must be a whole number." in await page.inner_text("#review-form")


async def test_hostile_text_round_trips_escaped(browser):
    async with episode(browser, START) as env:
        page, db = env.page, episode_db(env, "store")
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await page.goto(site_url("shop", "/account/edit"))
        await page.fill("#street", HOSTILE)
        await page.fill("#city", "Zürich")
        await page.click("button:has-text('Save')")
        assert db.execute("SELECT street FROM customers WHERE id = 1").fetchone()[0] == HOSTILE
        assert HOSTILE in await page.inner_text("#default-address")
        await page.goto(site_url("shop", "/search?q=" + "%3Cscript%3E%27%25_"))
        assert "<script>'%_" in await page.inner_text("h1")
        assert not dialogs


async def test_pagination_and_sorting(browser):
    async with episode(browser, START) as env:
        page = env.page
        await page.goto(site_url("shop", "/account/orders"))
        first = await page.locator("#my-orders a[aria-label^='View Order']").count()
        await page.click("a:has-text('Next')")
        assert "page=2" in page.url
        second = await page.locator("#my-orders a[aria-label^='View Order']").count()
        assert (first, second) == (10, data.SHOP_CUSTOMER_ORDERS - 10)
        await page.goto(site_url("shop", "/category/electronics?sort=price_asc"))
        prices = [float(p.strip("$").replace(",", "")) for p in await page.locator(".products .price").all_inner_texts()]
        assert prices == sorted(prices) and len(prices) == 12
        await page.click("a:has-text('Next')")
        later = [float(p.strip("$").replace(",", "")) for p in await page.locator(".products .price").all_inner_texts()]
        assert later and min(later) >= max(prices)


# ---------------------------------------------------------------- templates: the expert succeeds


async def test_expert_solves_one_instance_of_every_template(browser):
    _, result = await run_expert(browser, TEMPLATE_IDS)
    rewards = {t.task_id.split("/")[1]: t.reward for t in result.trajectories}
    assert rewards == {t: 1.0 for t in TEMPLATE_IDS}, [
        (t.task_id, t.verdict) for t in result.trajectories if t.reward != 1.0]


# ---------------------------------------------------------------- templates: plausible failures score 0


async def _wrong_price(page, p, db):
    other = db.execute("SELECT price_cents FROM products WHERE id != ? AND price_cents != "
                       "(SELECT price_cents FROM products WHERE id = ?) LIMIT 1", (p["product_id"], p["product_id"])).fetchone()[0]
    return data.money(other)


async def _other_product_page(page, p, db):
    await page.goto(site_url("shop", f"/product/{p['product_id'] % 250 + 1}"))


async def _one_too_many(page, p, db):
    await _add_to_cart(page, p["product_id"], p["qty"] + 1)


async def _wrong_average(page, p, db):
    n, avg = db.execute("SELECT COUNT(*), AVG(rating) FROM reviews WHERE product_id = ? AND status = 'approved'",
                        (p["product_id"],)).fetchone()
    wrong = 5.0 if f"{avg:.1f}" != "5.0" else 1.0
    return f"{n} reviews, average rating {wrong:.1f}"


async def _other_order_total(page, p, db):
    total = db.execute("SELECT total_cents FROM orders WHERE customer_id = 1 AND id != ? AND total_cents !="
                       " (SELECT total_cents FROM orders WHERE id = ?)", (p["order_id"], p["order_id"])).fetchone()[0]
    return data.money(total)


async def _oldest_order_date(page, p, db):
    created = db.execute("SELECT MIN(created) FROM orders WHERE customer_id = 1").fetchone()[0]
    return data.nice_date(created)


async def _unsorted_category(page, p, db):
    await page.goto(site_url("shop", f"/category/{p['slug']}?sort=name"))


async def _address_without_zip(page, p, db):
    await page.goto(site_url("shop", "/account/edit"))
    await page.fill("#street", p["street"])
    await page.fill("#city", p["city"])
    await page.select_option("#state", p["state"])
    await page.click("button:has-text('Save')")


async def _buy_with_other_payment(page, p, db):
    await _add_to_cart(page, p["product_id"], p["qty"])
    other = next(m for m in data.PAYMENT_METHODS if m != p["payment"])
    await _checkout(page, p["street"], p["city"], p["state"], p["zip"], other)
    assert "Thank you" in await page.inner_text("h1")


NEGATIVES = {
    "shop.product_price": _wrong_price,
    "shop.open_product": _other_product_page,
    "shop.add_to_cart": _one_too_many,
    "shop.product_reviews": _wrong_average,
    "shop.order_total": _other_order_total,
    "shop.last_order_with": _oldest_order_date,
    "shop.category_sorted": _unsorted_category,
    "shop.change_address": _address_without_zip,
    "shop.buy": _buy_with_other_payment,
}


def test_every_template_has_a_negative_case():
    assert set(NEGATIVES) == set(TEMPLATE_IDS)


@pytest.mark.parametrize("template", TEMPLATE_IDS)
async def test_plausible_failure_scores_zero(browser, template):
    assert await reward_after(browser, template, NEGATIVES[template], "store") == 0.0


@pytest.mark.parametrize("template", ["shop.add_to_cart", "shop.change_address", "shop.buy", "shop.open_product"])
async def test_doing_nothing_scores_zero(browser, template):
    assert await reward_after(browser, template, do_nothing, "store") == 0.0
