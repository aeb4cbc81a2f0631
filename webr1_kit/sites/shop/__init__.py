"""The online shop ("One Stop Market", after WebArena's shopping site).

Pages: home with categories and top-rated products, category listings with sorting and
pagination, search, product pages with reviews and a review form, and the cart (here);
checkout, order confirmation, "My Account" with the order history, and the wish list
(account.py).
Everything reads and writes the episode's "store" database through `g.db`.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from .. import SiteSpec
from ..web import FormErrors, paginate, sort_clause
from .account import current_customer, register_account, register_wishlist
from .data import TODAY, money, nice_date, status_label

SORTS = {
    "name": "p.name ASC",
    "price_asc": "p.price_cents ASC, p.name ASC",
    "price_desc": "p.price_cents DESC, p.name ASC",
    "rating": "rating DESC, p.name ASC",
}
# Listing query: products with their average approved rating and review count.
PRODUCTS_SQL = """
SELECT p.*, c.name AS category, COALESCE(AVG(r.rating), 0) AS rating, COUNT(r.id) AS n_reviews
FROM products p JOIN categories c ON c.id = p.category_id
LEFT JOIN reviews r ON r.product_id = p.id AND r.status = 'approved'
WHERE p.enabled = 1 {where}
GROUP BY p.id ORDER BY {order}
"""


def register(app: Flask) -> None:
    app.jinja_env.filters["money"] = money
    app.jinja_env.filters["nice_date"] = nice_date
    app.jinja_env.filters["status_label"] = status_label
    register_account(app)
    register_wishlist(app)

    @app.context_processor
    def _shop_globals() -> dict[str, Any]:
        top = g.db.execute("SELECT * FROM categories WHERE parent_id IS NULL ORDER BY id").fetchall() if "db" in g else []
        customer = current_customer() if "db" in g else None
        cart = 0
        if customer is not None:
            cart = g.db.execute("SELECT COALESCE(SUM(qty), 0) FROM cart_items WHERE customer_id = ?",
                                (customer["id"],)).fetchone()[0]
        return {"top_categories": top, "customer": customer, "cart_count": cart}

    @app.route("/")
    def home() -> str:
        top_rated = g.db.execute(PRODUCTS_SQL.format(where="", order="rating DESC, n_reviews DESC, p.name") + " LIMIT 8").fetchall()
        return render_template("home.html", products=top_rated)

    @app.route("/category/<slug>")
    def category(slug: str) -> str:
        cat = g.db.execute("SELECT * FROM categories WHERE slug = ?", (slug,)).fetchone()
        if cat is None:
            abort(404)
        subs = g.db.execute("SELECT * FROM categories WHERE parent_id = ? ORDER BY name", (cat["id"],)).fetchall()
        ids = [cat["id"]] + [s["id"] for s in subs]
        sort, order = sort_clause(SORTS, "name")
        where = f"AND p.category_id IN ({','.join('?' * len(ids))})"
        page = paginate(g.db, PRODUCTS_SQL.format(where=where, order=order), ids, per_page=12)
        parent = g.db.execute("SELECT * FROM categories WHERE id = ?", (cat["parent_id"],)).fetchone() if cat["parent_id"] else None
        return render_template("category.html", cat=cat, subs=subs, parent=parent, page=page, sort=sort, sorts=SORTS)

    @app.route("/search")
    def search() -> str:
        q = request.args.get("q", "").strip()
        sort, order = sort_clause(SORTS, "name")
        page = None
        if q:
            # Every word must appear in the name or description (LIKE with escaped wildcards).
            words = q.split()[:8]
            where = " ".join("AND (p.name LIKE ? ESCAPE '\\' OR p.description LIKE ? ESCAPE '\\')" for _ in words)
            params = [v for w in words for v in (_like(w), _like(w))]
            page = paginate(g.db, PRODUCTS_SQL.format(where=where, order=order), params, per_page=12)
        return render_template("search.html", q=q, page=page, sort=sort, sorts=SORTS)

    @app.route("/product/<int:pid>", methods=["GET", "POST"])
    def product(pid: int) -> Any:
        row = g.db.execute(PRODUCTS_SQL.format(where="AND p.id = ?", order="p.id"), (pid,)).fetchone()
        if row is None:
            abort(404)
        errors = FormErrors()
        form: dict[str, str] = {}
        if request.method == "POST":  # the review form
            form = request.form
            nickname = errors.text(form, "nickname", "Nickname", 60)
            rating = errors.integer(form, "rating", "Rating", 1, 5)
            title = errors.text(form, "title", "Summary", 120)
            body = errors.text(form, "body", "Review", 2000)
            if not errors:
                customer = current_customer()
                g.db.execute(
                    "INSERT INTO reviews (product_id, customer_id, nickname, rating, title, body, status, created)"
                    " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
                    (pid, customer["id"] if customer else None, nickname, rating, title, body, TODAY.isoformat()),
                )
                flash("Thank you for your review. It will appear after moderation.")
                return redirect(url_for("product", pid=pid))
        reviews = g.db.execute(
            "SELECT * FROM reviews WHERE product_id = ? AND status = 'approved' ORDER BY created DESC, id DESC", (pid,)
        ).fetchall()
        return render_template("product.html", p=row, reviews=reviews, errors=errors, form=form)

    @app.route("/cart/add/<int:pid>", methods=["POST"])
    def cart_add(pid: int) -> Any:
        customer = current_customer()
        if customer is None:
            flash("Sign in to use the cart.")
            return redirect(url_for("product", pid=pid))
        product = g.db.execute("SELECT * FROM products WHERE id = ? AND enabled = 1", (pid,)).fetchone()
        if product is None:
            abort(404)
        errors = FormErrors()
        qty = errors.integer(request.form, "qty", "Quantity", 1, 99)
        if errors:
            flash(errors["qty"])
            return redirect(url_for("product", pid=pid))
        g.db.execute(
            "INSERT INTO cart_items (customer_id, product_id, qty) VALUES (?, ?, ?)"
            " ON CONFLICT (customer_id, product_id) DO UPDATE SET qty = MIN(99, qty + excluded.qty)",
            (customer["id"], pid, qty),
        )
        flash(f"You added {product['name']} to your shopping cart.")
        return redirect(url_for("cart"))

    @app.route("/cart", methods=["GET", "POST"])
    def cart() -> Any:
        customer = current_customer()
        if customer is None:
            return render_template("cart.html", items=[], total=0)
        if request.method == "POST":  # update quantities (0 removes)
            for key, value in request.form.items():
                if key.startswith("qty-") and key[4:].isdigit():
                    try:
                        qty = max(0, min(99, int(value)))
                    except ValueError:
                        flash("Quantities must be whole numbers.")
                        continue
                    if qty == 0:
                        g.db.execute("DELETE FROM cart_items WHERE customer_id = ? AND product_id = ?",
                                     (customer["id"], int(key[4:])))
                    else:
                        g.db.execute("UPDATE cart_items SET qty = ? WHERE customer_id = ? AND product_id = ?",
                                     (qty, customer["id"], int(key[4:])))
            flash("Your cart was updated.")
            return redirect(url_for("cart"))
        items = g.db.execute(
            "SELECT ci.qty, p.* FROM cart_items ci JOIN products p ON p.id = ci.product_id"
            " WHERE ci.customer_id = ? ORDER BY ci.id", (customer["id"],)
        ).fetchall()
        total = sum(i["qty"] * i["price_cents"] for i in items)
        return render_template("cart.html", items=items, total=total)


def _like(word: str) -> str:
    """A LIKE pattern matching `word` literally (its % and _ escaped)."""
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


SITE = SiteSpec(name="shop", title="One Stop Market", db="store", placeholder="__SHOPPING__", register=register)
