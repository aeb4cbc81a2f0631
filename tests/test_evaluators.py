"""WebArena-style evaluators: string_match, url_match, program_html on a real headless
Chromium and real local HTTP servers, their product, and rewards end to end through
BrowserEnv (a right answer earns 1, a wrong one 0, an evaluator that cannot run raises
InfraError)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from http_helpers import PageServer
from webr1_kit.browser import BrowserEnv, InfraError
from webr1_kit.tasks import Task, load_task_file
from webr1_kit.tasks.evaluators import (
    EvaluationUnavailable,
    clean,
    contains,
    evaluate,
    program_html,
    string_match,
    text_judge,
    url_match,
)


def sm_task(intent: str = "What is the total of order 42?", **refs) -> Task:
    return Task(task_id="t/sm", intent=intent, start_url="http://127.0.0.1/",
                eval={"eval_types": ["string_match"], "reference_answers": refs})


def url_task(ref: str) -> Task:
    return Task(task_id="t/url", intent="", start_url="http://127.0.0.1/",
                eval={"eval_types": ["url_match"], "reference_url": ref})


def html_task(*items: dict) -> Task:
    return Task(task_id="t/html", intent="", start_url="http://127.0.0.1/",
                eval={"eval_types": ["program_html"], "program_html": list(items)})


def passes(task: Task, answer: str | None, **kw) -> bool:
    return asyncio.run(string_match(task, answer, **kw))["passed"]


def dead_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- string_match


@pytest.mark.parametrize("answer", ["Quest Lumaflex Band", "  quest lumaflex   band ", '"Quest Lumaflex Band"',
                                    "'QUEST LUMAFLEX BAND'", "Quest\nLumaflex\tBand"])
def test_exact_match_ignores_case_whitespace_and_quotes(answer):
    assert passes(sm_task(exact_match="Quest Lumaflex Band"), answer)


@pytest.mark.parametrize("answer", ["25.99", "$25.99.", "$ 25.99", "$25.99 total", "Quest Lumaflex", ""])
def test_exact_match_is_exact_otherwise(answer):
    assert not passes(sm_task(exact_match="$25.99"), answer)


def test_exact_match_punctuation_counts():
    assert passes(sm_task(exact_match="$25.99"), "$25.99")
    assert not passes(sm_task(exact_match="25.99"), "$25.99")


def test_must_include_list_needs_every_item():
    t = sm_task(must_include=["$25.99", "Order 42"])
    assert passes(t, "The total of order 42 is $25.99.")
    assert not passes(t, "The total is $25.99")
    assert not passes(t, "Order 42 costs 25.99")  # "$" is significant


def test_must_include_single_string():
    t = sm_task(must_include="Pittsburgh")
    assert passes(t, "It is Pittsburgh's airport")
    assert not passes(t, "It is Philadelphia")


def test_must_include_alternatives():
    t = sm_task(must_include=["Carnegie Mellon |OR| CMU", "Pittsburgh"])
    assert passes(t, "CMU, in Pittsburgh")
    assert passes(t, "carnegie mellon university, pittsburgh")
    assert not passes(t, "The University of Pittsburgh")
    assert not passes(t, "CMU")


def test_must_include_matches_whole_numbers_and_words():
    # WebArena tokenises single-word references "to prevent false positives (e.g. 0)".
    assert not passes(sm_task(must_include=["2"]), "12")
    assert not passes(sm_task(must_include=["2"]), "0123456789")
    assert passes(sm_task(must_include=["2"]), "There are 2 reviews.")
    assert not passes(sm_task(must_include=["25.99"]), "$125.99")
    assert passes(sm_task(must_include=["25.99"]), "It costs $25.99")
    assert not passes(sm_task(must_include=["cat"]), "a concatenated answer")


def test_contains_boundaries():
    assert contains("$25.99", "total: $25.99.")
    assert not contains("$25.99", "total: $25.990")
    assert contains("order #42", "Order #42 shipped")
    assert not contains("", "anything")
    assert contains("北京", "我在北京市")  # scripts without spaces keep substring matching


def test_empty_alternative_does_not_pass_everything():
    assert not passes(sm_task(must_include=["Paris |OR| "]), "London")


def test_fuzzy_match_default_judge():
    t = sm_task(fuzzy_match=["Quest Lumaflex Band"])
    assert passes(t, "The best seller is the Quest Lumaflex™ Band.")
    assert passes(t, "quest-lumaflex band")  # punctuation does not matter to the fuzzy judge
    assert passes(sm_task(fuzzy_match="Pittsburgh"), "It is Pittsburgh’s airport")  # curly apostrophe
    assert not passes(t, "The best seller is the Quest band")
    assert not passes(sm_task(fuzzy_match="2"), "12")


def test_text_judge():
    assert text_judge("", "N/A", "N/A")
    assert text_judge("", "n/a: the order does not exist", "N/A")
    assert text_judge("", "This task is not achievable", "N/A")
    assert not text_judge("", "nothing", "N/A")
    assert not text_judge("", "anything", "")
    assert clean("  'Hello   World' ") == "hello world"


def test_fuzzy_match_custom_sync_judge_gets_intent_answer_reference():
    calls = []

    def judge(intent, answer, reference):
        calls.append((intent, answer, reference))
        return answer.strip() == "twenty-five ninety-nine"

    t = sm_task(intent="Total?", fuzzy_match=["$25.99", "25.99 dollars"])
    assert passes(t, "twenty-five ninety-nine", judge=judge)
    assert calls == [("Total?", "twenty-five ninety-nine", "$25.99"), ("Total?", "twenty-five ninety-nine", "25.99 dollars")]
    assert not passes(t, "$25.99", judge=judge)  # the judge alone decides


def test_fuzzy_match_custom_async_judge():
    async def judge(intent, answer, reference):
        await asyncio.sleep(0)
        return "yes" in answer

    t = sm_task(fuzzy_match="N/A")
    assert asyncio.iscoroutinefunction(judge)
    assert passes(t, "yes indeed", judge=judge)
    assert not passes(t, "N/A", judge=judge)


def test_no_answer_fails_even_on_na_tasks():
    for refs in ({"exact_match": "N/A"}, {"fuzzy_match": "N/A"}, {"must_include": ["N/A"]}):
        result = asyncio.run(string_match(sm_task(**refs), None))
        assert result["passed"] is False and "without exit" in result["reason"]


def test_na_reference_passes_na_answers():
    assert passes(sm_task(exact_match="N/A"), "N/A")
    assert passes(sm_task(exact_match="N/A"), '"n/a"')
    assert passes(sm_task(fuzzy_match="N/A"), "N/A")
    assert not passes(sm_task(exact_match="N/A"), "")
    assert not passes(sm_task(exact_match="N/A"), "$25.99")


def test_string_match_without_usable_reference_is_unavailable():
    # Task records built in code are not validated: they must not pass every answer.
    for refs in ({}, {"must_include": []}, {"contains": ["x"]}):
        with pytest.raises(EvaluationUnavailable):
            asyncio.run(string_match(sm_task(**refs), "anything"))


# ---------------------------------------------------------------- url_match

BASE = "http://127.0.0.1:7770"


@pytest.mark.parametrize("ref,got,ok", [
    (f"{BASE}/search?q=shoes&page=2", f"{BASE}/search?page=2&q=shoes", True),
    (f"{BASE}/search?q=shoes&page=2", f"{BASE}/search?page=2&q=shoes&sort=price", True),  # extra params are fine
    (f"{BASE}/search?q=shoes&page=2", f"{BASE}/search?q=shoes", False),  # missing param
    (f"{BASE}/search?q=shoes", f"{BASE}/search?q=boots", False),  # different value
    (f"{BASE}/search?q=", f"{BASE}/search?q=boots", False),  # an empty search is a value too
    (f"{BASE}/search?q=red+shoes", f"{BASE}/search?q=red%20shoes", True),
    (f"{BASE}/customer/account/", f"{BASE}/customer/account", True),
    (f"{BASE}/customer/account", f"{BASE}/customer/account/", True),
    (f"{BASE}", f"{BASE}/", True),
    (f"{BASE}/customer/account", f"{BASE}/customer/accounts", False),
    (f"{BASE}/customer/account", f"{BASE}/customer", False),
    (f"{BASE}/a", "http://127.0.0.1:7780/a", False),  # other port, other site
    (f"{BASE}/a", "http://example.com/a", False),
    (f"{BASE}/a", "http://127.0.0.1:7770/a#reviews", True),
    (f"{BASE}/a", "about:blank", False),
])
def test_url_match(ref, got, ok):
    result = url_match(url_task(ref), got)
    assert result["passed"] is ok, result
    assert result["type"] == "url_match"


def test_url_match_alternatives():
    t = url_task(f"{BASE}/orders/42 |OR| {BASE}/sales/order/view/order_id/42")
    assert url_match(t, f"{BASE}/sales/order/view/order_id/42/")["passed"]
    assert url_match(t, f"{BASE}/orders/42")["passed"]
    assert not url_match(t, f"{BASE}/orders/41")["passed"]


def test_url_match_without_reference_is_unavailable():
    with pytest.raises(EvaluationUnavailable):
        url_match(url_task(""), f"{BASE}/")


# ---------------------------------------------------------------- program_html (real Chromium)


@pytest.fixture(scope="module")
def error_server():
    """A real HTTP server on 127.0.0.1 that answers every request with HTTP 500."""
    server = PageServer(b"<html><body>Internal error: Alice $25.99</body></html>", status=500)
    yield server.url
    server.stop()


@pytest.fixture
async def shop(browser, fixture_server):
    """A fresh context whose page shows the fixture shop; yields (page, context, base URL)."""
    ctx = await browser.new_context()
    page = await ctx.new_page()
    await page.goto(f"{fixture_server.url}/eval_shop.html")
    yield page, ctx, fixture_server.url
    await ctx.close()


def item(url: str = "last", locator: str = "", **required) -> dict:
    return {"url": url, "locator": locator, "required_contents": required}


async def test_program_html_last_page_with_locator(shop):
    page, ctx, _ = shop
    loc = "document.querySelector('#status').outerText"
    t = html_task(item(locator=loc, must_include=["Cancelled"]))
    assert (await program_html(t, page, ctx))["passed"] is False
    await page.click("#cancel")
    assert (await program_html(t, page, ctx))["passed"] is True
    exact = html_task(item(locator=loc, exact_match="order 42 is cancelled"))
    assert (await program_html(exact, page, ctx))["passed"] is True
    assert (await program_html(html_task(item(locator=loc, exact_match="Cancelled")), page, ctx))["passed"] is False


async def test_program_html_empty_locator_reads_the_whole_page_text(shop):
    page, ctx, _ = shop
    ok = html_task(item(must_include=["My orders", "$25.99", "Order 42 is Pending"]))
    assert (await program_html(ok, page, ctx))["passed"] is True
    # the visible text, not the HTML source
    assert (await program_html(html_task(item(must_include=["<table"])), page, ctx))["passed"] is False
    result = await program_html(html_task(item(must_include=["My orders", "$99.99"])), page, ctx)
    assert result["passed"] is False and "$99.99" in result["reason"]


async def test_program_html_fuzzy_match_asks_the_judge_with_the_list_joined(shop):
    """WebArena-Lite's program_html fuzzy_match: the judge gets the task's intent, the
    located content and the reference list joined by ", " (one question, as
    VisualAgentBench's evaluator asks it); its verdict decides the check."""
    page, ctx, _ = shop
    loc = "document.querySelector('#status').outerText"
    t = Task(task_id="t/fuzzy", intent="cancel order 42", start_url="http://127.0.0.1/",
             eval={"eval_types": ["program_html"],
                   "program_html": [item(locator=loc, fuzzy_match=["order 42", "cancelled"])]})
    asked = []

    async def judge(intent, answer, reference):
        asked.append((intent, answer, reference))
        return "cancelled" in answer.lower()

    assert (await program_html(t, page, ctx, judge=judge))["passed"] is False
    await page.click("#cancel")
    assert (await program_html(t, page, ctx, judge=judge))["passed"] is True
    assert asked == [("cancel order 42", "Order 42 is Pending", "order 42, cancelled"),
                     ("cancel order 42", "Order 42 is Cancelled", "order 42, cancelled")]
    # the default judge: the joined reference must appear in the content
    assert (await program_html(t, page, ctx))["passed"] is False
    same = Task(task_id="t/fuzzy2", intent="", start_url="http://127.0.0.1/",
                eval={"eval_types": ["program_html"], "program_html": [item(locator=loc, fuzzy_match=["Order 42 is cancelled"])]})
    assert (await program_html(same, page, ctx))["passed"] is True


async def test_program_html_must_include_uses_word_boundaries(shop):
    page, ctx, _ = shop
    count = "document.querySelector('#count').outerText"
    assert (await program_html(html_task(item(locator=count, must_include=["12"])), page, ctx))["passed"]
    assert not (await program_html(html_task(item(locator=count, must_include=["2"])), page, ctx))["passed"]


async def test_program_html_explicit_url_keeps_the_agent_page(shop):
    page, ctx, base = shop
    t = html_task(item(url=f"{base}/eval_order.html?id=42", locator="document.querySelector('#order-id').outerText",
                       exact_match="Order #42"))
    assert (await program_html(t, page, ctx))["passed"] is True
    wrong = html_task(item(url=f"{base}/eval_order.html?id=41", locator="document.querySelector('#order-id').outerText",
                           exact_match="Order #42"))
    assert (await program_html(wrong, page, ctx))["passed"] is False
    # the check neither moved the agent nor left a tab behind
    assert page.url == f"{base}/eval_shop.html"
    assert ctx.pages == [page]


async def test_program_html_explicit_url_sees_the_agent_login(shop):
    page, ctx, base = shop
    await page.evaluate("() => { localStorage.setItem('user', 'alice'); document.cookie = 'session=s3cret; path=/'; }")
    t = html_task(item(url=f"{base}/eval_account.html", must_include=["alice", "session s3cret"]))
    assert (await program_html(t, page, ctx))["passed"] is True


async def test_program_html_runs_prep_actions(shop):
    page, ctx, _ = shop
    t = html_task({**item(locator="document.querySelector('#status').outerText", must_include=["Cancelled"]),
                   "prep_actions": ["document.querySelector('#missing').click()",  # failures are ignored
                                    "document.querySelector('#cancel').click()"]})
    assert (await program_html(t, page, ctx))["passed"] is True


async def test_program_html_every_item_must_pass(shop):
    page, ctx, base = shop
    first = item(must_include=["$25.99"])
    second = item(url=f"{base}/eval_order.html?id=7", locator="document.querySelector('#order-id').outerText",
                  must_include=["#42"])
    result = await program_html(html_task(first, second), page, ctx)
    assert result["passed"] is False and "program_html[1]" in result["reason"]


@pytest.mark.parametrize("locator", [
    "document.querySelector('#does-not-exist').outerText",  # TypeError: null has no outerText
    "(() => { throw new Error('boom'); })()",
    "document.querySelector('#does-not-exist')",  # null: empty content
])
async def test_program_html_locator_that_throws_fails_the_check(shop, locator):
    page, ctx, _ = shop
    for required in ({"must_include": ["Pending"]}, {"exact_match": "Order 42 is Pending"}):
        result = await program_html(html_task({"url": "last", "locator": locator, "required_contents": required}),
                                    page, ctx)
        assert result["passed"] is False


async def test_program_html_locator_with_trailing_semicolon(shop):
    page, ctx, _ = shop
    t = html_task(item(locator="document.querySelector('#status').outerText;", must_include=["Pending"]))
    assert (await program_html(t, page, ctx))["passed"] is True


async def test_program_html_locator_that_does_not_parse_is_unavailable(shop):
    page, ctx, _ = shop
    with pytest.raises(EvaluationUnavailable, match="locator"):
        await program_html(html_task(item(locator="document.querySelector('#status'.outerText", must_include=["x"])),
                           page, ctx)


async def test_program_html_http_500_is_unavailable(shop, error_server):
    page, ctx, _ = shop
    t = html_task(item(url=f"{error_server}/admin/orders", must_include=["Alice"]))
    with pytest.raises(EvaluationUnavailable, match="HTTP 500"):
        await program_html(t, page, ctx)
    assert ctx.pages == [page]


async def test_program_html_dead_port_is_unavailable(shop):
    page, ctx, _ = shop
    t = html_task(item(url=f"http://127.0.0.1:{dead_port()}/orders", must_include=["x"]))
    with pytest.raises(EvaluationUnavailable, match="could not load"):
        await program_html(t, page, ctx)


@pytest.mark.parametrize("check", [
    item(url="last", locator="func:get_query_text(__page__, '.user-email')", must_include=["x"]),
    item(url="func:reddit_get_post_url('__last_url__')", locator="document.title", must_include=["x"]),
])
async def test_program_html_func_helpers_are_unavailable(shop, check):
    page, ctx, _ = shop
    with pytest.raises(EvaluationUnavailable, match="helper functions"):
        await program_html(html_task(check), page, ctx)


# ---------------------------------------------------------------- evaluate = product


def combined(base: str, answer_ref: str, url_ref: str) -> Task:
    return Task(task_id="t/both", intent="Open order 42 and tell its total", start_url=f"{base}/eval_shop.html",
                eval={"eval_types": ["string_match", "url_match"],
                      "reference_answers": {"must_include": [answer_ref]},
                      "reference_url": url_ref})


async def test_evaluate_multiplies_evaluators(shop):
    page, ctx, base = shop
    v = await evaluate(combined(base, "$25.99", f"{base}/eval_shop.html"), "$25.99", page, ctx)
    assert v.reward == 1.0 and v.success
    assert [(c["type"], c["passed"]) for c in v.checks] == [("string_match", True), ("url_match", True)]

    v = await evaluate(combined(base, "$25.99", f"{base}/eval_order.html"), "$25.99", page, ctx)
    assert v.reward == 0.0 and not v.success
    assert [(c["type"], c["passed"]) for c in v.checks] == [("string_match", True), ("url_match", False)]

    v = await evaluate(combined(base, "$25.99", f"{base}/eval_shop.html"), "$19.50", page, ctx)
    assert v.reward == 0.0
    assert [(c["type"], c["passed"]) for c in v.checks] == [("string_match", False), ("url_match", True)]


async def test_evaluate_all_three_with_a_custom_judge(shop):
    page, ctx, base = shop
    t = Task(task_id="t/three", intent="Cancel order 42", start_url=f"{base}/eval_shop.html",
             eval={"eval_types": ["string_match", "url_match", "program_html"],
                   "reference_answers": {"fuzzy_match": ["cancelled"]},
                   "reference_url": f"{base}/eval_shop.html",
                   "program_html": [item(locator="document.querySelector('#status').outerText",
                                         must_include=["Cancelled"])]})

    async def judge(intent, answer, reference):
        return intent == "Cancel order 42" and answer == "done"

    v = await evaluate(t, "done", page, ctx, judge=judge)
    assert v.reward == 0.0 and [c["passed"] for c in v.checks] == [True, True, False]
    await page.click("#cancel")
    v = await evaluate(t, "done", page, ctx, judge=judge)
    assert v.reward == 1.0 and [c["passed"] for c in v.checks] == [True, True, True]


async def test_evaluate_refuses_tasks_it_cannot_score(shop):
    page, ctx, base = shop
    for ev in ({"eval_types": []}, {},
               {"eval_types": ["url_match", "dom_match"], "reference_url": f"{base}/eval_shop.html"}):
        t = Task(task_id="t/bad", intent="", start_url=f"{base}/eval_shop.html", eval=ev)
        with pytest.raises(EvaluationUnavailable):
            await evaluate(t, "x", page, ctx)


# ---------------------------------------------------------------- end to end through BrowserEnv


def el(obs, name: str) -> int:
    """Id of the element with this accessible name in an observation."""
    found = [e.id for e in obs.elements if e.name == name]
    assert found, f"no element named {name!r} in {[e.name for e in obs.elements]}"
    return found[0]


@pytest.fixture
def task_file(tmp_path, fixture_server):
    """A WebArena-format task file with url_match, string_match and program_html tasks."""
    base = fixture_server.url
    records = [
        {"task_id": 1, "intent": "Open the details of order 42", "start_url": f"{base}/eval_shop.html",
         "sites": ["shopping"], "intent_template_id": 10, "require_login": False,
         "eval": {"eval_types": ["url_match"], "reference_answers": None,
                  "reference_url": f"{base}/eval_order.html?id=42&tab=items", "url_note": "GOLD in PRED",
                  "program_html": []}},
        {"task_id": 2, "intent": "What is the total of order 42?", "start_url": f"{base}/eval_shop.html",
         "sites": ["shopping"], "intent_template_id": 11,
         "eval": {"eval_types": ["string_match"], "reference_answers": {"must_include": ["$25.99"]},
                  "reference_url": "", "program_html": []}},
        {"task_id": 3, "intent": "Cancel order 42", "start_url": f"{base}/eval_shop.html",
         "eval": {"eval_types": ["program_html"], "reference_answers": None, "reference_url": "",
                  "program_html": [{"url": "last", "locator": "document.querySelector('#status').outerText",
                                    "required_contents": {"must_include": ["Cancelled"]}},
                                   {"url": f"{base}/eval_account.html", "locator": "",
                                    "required_contents": {"must_include": ["Account"]}}]}},
        {"task_id": 4, "intent": "Find order 99", "start_url": f"{base}/eval_shop.html",
         "eval": {"eval_types": ["string_match"], "reference_answers": {"exact_match": "N/A"},
                  "reference_url": "", "program_html": []}},
        {"task_id": 5, "intent": "Check the order page", "start_url": f"{base}/eval_shop.html",
         "eval": {"eval_types": ["program_html"], "reference_answers": None, "reference_url": "",
                  "program_html": [{"url": f"http://127.0.0.1:{dead_port()}/orders", "locator": "",
                                    "required_contents": {"must_include": ["42"]}}]}},
    ]
    p = tmp_path / "tasks.json"
    p.write_text(json.dumps(records, indent=1))
    return {t.task_id: t for t in load_task_file(p)}


@pytest.fixture
async def env(browser):
    e = BrowserEnv(browser)
    yield e
    await e.close()


async def test_env_url_match_rewards_the_right_page(env, task_file):
    obs = await env.reset(task_file["1"])
    assert env.intent == "Open the details of order 42"
    await env.step(f'do(action="Click", element="{el(obs, "Details of order 42")}")')
    assert env.page.url.endswith("/eval_order.html?tab=items&id=42")  # params in the other order
    obs, reward, done, info = await env.step('exit(message="done")')
    assert (reward, done) == (1.0, True)
    assert info["verdict"]["checks"][0]["type"] == "url_match"

    obs = await env.reset(task_file["1"])
    await env.step(f'do(action="Click", element="{el(obs, "Details of order 41")}")')
    obs, reward, done, info = await env.step('exit(message="done")')
    assert (reward, done) == (0.0, True)
    assert info["verdict"]["checks"][0]["passed"] is False


async def test_env_string_match_rewards_the_right_answer(env, task_file):
    await env.reset(task_file["2"])
    _, reward, done, info = await env.step('exit(message="The total of order 42 is $25.99.")')
    assert (reward, done) == (1.0, True) and info["answer"] == "The total of order 42 is $25.99."

    await env.reset(task_file["2"])
    _, reward, done, _ = await env.step('exit(message="$19.50")')
    assert (reward, done) == (0.0, True)

    await env.reset(task_file["2"])
    _, reward, done, _ = await env.step('exit(message="125.99")')
    assert (reward, done) == (0.0, True)


async def test_env_program_html_after_actions(env, task_file):
    obs = await env.reset(task_file["3"])
    _, reward, done, _ = await env.step(f'do(action="Click", element="{el(obs, "Cancel order 42")}")')
    assert (reward, done) == (0.0, False)
    obs, reward, done, info = await env.step('exit(message="cancelled")')
    assert (reward, done) == (1.0, True), info.get("verdict")
    # the explicit-URL check ran elsewhere: the agent's tab and page are unchanged
    assert obs.tabs == ["Fixture shop"] and obs.url.endswith("/eval_shop.html")

    await env.reset(task_file["3"])
    _, reward, _, info = await env.step('exit(message="cancelled")')
    assert reward == 0.0 and info["verdict"]["checks"][0]["passed"] is False


async def test_env_na_task_needs_an_exit(env, task_file):
    await env.reset(task_file["4"])
    _, reward, _, _ = await env.step('exit(message="N/A")')
    assert reward == 1.0
    await env.reset(task_file["4"])
    verdict = await env.evaluate(None)  # the turn limit ended the episode without exit
    assert verdict.reward == 0.0 and "without exit" in verdict.checks[0]["reason"]


async def test_env_evaluator_that_cannot_run_is_infra_error(env, task_file):
    await env.reset(task_file["5"])
    with pytest.raises(InfraError, match="not evaluated"):
        await env.step('exit(message="done")')
