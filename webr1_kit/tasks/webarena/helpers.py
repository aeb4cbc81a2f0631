"""The `func:` helpers WebArena's program_html checks call, written for this kit.

Task files call them as Python expressions, e.g.

    "url": "func:shopping_get_latest_order_url()"
    "url": "func:reddit_get_post_url('__last_url__')"
    "locator": "func:gitlab_get_project_memeber_role(__page__, 'byteblaze')"

WebArena runs these with eval(). Here the expression is parsed (ast) and must be one call
of a known helper with literal arguments, `__page__` (the page being checked) or
'__last_url__' (the agent's final URL); anything else is refused as not evaluable.

Three kinds, with WebArena's names (the misspelt `memeber` included) and meanings:
- URL helpers, for `url`: reddit_get_post_url, shopping_get_latest_order_url,
  shopping_get_sku_product_page_url;
- page helpers, for `locator`: they read the page's DOM (GitLab members table, Postmill
  comment tree, Magento order and product pages, querySelector text);
- API helpers, for `locator`: they read the storefront's Magento REST API as its admin
  (latest review author, rating, title, text of a SKU).

Failures split as everywhere else in the kit: a page that lacks the element reads as ""
(the check fails, as in WebArena); a site, page or API that cannot answer raises
EvaluationUnavailable (the episode is not evaluated). A number a helper returns is
compared as its decimal text.
"""

from __future__ import annotations

import ast
import asyncio
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..evaluators import EvaluationUnavailable
from ..task import origin_of
from .config import WebArenaConfig

PAGE = object()
"""Stands for `__page__` among parsed arguments."""
LAST_URL = "__last_url__"


def parse_call(expr: str) -> tuple[str, list[Any]]:
    """(name, args) of a helper call like "f(__page__, 'x', 2)"; raises EvaluationUnavailable."""
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        raise EvaluationUnavailable(f"helper call {expr!r} is not a Python call expression") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords:
        raise EvaluationUnavailable(f"helper call {expr!r} must be name(arg, ...) with positional arguments")
    args: list[Any] = []
    for a in node.args:
        if isinstance(a, ast.Name) and a.id == "__page__":
            args.append(PAGE)
        elif isinstance(a, ast.Constant) and isinstance(a.value, (str, int, float)) and not isinstance(a.value, bool):
            args.append(a.value)
        else:
            raise EvaluationUnavailable(f"helper call {expr!r}: arguments must be literals or __page__")
    return node.func.id, args


# ---------------------------------------------------------------- page helpers (JavaScript)

QUERY_TEXT_JS = """(sel) => { try { const e = document.querySelector(sel); return e ? e.textContent : ''; }
  catch (err) { return ''; } }"""

GITLAB_ROLE_JS = """(account) => {
  // The members table: the account column shows "@username", the max-role column the role.
  const names = [...document.querySelectorAll("td[data-label='Account'] span.gl-avatar-labeled-sublabel")];
  const roles = document.querySelectorAll("td.col-max-role span");
  const i = names.findIndex((e) => e.outerText.trim() === '@' + account);
  return (i >= 0 && roles[i]) ? roles[i].outerText : '';
}"""

# Postmill's comment tree: each comment is an element with class "comment" and a
# data-level; the author is its first ".fg-inherit" link, the text ".comment__content",
# the time a <time datetime> in its header. A top-level comment's parent is the post.
REDDIT_COMMENTS_JS = """(username) => {
  const first = (el, sel) => el.querySelector(sel);
  const text = (el) => (el ? el.outerText.trim() : '');
  let latest = null, latestTime = -Infinity;
  for (const c of document.querySelectorAll('#main .comment')) {
    if (text(first(c, '.fg-inherit')) !== username) continue;
    const t = first(c, '.comment__main > header time') || first(c, 'time');
    const when = t ? Date.parse(t.dateTime || t.getAttribute('datetime')) : NaN;
    if (!Number.isNaN(when) && when > latestTime) { latest = c; latestTime = when; }
  }
  if (!latest) return {content: '', parent: ''};
  const parent = latest.parentElement ? latest.parentElement.closest('.comment') : null;
  const parentName = parent ? text(first(parent, '.fg-inherit'))
                            : text(first(document.querySelector('#main') || document, '.fg-inherit'));
  return {content: text(first(latest, '.comment__content')), parent: parentName};
}"""

# Magento's "My orders" item table: one <tbody> per product, cells classed "col name",
# "col sku", "col price", "col qty", "col subtotal"; options as <dl><dt>Name</dt><dd>Value</dd>.
ORDER_ITEMS_JS = """() => {
  const table = document.querySelector('#my-orders-table');
  if (!table) return [];
  return [...table.getElementsByTagName('tbody')].map((body) => {
    const item = {options: {}};
    for (const td of body.getElementsByTagName('td')) {
      const key = td.className.split(' ')[1];
      if (key) item[key] = td.outerText;
      const dl = key === 'name' ? td.querySelector('dl') : null;
      if (dl) {
        const kids = [...dl.children];
        for (let i = 0; i + 1 < kids.length; i += 2) item.options[kids[i].outerText.trim()] = kids[i + 1].outerText.trim();
      }
    }
    return item;
  });
}"""

PRODUCT_ATTRIBUTES_JS = """(attribute) => {
  const terms = attribute.toLowerCase().split(' |or| ');
  const body = document.querySelector('#productDetails_detailBullets_sections1 > tbody');
  if (!body) return '';
  return [...body.children]
    .filter((row) => row.children.length > 1 && terms.some((t) => row.children[0].outerText.toLowerCase().includes(t)))
    .map((row) => row.children[1].outerText).join(', ');
}"""

PRODUCT_PRICE_JS = """() => {
  const e = document.querySelector('#maincontent > div.columns > div > div.product-info-main > div.product-info-price'
                                   + ' > div.price-box.price-final_price > span > span');
  const v = e ? parseFloat(e.outerText.substr(1)) : NaN;
  return Number.isNaN(v) ? 0 : v;
}"""

NUM_REVIEWS_JS = """() => {
  const e = document.querySelector('#tab-label-reviews-title');
  const v = e ? parseInt(e.outerText.split(' ')[1]) : NaN;
  return Number.isNaN(v) ? 0 : v;
}"""

RATING_JS = """() => {
  const e = document.querySelector('.rating-result');
  const v = e ? parseFloat((e.title || '').replace('%', '')) : NaN;
  return Number.isNaN(v) ? 0 : v;
}"""


async def _js(page: Any, script: str, arg: Any = None) -> Any:
    from playwright.async_api import Error as PlaywrightError

    try:
        return await page.evaluate(script, arg)
    except PlaywrightError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise EvaluationUnavailable(f"a program_html helper could not run on {page.url}: {first}") from None


def _number(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


async def get_query_text(page: Any, selector: str) -> str:
    return str(await _js(page, QUERY_TEXT_JS, selector) or "")


async def get_query_text_lowercase(page: Any, selector: str) -> str:
    return (await get_query_text(page, selector)).lower()


async def gitlab_get_project_memeber_role(page: Any, account: str) -> str:
    return str(await _js(page, GITLAB_ROLE_JS, account) or "")


async def reddit_get_latest_comment_content_by_username(page: Any, username: str) -> str:
    return (await _js(page, REDDIT_COMMENTS_JS, username))["content"]


async def reddit_get_parent_comment_username_of_latest_comment_by_username(page: Any, username: str) -> str:
    return (await _js(page, REDDIT_COMMENTS_JS, username))["parent"]


async def _order_items(page: Any) -> list[dict[str, Any]]:
    return list(await _js(page, ORDER_ITEMS_JS) or [])


async def shopping_get_order_product_name_list(page: Any) -> str:
    return " |OR| ".join(str(p.get("name", "")) for p in await _order_items(page))


async def shopping_get_order_product_quantity(page: Any, sku: str) -> str:
    skus = [s.strip() for s in sku.split("|OR|")]
    for p in await _order_items(page):
        if str(p.get("sku", "")).strip() in skus:
            digits = "".join(ch for ch in str(p.get("qty", "")).replace("Ordered", "", 1) if ch.isdigit())
            return digits or "0"
    return "0"


async def shopping_get_order_product_option(page: Any, sku: str, option: str) -> str:
    for p in await _order_items(page):
        if str(p.get("sku", "")).strip() == sku:
            return str(p.get("options", {}).get(option, ""))
    return ""


async def shopping_get_product_attributes(page: Any, attribute: str) -> str:
    return str(await _js(page, PRODUCT_ATTRIBUTES_JS, attribute) or "")


async def shopping_get_product_price(page: Any) -> str:
    return _number(await _js(page, PRODUCT_PRICE_JS))


async def shopping_get_num_reviews(page: Any) -> str:
    return _number(await _js(page, NUM_REVIEWS_JS))


async def shopping_get_rating_as_percentage(page: Any) -> str:
    return _number(await _js(page, RATING_JS))


PAGE_HELPERS = {f.__name__: f for f in (
    get_query_text, get_query_text_lowercase, gitlab_get_project_memeber_role,
    reddit_get_latest_comment_content_by_username, reddit_get_parent_comment_username_of_latest_comment_by_username,
    shopping_get_order_product_name_list, shopping_get_order_product_quantity, shopping_get_order_product_option,
    shopping_get_product_attributes, shopping_get_product_price, shopping_get_num_reviews,
    shopping_get_rating_as_percentage,
)}


# ---------------------------------------------------------------- URL helpers


def reddit_get_post_url(url: str) -> str:
    """A Postmill comment or post URL cut back to its post: scheme://host/f/<forum>/<id>/."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path.split("/")
    if len(path) < 4 or path[1] != "f":
        return url
    return f"{parts.scheme}://{parts.netloc}/f/{path[2]}/{path[3]}/"


# ---------------------------------------------------------------- Magento REST (API helpers)


class MagentoAPI:
    """The storefront's REST API, read as its admin (WebArena's `shopping_site_admin`)."""

    TOKEN_TTL_S = 300.0

    def __init__(self, config: WebArenaConfig, timeout_s: float = 20.0):
        self.config = config
        self.timeout_s = timeout_s
        self._token: tuple[str, float] | None = None

    @property
    def base(self) -> str:
        return self.config.url("shopping")

    def _request(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        url = origin_of(self.base) + path
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise EvaluationUnavailable(f"Magento API {method} {url} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise EvaluationUnavailable(f"Magento API {url} unreachable: {getattr(exc, 'reason', exc)}") from None
        except (ValueError, UnicodeDecodeError):
            raise EvaluationUnavailable(f"Magento API {url} did not answer JSON") from None

    def token(self) -> str:
        if self._token is None or time.monotonic() - self._token[1] > self.TOKEN_TTL_S:
            acc = self.config.account("shopping_site_admin")
            token = self._request("POST", "/rest/default/V1/integration/admin/token",
                                  {"username": acc["username"], "password": acc["password"]})
            if not isinstance(token, str) or not token:
                raise EvaluationUnavailable("Magento API: the admin token request returned no token")
            self._token = (token, time.monotonic())
        return self._token[0]

    def get(self, path: str) -> Any:
        return self._request("GET", path, token=self.token())

    def latest_order_url(self) -> str:
        query = urllib.parse.urlencode({"searchCriteria[sortOrders][0][field]": "created_at",
                                        "searchCriteria[sortOrders][0][direction]": "DESC",
                                        "searchCriteria[pageSize]": "1"})
        items = (self.get(f"/rest/V1/orders?{query}") or {}).get("items") or []
        if not items:
            raise EvaluationUnavailable("Magento API: the store has no orders at all")
        # As WebArena: the order's increment id, as a number, in the customer's order-view URL.
        return f"{self.base}/sales/order/view/order_id/{int(items[0]['increment_id'])}/"

    def latest_review(self, sku: str) -> dict[str, Any]:
        reviews = self.get(f"/rest/V1/products/{urllib.parse.quote(sku, safe='')}/reviews")
        if not isinstance(reviews, list):
            raise EvaluationUnavailable(f"Magento API: reviews of {sku} are not a list")
        return reviews[-1] if reviews else {}

    def product_page_url(self, sku: str) -> str:
        product = self.get(f"/rest/V1/products/{urllib.parse.quote(sku, safe='')}")
        for attr in (product or {}).get("custom_attributes", []):
            if attr.get("attribute_code") == "url_key":
                return f"{self.base}/{attr['value']}.html"
        return ""


def _review_field(review: dict[str, Any], field: str) -> str:
    if not review:
        return ""
    if field == "rating":
        ratings = review.get("ratings") or [{}]
        return _number(ratings[0].get("percent", ""))
    return str(review.get(field, ""))


class Helpers:
    """Resolves program_html `func:` expressions (see evaluators.program_html)."""

    def __init__(self, config: WebArenaConfig):
        self.api = MagentoAPI(config)

    async def url(self, expr: str, page: Any) -> str:
        """A `url: "func:..."` expression: the URL to load for the check."""
        name, args = parse_call(expr)
        args = [page.url if a == LAST_URL else a for a in args]
        if PAGE in args:
            raise EvaluationUnavailable(f"URL helper {name} takes no page")
        if name == "reddit_get_post_url" and len(args) == 1 and isinstance(args[0], str):
            return reddit_get_post_url(args[0])
        if name == "shopping_get_latest_order_url" and not args:
            return await asyncio.to_thread(self.api.latest_order_url)
        if name == "shopping_get_sku_product_page_url" and len(args) == 1:
            return await asyncio.to_thread(self.api.product_page_url, str(args[0]))
        raise EvaluationUnavailable(f"unknown or misused URL helper {expr!r}")

    async def locate(self, expr: str, page: Any) -> str:
        """A `locator: "func:..."` expression, evaluated on `page` (the loaded check page)."""
        name, args = parse_call(expr)
        args = [page.url if a == LAST_URL else a for a in args]
        if name in PAGE_HELPERS:
            if not args or args[0] is not PAGE or PAGE in args[1:]:
                raise EvaluationUnavailable(f"page helper {name} takes __page__ first: {expr!r}")
            try:
                return await PAGE_HELPERS[name](page, *[str(a) for a in args[1:]])
            except TypeError:
                raise EvaluationUnavailable(f"wrong number of arguments in {expr!r}") from None
        field = {"shopping_get_sku_latest_review_author": "nickname", "shopping_get_sku_latest_review_rating": "rating",
                 "shopping_get_sku_latest_review_text": "detail", "shopping_get_sku_latest_review_title": "title"}.get(name)
        if field and len(args) == 1 and args[0] is not PAGE:
            review = await asyncio.to_thread(self.api.latest_review, str(args[0]))
            return _review_field(review, field)
        raise EvaluationUnavailable(f"unknown or misused locator helper {expr!r}")
