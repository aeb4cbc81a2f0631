"""The shop's product vocabulary: what each subcategory sells, at what prices, in what variants.

Each subcategory lists adjectives that suit its products and, per product noun, a price
range in dollars and the variants a real listing of that noun would have (sizes, colours,
pack counts), so generated names and prices read like a real catalogue: a tent costs
$60-$450 and comes as "2-Person" or "4-Person", never as "Unscented" for $3.99.
"""

from __future__ import annotations

# (noun, lowest price, highest price, variants)
Item = tuple[str, int, int, list[str]]

# Top-level category -> {subcategory: (adjectives, items)}
CATALOG: dict[str, dict[str, tuple[list[str], list[Item]]]] = {
    "Beauty & Personal Care": {
        "Skin Care": (["Hydrating", "Gentle", "Radiance", "Daily", "Soothing", "Advanced", "Sensitive-Skin"], [
            ("Face Cream", 12, 48, ["1.7 oz", "2.5 oz", "Fragrance-Free"]),
            ("Night Serum", 18, 65, ["1 oz", "2-Pack"]),
            ("Eye Gel", 10, 36, ["0.5 oz", "1 oz"]),
            ("Facial Cleanser", 7, 25, ["8 oz", "16 oz", "Fragrance-Free"]),
            ("Sunscreen Lotion SPF 50", 8, 22, ["3 oz", "6 oz", "2-Pack"]),
            ("Clay Mask", 9, 30, ["4 oz", "Travel Size"]),
        ]),
        "Hair Care": (["Volumizing", "Moisturizing", "Repair", "Clarifying", "Argan", "Smoothing", "Curl-Defining"], [
            ("Shampoo", 6, 24, ["12 oz", "33 oz", "2-Pack"]),
            ("Conditioner", 6, 24, ["12 oz", "33 oz", "2-Pack"]),
            ("Hair Oil", 9, 32, ["2 oz", "4 oz"]),
            ("Styling Gel", 5, 15, ["8 oz", "16 oz"]),
            ("Hair Mask", 10, 28, ["6 oz", "8 oz"]),
            ("Dry Shampoo", 6, 18, ["4.5 oz", "2-Pack"]),
        ]),
        "Fragrance": (["Citrus", "Amber", "Midnight", "Rose", "Sandalwood", "Fresh", "Velvet"], [
            ("Eau de Parfum", 35, 140, ["1.7 oz", "3.4 oz"]),
            ("Body Mist", 9, 25, ["8 oz", "2-Pack"]),
            ("Cologne", 30, 110, ["1.7 oz", "3.4 oz"]),
            ("Roll-On Perfume", 12, 40, ["0.33 oz", "3-Pack"]),
            ("Scented Oil", 10, 30, ["1 oz", "0.5 oz"]),
        ]),
    },
    "Electronics": {
        "Headphones": (["Studio", "Bass", "Active", "Elite", "Air", "Pro", "Max"], [
            ("Wireless Earbuds", 20, 180, ["Black", "White", "Navy"]),
            ("Over-Ear Headphones", 35, 350, ["Black", "Silver", "Midnight Blue"]),
            ("Sports Earphones", 15, 80, ["Black", "Red", "Lime"]),
            ("Noise-Cancelling Headset", 60, 300, ["Black", "Gray"]),
        ]),
        "Computer Accessories": (["Ergonomic", "Slim", "Pro", "Compact", "Silent", "Wireless"], [
            ("Mouse", 12, 70, ["Black", "Gray", "White"]),
            ("Mechanical Keyboard", 45, 180, ["Brown Switches", "Red Switches", "Blue Switches"]),
            ("USB-C Hub", 20, 80, ["7-in-1", "10-in-1"]),
            ("Laptop Stand", 18, 70, ["Silver", "Space Gray"]),
            ("Webcam", 30, 150, ["1080p", "4K"]),
        ]),
        "Phone Accessories": (["Rugged", "Slim", "Fast", "Magnetic", "Clear", "Ultra"], [
            ("Phone Case", 9, 40, ["iPhone 15", "Galaxy S24", "Pixel 8"]),
            ("Screen Protector", 7, 20, ["2-Pack", "3-Pack"]),
            ("Car Charger", 10, 35, ["Dual Port", "40W"]),
            ("Power Bank", 18, 80, ["10000mAh", "20000mAh"]),
            ("Charging Cable", 7, 22, ["3 ft", "6 ft", "2-Pack"]),
        ]),
    },
    "Home & Kitchen": {
        "Cookware": (["Nonstick", "Stainless Steel", "Cast Iron", "Ceramic", "Enameled", "Hard-Anodized"], [
            ("Frying Pan", 18, 90, ["10 inch", "12 inch"]),
            ("Saucepan", 20, 80, ["2 qt", "3 qt"]),
            ("Dutch Oven", 45, 250, ["5.5 qt", "7 qt"]),
            ("Wok", 25, 90, ["12 inch", "14 inch"]),
            ("Stock Pot", 30, 120, ["8 qt", "12 qt"]),
        ]),
        "Storage": (["Stackable", "Bamboo", "Airtight", "Clear", "Woven", "Modular"], [
            ("Food Container Set", 15, 45, ["10-Piece", "24-Piece"]),
            ("Spice Rack", 18, 60, ["3-Tier", "Wall-Mounted"]),
            ("Storage Basket", 12, 40, ["Set of 3", "Large"]),
            ("Drawer Organizer", 10, 35, ["6-Piece", "Expandable"]),
            ("Bread Box", 25, 70, ["White", "Black"]),
        ]),
        "Bedding": (["Cooling", "Organic Cotton", "Microfiber", "Linen", "Plush", "Hypoallergenic"], [
            ("Pillow", 20, 90, ["Standard", "King", "2-Pack"]),
            ("Duvet Cover", 40, 180, ["Queen", "King", "Twin"]),
            ("Sheet Set", 30, 150, ["Queen", "King", "Full"]),
            ("Weighted Blanket", 50, 200, ["15 lb", "20 lb"]),
            ("Mattress Topper", 60, 250, ["Queen", "King", "Twin"]),
        ]),
    },
    "Grocery & Gourmet Food": {
        "Coffee & Tea": (["Organic", "Single-Origin", "Dark Roast", "Fair Trade", "Decaf", "Morning"], [
            ("Ground Coffee", 8, 25, ["12 oz", "2 lb"]),
            ("Whole Bean Coffee", 10, 30, ["12 oz", "2 lb"]),
            ("Green Tea", 4, 15, ["20 Bags", "100 Bags"]),
            ("Herbal Tea", 4, 14, ["20 Bags", "6-Pack"]),
            ("Chai Concentrate", 5, 12, ["32 oz", "2-Pack"]),
        ]),
        "Snacks": (["Organic", "Gluten-Free", "Classic", "Natural", "Premium", "Harvest"], [
            ("Trail Mix", 5, 18, ["10 oz", "26 oz", "6-Pack"]),
            ("Granola Bars", 4, 15, ["12 Count", "24 Count"]),
            ("Rice Crackers", 3, 10, ["3.5 oz", "Family Size"]),
            ("Almonds", 7, 22, ["16 oz", "3 lb"]),
            ("Dried Mango", 5, 16, ["8 oz", "2-Pack"]),
        ]),
        "Pantry": (["Organic", "Pure", "Artisan", "Classic", "Natural", "Premium"], [
            ("Olive Oil", 9, 35, ["500 ml", "1 liter"]),
            ("Maple Syrup", 8, 30, ["8 oz", "32 oz"]),
            ("Pasta Sauce", 3, 12, ["24 oz", "3-Pack"]),
            ("Honey", 6, 25, ["12 oz", "2 lb"]),
            ("Rolled Oats", 4, 12, ["42 oz", "2-Pack"]),
        ]),
    },
    "Sports & Outdoors": {
        "Camping": (["Ultralight", "All-Season", "Waterproof", "Trail", "Expedition", "Backcountry"], [
            ("Tent", 60, 450, ["2-Person", "4-Person", "6-Person"]),
            ("Sleeping Bag", 35, 220, ["20°F", "40°F", "Long"]),
            ("Camping Lantern", 15, 60, ["Rechargeable", "2-Pack"]),
            ("Hiking Backpack", 45, 240, ["40L", "55L", "65L"]),
            ("Water Filter", 20, 90, ["Squeeze", "Gravity 4L"]),
        ]),
        "Fitness": (["Pro", "Non-Slip", "Heavy-Duty", "Adjustable", "Studio", "Compact"], [
            ("Yoga Mat", 18, 90, ["6 mm", "8 mm", "Extra Long"]),
            ("Resistance Bands", 10, 40, ["Set of 5", "Heavy"]),
            ("Jump Rope", 8, 30, ["Weighted", "Speed"]),
            ("Dumbbell Set", 40, 300, ["20 lb", "50 lb"]),
            ("Foam Roller", 12, 45, ["13 inch", "18 inch"]),
        ]),
        "Cycling": (["Aero", "Commuter", "Trail", "Reflective", "Carbon", "Urban"], [
            ("Bike Helmet", 30, 180, ["Small", "Medium", "Large"]),
            ("Bike Light Set", 15, 70, ["USB Rechargeable", "800 Lumen"]),
            ("Cycling Gloves", 12, 45, ["Medium", "Large"]),
            ("Bottle Cage", 8, 35, ["Black", "2-Pack"]),
            ("Bike Lock", 20, 90, ["U-Lock", "Cable"]),
        ]),
    },
    "Office Products": {
        "Writing": (["Smooth", "Fine Point", "Retractable", "Classic", "Quick-Dry", "Bold"], [
            ("Gel Pens", 5, 20, ["12-Pack", "24-Pack"]),
            ("Fountain Pen", 15, 120, ["Black Ink", "Blue Ink"]),
            ("Highlighters", 4, 15, ["6-Pack", "12-Pack"]),
            ("Mechanical Pencil", 4, 25, ["0.5 mm", "0.7 mm"]),
            ("Marker Set", 8, 35, ["24 Colors", "48 Colors"]),
        ]),
        "Paper": (["Premium", "Recycled", "Dotted", "Hardcover", "Weekly", "Heavyweight"], [
            ("Notebook", 5, 28, ["A5", "College Ruled", "3-Pack"]),
            ("Sticky Notes", 4, 16, ["12 Pads", "24 Pads"]),
            ("Printer Paper", 8, 50, ["500 Sheets", "Case of 10 Reams"]),
            ("Planner", 12, 40, ["2024", "Undated"]),
            ("Index Cards", 3, 12, ["3x5 in", "4x6 in"]),
        ]),
        "Desk Organization": (["Mesh", "Bamboo", "Metal", "Minimalist", "Stackable", "Leather"], [
            ("Desk Organizer", 12, 45, ["5 Compartments", "Rotating"]),
            ("File Folder Set", 8, 30, ["Letter Size", "Legal Size"]),
            ("Monitor Riser", 20, 70, ["Single", "Dual"]),
            ("Cable Clips", 5, 15, ["6-Pack", "12-Pack"]),
            ("Letter Tray", 10, 40, ["2-Tier", "3-Tier"]),
        ]),
    },
}

BRANDS = ["Acme", "Northwind", "Bluebird", "Lumina", "Greenleaf", "Ironwood", "Solstice", "Maple & Co",
          "Everhart", "Zephyr", "Crestline", "Orchid", "Pinecrest", "Brightside", "Nimbus", "Harbor"]
DESCRIPTORS = ["popular", "well-reviewed", "new", "best-selling", "customer-favourite"]
SHIPPING_NOTES = ["Ships in 1-2 business days.", "Limited stock.", "Gift wrapping available.", "Free returns within 30 days."]

FIRST = ["Emma", "Liam", "Olivia", "Noah", "Ava", "Ethan", "Sophia", "Mason", "Isabella", "Lucas", "Mia",
         "Amir", "Chloe", "Mateo", "Priya", "Kenji", "Zoe", "Omar", "Grace", "Diego", "Hana", "Felix", "Nora",
         "Samuel", "Leila", "Jonas", "Aisha", "Victor", "Maya", "Hugo", "Julia", "Tomás", "Ingrid", "Rafael"]
LAST = ["Lopez", "Smith", "Nguyen", "Garcia", "Kim", "Johnson", "Patel", "Brown", "Rossi", "Müller",
        "Silva", "Chen", "Okafor", "Dubois", "Novak", "Tanaka", "Williams", "Haddad", "Jensen", "Costa",
        "O'Brien", "Schmidt", "Andersson", "Park"]
# (city, state, first three digits of the ZIP code)
CITIES = [("Pittsburgh", "PA", "152"), ("Austin", "TX", "787"), ("Portland", "OR", "972"),
          ("Denver", "CO", "802"), ("Boston", "MA", "021"), ("Seattle", "WA", "981"),
          ("Chicago", "IL", "606"), ("Miami", "FL", "331"), ("Phoenix", "AZ", "850"), ("Atlanta", "GA", "303"),
          ("Minneapolis", "MN", "554"), ("Columbus", "OH", "432"), ("Nashville", "TN", "372"), ("Raleigh", "NC", "276")]
STREETS = ["Oak St", "Maple Ave", "Pine Rd", "Cedar Ln", "Elm St", "Lake Dr", "Hill Rd", "River Way",
           "Forbes Ave", "Walnut St", "Sunset Blvd", "Park Pl", "Highland Ave", "Church St"]
STATES = ["AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "DC", "FL", "GA", "HI", "ID", "IL", "IN", "IA", "KS",
          "KY", "LA", "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH", "NJ", "NM", "NY", "NC",
          "ND", "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VT", "VA", "WA", "WV", "WI", "WY"]

REVIEW_TITLES = {
    5: ["Love it!", "Exactly as described", "Best purchase this year", "Highly recommend", "Five stars",
        "Perfect gift", "Exceeded expectations"],
    4: ["Very good", "Works well", "Nice quality", "Pretty happy with it", "Good value", "Solid choice"],
    3: ["It's okay", "Average", "Does the job", "Mixed feelings", "Not bad, not great"],
    2: ["Disappointing", "Expected more", "Meh", "Quality issues", "Would not buy again"],
    1: ["Terrible", "Stopped working", "Do not buy", "Waste of money", "Very poor"],
}
REVIEW_BODIES = {
    5: ["The {noun} is fantastic and arrived quickly.", "I use this {noun} every day. Great quality.",
        "Better than the {noun} I had before.", "Bought a second one as a gift."],
    4: ["Solid {noun}, minor issues with the packaging.", "Good {noun} for the price.",
        "Does what a {noun} should do.", "Would be perfect if it were a little cheaper."],
    3: ["The {noun} is fine but nothing special.", "Average {noun}; shipping was slow.",
        "Some things I like about this {noun}, some I don't."],
    2: ["The {noun} stopped working properly after a month.", "Not the {noun} I expected from the photos."],
    1: ["The {noun} arrived damaged and support never answered.", "This {noun} is not worth the money."],
}
