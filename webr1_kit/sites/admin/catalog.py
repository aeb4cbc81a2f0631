"""Admin catalog pages: the products grid and product form, and review moderation
(reviews grid, review view with approve / reject / delete)."""

from __future__ import annotations

import re
from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from ..shop.data import REVIEW_STATUSES
from ..web import FormErrors, paginate, sort_clause
from .common import keyword_filter, like

PRODUCT_SORTS = {
    "id_asc": "p.id ASC",
    "name_asc": "p.name ASC",
    "price_asc": "p.price_cents ASC, p.name ASC",
    "price_desc": "p.price_cents DESC, p.name ASC",
    "stock_asc": "p.stock ASC, p.name ASC",
    "stock_desc": "p.stock DESC, p.name ASC",
}
PRODUCT_SORT_LABELS = {"id_asc": "ID", "name_asc": "Name", "price_asc": "Price: low to high",
                       "price_desc": "Price: high to low", "stock_asc": "Quantity: low to high",
                       "stock_desc": "Quantity: high to low"}
PRODUCTS_SQL = """
SELECT p.*, c.name AS category FROM products p JOIN categories c ON c.id = p.category_id
WHERE 1 = 1 {where} ORDER BY {order}
"""
REVIEWS_SQL = """
SELECT r.*, p.name AS product FROM reviews r JOIN products p ON p.id = r.product_id
WHERE 1 = 1 {where} ORDER BY r.created DESC, r.id DESC
"""
PRICE_RE = re.compile(r"^\d{1,6}(\.\d{1,2})?$")
SKU_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9\-_.]{1,39}$")


def _categories() -> list[Any]:
    """Subcategories (products live in those) with their parent's name, in catalogue order."""
    return g.db.execute(
        "SELECT c.id, c.name, t.name AS parent FROM categories c JOIN categories t ON t.id = c.parent_id ORDER BY c.id"
    ).fetchall()


def read_price(form: Any, errors: FormErrors) -> int | None:
    """A price field ("34.99", "$1,034.50") in cents, or None with an error."""
    raw = (form.get("price") or "").strip().replace("$", "").replace(",", "")
    if not PRICE_RE.match(raw):
        errors["price"] = "Price must be a number with at most two decimals, e.g. 34.99."
        return None
    cents = round(float(raw) * 100)
    if cents <= 0:
        errors["price"] = "Price must be greater than 0."
        return None
    return cents


def register(app: Flask) -> None:
    @app.route("/products")
    def products() -> str:
        q = request.args.get("q", "").strip()
        category = request.args.get("category", "")
        enabled = request.args.get("enabled", "")
        sort, order = sort_clause(PRODUCT_SORTS, "id_asc")
        where, params = keyword_filter(q, ["p.name", "p.sku"])
        cats = _categories()
        if category.isdigit() and any(c["id"] == int(category) for c in cats):
            where += " AND p.category_id = ?"
            params.append(int(category))
        else:
            category = ""
        if enabled in ("0", "1"):
            where += " AND p.enabled = ?"
            params.append(int(enabled))
        else:
            enabled = ""
        page = paginate(g.db, PRODUCTS_SQL.format(where=where, order=order), params, per_page=20)
        return render_template("products.html", page=page, q=q, category=category, enabled=enabled, sort=sort,
                               categories=cats, sort_labels=PRODUCT_SORT_LABELS)

    @app.route("/products/<int:pid>/edit", methods=["GET", "POST"])
    def product_edit(pid: int) -> Any:
        row = g.db.execute(PRODUCTS_SQL.format(where="AND p.id = ?", order="p.id"), (pid,)).fetchone()
        if row is None:
            abort(404)
        errors = FormErrors()
        form: Any = {**dict(row), "price": f"{row['price_cents'] / 100:.2f}"}
        cats = _categories()
        if request.method == "POST":
            form = request.form
            name = errors.text(form, "name", "Product name", 120)
            sku = errors.text(form, "sku", "SKU", 40)
            if sku and "sku" not in errors and not SKU_RE.match(sku):
                errors["sku"] = "SKU may only contain letters, digits, - _ and ."
            price = read_price(form, errors)
            stock = errors.integer(form, "stock", "Quantity", 0, 99999)
            enabled = errors.choice(form, "enabled", "Status", ("0", "1"))
            category = errors.choice(form, "category_id", "Category", [str(c["id"]) for c in cats])
            description = errors.text(form, "description", "Description", 4000, required=False)
            if name and g.db.execute("SELECT 1 FROM products WHERE name = ? AND id != ?", (name, pid)).fetchone():
                errors["name"] = "Another product already has this name."
            if sku and g.db.execute("SELECT 1 FROM products WHERE sku = ? AND id != ?", (sku, pid)).fetchone():
                errors["sku"] = "Another product already has this SKU."
            if not errors:
                g.db.execute(
                    "UPDATE products SET name = ?, sku = ?, price_cents = ?, stock = ?, enabled = ?, category_id = ?,"
                    " description = ? WHERE id = ?",
                    (name, sku, price, stock, int(enabled), int(category), description, pid),
                )
                flash("You saved the product.")
                return redirect(url_for("product_edit", pid=pid))
        return render_template("product_edit.html", p=row, form=form, errors=errors, categories=cats)

    @app.route("/reviews")
    def reviews() -> str:
        status = request.args.get("status", "")
        filters = {k: request.args.get(k, "").strip() for k in ("title", "nickname", "product")}
        where, params = "", []
        if status in REVIEW_STATUSES:
            where += " AND r.status = ?"
            params.append(status)
        else:
            status = ""
        for key, column in (("title", "r.title"), ("nickname", "r.nickname"), ("product", "p.name")):
            if filters[key]:
                # Column filters match the typed text as one phrase, as Magento's grid filters do.
                where += f" AND {column} LIKE ? ESCAPE '\\'"
                params.append(like(filters[key]))
        page = paginate(g.db, REVIEWS_SQL.format(where=where), params, per_page=20)
        return render_template("reviews.html", page=page, status=status, filters=filters, statuses=REVIEW_STATUSES)

    @app.route("/reviews/<int:rid>")
    def review(rid: int) -> str:
        row = g.db.execute(REVIEWS_SQL.format(where="AND r.id = ?"), (rid,)).fetchone()
        if row is None:
            abort(404)
        return render_template("review.html", r=row)

    @app.route("/reviews/<int:rid>/status", methods=["POST"])
    def review_status(rid: int) -> Any:
        if g.db.execute("SELECT 1 FROM reviews WHERE id = ?", (rid,)).fetchone() is None:
            abort(404)
        errors = FormErrors()
        status = errors.choice(request.form, "status", "Status", REVIEW_STATUSES)
        if errors:
            flash(errors["status"])
        else:
            g.db.execute("UPDATE reviews SET status = ? WHERE id = ?", (status, rid))
            flash(f"The review was marked {status}.")
        return redirect(url_for("review", rid=rid))

    @app.route("/reviews/<int:rid>/delete", methods=["POST"])
    def review_delete(rid: int) -> Any:
        if g.db.execute("DELETE FROM reviews WHERE id = ?", (rid,)).rowcount == 0:
            abort(404)
        flash("The review has been deleted.")
        return redirect(url_for("reviews"))
