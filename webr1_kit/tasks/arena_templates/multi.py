"""Multi-site task templates: look something up on one site, act on it on another.

On these tasks every page carries an "Other sites" bar linking the task's other sites
(see sites/web.py), as WebArena's homepage links its sites. The experts are stateless:
what they learned on the first site they read back from the history's observations.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any
from urllib.parse import quote

from ...sites.shop.data import money
from ..arena import Instance, Template, World, page_eval
from . import code as code_t
from . import forum as forum_t
from . import shop as shop_t
from ._expert import answer, click_or_scroll


def _seen(history: list, obs: Any, pattern: str) -> str | None:
    """The first group of `pattern` in the current or any past observation's page text."""
    for text in [obs.content] + [t.observation.get("content", "") for t in reversed(history)]:
        m = re.search(pattern, text)
        if m:
            return m.group(1)
    return None


def _to_site(obs: Any, history: list, title: str) -> str | None:
    """Click the "Other sites" link to `title`, unless already there (None)."""
    if obs.title.endswith(f"· {title}"):
        return None
    return click_or_scroll(obs, history, f"the link to {title}", name=title, role="link")


def _products(world: World, n: int, salt: str) -> list[Any]:
    rows = world.query("store", "SELECT id, name, sku, price_cents FROM products WHERE enabled = 1 ORDER BY id")
    rng = random.Random(f"{salt}/{world.seed}")
    return rng.sample(rows, min(n, len(rows)))


# ---------------------------------------------------------------- shop -> forum: post a price


FORUMS = ("deals", "BuyItForLife", "personalfinance")


def _price_post_instances(world: World):
    forums = {r["name"] for r in world.query("forum", "SELECT name FROM forums")}
    taken = {r["title"] for r in world.query("forum", "SELECT title FROM posts")}
    usable = [f for f in FORUMS if f in forums] or sorted(forums)[:3]
    for k, r in enumerate(_products(world, 40, "multi.price_post")):
        forum = usable[k % len(usable)]
        title = f"Price check: {r['name']}"
        if title in taken:
            continue
        body = money(r["price_cents"])
        locator = (f"[...document.querySelectorAll('.posts .post')]"
                   f".filter(li => li.querySelector('.post-title').textContent.trim() === {json.dumps(title)})"
                   f".map(li => [li.querySelector('.forum-link').textContent.trim(),"
                   f" (li.querySelector('.snippet') || {{textContent: ''}}).textContent.trim()].join(' | ')).join(' || ')")
        yield Instance({"product_id": r["id"], "name": r["name"], "forum": forum, "title": title},
                       page_eval((f"__REDDIT__/search?q={quote(title)}", locator, f"f/{forum} | {body}")))


def _price_post_expert(p, obs, history):
    price = _seen(history, obs, r"Price: (\$[\d,]+\.\d\d)") if any(
        f"/product/{p['product_id']}" in t.observation.get("url", "") for t in history) or \
        obs.url.endswith(f"/product/{p['product_id']}") else None
    if price is None:
        return shop_t._go_to_product(p, obs, history, lambda o: answer("No price shown.", "unknown"))
    move = _to_site(obs, history, "Postmill")
    if move is not None:
        return move.replace("<think>", f"<think>The price is {price}. Now go to the forum. ", 1)
    return forum_t._submit_expert({"forum": p["forum"], "title": p["title"], "body": price}, obs, history)


PRICE_POST = Template(
    id="multi.price_post", sites=("shop", "forum"), kind="content",
    intent='Look up the price of the {name} in One Stop Market, then create a post in f/{forum} titled '
           '"{title}" whose body is just that price (e.g. $12.34).',
    start="__SHOPPING__/", min_steps=9, instances=_price_post_instances, expert=_price_post_expert,
)


# ---------------------------------------------------------------- shop -> code: an issue named by SKU


def _sku_issue_instances(world: World):
    projects = code_t._projects(world)
    for k, r in enumerate(_products(world, 40, "multi.sku_issue")):
        proj = projects[k % len(projects)]
        title = f"Restock {r['sku']}"
        existing = world.query("code", "SELECT 1 FROM issues WHERE project_id = ? AND title = ?", (proj["id"], title))
        if existing:
            continue
        locator = ("(() => [...document.querySelectorAll('li.issue .issue-title')].map(e => e.innerText.trim())"
                   f".filter(t => t === {json.dumps(title)}).length)()")
        yield Instance({**code_t._base(proj), "product_id": r["id"], "name": r["name"]},
                       page_eval((f"__GITLAB__/{proj['ns']}/{proj['proj']}/-/issues?state=all&sort=created_desc",
                                  locator, "1")))


def _sku_issue_expert(p, obs, history):
    on_product = obs.url.endswith(f"/product/{p['product_id']}") or any(
        t.observation.get("url", "").endswith(f"/product/{p['product_id']}") for t in history)
    sku = _seen(history, obs, r"SKU: ([A-Z]+-\d+)") if on_product else None
    if sku is None:
        return shop_t._go_to_product(p, obs, history, lambda o: answer("No SKU shown.", "unknown"))
    move = _to_site(obs, history, "CodeHub")
    if move is not None:
        return move.replace("<think>", f"<think>The SKU is {sku}. Now go to CodeHub. ", 1)
    title = f"Restock {sku}"
    here, _ = code_t.where(obs)
    if re.fullmatch(re.escape(code_t.project_path(p)) + r"/-/issues/\d+", here) and code_t._flash(obs, r"Issue #\d+ was created"):
        return answer("The issue is created.", "done")

    def on_issues(obs):
        here, _ = code_t.where(obs)
        if here.endswith("/-/issues/new"):
            return code_t.fill_form(obs, [("text", "Title", title)], "Create issue")
        if here.endswith("/-/issues"):
            return click_or_scroll(obs, history, "the New issue button", name="New issue", role="link")
        return click_or_scroll(obs, history, "the Issues tab", name="Issues", role="link")

    return code_t.to_tab(p, obs, history, "Issues", "issues", on_issues, subpages=True)


SKU_ISSUE = Template(
    id="multi.sku_issue", sites=("shop", "code"), kind="content",
    intent='Find the SKU of the {name} in One Stop Market, then open an issue in the CodeHub project {project} '
           'titled "Restock <SKU>" (for example "Restock ABC-12345").',
    start="__SHOPPING__/", min_steps=10, instances=_sku_issue_instances, expert=_sku_issue_expert,
)

TEMPLATES = [PRICE_POST, SKU_ISSUE]
