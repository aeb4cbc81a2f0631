"""The "store" database shared by the online shop and its admin (as Magento's are in
WebArena): categories, products, reviews, customers, orders and carts.

Everything is generated from the world seed with one `random.Random`, so the same
seed always gives byte-identical data. Money is stored in integer cents; dates are
ISO strings. The product vocabulary (names, price ranges, variants) is in catalog.py.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta

from .catalog import (BRANDS, CATALOG, CITIES, DESCRIPTORS, FIRST, LAST, REVIEW_BODIES, REVIEW_TITLES,
                      SHIPPING_NOTES, STATES, STREETS)

SCHEMA = """
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL, slug TEXT NOT NULL UNIQUE,
                         parent_id INTEGER REFERENCES categories(id));
CREATE TABLE products (id INTEGER PRIMARY KEY, sku TEXT NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE,
                       category_id INTEGER NOT NULL REFERENCES categories(id), price_cents INTEGER NOT NULL,
                       stock INTEGER NOT NULL, description TEXT NOT NULL, enabled INTEGER NOT NULL DEFAULT 1,
                       created TEXT NOT NULL);
CREATE TABLE customers (id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL,
                        email TEXT NOT NULL UNIQUE, phone TEXT NOT NULL, street TEXT NOT NULL, city TEXT NOT NULL,
                        state TEXT NOT NULL, zip TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL REFERENCES products(id) ON DELETE CASCADE,
                      customer_id INTEGER REFERENCES customers(id), nickname TEXT NOT NULL,
                      rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5), title TEXT NOT NULL, body TEXT NOT NULL,
                      status TEXT NOT NULL DEFAULT 'pending', created TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, number TEXT NOT NULL UNIQUE, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     status TEXT NOT NULL, created TEXT NOT NULL, ship_name TEXT NOT NULL, ship_street TEXT NOT NULL,
                     ship_city TEXT NOT NULL, ship_state TEXT NOT NULL, ship_zip TEXT NOT NULL,
                     payment TEXT NOT NULL, shipping_cents INTEGER NOT NULL, total_cents INTEGER NOT NULL);
CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
                          product_id INTEGER NOT NULL REFERENCES products(id), qty INTEGER NOT NULL,
                          price_cents INTEGER NOT NULL);
-- Status changes and comments on an order, newest last (the admin's "comments history").
CREATE TABLE order_history (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
                            status TEXT NOT NULL, comment TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE cart_items (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                         product_id INTEGER NOT NULL REFERENCES products(id), qty INTEGER NOT NULL,
                         UNIQUE (customer_id, product_id));
CREATE TABLE wishlist_items (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                             product_id INTEGER NOT NULL REFERENCES products(id), added TEXT NOT NULL,
                             UNIQUE (customer_id, product_id));
CREATE TABLE admin_users (id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE, name TEXT NOT NULL);
-- Who is logged in on each site of this episode (site -> user id); a missing row means logged out.
CREATE TABLE sessions (site TEXT PRIMARY KEY, user_id INTEGER NOT NULL);
CREATE INDEX products_category ON products(category_id);
CREATE INDEX reviews_product ON reviews(product_id);
CREATE INDEX orders_customer ON orders(customer_id);
CREATE INDEX items_order ON order_items(order_id);
CREATE INDEX history_order ON order_history(order_id);
"""

ORDER_STATUSES = ("pending", "processing", "on_hold", "shipped", "complete", "canceled")
STATUS_LABELS = {"pending": "Pending", "processing": "Processing", "on_hold": "On Hold", "shipped": "Shipped",
                 "complete": "Complete", "canceled": "Canceled"}
REVIEW_STATUSES = ("pending", "approved", "rejected")
PAYMENT_METHODS = ("Credit card", "PayPal", "Check / money order")
SHIPPING_CENTS = 500
START = date(2022, 1, 1)
TODAY = date(2024, 1, 2)
"""The world's "today": orders placed and reviews written during an episode get this date."""
N_CUSTOMERS = 150
SHOP_CUSTOMER_ORDERS = 14
"""The shop's logged-in customer (id 1) has this many orders, so the history has two pages."""


def slugify(text: str) -> str:
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    return "-".join(part for part in out.split("-") if part)


def _price(rng: random.Random, lo: int, hi: int) -> int:
    """A shelf price in cents between lo and hi dollars, ending like real prices (.99, .49, .95, .00)."""
    dollars = int(lo + (hi - lo) * rng.random() ** 1.5)  # skewed towards the cheaper end
    return dollars * 100 + rng.choice([99, 99, 49, 95, 0])


def build(conn: sqlite3.Connection, seed: int = 0) -> None:
    """Create and fill the store database for world `seed`."""
    rng = random.Random(f"store-{seed}")
    conn.executescript(SCHEMA)

    def day(lo: int, hi: int) -> str:
        return (START + timedelta(days=rng.randint(lo, hi))).isoformat()

    nouns = _products(conn, rng, day)
    n_products = len(nouns)
    _customers(conn, rng, day)
    _reviews(conn, rng, nouns)
    _orders(conn, rng, n_products)
    _wishlists(conn, rng, n_products)
    conn.executemany("INSERT INTO admin_users VALUES (?, ?, ?)", [(1, "admin", "Store Admin"), (2, "jsmith", "Jordan Smith")])
    # The shop's user is customer 1; the admin's user is admin 1 (both logged in at the start).
    conn.executemany("INSERT INTO sessions VALUES (?, ?)", [("shop", 1), ("admin", 1)])


def _products(conn: sqlite3.Connection, rng: random.Random, day) -> dict[int, str]:
    """Categories and 14-20 products per subcategory; returns product id -> noun (for reviews)."""
    nouns: dict[int, str] = {}
    names: set[str] = set()
    cat_id = pid = 0
    for top, subs in CATALOG.items():
        cat_id += 1
        top_id = cat_id
        conn.execute("INSERT INTO categories VALUES (?, ?, ?, NULL)", (top_id, top, slugify(top)))
        for sub, (adjectives, items) in subs.items():
            cat_id += 1
            conn.execute("INSERT INTO categories VALUES (?, ?, ?, ?)", (cat_id, sub, slugify(sub), top_id))
            for _ in range(rng.randint(14, 20)):
                for _attempt in range(50):
                    noun, lo, hi, variants = rng.choice(items)
                    variant = rng.choice(variants) if rng.random() < 0.6 else ""
                    brand = rng.choice(BRANDS)
                    name = f"{brand} {rng.choice(adjectives)} {noun}" + (f", {variant}" if variant else "")
                    if name not in names:
                        break
                else:
                    continue
                names.add(name)
                pid += 1
                desc = (f"The {name} is a {rng.choice(DESCRIPTORS)} {noun.lower()} from {brand}. "
                        f"{rng.choice(SHIPPING_NOTES)}")
                stock = rng.choices([0, rng.randint(1, 9), rng.randint(10, 150)], weights=[8, 12, 80])[0]
                conn.execute(
                    "INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)",
                    (pid, f"{slugify(noun)[:3].upper()}-{10000 + pid * 7}", name, cat_id, _price(rng, lo, hi),
                     stock, desc, day(0, 400)),
                )
                nouns[pid] = noun.lower()
    return nouns


def _customers(conn: sqlite3.Connection, rng: random.Random, day) -> None:
    emails: set[str] = set()
    for cid in range(1, N_CUSTOMERS + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        base = f"{first}.{last}".lower().replace("ü", "u").replace("á", "a").replace("'", "")
        email, k = f"{base}@example.com", 2
        while email in emails:
            email, k = f"{base}{k}@example.com", k + 1
        emails.add(email)
        city, state, zip3 = rng.choice(CITIES)
        conn.execute(
            "INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (cid, first, last, email, f"{rng.randint(201, 989)}-555-{rng.randint(1000, 9999)}",
             f"{rng.randint(10, 999)} {rng.choice(STREETS)}", city, state, f"{zip3}{rng.randint(10, 99)}", day(0, 300)),
        )


def _reviews(conn: sqlite3.Connection, rng: random.Random, nouns: dict[int, str]) -> None:
    rid = 0
    for product, noun in nouns.items():
        created = conn.execute("SELECT created FROM products WHERE id = ?", (product,)).fetchone()[0]
        first_day = (date.fromisoformat(created) - START).days
        for _ in range(rng.choice([0, 1, 1, 2, 3, 4, 5, 7])):
            rid += 1
            rating = rng.choices([5, 4, 3, 2, 1], weights=[35, 30, 15, 10, 10])[0]
            cust = rng.randint(1, N_CUSTOMERS)
            first = conn.execute("SELECT first_name FROM customers WHERE id = ?", (cust,)).fetchone()[0]
            status = rng.choices(REVIEW_STATUSES, weights=[12, 85, 3])[0]
            conn.execute(
                "INSERT INTO reviews VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rid, product, cust, first, rating, rng.choice(REVIEW_TITLES[rating]),
                 rng.choice(REVIEW_BODIES[rating]).format(noun=noun), status,
                 (START + timedelta(days=rng.randint(first_day + 10, (TODAY - START).days - 1))).isoformat()),
            )


def _orders(conn: sqlite3.Connection, rng: random.Random, n_products: int) -> None:
    """Orders from July 2022 to December 2023, with items, totals and a status history."""
    created_of = {r[0]: r[1] for r in conn.execute("SELECT id, created FROM products")}
    oid = 0
    for cust in range(1, N_CUSTOMERS + 1):
        n_orders = SHOP_CUSTOMER_ORDERS if cust == 1 else rng.choice([0, 1, 1, 2, 2, 3, 4, 6])
        days = sorted(rng.sample(range(200, (TODAY - START).days - 1), n_orders))  # distinct dates per customer
        row = conn.execute("SELECT first_name, last_name, street, city, state, zip FROM customers WHERE id = ?",
                           (cust,)).fetchone()
        for d in days:
            oid += 1
            created = (START + timedelta(days=d)).isoformat()
            status = rng.choices(ORDER_STATUSES, weights=[12, 10, 4, 14, 50, 10])[0]
            available = [p for p in range(1, n_products + 1) if created_of[p] <= created]
            items = rng.sample(available, rng.choice([1, 1, 2, 2, 3, 4]))
            conn.execute(
                "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (oid, f"{100000 + oid:09d}", cust, status, created, f"{row[0]} {row[1]}", row[2], row[3], row[4],
                 row[5], rng.choice(PAYMENT_METHODS), SHIPPING_CENTS),
            )
            subtotal = 0
            for product in items:
                qty = rng.choice([1, 1, 1, 2, 3])
                price = conn.execute("SELECT price_cents FROM products WHERE id = ?", (product,)).fetchone()[0]
                conn.execute("INSERT INTO order_items (order_id, product_id, qty, price_cents) VALUES (?, ?, ?, ?)",
                             (oid, product, qty, price))
                subtotal += qty * price
            conn.execute("UPDATE orders SET total_cents = ? WHERE id = ?", (subtotal + SHIPPING_CENTS, oid))
            conn.execute("INSERT INTO order_history (order_id, status, comment, created) VALUES (?, 'pending', ?, ?)",
                         (oid, "Order placed.", created))
            if status != "pending":
                conn.execute("INSERT INTO order_history (order_id, status, comment, created) VALUES (?, ?, '', ?)",
                             (oid, status, created))


def _wishlists(conn: sqlite3.Connection, rng: random.Random, n_products: int) -> None:
    """A few saved products for some customers (the shop's customer always has some)."""
    for cust in range(1, N_CUSTOMERS + 1):
        n = 3 if cust == 1 else rng.choice([0, 0, 0, 1, 2, 4])
        for product in rng.sample(range(1, n_products + 1), n):
            conn.execute("INSERT INTO wishlist_items (customer_id, product_id, added) VALUES (?, ?, ?)",
                         (cust, product, (TODAY - timedelta(days=rng.randint(1, 90))).isoformat()))


def money(cents: int) -> str:
    """Cents as the sites show them: $1,234.50."""
    return f"${cents / 100:,.2f}"


def nice_date(iso: str) -> str:
    """An ISO date as the sites show it: "Mar 5, 2023"."""
    d = date.fromisoformat(iso[:10])
    return f"{d.strftime('%b')} {d.day}, {d.year}"


def date_answers(iso: str) -> str:
    """The ways a person may write a date, as WebArena's "|OR|" alternatives."""
    d = date.fromisoformat(iso[:10])
    forms = [nice_date(iso), f"{d.strftime('%B')} {d.day}, {d.year}", d.isoformat(),
             f"{d.month}/{d.day}/{d.year}", f"{d.month:02d}/{d.day:02d}/{d.year}"]
    return " |OR| ".join(dict.fromkeys(forms))  # May is its own abbreviation: no duplicates


def status_label(status: str) -> str:
    return STATUS_LABELS.get(status, status.title())


__all__ = ["build", "money", "nice_date", "date_answers", "status_label", "ORDER_STATUSES", "STATUS_LABELS",
           "REVIEW_STATUSES", "PAYMENT_METHODS", "SHIPPING_CENTS", "STATES", "TODAY"]
