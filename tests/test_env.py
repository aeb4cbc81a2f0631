"""BrowserEnv on fixture pages in a real headless Chromium: every action executes,
every bad input becomes an error for the agent (not an exception), and observations
carry the paper's numbered simplified HTML."""

from __future__ import annotations

import asyncio
import struct

import pytest

from http_helpers import PageServer
from webr1_kit.browser import BrowserEnv, InfraError, find_browser, BrowserNotFound
from webr1_kit.config import EnvConfig
from webr1_kit.tasks import Task


def form_task(server, **eval_block) -> Task:
    ev = eval_block or {"eval_types": ["url_match"], "reference_url": server.url + "/page2.html"}
    return Task(task_id="fixture/form", intent="Explore the form", start_url=server.url + "/form.html", eval=ev)


def el(obs, name: str) -> int:
    """Id of the element with this accessible name in an observation."""
    matches = [e.id for e in obs.elements if e.name == name]
    assert matches, f"no element named {name!r} in {[e.name for e in obs.elements]}"
    return matches[0]


async def page_text(env, selector: str) -> str:
    return await env.page.locator(selector).inner_text()


@pytest.fixture
async def env(browser, fixture_server):
    e = BrowserEnv(browser)
    yield e
    await e.close()


# ---------------------------------------------------------------- observations


async def test_observation_is_simplified_html_with_numbered_elements(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    assert obs.url.endswith("/form.html") and obs.title == "Fixture form"
    assert "<h1>Account settings</h1>" in obs.content
    assert f'<button id="{el(obs, "Save")}" type="submit" data-text="Save">' in obs.content
    assert f'<input id="{el(obs, "Full name")}" type="text" placeholder="Your name">' in obs.content
    assert "<option selected>Medium</option>" in obs.content
    # hidden things are not shown, and the element below the fold needs a scroll
    assert "Invisible" not in obs.content and "secret" not in obs.content
    assert "Bottom button" not in obs.content
    assert "scroll down" in obs.content
    ids = [e.id for e in obs.elements]
    assert len(ids) == len(set(ids)) and all(i > 0 for i in ids)
    assert obs.text.startswith(f"URL: {obs.url}\nTitle: Fixture form\n")


async def test_axtree_variant_uses_the_same_ids(browser, fixture_server):
    env = BrowserEnv(browser, EnvConfig(observation="axtree"))
    try:
        obs = await env.reset(form_task(fixture_server))
        assert f"[{el(obs, 'Save')}] button 'Save'" in obs.content
        assert f"[{el(obs, 'I agree')}] checkbox 'I agree'" in obs.content
        assert "heading 'Account settings'" in obs.content
        step = await env.step(f'do(action="Click", element="{el(obs, "I agree")}")')
        assert f"[{el(obs, 'I agree')}] checkbox 'I agree' checked" in step.observation.content
    finally:
        await env.close()


async def test_observation_size_budget_says_it_was_cut(browser, fixture_server):
    env = BrowserEnv(browser, EnvConfig(max_obs_chars=200))
    try:
        obs = await env.reset(form_task(fixture_server))
        assert obs.truncated
        assert "[observation truncated:" in obs.content
        assert len(obs.content.split("[observation truncated")[0]) <= 200
    finally:
        await env.close()


async def test_screenshot_and_element_boxes(browser, fixture_server):
    env = BrowserEnv(browser, EnvConfig(screenshot=True, viewport_width=800, viewport_height=600))
    try:
        obs = await env.reset(form_task(fixture_server))
        png = obs.screenshot
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", png[16:24])
        assert (width, height) == (800, 600)
        save = obs.element(el(obs, "Save"))
        x, y, w, h = save.box
        assert w > 0 and h > 0 and 0 <= x < 800 and 0 <= y < 600
    finally:
        await env.close()


async def test_ids_still_name_the_same_element_after_the_page_changes(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    save = el(obs, "Save")
    # The page inserts elements before the button between observation and action.
    await env.page.evaluate(
        "() => { const f = document.getElementById('f');"
        " for (let i = 0; i < 3; i++) { const b = document.createElement('button'); b.textContent = 'new ' + i;"
        " b.type = 'button'; f.prepend(b); } }"
    )
    await env.page.fill("#name", "Bob")
    step = await env.step(f'do(action="Click", element="{save}")')
    assert step.observation.error is None
    assert await page_text(env, "#status") == "Submitted Bob"
    assert el(step.observation, "Save") == save  # and the id is kept in the next observation


# ---------------------------------------------------------------- every action


async def test_click_type_select_and_submit(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    s = await env.step(f'do(action="Type", argument="Ada Lovelace", element="{el(obs, "Full name")}")')
    assert s.observation.error is None
    s = await env.step(f'do(action="Click", element="{el(obs, "I agree")}")')
    assert s.observation.element(el(obs, "I agree")).checked is True
    s = await env.step(f'do(action="Select Dropdown Option", argument="Large", element="{el(obs, "Save") - 2}")')
    assert s.observation.error is None
    assert await env.page.eval_on_selector("#size", "e => e.value") == "l"
    s = await env.step(f'<think>submit</think><answer>do(action="Click", element="{el(obs, "Save")}")</answer>')
    assert await page_text(env, "#status") == "Submitted Ada Lovelace"
    assert s.reward == 0.0 and not s.done and s.info["error_kind"] is None


async def test_select_unknown_option_lists_the_options(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    size = next(e.id for e in obs.elements if e.tag == "select")
    s = await env.step(f'do(action="Select Dropdown Option", argument="Huge", element="{size}")')
    assert s.info["error_kind"] == "invalid_argument"
    assert '"Small", "Medium", "Large"' in s.observation.error


async def test_hover_right_click_and_pointer_elements(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    await env.step(f'do(action="Hover", element="{el(obs, "Hover me")}")')
    assert await page_text(env, "#status") == "hovered"
    await env.step(f'do(action="Right Click", element="{el(obs, "Right click me")}")')
    assert await page_text(env, "#status") == "right clicked"
    # a <span> with a click handler and a pointer cursor is numbered and clickable
    await env.step(f'do(action="Click", element="{el(obs, "More info")}")')
    assert await page_text(env, "#status") == "fake link clicked"


async def test_press_enter_search_and_navigation_history(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    s = await env.step(f'do(action="Click", element="{el(obs, "Next page")}")')
    assert s.observation.url.endswith("/page2.html")
    box = el(s.observation, "Search")
    s = await env.step(f'do(action="Search", argument="kittens", element="{box}")')
    assert await page_text(env, "#out") == "searched kittens"
    await env.step(f'do(action="Type", argument="cats", element="{box}")')
    await env.step(f'do(action="Press Enter", element="{box}")')
    assert await page_text(env, "#out") == "searched cats"
    s = await env.step("go_backward()")
    assert s.observation.url.endswith("/form.html") and s.observation.error is None
    s = await env.step("go_forward()")
    assert s.observation.url.endswith("/page2.html")
    s = await env.step("go_forward()")
    assert s.info["error_kind"] == "no_history"


async def test_scroll_reveals_elements_below_the_fold(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    assert "Bottom button" not in obs.content
    s = await env.step('do(action="Scroll Down")')
    for _ in range(4):
        if "Bottom button" in s.observation.content:
            break
        s = await env.step('do(action="Scroll Down")')
    assert "Bottom button" in s.observation.content
    assert "scroll up" in s.observation.content
    s = await env.step('do(action="Scroll Up")')
    assert await env.page.evaluate("() => window.scrollY") < 2000


async def test_new_tab_switch_tab_and_dialogs(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    s = await env.step(f'do(action="Click", element="{el(obs, "Open in new tab")}")')
    assert s.observation.tabs == ["Fixture form", "Second page"] and s.observation.active_tab == 1
    assert any("new tab" in n for n in s.observation.notes)
    assert "Tabs: [0] Fixture form, [1] Second page (current)" in s.observation.text
    s = await env.step('do(action="Switch Tab", argument="0")')
    assert s.observation.url.endswith("/form.html") and s.observation.active_tab == 0
    s = await env.step('do(action="Switch Tab", argument="5")')
    assert s.info["error_kind"] == "invalid_argument"
    s = await env.step(f'do(action="Click", element="{el(obs, "Alert")}")')
    assert "Hello there" in s.observation.notes[0]
    assert await page_text(env, "#status") == "alerted"


async def test_wait_and_exit_end_the_episode_with_the_verdict(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    s = await env.step('do(action="Wait")')
    assert not s.done and s.observation.error is None
    await env.step(f'do(action="Click", element="{el(obs, "Next page")}")')
    s = await env.step('exit(message="done")')
    assert s.done and s.reward == 1.0 and s.info["answer"] == "done"
    assert s.info["verdict"]["checks"][0]["type"] == "url_match"
    with pytest.raises(RuntimeError, match="reset"):
        await env.step("go_backward()")


async def test_typed_text_is_data_never_code(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    payloads = ['"); window.pwned = 1; ("', "<img src=x onerror=\"window.pwned=1\">", "${alert(1)}`\\'"]
    for text in payloads:
        action = f'do(action="Type", argument={__import__("json").dumps(text)}, element="{el(obs, "Full name")}")'
        s = await env.step(action)
        assert s.observation.error is None
        assert await env.page.input_value("#name") == text
    assert await env.page.evaluate("() => typeof window.pwned") == "undefined"


# ---------------------------------------------------------------- bad input


async def test_bad_actions_become_errors_for_the_agent(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    cases = [
        ("I will click the button", "malformed", "no action found"),
        ('do(action="Click", element="999")', "unknown_element", "no element 999"),
        (f'do(action="Click", element="{el(obs, "Under cover")}")', "timeout", "covers it"),
        (f'do(action="Type", argument="x", element="{el(obs, "Save")}")', "invalid_target", "Type"),
        (f'do(action="Select Dropdown Option", argument="x", element="{el(obs, "Save")}")', "invalid_target", "not a dropdown"),
    ]
    for n, (action, kind, words) in enumerate(cases, 1):
        s = await env.step(action)
        assert s.info["error_kind"] == kind, (action, s.info)
        assert words in s.observation.error
        assert s.info["invalid_action"] and not s.done and s.reward == 0.0
        assert f"Error: {s.observation.error}" in s.observation.text
        assert s.info["errors"][kind] >= 1
    assert sum(env.errors.values()) == len(cases)


async def test_hidden_and_detached_elements(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    blink, gone = el(obs, "Blink"), el(obs, "Gone")
    # The page's timers fire 1.5 s after a click: after the observation the agent answers (one
    # step, even on a loaded machine), before its next action.
    s = await env.step(f'do(action="Click", element="{el(obs, "Hide soon")}")')
    assert "Blink" in s.observation.content  # still visible when observed
    await asyncio.sleep(1.7)
    s = await env.step(f'do(action="Click", element="{blink}")')
    assert s.info["error_kind"] == "hidden_element" and "not visible" in s.observation.error
    s2 = await env.step('do(action="Wait")')
    assert "Blink" not in s2.observation.content
    obs = await env.reset(form_task(fixture_server))
    s = await env.step(f'do(action="Click", element="{el(obs, "Remove soon")}")')
    assert "Gone" in s.observation.content  # still on the page when observed
    await asyncio.sleep(1.7)
    s = await env.step(f'do(action="Click", element="{el(obs, "Gone")}")')
    assert s.info["error_kind"] == "detached_element" and "no longer on the page" in s.observation.error
    assert gone == el(obs, "Gone")


async def test_navigation_outside_the_task_is_blocked_and_the_page_kept(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    await env.step(f'do(action="Type", argument="kept", element="{el(obs, "Full name")}")')
    for link, target in (("External site", "https://example.com/outside"), ("Local file", "file:///etc/passwd")):
        s = await env.step(f'do(action="Click", element="{el(obs, link)}")')
        assert s.info["error_kind"] == "blocked_navigation", link
        assert target in s.observation.error
        assert s.observation.url.endswith("/form.html")
    # the page was not reloaded: what the agent typed is still there
    assert await env.page.input_value("#name") == "kept"


# ---------------------------------------------------------------- infrastructure


async def test_dead_start_page_is_an_infrastructure_failure(env):
    task = Task(task_id="dead", intent="x", start_url="http://127.0.0.1:9/", eval={"eval_types": ["url_match"], "reference_url": "http://127.0.0.1:9/"})
    with pytest.raises(InfraError, match="failed to load"):
        await env.reset(task)


async def test_missing_start_page_is_an_infrastructure_failure(env, fixture_server):
    task = Task(task_id="404", intent="x", start_url=fixture_server.url + "/no-such-page.html",
                eval={"eval_types": ["url_match"], "reference_url": "x"})
    with pytest.raises(InfraError, match="HTTP 404"):
        await env.reset(task)


async def test_closed_page_mid_episode_raises_infra_error(env, fixture_server):
    obs = await env.reset(form_task(fixture_server))
    await env.page.close()
    with pytest.raises(InfraError):
        await env.step(f'do(action="Click", element="{el(obs, "Save")}")')


async def test_a_browser_gone_while_the_episode_opens_is_an_infra_error(browser, fixture_server):
    """The context opens, then its browser goes (a browser server stopped mid-run): setting
    the context up fails on a closed target, which is infrastructure, never the agent's."""
    env = BrowserEnv(browser)
    opened = browser.new_context

    async def opened_then_gone(*args, **kwargs):
        ctx = await opened(*args, **kwargs)
        await ctx.close()
        return ctx

    browser.new_context = opened_then_gone
    try:
        with pytest.raises(InfraError, match="the browser went away while opening the episode's page"):
            await env.reset(form_task(fixture_server))
    finally:
        del browser.new_context
        await env.close()


async def test_the_page_an_action_opens_is_observed_with_its_stylesheet(browser):
    # Unstyled, the filler pushes the sidebar below the fold; the stylesheet (served a
    # second late) hides the filler. Observing before it applies would miss the sidebar.
    filler = "<div id='filler'>" + "<br>" * 200 + "</div>"
    pages = {
        "/start.html": ("text/html", b"<html><body><a href='/next.html'>Next</a></body></html>", 0.0),
        "/next.html": ("text/html", ("<html><head><link rel='stylesheet' href='/slow.css'></head><body><h1>Issue</h1>"
                                     f"{filler}<aside><a href='/start.html'>Sidebar link</a></aside></body></html>"
                                     ).encode(), 0.0),
        "/slow.css": ("text/css", b"#filler { display: none; }", 1.0),
    }
    site = PageServer(pages=pages)
    env = BrowserEnv(browser)
    try:
        obs = await env.reset(Task(task_id="styled", intent="x", start_url=site.url + "/start.html",
                                   eval={"eval_types": ["url_match"], "reference_url": site.url + "/done"}))
        s = await env.step(f'do(action="Click", element="{el(obs, "Next")}")')
        assert s.observation.url.endswith("/next.html")
        assert "Sidebar link" in s.observation.content
        s = await env.step(f'do(action="Click", element="{el(s.observation, "Sidebar link")}")')
        s = await env.step("go_backward()")  # back to the styled page: its sidebar in view again
        assert "Sidebar link" in s.observation.content
    finally:
        await env.close()
        site.stop()


@pytest.mark.parametrize("limit", [2, 6])
async def test_max_starting_bounds_how_many_episodes_start_at_once(limit):
    from webr1_kit.browser import Browser

    # Each start page takes 2 s and is held until `limit` are loading at once (at most 10 s):
    # the starts overlap however slowly a busy machine opens the contexts.
    slow = PageServer(delay_s=2.0, hold_until=limit)
    task = Task(task_id="slow", intent="x", start_url=slow.url + "/start.html",
                eval={"eval_types": ["url_match"], "reference_url": slow.url + "/done"})
    try:
        async with Browser(EnvConfig(max_starting=limit)) as browser:
            envs = [BrowserEnv(browser) for _ in range(6)]
            observations = await asyncio.gather(*(e.reset(task, seed=i) for i, e in enumerate(envs)))
            for e in envs:
                await e.close()
    finally:
        slow.stop()
    assert all(o.url.endswith("/start.html") for o in observations)  # every episode started
    assert slow.most == limit  # never more at once than the limit, and the limit is used


def test_max_starting_default_and_bad_values():
    import os

    from webr1_kit.browser import Browser

    assert Browser().max_starting == 2 * os.cpu_count()
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_starting"):
            Browser(EnvConfig(max_starting=bad))


def test_browser_discovery_order_and_help(tmp_path, monkeypatch):
    fake = tmp_path / "my-chrome"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.delenv("WEBR1_BROWSER", raising=False)
    assert find_browser(str(fake), "/nonexistent/playwright/chrome") == str(fake)  # configured path first
    monkeypatch.setenv("WEBR1_BROWSER", str(fake))
    assert find_browser(None, None) == str(fake)
    monkeypatch.delenv("WEBR1_BROWSER")
    assert find_browser(None, str(fake), headless=False) == str(fake)  # then Playwright's own (a headless run
    # would take a headless shell first: the next test)
    with pytest.raises(BrowserNotFound, match="does not exist"):
        find_browser(str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no system browser on PATH
    monkeypatch.setattr("webr1_kit.browser.MAC_BROWSERS", ())
    with pytest.raises(BrowserNotFound) as info:
        find_browser(None, None)
    assert "playwright install chromium" in str(info.value) and "apt-get install chromium" in str(info.value)


def test_headless_runs_prefer_a_headless_shell_and_headed_runs_the_full_browser(tmp_path, monkeypatch):
    def executable(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return str(path)

    monkeypatch.delenv("WEBR1_BROWSER", raising=False)
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", str(bin_dir))
    # Playwright's layout: a chromium-<revision> folder, its headless shell beside it
    chrome = executable(tmp_path / "ms-playwright" / "chromium-1255" / "chrome-linux64" / "chrome")
    assert find_browser(None, chrome) == chrome  # no shell installed: the full browser
    shell = executable(tmp_path / "ms-playwright" / "chromium_headless_shell-1255" / "chrome-headless-shell-linux64"
                       / "chrome-headless-shell")
    assert find_browser(None, chrome) == shell
    assert find_browser(None, chrome, headless=False) == chrome
    # the system's: Debian's chromium and chromium-headless-shell packages
    system = executable(bin_dir / "chromium")
    assert find_browser(None, None) == system
    system_shell = executable(bin_dir / "chromium-headless-shell")
    assert find_browser(None, None) == system_shell
    assert find_browser(None, None, headless=False) == system
    assert find_browser(None, chrome) == shell  # Playwright's shell before the system's
    assert find_browser(system, chrome) == system  # a configured browser always wins
