"""The shop's customer pages: checkout, the order confirmation, and "My Account"
(overview, account information form, order history and order details).

The customer is whoever the episode's `sessions` row for "shop" names (customer 1 at
the start). Orders placed here are dated with the world's TODAY and start "pending",
as Magento's do; the admin site (which shares the database) moves them on.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from ..web import FormErrors, paginate
from .data import PAYMENT_METHODS, SHIPPING_CENTS, STATES, TODAY

ZIP_RE = re.compile(r"^\d{5}$")
PHONE_RE = re.compile(r"^[0-9+()\-. ]{7,20}$")


def current_customer() -> Any:
    """The logged-in customer's row, or None when the shop session is logged out."""
    row = g.db.execute("SELECT user_id FROM sessions WHERE site = 'shop'").fetchone()
    if row is None:
        return None
    return g.db.execute("SELECT * FROM customers WHERE id = ?", (row[0],)).fetchone()


def read_address(form: Any, errors: FormErrors) -> dict[str, str]:
    """Street, city, state and ZIP from a form, with their errors added to `errors`.

    Shared by checkout, the account form and the admin's customer form, so every
    address in the store follows the same rules."""
    street = errors.text(form, "street", "Street address", 100)
    city = errors.text(form, "city", "City", 60)
    if city and "city" not in errors and not any(ch.isalpha() for ch in city):
        errors["city"] = "City must contain letters."
    state = errors.choice(form, "state", "State", STATES)
    zip_code = errors.text(form, "zip", "ZIP code", 10)
    if zip_code and "zip" not in errors and not ZIP_RE.match(zip_code):
        errors["zip"] = "ZIP code must be 5 digits, e.g. 15213."
    return {"street": street, "city": city, "state": state, "zip": zip_code}


def read_phone(form: Any, errors: FormErrors) -> str:
    phone = errors.text(form, "phone", "Phone number", 20)
    if phone and "phone" not in errors and not PHONE_RE.match(phone):
        errors["phone"] = "Phone number may only contain digits, spaces and + ( ) - ."
    return phone


def _cart_items(customer_id: int) -> list[Any]:
    return g.db.execute(
        "SELECT ci.qty, p.* FROM cart_items ci JOIN products p ON p.id = ci.product_id"
        " WHERE ci.customer_id = ? ORDER BY ci.id", (customer_id,)
    ).fetchall()


def _own_order(oid: int) -> Any:
    """The logged-in customer's order `oid`, or a 404 (another customer's order is not found)."""
    customer = current_customer()
    order = None
    if customer is not None:
        order = g.db.execute("SELECT * FROM orders WHERE id = ? AND customer_id = ?", (oid, customer["id"])).fetchone()
    if order is None:
        abort(404)
    return order


def _login_required() -> Any:
    return render_template("signin.html"), 401


def register_account(app: Flask) -> None:
    """Add checkout and "My Account" routes to the shop app."""

    @app.route("/checkout", methods=["GET", "POST"])
    def checkout() -> Any:
        customer = current_customer()
        if customer is None:
            return _login_required()
        items = _cart_items(customer["id"])
        if not items:
            flash("You have no items in your shopping cart.")
            return redirect(url_for("cart"))
        errors = FormErrors()
        form: Any = {"ship_name": f"{customer['first_name']} {customer['last_name']}", "street": customer["street"],
                     "city": customer["city"], "state": customer["state"], "zip": customer["zip"]}
        if request.method == "POST":
            form = request.form
            name = errors.text(form, "ship_name", "Full name", 80)
            address = read_address(form, errors)
            payment = errors.choice(form, "payment", "Payment method", PAYMENT_METHODS)
            for i in items:
                if not i["enabled"]:
                    errors["cart"] = f"{i['name']} is no longer available. Remove it from your cart."
                elif i["qty"] > i["stock"]:
                    errors["cart"] = f"Only {i['stock']} of {i['name']} left in stock."
            if not errors:
                oid = _place_order(customer["id"], name, address, payment, items)
                return redirect(url_for("checkout_success", oid=oid))
        subtotal = sum(i["qty"] * i["price_cents"] for i in items)
        return render_template("checkout.html", items=items, subtotal=subtotal, shipping=SHIPPING_CENTS,
                               form=form, errors=errors, states=STATES, payments=PAYMENT_METHODS)

    @app.route("/checkout/success/<int:oid>")
    def checkout_success(oid: int) -> Any:
        return render_template("success.html", order=_own_order(oid))

    @app.route("/account")
    def account() -> Any:
        customer = current_customer()
        if customer is None:
            return _login_required()
        recent = g.db.execute("SELECT * FROM orders WHERE customer_id = ? ORDER BY created DESC, id DESC LIMIT 5",
                              (customer["id"],)).fetchall()
        return render_template("account.html", recent=recent)

    @app.route("/account/edit", methods=["GET", "POST"])
    def account_edit() -> Any:
        customer = current_customer()
        if customer is None:
            return _login_required()
        errors = FormErrors()
        form: Any = dict(customer)
        if request.method == "POST":
            form = request.form
            first = errors.text(form, "first_name", "First name", 40)
            last = errors.text(form, "last_name", "Last name", 40)
            phone = read_phone(form, errors)
            address = read_address(form, errors)
            if not errors:
                g.db.execute(
                    "UPDATE customers SET first_name = ?, last_name = ?, phone = ?, street = ?, city = ?, state = ?,"
                    " zip = ? WHERE id = ?",
                    (first, last, phone, address["street"], address["city"], address["state"], address["zip"],
                     customer["id"]),
                )
                flash("You saved the account information.")
                return redirect(url_for("account"))
        return render_template("account_edit.html", form=form, errors=errors, states=STATES)

    @app.route("/account/orders")
    def orders() -> Any:
        customer = current_customer()
        if customer is None:
            return _login_required()
        page = paginate(g.db, "SELECT * FROM orders WHERE customer_id = ? ORDER BY created DESC, id DESC",
                        (customer["id"],), per_page=10)
        return render_template("orders.html", page=page)

    @app.route("/account/orders/<int:oid>")
    def order(oid: int) -> Any:
        order = _own_order(oid)
        items = g.db.execute(
            "SELECT oi.*, p.name, p.sku, p.enabled FROM order_items oi JOIN products p ON p.id = oi.product_id"
            " WHERE oi.order_id = ? ORDER BY oi.id", (oid,)
        ).fetchall()
        subtotal = sum(i["qty"] * i["price_cents"] for i in items)
        return render_template("order.html", order=order, items=items, subtotal=subtotal)


def register_wishlist(app: Flask) -> None:
    """Add the wish list: save products from their page, see them under My Account, move or remove them."""

    @app.route("/wishlist/add/<int:pid>", methods=["POST"])
    def wishlist_add(pid: int) -> Any:
        customer = current_customer()
        if customer is None:
            return _login_required()
        product = g.db.execute("SELECT * FROM products WHERE id = ? AND enabled = 1", (pid,)).fetchone()
        if product is None:
            abort(404)
        g.db.execute("INSERT INTO wishlist_items (customer_id, product_id, added) VALUES (?, ?, ?)"
                     " ON CONFLICT (customer_id, product_id) DO NOTHING", (customer["id"], pid, TODAY.isoformat()))
        flash(f"{product['name']} has been added to your Wish List.")
        return redirect(url_for("wishlist"))

    @app.route("/account/wishlist", methods=["GET", "POST"])
    def wishlist() -> Any:
        customer = current_customer()
        if customer is None:
            return _login_required()
        if request.method == "POST":  # remove one product
            errors = FormErrors()
            pid = errors.integer(request.form, "product_id", "Product", 1, 10**9)
            if pid is not None and g.db.execute("DELETE FROM wishlist_items WHERE customer_id = ? AND product_id = ?",
                                                (customer["id"], pid)).rowcount:
                flash("The product was removed from your Wish List.")
            else:
                flash("That product is not in your Wish List.")
            return redirect(url_for("wishlist"))
        items = g.db.execute(
            "SELECT w.added, p.* FROM wishlist_items w JOIN products p ON p.id = w.product_id"
            " WHERE w.customer_id = ? AND p.enabled = 1 ORDER BY w.added DESC, w.id DESC", (customer["id"],)
        ).fetchall()
        return render_template("wishlist.html", items=items)


def _place_order(customer_id: int, name: str, address: dict[str, str], payment: str, items: list[Any]) -> int:
    """Turn the cart into a pending order, take the items out of stock, empty the cart."""
    subtotal = sum(i["qty"] * i["price_cents"] for i in items)
    cur = g.db.execute(
        "INSERT INTO orders (number, customer_id, status, created, ship_name, ship_street, ship_city, ship_state,"
        " ship_zip, payment, shipping_cents, total_cents) VALUES ('', ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (customer_id, TODAY.isoformat(), name, address["street"], address["city"], address["state"], address["zip"],
         payment, SHIPPING_CENTS, subtotal + SHIPPING_CENTS),
    )
    oid = cur.lastrowid
    g.db.execute("UPDATE orders SET number = ? WHERE id = ?", (f"{100000 + oid:09d}", oid))
    for i in items:
        g.db.execute("INSERT INTO order_items (order_id, product_id, qty, price_cents) VALUES (?, ?, ?, ?)",
                     (oid, i["id"], i["qty"], i["price_cents"]))
        g.db.execute("UPDATE products SET stock = stock - ? WHERE id = ?", (i["qty"], i["id"]))
    g.db.execute("INSERT INTO order_history (order_id, status, comment, created) VALUES (?, 'pending', ?, ?)",
                 (oid, "Order placed.", TODAY.isoformat()))
    g.db.execute("DELETE FROM cart_items WHERE customer_id = ?", (customer_id,))
    return oid
