"""Task templates on the online shop (__SHOPPING__).

Each template pairs an intent with the instances that the world's data allows, the
eval block that scores them, and the expert that solves them through the browser.
The shop's logged-in customer is customer 1, whose order history has two pages.
"""

from __future__ import annotations

import html
import random
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ...sites.shop.catalog import CITIES, STREETS
from ...sites.shop.data import PAYMENT_METHODS, date_answers, money
from ..arena import Instance, Template, World, answer_eval, page_eval, url_eval
from ._expert import answer, click, click_or_scroll, fill, find, go_back, path, read, scroll_down, search, select, type_text

CUSTOMER = 1
"""The shop's logged-in customer in the seed state."""


def query(obs) -> dict[str, str]:
    """The observation URL's query parameters (first value of each)."""
    return {k: v[0] for k, v in parse_qs(urlsplit(obs.url).query, keep_blank_values=True).items()}


def text(obs) -> str:
    """The page text with HTML entities decoded (the observation escapes &, < and >)."""
    return html.unescape(obs.content)


def _go_to_product(p: dict[str, Any], obs, history, then) -> str:
    """Shared route: search the product by name, open it, then call `then(obs)` on its page."""
    if path(obs) == f"/product/{p['product_id']}":
        return then(obs)
    link = find(obs, name=p["name"], role="link")
    if link is not None:
        return click(f"The results list {p['name']}; open its page.", link)
    box = find(obs, role="searchbox") or find(obs, name="Search")
    if box is not None and not path(obs).startswith("/search"):
        return search(f"Search the store for {p['name']}.", box, p["name"])
    return click_or_scroll(obs, history, f"the link to {p['name']}", name=p["name"], role="link")


def _go_to_my_orders(obs) -> str | None:
    """Open My Account > My Orders; None once the order history is on screen."""
    if path(obs).startswith("/account/orders") and not re.match(r"/account/orders/\d", path(obs)):
        return None
    link = find(obs, name="My Orders", role="link")
    if link is not None:
        return click("My Orders lists every order I placed.", link)
    return click("Open My Account to find my orders.", find(obs, name="My Account", role="link"))


def _next_page(obs, what: str) -> str:
    """Scroll to, then click, the pager's Next link."""
    nxt = find(obs, name="Next", role="link")
    if nxt is not None:
        return click(f"{what} is not on this page; go to the next page.", nxt)
    if "more of the page is below" in obs.content:
        return scroll_down(f"{what} is not in view; scroll down.")
    return answer(f"I cannot find {what}.", "I could not find it")


# ---------------------------------------------------------------- product price (info)


def _price_instances(world: World):
    for r in world.query("store", "SELECT id, name, price_cents FROM products WHERE enabled = 1 ORDER BY id"):
        yield Instance({"product_id": r["id"], "name": r["name"]}, answer_eval(must_include=[money(r["price_cents"])]))


def _price_expert(p, obs, history):
    def on_page(obs):
        price = read(obs, r"Price: (\$[\d,]+\.\d\d)")
        return answer(f"The product page shows the price {price}.", price or "unknown")

    return _go_to_product(p, obs, history, on_page)


PRODUCT_PRICE = Template(
    id="shop.product_price", sites=("shop",), kind="info",
    intent="What is the price of the {name}?", start="__SHOPPING__/", min_steps=3,
    instances=_price_instances, expert=_price_expert,
)


# ---------------------------------------------------------------- open a product page (nav)


def _open_instances(world: World):
    for r in world.query("store", "SELECT id, name FROM products WHERE enabled = 1 ORDER BY id"):
        yield Instance({"product_id": r["id"], "name": r["name"]}, url_eval(f"__SHOPPING__/product/{r['id']}"))


def _open_expert(p, obs, history):
    return _go_to_product(p, obs, history, lambda obs: answer("This is the product's page.", "done"))


OPEN_PRODUCT = Template(
    id="shop.open_product", sites=("shop",), kind="nav",
    intent="Open the product page of the {name}.", start="__SHOPPING__/", min_steps=3,
    instances=_open_instances, expert=_open_expert,
)


# ---------------------------------------------------------------- add to cart (content)


def _cart_instances(world: World):
    rows = world.query("store", "SELECT id, name FROM products WHERE enabled = 1 AND stock > 5 ORDER BY id")
    for k, r in enumerate(rows):
        qty = 1 + k % 3
        yield Instance(
            {"product_id": r["id"], "name": r["name"], "qty": qty},
            page_eval(("__SHOPPING__/cart", f"document.querySelector('input[name=\"qty-{r['id']}\"]').value", str(qty))),
        )


def _add_to_cart_step(p, obs, history) -> str:
    """On the way to the product, or on its page: set the quantity and add it to the cart."""
    def on_page(obs):
        qty = find(obs, name="Qty")
        if qty is not None and (qty.value or "") != str(p["qty"]):
            return type_text(f"Set the quantity to {p['qty']}.", qty, str(p["qty"]))
        return click("Add it to the cart.", find(obs, name="Add to Cart"))

    return _go_to_product(p, obs, history, on_page)


def _cart_expert(p, obs, history):
    if path(obs) == "/cart" and find(obs, name=p["name"], role="link") is not None:
        return answer(f"The cart now holds {p['qty']} of {p['name']}.", "done")
    return _add_to_cart_step(p, obs, history)


ADD_TO_CART = Template(
    id="shop.add_to_cart", sites=("shop",), kind="content",
    intent="Add {qty} of the {name} to my cart.", start="__SHOPPING__/", min_steps=5,
    instances=_cart_instances, expert=_cart_expert,
)


# ---------------------------------------------------------------- reviews of a product (info)


def _reviews_instances(world: World):
    rows = world.query("store", """
        SELECT p.id, p.name, COUNT(r.id) AS n, AVG(r.rating) AS avg FROM products p
        JOIN reviews r ON r.product_id = p.id AND r.status = 'approved'
        WHERE p.enabled = 1 GROUP BY p.id ORDER BY p.id""")
    for r in rows:
        avg = f"{r['avg']:.1f}"
        if avg.split(".")[0] == str(r["n"]):
            continue  # "3" would be found inside "3.7": the count must be told apart from the rating
        yield Instance({"product_id": r["id"], "name": r["name"]}, answer_eval(must_include=[str(r["n"]), avg]))


def _reviews_expert(p, obs, history):
    def on_page(obs):
        m = re.search(r"Rating: ([\d.]+) of 5 from (\d+) reviews?", obs.content)
        if m is None:
            return answer("The page shows no rating.", "no reviews")
        return answer(f"The product page says {m.group(2)} reviews averaging {m.group(1)} of 5.",
                      f"{m.group(2)} reviews, average rating {m.group(1)} out of 5")

    return _go_to_product(p, obs, history, on_page)


PRODUCT_REVIEWS = Template(
    id="shop.product_reviews", sites=("shop",), kind="info",
    intent="How many reviews does the {name} have, and what is its average rating?",
    start="__SHOPPING__/", min_steps=3, instances=_reviews_instances, expert=_reviews_expert,
)


# ---------------------------------------------------------------- total of one of my orders (info)


def _order_total_instances(world: World):
    for r in world.query("store", "SELECT id, number, total_cents FROM orders WHERE customer_id = ? ORDER BY id",
                         (CUSTOMER,)):
        yield Instance({"order_id": r["id"], "number": r["number"]}, answer_eval(must_include=[money(r["total_cents"])]))


def _order_total_expert(p, obs, history):
    number = p["number"]
    total = read(obs, r"Grand Total</td>\s*<td>(\$[\d,]+\.\d\d)</td>")
    if path(obs) == f"/account/orders/{p['order_id']}" and total:
        return answer(f"Order #{number} has a grand total of {total}.", total)
    step = _go_to_my_orders(obs)
    if step is not None:
        return step
    total = read(obs, re.escape(f'data-text="{number}">') + r"\s*</td>\s*<td>[^<]*</td>\s*<td>[^<]*</td>\s*<td>(\$[\d,]+\.\d\d)</td>")
    if total:
        return answer(f"The order history lists #{number} with a total of {total}.", total)
    return _next_page(obs, f"order #{number}")


ORDER_TOTAL = Template(
    id="shop.order_total", sites=("shop",), kind="info",
    intent="What was the grand total of my order #{number}?", start="__SHOPPING__/", min_steps=3,
    instances=_order_total_instances, expert=_order_total_expert,
)


# ---------------------------------------------------------------- when did I last buy X (info)

RECENT_ORDERS = 5
"""Only products from the customer's five newest orders: the expert opens orders newest first."""


def _last_order_instances(world: World):
    orders = world.query("store", "SELECT id, created FROM orders WHERE customer_id = ? ORDER BY created DESC, id DESC",
                         (CUSTOMER,))
    seen: set[int] = set()
    for o in orders[:RECENT_ORDERS]:
        for item in world.query("store", "SELECT p.id, p.name, p.enabled FROM order_items oi"
                                " JOIN products p ON p.id = oi.product_id WHERE oi.order_id = ? ORDER BY oi.id", (o["id"],)):
            if item["id"] in seen:
                continue
            seen.add(item["id"])
            yield Instance({"product_id": item["id"], "name": item["name"]},
                           answer_eval(must_include=[date_answers(o["created"])]))


def _last_order_expert(p, obs, history):
    if re.match(r"/account/orders/\d+$", path(obs)):
        listed = re.search(r"<td>" + re.escape(html.escape(p["name"], quote=False)) + r"</td>", obs.content)
        if find(obs, name=p["name"], role="link") is not None or listed:
            when = read(obs, r"Order Date: ([A-Z][a-z]{2} \d{1,2}, \d{4})")
            return answer(f"This order contains the {p['name']} and was placed on {when}.", when or "unknown")
        return go_back("This order does not contain the product; back to the order list.")
    step = _go_to_my_orders(obs)
    if step is not None:
        return step
    visited = {urlsplit(t.observation["url"]).path for t in history} | {urlsplit(t.url).path for t in history}
    for e in obs.elements:  # order links, newest first
        if e.role == "link" and re.fullmatch(r"\d{9}", e.name):
            if f"/account/orders/{int(e.name) - 100000}" not in visited:
                return click(f"Check order #{e.name}, the newest one I have not opened yet.", e)
    return _next_page(obs, "an order with the product")


LAST_ORDER_WITH = Template(
    id="shop.last_order_with", sites=("shop",), kind="info",
    intent="When did I place my most recent order that contained the {name}?",
    start="__SHOPPING__/", min_steps=6, instances=_last_order_instances, expert=_last_order_expert, held_out=True,
)


# ---------------------------------------------------------------- sorted category listing (nav)

SORTS = {"price_asc": ("price from low to high", "Price: low to high"),
         "price_desc": ("price from high to low", "Price: high to low"),
         "rating": ("customer rating", "Rating")}


def _category_instances(world: World):
    cats = world.query("store", "SELECT c.id, c.name, c.slug, t.name AS parent FROM categories c"
                       " LEFT JOIN categories t ON t.id = c.parent_id ORDER BY c.id")
    keys = list(SORTS)
    for k, c in enumerate(cats):
        sort = keys[k % len(keys)]
        yield Instance({"category": c["name"], "slug": c["slug"], "parent": c["parent"] or "", "sort": sort,
                        "order": SORTS[sort][0]},
                       url_eval(f"__SHOPPING__/category/{c['slug']}?sort={sort}"))


def _category_expert(p, obs, history):
    label = SORTS[p["sort"]][1]
    if path(obs).startswith(f"/category/{p['slug']}"):
        if query(obs).get("sort") == p["sort"]:
            return answer(f"The {p['category']} listing is sorted by {p['order']}.", "done")
        sorter = find(obs, name="Sort by")
        if sorter is not None and (sorter.value or "") != label:
            return select(f"Sort the listing by {label}.", sorter, label)
        return click("Apply the sort order.", find(obs, name="Apply"))
    link = find(obs, name=p["category"], role="link")
    if link is not None:
        return click(f"Open the {p['category']} category.", link)
    return click(f"{p['category']} is a subcategory of {p['parent']}; open that first.",
                 find(obs, name=p["parent"], role="link"))


CATEGORY_SORTED = Template(
    id="shop.category_sorted", sites=("shop",), kind="nav",
    intent="Show me the products in the {category} category sorted by {order}.",
    start="__SHOPPING__/", min_steps=4, instances=_category_instances, expert=_category_expert,
)


# ---------------------------------------------------------------- change my address (content)


def _new_addresses(world: World, n: int) -> list[dict[str, str]]:
    rng = random.Random(f"shop.change_address/{world.seed}")
    current = world.one("store", "SELECT street, city FROM customers WHERE id = ?", (CUSTOMER,))
    out, seen = [], set()
    while len(out) < n:
        city, state, zip3 = rng.choice(CITIES)
        street = f"{rng.randint(2, 999)} {rng.choice(STREETS)}"
        if city == current["city"] or street in seen:
            continue
        seen.add(street)
        out.append({"street": street, "city": city, "state": state, "zip": f"{zip3}{rng.randint(10, 99)}"})
    return out


def _address_instances(world: World):
    for a in _new_addresses(world, 25):
        yield Instance(a, page_eval(
            *[("__SHOPPING__/account/edit", f"document.querySelector('#{key}').value", a[key])
              for key in ("street", "city", "state", "zip")]))


ADDRESS_FIELDS = (("Street Address", "street"), ("City", "city"), ("State", "state"), ("ZIP Code", "zip"))


def _address_expert(p, obs, history):
    if path(obs) == "/account":
        box = text(obs)
        if p["street"] in box and f"{p['city']}, {p['state']} {p['zip']}" in box:
            return answer("My account now shows the new address.", "done")
        return click("Edit the account information to change the address.", find(obs, name="Account Information", role="link"))
    if path(obs) == "/account/edit":
        step = fill(obs, [(label, p[key]) for label, key in ADDRESS_FIELDS], "the account form")
        return step or click("Every field holds the new address; save.", find(obs, name="Save"))
    return click("Open My Account.", find(obs, name="My Account", role="link"))


CHANGE_ADDRESS = Template(
    id="shop.change_address", sites=("shop",), kind="content",
    intent="Change the address in my account to {street}, {city}, {state} {zip}.",
    start="__SHOPPING__/", min_steps=7, instances=_address_instances, expert=_address_expert,
)


# ---------------------------------------------------------------- buy and ship (content)


def _buy_instances(world: World):
    next_order = world.one("store", "SELECT MAX(id) + 1 AS n FROM orders")["n"]
    rows = world.query("store", "SELECT id, name FROM products WHERE enabled = 1 AND stock >= 5 ORDER BY id")
    rng = random.Random(f"shop.buy/{world.seed}")
    addresses = _new_addresses(world, 60)
    for k, r in enumerate(rng.sample(rows, min(60, len(rows)))):
        a = addresses[k]
        qty, payment = rng.choice([1, 2, 2, 3]), PAYMENT_METHODS[k % len(PAYMENT_METHODS)]
        url = f"__SHOPPING__/account/orders/{next_order}"
        yield Instance(
            {"product_id": r["id"], "name": r["name"], "qty": qty, "payment": payment, **a},
            page_eval(
                (url, "document.querySelectorAll('#order-items tbody tr').length", "1"),
                (url, f"document.querySelector('#order-items tr[data-product=\"{r['id']}\"] .qty').innerText", str(qty)),
                (url, "document.querySelector('#shipping-address').innerText",
                 [a["street"], f"{a['city']}, {a['state']} {a['zip']}"]),
                (url, "document.querySelector('#payment-method').innerText", payment),
            ),
        )


def _buy_expert(p, obs, history):
    where = path(obs)
    if where.startswith("/checkout/success/"):
        return answer("The order is placed.", "done")
    if where == "/checkout":
        fields = [(label, p[key]) for label, key in ADDRESS_FIELDS] + [("Payment Method", p["payment"])]
        step = fill(obs, fields, "the checkout form")
        return step or click("The shipping address and payment are filled in; place the order.", find(obs, name="Place Order"))
    if where == "/cart" and find(obs, name=p["name"], role="link") is not None:
        return click_or_scroll(obs, history, "the Proceed to Checkout button", name="Proceed to Checkout")
    return _add_to_cart_step(p, obs, history)


BUY = Template(
    id="shop.buy", sites=("shop",), kind="content",
    intent="Buy {qty} of the {name} and have it shipped to {street}, {city}, {state} {zip}. Pay by {payment}.",
    start="__SHOPPING__/", min_steps=11, instances=_buy_instances, expert=_buy_expert,
)

TEMPLATES = [PRODUCT_PRICE, OPEN_PRODUCT, ADD_TO_CART, PRODUCT_REVIEWS, ORDER_TOTAL, LAST_ORDER_WITH,
             CATEGORY_SORTED, CHANGE_ADDRESS, BUY]
