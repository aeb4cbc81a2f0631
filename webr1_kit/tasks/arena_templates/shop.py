"""Task templates on the online shop (__SHOPPING__).

Each template pairs an intent with the instances that the world's data allows, the
eval block that scores them, and the expert that solves them through the browser.
"""

from __future__ import annotations

from typing import Any

from ...sites.shop.data import money
from ..arena import Instance, Template, World, answer_eval, page_eval, url_eval
from ._expert import answer, click, click_or_scroll, find, path, read, search, type_text


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


def _cart_expert(p, obs, history):
    if path(obs) == "/cart" and find(obs, name=p["name"], role="link") is not None:
        return answer(f"The cart now holds {p['qty']} of {p['name']}.", "done")

    def on_page(obs):
        qty = find(obs, name="Qty")
        if qty is not None and (qty.value or "") != str(p["qty"]):
            return type_text(f"Set the quantity to {p['qty']}.", qty, str(p["qty"]))
        return click("Add it to the cart.", find(obs, name="Add to Cart"))

    return _go_to_product(p, obs, history, on_page)


ADD_TO_CART = Template(
    id="shop.add_to_cart", sites=("shop",), kind="content",
    intent="Add {qty} of the {name} to my cart.", start="__SHOPPING__/", min_steps=5,
    instances=_cart_instances, expert=_cart_expert,
)

TEMPLATES = [PRODUCT_PRICE, OPEN_PRODUCT, ADD_TO_CART]
