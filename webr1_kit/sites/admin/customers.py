"""Admin customer pages: the customers grid, a customer's view with their orders, and the
customer form."""

from __future__ import annotations

import re
from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from ..shop.account import read_address, read_phone
from ..shop.data import STATES
from ..web import FormErrors, paginate, sort_clause
from .common import keyword_filter

CUSTOMER_SORTS = {
    "name_asc": "c.last_name ASC, c.first_name ASC, c.id ASC",
    "name_desc": "c.last_name DESC, c.first_name DESC, c.id DESC",
    "email_asc": "c.email ASC",
    "since_desc": "c.created DESC, c.id DESC",
    "since_asc": "c.created ASC, c.id ASC",
}
CUSTOMER_SORT_LABELS = {"name_asc": "Name: A to Z", "name_desc": "Name: Z to A", "email_asc": "Email",
                        "since_desc": "Customer Since: newest first", "since_asc": "Customer Since: oldest first"}
CUSTOMERS_SQL = """
SELECT c.*, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS n_orders
FROM customers c WHERE 1 = 1 {where} ORDER BY {order}
"""
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")


def register(app: Flask) -> None:
    @app.route("/customers")
    def customers() -> str:
        q = request.args.get("q", "").strip()
        sort, order = sort_clause(CUSTOMER_SORTS, "name_asc")
        where, params = keyword_filter(q, ["c.first_name || ' ' || c.last_name", "c.email", "c.phone", "c.city", "c.zip"])
        page = paginate(g.db, CUSTOMERS_SQL.format(where=where, order=order), params, per_page=20)
        return render_template("customers.html", page=page, q=q, sort=sort, sort_labels=CUSTOMER_SORT_LABELS)

    @app.route("/customers/<int:cid>")
    def customer(cid: int) -> str:
        row = g.db.execute(CUSTOMERS_SQL.format(where="AND c.id = ?", order="c.id"), (cid,)).fetchone()
        if row is None:
            abort(404)
        orders = g.db.execute("SELECT * FROM orders WHERE customer_id = ? ORDER BY created DESC, id DESC", (cid,)).fetchall()
        sales = sum(o["total_cents"] for o in orders if o["status"] != "canceled")
        n_reviews = g.db.execute("SELECT COUNT(*) FROM reviews WHERE customer_id = ?", (cid,)).fetchone()[0]
        return render_template("customer.html", c=row, orders=orders, sales=sales, n_reviews=n_reviews)

    @app.route("/customers/<int:cid>/edit", methods=["GET", "POST"])
    def customer_edit(cid: int) -> Any:
        row = g.db.execute("SELECT * FROM customers WHERE id = ?", (cid,)).fetchone()
        if row is None:
            abort(404)
        errors = FormErrors()
        form: Any = dict(row)
        if request.method == "POST":
            form = request.form
            first = errors.text(form, "first_name", "First name", 40)
            last = errors.text(form, "last_name", "Last name", 40)
            email = errors.text(form, "email", "Email", 120)
            if email and "email" not in errors and not EMAIL_RE.match(email):
                errors["email"] = "Enter a valid email address, e.g. name@example.com."
            elif email and g.db.execute("SELECT 1 FROM customers WHERE email = ? AND id != ?", (email, cid)).fetchone():
                errors["email"] = "A customer with this email address already exists."
            phone = read_phone(form, errors)
            address = read_address(form, errors)
            if not errors:
                g.db.execute(
                    "UPDATE customers SET first_name = ?, last_name = ?, email = ?, phone = ?, street = ?, city = ?,"
                    " state = ?, zip = ? WHERE id = ?",
                    (first, last, email, phone, address["street"], address["city"], address["state"], address["zip"], cid),
                )
                flash("You saved the customer.")
                return redirect(url_for("customer", cid=cid))
        return render_template("customer_edit.html", c=row, form=form, errors=errors, states=STATES)
