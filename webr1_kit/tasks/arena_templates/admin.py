"""Task templates on the shop's admin panel (__SHOPPING_ADMIN__).

The admin shares the shop's "store" database, so some checks read the result on the
shop's pages too (a new price is the price customers see). The admin experts go
through the grids' filter forms, as a person would: choose the dropdowns, then type
the keyword and press Enter (which submits the whole filter form).
"""

from __future__ import annotations

import calendar
import html
import random
import re
from datetime import date

from ...sites.shop.data import STATUS_LABELS, money
from ..arena import Instance, Template, World, answer_eval, page_eval, url_eval
from ._expert import answer, click, click_or_scroll, fill, find, path, read, search
from .shop import query

SECTIONS = {"/orders": "Sales", "/products": "Catalog", "/customers": "Customers", "/reviews": "Reviews",
            "/reports/sales": "Reports"}


def _open_section(obs, prefix: str) -> str | None:
    """Click the admin menu entry of the grid at `prefix`; None when already on that grid."""
    if path(obs).split("?")[0] == prefix:
        return None
    return click(f"Open {SECTIONS[prefix]} in the admin menu.", find(obs, name=SECTIONS[prefix], role="link"))


def _filter_grid(obs, prefix: str, selects: list[tuple[str, str]], keyword: str, wanted: dict[str, str]) -> str | None:
    """Drive a grid's filter form until the URL shows the `wanted` query; None once it does.

    Dropdowns first, then the keyword typed with Enter, which submits the whole form."""
    step = _open_section(obs, prefix)
    if step is not None:
        return step
    q = query(obs)
    if all(q.get(k, "") == v for k, v in wanted.items()):
        return None
    step = fill(obs, selects, "the grid filters")
    if step is not None:
        return step
    box = find(obs, name="Keyword")
    if box is not None:
        return search(f"Search the grid for {keyword!r}." if keyword else "Apply the filters.", box, keyword)
    return click("Apply the filters.", find(obs, name="Search"))


def _open_row(obs, name: str, what: str) -> str:
    """Click the grid link named `name` (scrolling down to it)."""
    return click_or_scroll(obs, [], what, name=name, role="link")


def _unique_names(world: World) -> dict[int, str]:
    """Customer id -> full name, for the names only one customer has (and no e-mail of another matches)."""
    rows = world.query("store", "SELECT id, first_name || ' ' || last_name AS name, email FROM customers")
    out = {}
    for r in rows:
        words = r["name"].lower().split()
        matches = [o for o in rows if all(w in f"{o['name']} {o['email']}".lower() for w in words)]
        if len(matches) == 1:
            out[r["id"]] = r["name"]
    return out


# ---------------------------------------------------------------- orders of a customer by status (info)


def _customer_orders_instances(world: World):
    names = _unique_names(world)
    rng = random.Random(f"admin.customer_orders/{world.seed}")
    for cid, name in names.items():
        rows = world.query("store", "SELECT status, COUNT(*) AS n FROM orders WHERE customer_id = ? GROUP BY status", (cid,))
        counts = {r["status"]: r["n"] for r in rows}
        if not counts:
            continue
        # Mostly a status the customer has; sometimes one they have none of (the answer is 0).
        status = rng.choice(sorted(counts)) if rng.random() < 0.8 else rng.choice(list(STATUS_LABELS))
        yield Instance({"customer": name, "status": status, "label": STATUS_LABELS[status].lower()},
                       answer_eval(must_include=[str(counts.get(status, 0))]))


def _customer_orders_expert(p, obs, history):
    label = STATUS_LABELS[p["status"]]
    step = _filter_grid(obs, "/orders", [("Status", label)], p["customer"], {"q": p["customer"], "status": p["status"]})
    if step is not None:
        return step
    n = read(obs, r"(\d+) records found")
    return answer(f"Filtered to {p['customer']}'s {label.lower()} orders, the grid finds {n}.", n or "0")


CUSTOMER_ORDERS = Template(
    id="admin.customer_orders", sites=("admin",), kind="info",
    intent="How many {label} orders does {customer} have?", start="__SHOPPING_ADMIN__/", min_steps=4,
    instances=_customer_orders_instances, expert=_customer_orders_expert,
)


# ---------------------------------------------------------------- top seller of a period (info)

QUARTERS = {1: "first", 2: "second", 3: "third", 4: "fourth"}


def _periods(world: World):
    """(label, first day, last day) of every month and quarter with orders."""
    lo, hi = world.one("store", "SELECT MIN(created) AS lo, MAX(created) AS hi FROM orders")
    y, m = int(lo[:4]), int(lo[5:7])
    while (y, m) <= (int(hi[:4]), int(hi[5:7])):
        last = calendar.monthrange(y, m)[1]
        yield f"{calendar.month_name[m]} {y}", date(y, m, 1), date(y, m, last)
        if m % 3 == 0 and (y, m - 2) >= (int(lo[:4]), int(lo[5:7])):
            q = m // 3
            yield f"the {QUARTERS[q]} quarter of {y}", date(y, m - 2, 1), date(y, m, last)
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)


def _top_seller_instances(world: World):
    names = [r["name"] for r in world.query("store", "SELECT name FROM products")]
    for label, start, end in _periods(world):
        rows = world.query("store", """
            SELECT p.name, SUM(oi.qty) AS qty FROM order_items oi JOIN orders o ON o.id = oi.order_id
            JOIN products p ON p.id = oi.product_id
            WHERE o.status != 'canceled' AND o.created BETWEEN ? AND ?
            GROUP BY p.id ORDER BY qty DESC LIMIT 2""", (start.isoformat(), end.isoformat() + "~"))
        if len(rows) < 2 or rows[0]["qty"] == rows[1]["qty"]:
            continue  # a tie has no single answer
        top = rows[0]["name"]
        if any(top in other and top != other for other in names):
            continue  # "X" would also be found in an answer naming "X, Large"
        yield Instance({"period": label, "from": start.isoformat(), "to": end.isoformat()},
                       answer_eval(must_include=[top]))


def _top_seller_expert(p, obs, history):
    if path(obs).split("?")[0] == "/reports/sales":
        q = query(obs)
        if q.get("from") == p["from"] and q.get("to") == p["to"]:
            m = re.search(r"<td>1</td>\s*<td>([^<]+)</td>", obs.content)
            top = html.unescape(m.group(1)) if m else None
            return answer(f"The bestsellers table for {p['period']} ranks {top} first.", top or "unknown")
        step = fill(obs, [("From", p["from"]), ("To", p["to"])], "the report form")
        return step or click("Show the report for these dates.", find(obs, name="Show Report"))
    return _open_section(obs, "/reports/sales")


TOP_SELLER = Template(
    id="admin.top_seller", sites=("admin",), kind="info",
    intent="What was the top-selling product in {period}?", start="__SHOPPING_ADMIN__/", min_steps=5,
    instances=_top_seller_instances, expert=_top_seller_expert,
)


# ---------------------------------------------------------------- stock of a SKU (info)


def _sku_stock_instances(world: World):
    for r in world.query("store", "SELECT sku, stock FROM products ORDER BY id"):
        yield Instance({"sku": r["sku"]}, answer_eval(must_include=[str(r["stock"])]))


def _sku_stock_expert(p, obs, history):
    step = _filter_grid(obs, "/products", [], p["sku"], {"q": p["sku"]})
    if step is not None:
        return step
    stock = read(obs, re.escape(f"<td>{p['sku']}</td>") + r"\s*<td>[^<]*</td>\s*<td>[^<]*</td>\s*<td>(\d+)</td>")
    return answer(f"The products grid shows a quantity of {stock} for {p['sku']}.", stock or "unknown")


SKU_STOCK = Template(
    id="admin.sku_stock", sites=("admin",), kind="info",
    intent="How many units of the product with SKU {sku} are in stock?", start="__SHOPPING_ADMIN__/", min_steps=3,
    instances=_sku_stock_instances, expert=_sku_stock_expert,
)


# ---------------------------------------------------------------- filtered orders grid (nav)

# Not the grid's default (newest first): a URL without ?sort= shows that order too, so it
# would be a correct page that url_match cannot recognise.
ORDER_SORTS = {"date_asc": ("purchase date, oldest first", "Purchase Date: oldest first"),
               "total_desc": ("grand total, highest first", "Grand Total: highest first"),
               "total_asc": ("grand total, lowest first", "Grand Total: lowest first")}


def _orders_grid_instances(world: World):
    for status, label in STATUS_LABELS.items():
        for sort, (words, _) in ORDER_SORTS.items():
            yield Instance({"status": status, "label": label.lower(), "sort": sort, "order": words},
                           url_eval(f"__SHOPPING_ADMIN__/orders?status={status}&sort={sort}"))


def _orders_grid_expert(p, obs, history):
    selects = [("Status", STATUS_LABELS[p["status"]]), ("Sort by", ORDER_SORTS[p["sort"]][1])]
    step = _filter_grid(obs, "/orders", selects, "", {"status": p["status"], "sort": p["sort"]})
    return step or answer("The orders grid shows exactly these orders in this order.", "done")


ORDERS_GRID = Template(
    id="admin.orders_grid", sites=("admin",), kind="nav",
    intent="Show me all {label} orders, sorted by {order}.", start="__SHOPPING_ADMIN__/", min_steps=5,
    instances=_orders_grid_instances, expert=_orders_grid_expert, held_out=True,
)


# ---------------------------------------------------------------- edit a product (content)


def _product_step(p, obs, fields: list[tuple[str, str]], done: str) -> str:
    """Find the product in the grid, open it, set `fields` and save; answer once saved."""
    if path(obs) == f"/products/{p['product_id']}/edit":
        step = fill(obs, fields, "the product form")
        if step is not None:
            return step
        if "You saved the product." in obs.content:
            return answer(done, "done")
        return click("The form holds the new values; save the product.", find(obs, name="Save"))
    step = _filter_grid(obs, "/products", [], p["name"], {"q": p["name"]})
    return step or _open_row(obs, p["name"], f"the {p['name']} row")


def _price_instances(world: World):
    rng = random.Random(f"admin.change_price/{world.seed}")
    for r in world.query("store", "SELECT id, name, price_cents FROM products WHERE enabled = 1 ORDER BY id"):
        new = max(199, round(r["price_cents"] * rng.choice([0.75, 0.85, 1.1, 1.2, 1.3]) / 100) * 100 - 1)
        if new == r["price_cents"]:
            new += 100
        value = f"{new / 100:.2f}"
        yield Instance(
            {"product_id": r["id"], "name": r["name"], "price": value},
            page_eval((f"__SHOPPING_ADMIN__/products/{r['id']}/edit", "document.querySelector('#price').value", value),
                      (f"__SHOPPING__/product/{r['id']}", "document.querySelector('#product-price').innerText", money(new))),
        )


def _price_expert(p, obs, history):
    return _product_step(p, obs, [("Price ($)", p["price"])], f"The {p['name']} now costs ${p['price']}.")


CHANGE_PRICE = Template(
    id="admin.change_price", sites=("admin",), kind="content",
    intent="Change the price of the {name} to ${price}.", start="__SHOPPING_ADMIN__/", min_steps=6,
    instances=_price_instances, expert=_price_expert,
)


def _disable_instances(world: World):
    for r in world.query("store", "SELECT id, name FROM products WHERE enabled = 1 ORDER BY id"):
        yield Instance(
            {"product_id": r["id"], "name": r["name"]},
            page_eval((f"__SHOPPING_ADMIN__/products/{r['id']}/edit", "document.querySelector('#enabled').value", "0"),
                      (f"__SHOPPING__/product/{r['id']}",
                       "document.querySelector('#product-name') ? 'on sale' : 'not on sale'", "not on sale")),
        )


def _disable_expert(p, obs, history):
    return _product_step(p, obs, [("Enable Product", "Disabled")], f"The {p['name']} is disabled.")


DISABLE_PRODUCT = Template(
    id="admin.disable_product", sites=("admin",), kind="content",
    intent="Disable the product {name} so that it is no longer sold.", start="__SHOPPING_ADMIN__/", min_steps=6,
    instances=_disable_instances, expert=_disable_expert, held_out=True,
)


# ---------------------------------------------------------------- approve a review (content)


def _approve_instances(world: World):
    pending = world.query("store", "SELECT id, title, nickname FROM reviews WHERE status = 'pending' ORDER BY id")
    for r in pending:
        # The grid filters match substrings; the title and nickname must single this review out.
        same = [o for o in pending if r["title"].lower() in o["title"].lower() and r["nickname"].lower() in o["nickname"].lower()]
        if len(same) == 1:
            yield Instance({"review_id": r["id"], "title": r["title"], "nickname": r["nickname"]},
                           page_eval((f"__SHOPPING_ADMIN__/reviews/{r['id']}",
                                      "document.querySelector('#review-status').innerText", "Approved")))


def _approve_expert(p, obs, history):
    if path(obs) == f"/reviews/{p['review_id']}":
        if read(obs, r"Status: (\w+)") == "Approved":
            return answer("The review is approved.", "done")
        return click("This is the review; approve it.", find(obs, name="Approve"))
    step = _open_section(obs, "/reviews")
    if step is not None:
        return step
    q = query(obs)
    if q.get("status") == "pending" and q.get("title") == p["title"] and q.get("nickname") == p["nickname"]:
        return _open_row(obs, p["title"], f"the review titled {p['title']}")
    step = fill(obs, [("Status", "Pending"), ("Title", p["title"]), ("Nickname", p["nickname"])], "the review filters")
    return step or click("Search with these filters.", find(obs, name="Search"))


APPROVE_REVIEW = Template(
    id="admin.approve_review", sites=("admin",), kind="content",
    intent='Approve the pending review titled "{title}" by {nickname}.', start="__SHOPPING_ADMIN__/", min_steps=8,
    instances=_approve_instances, expert=_approve_expert,
)


# ---------------------------------------------------------------- cancel an order (content)


def _cancel_instances(world: World):
    for r in world.query("store", "SELECT id, number FROM orders WHERE status IN ('pending', 'processing', 'on_hold')"
                         " ORDER BY id"):
        yield Instance({"order_id": r["id"], "number": r["number"]},
                       page_eval((f"__SHOPPING_ADMIN__/orders/{r['id']}",
                                  "document.querySelector('#order-status').innerText", "Canceled")))


def _cancel_expert(p, obs, history):
    if path(obs) == f"/orders/{p['order_id']}":
        if read(obs, r"Order Status: (\w+)") == "Canceled":
            return answer(f"Order #{p['number']} is canceled.", "done")
        step = fill(obs, [("Change Status", "Canceled")], "the status form")
        return step or click("Save the new status.", find(obs, name="Update Status"))
    step = _filter_grid(obs, "/orders", [], p["number"], {"q": p["number"]})
    return step or _open_row(obs, p["number"], f"order #{p['number']}")


CANCEL_ORDER = Template(
    id="admin.cancel_order", sites=("admin",), kind="content",
    intent="Cancel order #{number}.", start="__SHOPPING_ADMIN__/", min_steps=6,
    instances=_cancel_instances, expert=_cancel_expert,
)

TEMPLATES = [CUSTOMER_ORDERS, TOP_SELLER, SKU_STOCK, ORDERS_GRID, CHANGE_PRICE, DISABLE_PRODUCT, APPROVE_REVIEW,
             CANCEL_ORDER]
