"""The "store" database shared by the online shop and its admin (as Magento's are in
WebArena): categories, products, reviews, customers, orders and carts.

Everything is generated from the world seed with one `random.Random`, so the same
seed always gives byte-identical data. Money is stored in integer cents.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta

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
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL REFERENCES products(id),
                      customer_id INTEGER REFERENCES customers(id), nickname TEXT NOT NULL,
                      rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5), title TEXT NOT NULL, body TEXT NOT NULL,
                      status TEXT NOT NULL DEFAULT 'approved', created TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, number TEXT NOT NULL UNIQUE, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     status TEXT NOT NULL, created TEXT NOT NULL, ship_name TEXT NOT NULL, ship_street TEXT NOT NULL,
                     ship_city TEXT NOT NULL, ship_state TEXT NOT NULL, ship_zip TEXT NOT NULL,
                     payment TEXT NOT NULL, shipping_cents INTEGER NOT NULL, total_cents INTEGER NOT NULL);
CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
                          product_id INTEGER NOT NULL REFERENCES products(id), qty INTEGER NOT NULL,
                          price_cents INTEGER NOT NULL);
CREATE TABLE cart_items (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                         product_id INTEGER NOT NULL REFERENCES products(id), qty INTEGER NOT NULL,
                         UNIQUE (customer_id, product_id));
CREATE TABLE admin_users (id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE, name TEXT NOT NULL);
-- Who is logged in on each site of this episode (site -> user id); a missing row means logged out.
CREATE TABLE sessions (site TEXT PRIMARY KEY, user_id INTEGER NOT NULL);
CREATE INDEX products_category ON products(category_id);
CREATE INDEX reviews_product ON reviews(product_id);
CREATE INDEX orders_customer ON orders(customer_id);
CREATE INDEX items_order ON order_items(order_id);
"""

ORDER_STATUSES = ("pending", "processing", "shipped", "complete", "canceled")
PAYMENT_METHODS = ("Credit card", "PayPal", "Check / money order")
SHIPPING_CENTS = 500

# Top-level category -> {subcategory: product nouns}
CATALOG = {
    "Beauty & Personal Care": {
        "Skin Care": ["Face Cream", "Night Serum", "Eye Gel", "Facial Cleanser", "Sunscreen Lotion", "Clay Mask"],
        "Hair Care": ["Shampoo", "Conditioner", "Hair Oil", "Styling Gel", "Hair Mask", "Dry Shampoo"],
        "Fragrance": ["Eau de Parfum", "Body Mist", "Cologne", "Roll-On Perfume", "Scented Oil"],
    },
    "Electronics": {
        "Headphones": ["Wireless Earbuds", "Over-Ear Headphones", "Sports Earphones", "Noise-Cancelling Headset"],
        "Computer Accessories": ["Wireless Mouse", "Mechanical Keyboard", "USB-C Hub", "Laptop Stand", "Webcam"],
        "Phone Accessories": ["Phone Case", "Screen Protector", "Car Charger", "Power Bank", "Charging Cable"],
    },
    "Home & Kitchen": {
        "Cookware": ["Frying Pan", "Saucepan", "Dutch Oven", "Wok", "Baking Sheet", "Stock Pot"],
        "Storage": ["Food Container Set", "Spice Rack", "Storage Basket", "Drawer Organizer", "Bread Box"],
        "Bedding": ["Pillow", "Duvet Cover", "Fitted Sheet", "Weighted Blanket", "Mattress Topper"],
    },
    "Grocery & Gourmet Food": {
        "Coffee & Tea": ["Ground Coffee", "Green Tea", "Espresso Beans", "Herbal Tea", "Chai Mix"],
        "Snacks": ["Trail Mix", "Granola Bars", "Rice Crackers", "Dark Chocolate", "Dried Mango"],
        "Pantry": ["Olive Oil", "Maple Syrup", "Pasta Sauce", "Honey", "Sea Salt", "Rolled Oats"],
    },
    "Sports & Outdoors": {
        "Camping": ["Tent", "Sleeping Bag", "Camping Lantern", "Hiking Backpack", "Water Filter"],
        "Fitness": ["Yoga Mat", "Resistance Bands", "Jump Rope", "Dumbbell Set", "Foam Roller"],
        "Cycling": ["Bike Helmet", "Bike Light", "Cycling Gloves", "Water Bottle Cage", "Bike Lock"],
    },
    "Office Products": {
        "Writing": ["Gel Pens", "Fountain Pen", "Highlighters", "Mechanical Pencil", "Marker Set"],
        "Paper": ["Notebook", "Sticky Notes", "Printer Paper", "Planner", "Index Cards"],
        "Desk Organization": ["Desk Organizer", "File Folder Set", "Monitor Riser", "Cable Clips", "Letter Tray"],
    },
}
BRANDS = ["Acme", "Northwind", "Bluebird", "Lumina", "Greenleaf", "Ironwood", "Solstice", "Maple & Co",
          "Everhart", "Zephyr", "Crestline", "Orchid", "Pinecrest", "Brightside", "Nimbus", "Harbor"]
ADJECTIVES = ["Classic", "Premium", "Organic", "Ultra", "Compact", "Deluxe", "Everyday", "Pro", "Natural",
              "Travel", "Eco", "Essential", "Signature", "Lightweight", "Family-Size"]
VARIANTS = ["", "", "", "2-Pack", "Large", "Small", "Blue", "Black", "Vanilla", "Unscented", "12 oz", "XL"]
FIRST = ["Emma", "Liam", "Olivia", "Noah", "Ava", "Ethan", "Sophia", "Mason", "Isabella", "Lucas", "Mia",
         "Amir", "Chloe", "Mateo", "Priya", "Kenji", "Zoe", "Omar", "Grace", "Diego", "Hana", "Felix", "Nora",
         "Samuel", "Leila", "Jonas", "Aisha", "Victor", "Maya", "Hugo"]
LAST = ["Lopez", "Smith", "Nguyen", "Garcia", "Kim", "Johnson", "Patel", "Brown", "Rossi", "Müller",
        "Silva", "Chen", "Okafor", "Dubois", "Novak", "Tanaka", "Williams", "Haddad", "Jensen", "Costa"]
CITIES = [("Pittsburgh", "PA", "152"), ("Austin", "TX", "787"), ("Portland", "OR", "972"),
          ("Denver", "CO", "802"), ("Boston", "MA", "021"), ("Seattle", "WA", "981"),
          ("Chicago", "IL", "606"), ("Miami", "FL", "331"), ("Phoenix", "AZ", "850"), ("Atlanta", "GA", "303")]
STREETS = ["Oak St", "Maple Ave", "Pine Rd", "Cedar Ln", "Elm St", "Lake Dr", "Hill Rd", "River Way"]
REVIEW_TITLES = {
    5: ["Love it!", "Exactly as described", "Best purchase this year", "Highly recommend", "Five stars"],
    4: ["Very good", "Works well", "Nice quality", "Pretty happy with it", "Good value"],
    3: ["It's okay", "Average", "Does the job", "Mixed feelings", "Not bad, not great"],
    2: ["Disappointing", "Expected more", "Meh", "Quality issues", "Would not buy again"],
    1: ["Terrible", "Broke after a week", "Do not buy", "Waste of money", "Very poor"],
}
REVIEW_BODIES = {
    5: ["The {noun} is fantastic and arrived quickly.", "I use this {noun} every day. Great quality.",
        "Better than the {noun} I had before."],
    4: ["Solid {noun}, minor issues with the packaging.", "Good {noun} for the price.",
        "Does what a {noun} should do."],
    3: ["The {noun} is fine but nothing special.", "Average {noun}; shipping was slow.",
        "Some things I like about this {noun}, some I don't."],
    2: ["The {noun} stopped working properly after a month.", "Not the {noun} I expected from the photos."],
    1: ["The {noun} arrived damaged and support never answered.", "This {noun} is not worth the money."],
}
START = date(2022, 1, 1)


def slugify(text: str) -> str:
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    return "-".join(part for part in out.split("-") if part)


def build(conn: sqlite3.Connection, seed: int = 0) -> None:
    """Create and fill the store database for world `seed`."""
    rng = random.Random(f"store-{seed}")
    conn.executescript(SCHEMA)
    day = lambda lo, hi: (START + timedelta(days=rng.randint(lo, hi))).isoformat()  # noqa: E731

    # categories and products
    nouns_by_cat: dict[int, list[str]] = {}
    cat_id = 0
    for top, subs in CATALOG.items():
        cat_id += 1
        top_id = cat_id
        conn.execute("INSERT INTO categories VALUES (?, ?, ?, NULL)", (top_id, top, slugify(top)))
        for sub, nouns in subs.items():
            cat_id += 1
            conn.execute("INSERT INTO categories VALUES (?, ?, ?, ?)", (cat_id, sub, slugify(sub), top_id))
            nouns_by_cat[cat_id] = nouns
    names: set[str] = set()
    product_nouns: dict[int, str] = {}
    pid = 0
    for cid, nouns in nouns_by_cat.items():
        for _ in range(rng.randint(14, 20)):
            for _attempt in range(50):
                noun = rng.choice(nouns)
                variant = rng.choice(VARIANTS)
                name = f"{rng.choice(BRANDS)} {rng.choice(ADJECTIVES)} {noun}" + (f", {variant}" if variant else "")
                if name not in names:
                    break
            else:
                continue
            names.add(name)
            pid += 1
            price = rng.choice([rng.randint(299, 2999), rng.randint(1000, 9999), rng.randint(2500, 24999)])
            price = price - price % 100 + rng.choice([99, 49, 95, 0])
            desc = (f"The {name} is a {rng.choice(['popular', 'well-reviewed', 'new', 'best-selling'])} "
                    f"{noun.lower()} from {name.split()[0]}. {rng.choice(['Ships in 1-2 days.', 'Limited stock.', 'Gift wrapping available.'])}")
            conn.execute(
                "INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)",
                (pid, f"SKU-{10000 + pid * 7}", name, cid, price, rng.randint(0, 120), desc, day(0, 500)),
            )
            product_nouns[pid] = noun.lower()

    # customers
    emails: set[str] = set()
    n_customers = 120
    for cid in range(1, n_customers + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first}.{last}".lower().replace("ü", "u") + "@example.com"
        k = 2
        while email in emails:
            email = f"{first}.{last}{k}".lower().replace("ü", "u") + "@example.com"
            k += 1
        emails.add(email)
        city, state, zip3 = rng.choice(CITIES)
        conn.execute(
            "INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (cid, first, last, email, f"412-555-{rng.randint(1000, 9999)}",
             f"{rng.randint(10, 999)} {rng.choice(STREETS)}", city, state, f"{zip3}{rng.randint(10, 99)}", day(0, 300)),
        )

    # reviews
    rid = 0
    for product in range(1, pid + 1):
        for _ in range(rng.choice([0, 1, 1, 2, 3, 4, 5])):
            rid += 1
            rating = rng.choices([5, 4, 3, 2, 1], weights=[35, 30, 15, 10, 10])[0]
            cust = rng.randint(1, n_customers)
            first = conn.execute("SELECT first_name FROM customers WHERE id = ?", (cust,)).fetchone()[0]
            conn.execute(
                "INSERT INTO reviews VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rid, product, cust, first, rating, rng.choice(REVIEW_TITLES[rating]),
                 rng.choice(REVIEW_BODIES[rating]).format(noun=product_nouns[product]),
                 "approved" if rng.random() < 0.9 else "pending", day(300, 700)),
            )

    # orders
    oid = 0
    for cust in range(1, n_customers + 1):
        n_orders = rng.choice([0, 1, 2, 3, 4, 6])
        if cust == 1:  # the shop's logged-in customer always has a history to ask about
            n_orders = max(n_orders, 5)
        for _ in range(n_orders):
            oid += 1
            created = day(200, 720)
            status = rng.choices(ORDER_STATUSES, weights=[10, 10, 20, 50, 10])[0]
            row = conn.execute("SELECT first_name, last_name, street, city, state, zip FROM customers WHERE id = ?",
                               (cust,)).fetchone()
            items = rng.sample(range(1, pid + 1), rng.randint(1, 4))
            subtotal = 0
            conn.execute(
                "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (oid, f"{100000 + oid:09d}", cust, status, created, f"{row[0]} {row[1]}", row[2], row[3], row[4], row[5],
                 rng.choice(PAYMENT_METHODS), SHIPPING_CENTS),
            )
            for product in items:
                qty = rng.choice([1, 1, 1, 2, 3])
                price = conn.execute("SELECT price_cents FROM products WHERE id = ?", (product,)).fetchone()[0]
                conn.execute("INSERT INTO order_items (order_id, product_id, qty, price_cents) VALUES (?, ?, ?, ?)",
                             (oid, product, qty, price))
                subtotal += qty * price
            conn.execute("UPDATE orders SET total_cents = ? WHERE id = ?", (subtotal + SHIPPING_CENTS, oid))

    conn.executemany("INSERT INTO admin_users VALUES (?, ?, ?)", [(1, "admin", "Store Admin"), (2, "jsmith", "Jordan Smith")])
    # The shop's user is customer 1; the admin's user is admin 1 (both logged in at the start).
    conn.executemany("INSERT INTO sessions VALUES (?, ?)", [("shop", 1), ("admin", 1)])


def money(cents: int) -> str:
    """Cents as the sites show them: $1,234.50."""
    return f"${cents / 100:,.2f}"
