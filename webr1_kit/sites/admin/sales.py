"""Admin sales pages: the dashboard, the sales report, the orders grid and the order view
with its status form.

Sales figures (revenue, bestsellers) leave canceled orders out, as Magento's reports do.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from flask import Flask, abort, flash, g, redirect, render_template, request, url_for

from ..shop.data import ORDER_STATUSES, TODAY, status_label
from ..web import FormErrors, paginate, sort_clause
from .common import keyword_filter

ORDER_SORTS = {
    "date_desc": "o.created DESC, o.id DESC",
    "date_asc": "o.created ASC, o.id ASC",
    "total_desc": "o.total_cents DESC, o.id DESC",
    "total_asc": "o.total_cents ASC, o.id ASC",
}
SORT_LABELS = {"date_desc": "Purchase Date: newest first", "date_asc": "Purchase Date: oldest first",
               "total_desc": "Grand Total: highest first", "total_asc": "Grand Total: lowest first"}
ORDERS_SQL = """
SELECT o.*, c.first_name || ' ' || c.last_name AS customer_name, c.email
FROM orders o JOIN customers c ON c.id = o.customer_id
WHERE 1 = 1 {where} ORDER BY {order}
"""
# Which statuses an order may move to from each status (complete and canceled are final).
TRANSITIONS = {
    "pending": ("processing", "on_hold", "canceled"),
    "processing": ("on_hold", "shipped", "canceled"),
    "on_hold": ("processing", "canceled"),
    "shipped": ("complete",),
    "complete": (),
    "canceled": (),
}
BESTSELLERS_SQL = """
SELECT p.id, p.name, p.sku, SUM(oi.qty) AS qty, SUM(oi.qty * oi.price_cents) AS revenue
FROM order_items oi JOIN orders o ON o.id = oi.order_id JOIN products p ON p.id = oi.product_id
WHERE o.status != 'canceled' AND o.created BETWEEN ? AND ?
GROUP BY p.id ORDER BY qty DESC, revenue DESC, p.name LIMIT ?
"""
MONTHLY_SQL = """
SELECT substr(o.created, 1, 7) AS month, COUNT(*) AS orders, SUM(it.n) AS items, SUM(o.total_cents) AS revenue
FROM orders o JOIN (SELECT order_id, SUM(qty) AS n FROM order_items GROUP BY order_id) it ON it.order_id = o.id
WHERE o.status != 'canceled' AND o.created BETWEEN ? AND ?
GROUP BY month ORDER BY month
"""


def month_label(month: str) -> str:
    """"2023-01" -> "Jan 2023"."""
    return date.fromisoformat(month + "-01").strftime("%b %Y")


def _parse_date(errors: FormErrors, name: str, label: str, default: str) -> str:
    raw = (request.args.get(name) or "").strip()
    if not raw:
        return default
    try:
        return date.fromisoformat(raw).isoformat()
    except ValueError:
        errors[name] = f"{label} must be a date written YYYY-MM-DD, e.g. 2023-01-31."
        return default


def register(app: Flask) -> None:
    app.jinja_env.filters["month_label"] = month_label

    @app.route("/")
    def home() -> str:
        db = g.db
        counts = {
            "Lifetime Sales": db.execute("SELECT COALESCE(SUM(total_cents), 0) FROM orders WHERE status != 'canceled'").fetchone()[0],
            "Orders": db.execute("SELECT COUNT(*) FROM orders").fetchone()[0],
            "Customers": db.execute("SELECT COUNT(*) FROM customers").fetchone()[0],
            "Products": db.execute("SELECT COUNT(*) FROM products WHERE enabled = 1").fetchone()[0],
            "Pending Reviews": db.execute("SELECT COUNT(*) FROM reviews WHERE status = 'pending'").fetchone()[0],
        }
        recent = db.execute(ORDERS_SQL.format(where="", order=ORDER_SORTS["date_desc"]) + " LIMIT 5").fetchall()
        best = db.execute(BESTSELLERS_SQL, ("0000", "9999", 5)).fetchall()
        return render_template("dashboard.html", counts=counts, recent=recent, best=best)

    @app.route("/reports/sales")
    def sales_report() -> str:
        errors = FormErrors()
        first = g.db.execute("SELECT COALESCE(MIN(created), ?) FROM orders", (TODAY.isoformat(),)).fetchone()[0]
        start = _parse_date(errors, "from", "From", first[:10])
        end = _parse_date(errors, "to", "To", TODAY.isoformat())
        if not errors and start > end:
            errors["to"] = "To must not be before From."
        months = best = []
        if not errors:
            # created holds a date or a date and time; "~" sorts after both, so the end day is included.
            lo, hi = start, end + "~"
            months = g.db.execute(MONTHLY_SQL, (lo, hi)).fetchall()
            best = g.db.execute(BESTSELLERS_SQL, (lo, hi, 10)).fetchall()
        return render_template("sales_report.html", start=start, end=end, errors=errors, months=months, best=best,
                               form=request.args)

    @app.route("/orders")
    def orders() -> str:
        q = request.args.get("q", "").strip()
        status = request.args.get("status", "")
        sort, order = sort_clause(ORDER_SORTS, "date_desc")
        where, params = keyword_filter(q, ["o.number", "c.first_name || ' ' || c.last_name", "c.email", "o.ship_name"])
        if status in ORDER_STATUSES:
            where += " AND o.status = ?"
            params.append(status)
        else:
            status = ""
        page = paginate(g.db, ORDERS_SQL.format(where=where, order=order), params, per_page=20)
        return render_template("orders.html", page=page, q=q, status=status, sort=sort, statuses=ORDER_STATUSES,
                               sort_labels=SORT_LABELS)

    @app.route("/orders/<int:oid>", methods=["GET", "POST"])
    def order(oid: int) -> Any:
        row = g.db.execute(ORDERS_SQL.format(where="AND o.id = ?", order="o.id"), (oid,)).fetchone()
        if row is None:
            abort(404)
        errors = FormErrors()
        if request.method == "POST":  # the status form
            allowed = TRANSITIONS.get(row["status"], ())
            new = errors.choice(request.form, "status", "Status", allowed)
            comment = errors.text(request.form, "comment", "Comment", 500, required=False)
            if not allowed:
                errors["status"] = f"A {status_label(row['status']).lower()} order cannot change its status."
            if not errors:
                _set_status(oid, row["status"], new, comment)
                flash(f"The order status was changed to {status_label(new)}.")
                return redirect(url_for("order", oid=oid))
        items = g.db.execute(
            "SELECT oi.*, p.name, p.sku FROM order_items oi JOIN products p ON p.id = oi.product_id"
            " WHERE oi.order_id = ? ORDER BY oi.id", (oid,)
        ).fetchall()
        history = g.db.execute("SELECT * FROM order_history WHERE order_id = ? ORDER BY id DESC", (oid,)).fetchall()
        subtotal = sum(i["qty"] * i["price_cents"] for i in items)
        return render_template("order.html", order=row, items=items, history=history, subtotal=subtotal,
                               errors=errors, next_statuses=TRANSITIONS.get(row["status"], ()), form=request.form)


def _set_status(oid: int, old: str, new: str, comment: str) -> None:
    """Move an order to a new status; canceling puts its items back in stock."""
    g.db.execute("UPDATE orders SET status = ? WHERE id = ?", (new, oid))
    g.db.execute("INSERT INTO order_history (order_id, status, comment, created) VALUES (?, ?, ?, ?)",
                 (oid, new, comment, TODAY.isoformat()))
    if new == "canceled" and old != "canceled":
        for item in g.db.execute("SELECT product_id, qty FROM order_items WHERE order_id = ?", (oid,)).fetchall():
            g.db.execute("UPDATE products SET stock = stock + ? WHERE id = ?", (item["qty"], item["product_id"]))
