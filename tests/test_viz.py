"""Replays, group and token views, dashboards and `webr1 replay`, on episodes recorded in a real
headless Chromium; the saved replay page is loaded back into that Chromium and driven."""

from __future__ import annotations

import base64
import html
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from PIL import Image, ImageStat

from webr1_kit.browser import BrowserEnv
from webr1_kit.cli import main
from webr1_kit.config import EnvConfig
from webr1_kit.experts import MiniWoBExpert
from webr1_kit.rollout import EvalResult, run_episode
from webr1_kit.tasks import load_tasks
from webr1_kit.trajectory import Trajectory, TrajectoryGroup, Turn, pack, write_jsonl
from webr1_kit.viz import (LiveDashboard, plot_run, plot_runs, plot_success, save_gif, show, show_group,
                           show_tokens)

HOSTILE = "<script>alert('pwned')</script><img src=x onerror=alert(2)>"
"""Model output that would run if it were put into the page unescaped."""


class Quitter:
    """A 'model' that gives up at once, with hostile text in its thought and its answer."""

    async def act(self, task, intent, observation, history, seed=0):
        return f'<think>{HOSTILE}</think><answer>exit(message="{HOSTILE}")</answer>'


@pytest_asyncio.fixture(scope="module")
async def episodes(chromium):
    """Two recorded episodes of one MiniWoB++ problem (same page seed), with screenshots:
    the scripted expert (2 steps, reward 1) and the quitter (1 step, reward 0)."""
    task = load_tasks("miniwob", names=["enter-text"])[0]
    env = BrowserEnv(chromium, EnvConfig(screenshot=True, viewport_width=480, viewport_height=320))
    try:
        expert = await run_episode(env, task, MiniWoBExpert(), seed=4, max_turns=5)
        quitter = await run_episode(env, task, Quitter(), seed=4, max_turns=5)
    finally:
        await env.close()
    assert expert.reward == 1.0 and len(expert.turns) == 2 and quitter.reward == 0.0 and len(quitter.turns) == 1
    return expert, quitter


def frames(body: str) -> list[str]:
    return re.findall(r'class="wr1-frame" data-step="(\d+)" data-label="([^"]*)"', body)


def data_images(body: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", body)]


def not_blank(png: bytes) -> float:
    """Mean per-channel standard deviation of an image's pixels (0 for a blank image)."""
    stat = ImageStat.Stat(Image.open(io.BytesIO(png)).convert("RGB"))
    return sum(stat.stddev) / 3


# ---------------------------------------------------------------- replays


def test_replay_of_a_recorded_episode_shows_every_step(episodes):
    expert, _ = episodes
    view = show(expert)
    body = view._repr_html_()
    assert [label for _, label in frames(body)] == ["step 1", "step 2", "end"]
    for turn in expert.turns:  # each step's action, thought and page
        assert html.escape(turn.action["text"]) in body
        assert html.escape(re.search(r"<think>(.*)</think>", turn.response).group(1)) in body
    shots = data_images(body)
    assert len(shots) == 3  # both steps and the final page, embedded
    assert shots[0] == base64.b64decode(expert.turns[0].observation["screenshot_png_b64"])
    assert all(not_blank(s) > 1 for s in shots)
    # the acted-on element is outlined where its box is, in % of the 480x320 screenshot
    x, y, w, h = next(e["box"] for e in expert.turns[0].observation["elements"]
                      if e["id"] == expert.turns[0].action["element"])
    assert f"left:{100 * x / 480:.2f}%;top:{100 * y / 320:.2f}%;width:{100 * w / 480:.2f}%" in body
    assert "evaluator verdict: reward 1.0" in body and "success" in body
    assert not view.notes
    # self-contained: no resource is fetched from anywhere
    assert not re.search(r"""<[^>]*\s(?:src|href)\s*=\s*(?!['"]?data:)""", view.page(), re.I)


def test_model_output_is_escaped_everywhere(episodes):
    _, quitter = episodes
    quitter = Trajectory.from_dict(json.loads(json.dumps(quitter.to_dict())))
    quitter.task_id, quitter.intent = f"task{HOSTILE}", f"intent {HOSTILE}"
    quitter.turns[0].error, quitter.turns[0].url = HOSTILE, f"http://x/{HOSTILE}"
    quitter.turns[0].observation["content"] = HOSTILE
    quitter.verdict["checks"][0]["reason"] = HOSTILE
    body = show(quitter).page() + show_group([quitter]).page()
    widgets = body.count('class="wr1-controls"')
    assert widgets == 2
    assert body.count("<script>") == widgets  # only the step controls' own scripts
    assert "<img src=x" not in body and "alert('pwned')</script>" not in body
    assert html.escape(HOSTILE) in body


async def test_replay_page_works_in_chromium(browser, episodes, tmp_path):
    expert, quitter = episodes
    path = show([expert, quitter]).save(tmp_path / "replay.html")
    ctx = await browser.new_context()
    try:
        page = await ctx.new_page()
        requests, dialogs, errors = [], [], []
        page.on("request", lambda r: requests.append(r.url))
        page.on("dialog", lambda d: dialogs.append(d.message))
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(path.as_uri())
        first, second = page.locator(".wr1[data-steps]").nth(0), page.locator(".wr1[data-steps]").nth(1)

        async def shown(widget) -> list[str]:
            return await widget.locator(".wr1-frame:visible").evaluate_all("fs => fs.map(f => f.dataset.label)")

        assert await shown(first) == ["step 1"] and await shown(second) == ["step 1"]
        before = await page.screenshot(full_page=True)
        await first.locator(".wr1-next").click()
        assert await shown(first) == ["step 2"]
        assert await first.locator(".wr1-pos").inner_text() == "2 / 3: step 2"
        assert await shown(second) == ["step 1"]  # the other replay on the page is untouched
        await first.locator("input[type=range]").fill("2")  # the slider, to the last frame
        assert await shown(first) == ["end"] and await first.locator(".wr1-next").is_disabled()
        await first.locator(".wr1-prev").click()
        assert await shown(first) == ["step 2"]
        await second.locator(".wr1-next").click()
        assert await shown(second) == ["end"] and await shown(first) == ["step 2"]
        after = await page.screenshot(full_page=True)
        assert not_blank(after) > 10 and before != after
        # the quitter's hostile thought is shown as text, and nothing ran
        await second.locator(".wr1-prev").click()
        assert HOSTILE in await second.locator(".wr1-frame:visible").inner_text()
        assert dialogs == [] and errors == []
        assert all(u.startswith(("file:", "data:")) for u in requests), requests
    finally:
        await ctx.close()
    # without JavaScript (an untrusted notebook, a static viewer) every step is listed, no dead controls
    ctx = await browser.new_context(java_script_enabled=False)
    try:
        page = await ctx.new_page()
        await page.goto(path.as_uri())
        labels = await page.locator(".wr1-frame:visible").evaluate_all("fs => fs.map(f => f.dataset.label)")
        assert labels == ["step 1", "step 2", "end", "step 1", "end"]
        assert await page.locator(".wr1-controls:visible").count() == 0
    finally:
        await ctx.close()


def test_missing_screenshots_and_truncated_jsonl_render_what_is_there(episodes, tmp_path):
    expert, quitter = episodes
    traj = Trajectory.from_dict(json.loads(json.dumps(expert.to_dict())))
    # step 1's screenshot moved to a file, step 2 names a file that is gone, the final page has none
    (tmp_path / "shots").mkdir()
    png = base64.b64decode(traj.turns[0].observation.pop("screenshot_png_b64"))
    (tmp_path / "shots" / "1.png").write_bytes(png)
    traj.turns[0].observation["screenshot_file"] = "shots/1.png"
    del traj.turns[1].observation["screenshot_png_b64"]
    traj.turns[1].observation["screenshot_file"] = "shots/2.png"
    del traj.final_observation["screenshot_png_b64"]
    path = tmp_path / "t.jsonl"
    write_jsonl(path, [traj, quitter])
    text = path.read_text()
    path.write_text(text[: len(text) - 50])  # the second record is cut off mid-write

    view = show(path)
    body = view._repr_html_()
    assert [label for _, label in frames(body)] == ["step 1", "step 2", "end"]  # only the whole record
    assert data_images(body) == [png]
    assert "t.jsonl line 2: not a valid trajectory record" in body
    assert "step 2: screenshot file shots/2.png is missing" in html.unescape(body)
    assert "the final page: no screenshot recorded" in html.unescape(body)
    # without a screenshot the step shows the observation text the agent read
    assert html.escape(traj.turns[1].observation["content"][:40]) in body
    assert any("line 2" in n for n in view.notes) and any("shots/2.png is missing" in n for n in view.notes)

    traj.turns[0].observation["screenshot_file"] = None
    traj.turns[0].observation["screenshot_png_b64"] = "not base64!"
    assert "step 1: screenshot data is corrupt" in html.unescape(show(traj).body)


def test_group_view_shows_rewards_and_the_training_advantages(episodes):
    from webr1_kit.grpo import group_advantages

    expert, quitter = episodes
    failed = Trajectory(expert.task_id, expert.intent, expert.seed, status="infra_failure", termination="infra",
                        infra_error="browser crashed")
    body = show_group(TrajectoryGroup(expert.task_id, [expert, quitter, failed])).body
    a_expert, a_quitter = group_advantages([1.0, 0.0])
    assert f"advantage {a_expert:+.3f}" in body and f"advantage {a_quitter:+.3f}" in body
    assert a_expert > 0 > a_quitter
    assert "no advantage" in body and "infrastructure failure" in body and "browser crashed" in body
    assert body.count('class="wr1-controls"') == 3
    # regrouped from a flat list (as read back from a step's JSONL): same task and page seed
    flat = show_group([expert, quitter, expert]).body
    assert flat.count("group: miniwob/enter-text") == 1 and "rewards [1, 0, 1]" in flat
    assert "equal rewards" in show_group([expert, expert]).body


def test_guided_episodes_say_what_the_expert_did(episodes):
    from dataclasses import replace

    expert, quitter = episodes
    member = replace(expert, meta={**expert.meta, "expert": True}, turns=list(expert.turns))
    prefixed = replace(expert, turns=[replace(expert.turns[0], trained=False), expert.turns[1]])
    watched = replace(quitter, meta={**quitter.meta, "hinted": True},
                      turns=[replace(quitter.turns[0], expert={"name": "Type", "element": 2, "argument": "x",
                                                               "text": 'do(action="Type", argument="x", element="2")'})])
    body = show_group(TrajectoryGroup(expert.task_id, [member, prefixed, watched])).body
    assert body.count("expert member") == 1 and body.count(">hinted<") == 1 and body.count("expert prefix") == 1
    assert "the expert would" in body and "do(action=&quot;Type&quot;, argument=&quot;x&quot;" in body
    plain = show_group(TrajectoryGroup(expert.task_id, [expert, quitter])).body
    assert not any(w in plain for w in ("expert member", ">hinted<", "expert prefix", "the expert would"))


def test_gif_export_has_a_frame_per_step(episodes, tmp_path):
    expert, _ = episodes
    out = save_gif(expert, tmp_path / "replay.gif")
    img = Image.open(out)
    assert img.n_frames == 3 and img.width == 800
    no_shots = Trajectory.from_dict(json.loads(json.dumps(expert.to_dict())))
    for t in no_shots.turns + [Turn(observation=no_shots.final_observation, response="")]:
        t.observation.pop("screenshot_png_b64", None)
    with pytest.raises(ValueError, match="no screenshot recorded"):
        save_gif(no_shots, tmp_path / "none.gif")


# ---------------------------------------------------------------- token view


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from webr1_kit.models import embedded_path

    return AutoTokenizer.from_pretrained(embedded_path())


def token_trajectory(tok) -> Trajectory:
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    p1 = enc("System: act on the page.\nTask: buy the mug\nPage: <button id=\"3\" data-text=\"Buy ☃\">\n")
    c1 = enc('<think>The mug is here.</think><answer>do(action="Click", element="3")</answer>')
    p2 = p1 + c1 + enc("\nPage: <p>Added to cart</p>\n")  # extends the sequence
    c2 = enc("<think>Done.</think><answer>exit(message=\"<script>x</script>\")</answer>")
    p3 = enc("System: act on the page.\nTask: buy the mug\n[page content omitted]\n")  # compressed: new sequence
    c3 = enc('<answer>exit(message="done")</answer>')
    turns = [Turn(observation={}, response="", prompt_ids=p, completion_ids=c, logprobs=[-0.25] * len(c))
             for p, c in ((p1, c1), (p2, c2), (p3, c3))]
    return Trajectory("shop/mug", "buy the mug", 0, turns=turns, reward=1.0, status="done")


def token_spans(body: str) -> list[list[tuple[int, str, str, str]]]:
    """Per sequence: (position, mask, class, text) of every token span."""
    out = []
    for block in re.findall(r"<div class='wr1-tokens' data-seq='\d+'>(.*?)</div>", body, re.S):
        spans = re.findall(r"<span class='([^']*)' data-i='(\d+)' data-m='(\d)'[^>]*>(.*?)</span>", block, re.S)
        out.append([(int(i), m, cls, html.unescape(text)) for cls, i, m, text in spans])
    return out


def test_token_view_greys_exactly_what_the_loss_ignores(tokenizer):
    from webr1_kit.training import apply_think_mask

    traj = token_trajectory(tokenizer)
    seqs = pack(traj)
    assert len(seqs) == 2  # the compressed third turn starts a sequence of its own
    body = show_tokens(traj, tokenizer, advantage=0.9).body
    shown = token_spans(body)
    assert len(shown) == len(seqs)
    for spans, seq in zip(shown, seqs):
        assert [i for i, *_ in spans] == list(range(len(seq.input_ids)))
        assert {i for i, _, cls, _ in spans if "wr1-m0" in cls} == {i for i, m in enumerate(seq.loss_mask) if m == 0}
        assert {i for i, m, *_ in spans if m == "1"} == {i for i, m in enumerate(seq.loss_mask) if m == 1}
        assert "".join(t for *_, t in spans) == tokenizer.decode(seq.input_ids)  # every token, in order
    assert "background:rgba(45,164,78" in body and "rgba(207,34,46" not in body  # positive: green
    assert "rgba(207,34,46" in show_tokens(traj, tokenizer, advantage=-0.9).body  # negative: red
    assert "<script" not in body  # the response's <script> is text (the decode check above shows it is there)

    # train_think=False: the loss drops the <think> tokens, and so does the view
    masked = [apply_think_mask(tokenizer, s, False) for s in seqs]
    shown = token_spans(show_tokens(traj, tokenizer, advantage=0.9, train_think=False).body)
    for spans, seq, raw in zip(shown, masked, seqs):
        assert {i for i, _, cls, _ in spans if "wr1-m0" in cls} == {i for i, m in enumerate(seq.loss_mask) if m == 0}
        assert {i for i, _, cls, _ in spans if "wr1-think" in cls} == {
            i for i, (m, r) in enumerate(zip(seq.loss_mask, raw.loss_mask)) if r == 1 and m == 0}
    assert sum(masked[0].loss_mask) < sum(seqs[0].loss_mask)

    with pytest.raises(ValueError, match="no token record"):
        show_tokens(Trajectory("t", "i", 0, turns=[Turn(observation={}, response="x")]), tokenizer)


# ---------------------------------------------------------------- dashboards


def metrics_rows(steps: int = 12, keys: tuple[str, ...] | None = None) -> list[dict]:
    rows = [{"phase": "eval", "step": 0, "success_rate": 0.2, "success_ci95": [0.1, 0.4], "turns": 6.0,
             "invalid_action_rate": 0.3, "per_site": {"shop": 0.25, "forum": 0.1, "multi": 0.0}}]
    for s in range(1, steps + 1):
        row = {"phase": "train", "step": s, "success_rate": 0.2 + 0.05 * s, "reward_mean": 0.2 + 0.05 * s,
               "equal_reward_frac": 0.6 - 0.03 * s, "kl": 0.002 * s, "entropy": 1.2 - 0.03 * s,
               "response_tokens": 90.0 - s, "turns": 6.0 - 0.2 * s, "invalid_action_rate": 0.3 - 0.02 * s,
               "loss": 0.05 / s}
        rows.append({k: v for k, v in row.items() if keys is None or k in keys or k in ("phase", "step")})
    rows.append({"phase": "eval", "step": steps, "success_rate": 0.6, "success_ci95": [0.4, 0.8], "turns": 4.0,
                 "invalid_action_rate": 0.1, "per_site": {"shop": 0.7, "forum": 0.5, "multi": 0.2}})
    return rows


def write_run(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def png_ok(path: Path) -> Image.Image:
    assert path.is_file() and path.stat().st_size > 5000
    img = Image.open(path)
    assert sum(ImageStat.Stat(img.convert("RGB")).stddev) / 3 > 10  # not blank
    return img


def test_plot_run_draws_every_logged_curve_and_skips_missing_keys(tmp_path):
    run = write_run(tmp_path / "run", metrics_rows())
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"phase": "train", "step": 13, "succ')  # a run killed mid-write
    fig = plot_run(run, save=tmp_path / "run.png")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["success rate", "reward", "KL to the reference", "entropy", "response length",
                      "turns per episode", "invalid-action rate", "loss"]
    success = fig.axes[0]
    assert [line.get_label() for line in success.lines] == ["trained groups", "held-out"]
    assert list(success.lines[0].get_xdata()) == list(range(1, 13))  # the torn line is skipped
    assert not any("skipped" in t.get_text() for t in fig.texts)
    png_ok(tmp_path / "run.png")

    few = plot_run(metrics_rows(keys=("success_rate", "turns")), save=tmp_path / "few.png")
    assert [ax.get_title() for ax in few.axes] == ["success rate", "turns per episode", "invalid-action rate"]
    note = " ".join(t.get_text() for t in few.texts)
    assert "skipped: reward, KL to the reference, entropy, response length, loss" in note
    png_ok(tmp_path / "few.png")
    empty = plot_run(write_run(tmp_path / "new", []))
    assert not empty.axes and "no metrics yet" in empty.texts[0].get_text()
    with pytest.raises(FileNotFoundError):
        plot_run(tmp_path / "no-such-run" / "x")


def test_plot_runs_compares_runs_and_plot_success_draws_sites_and_templates(tmp_path):
    a = write_run(tmp_path / "a", metrics_rows())
    b = write_run(tmp_path / "b", metrics_rows(keys=("success_rate",)))
    fig = plot_runs({"baseline": a, "no-think": b}, save=tmp_path / "cmp.png")
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert labels == ["baseline (trained groups)", "baseline (held-out)", "no-think (trained groups)",
                      "no-think (held-out)"]
    kl = next(ax for ax in fig.axes if ax.get_title() == "KL to the reference")
    assert [line.get_label() for line in kl.lines] == ["baseline"]  # run b logged no KL
    png_ok(tmp_path / "cmp.png")

    result = EvalResult([], 1.0, {"success_rate": 0.5, "per_site": {"shop": 0.5, "forum": 1.0},
                                  "per_template": {"shop.price": 0.0, "shop.order": 1.0, "forum.post": 1.0}})
    fig = plot_success(result, save=tmp_path / "success.png")
    assert [ax.get_title() for ax in fig.axes] == ["success per site", "success per template"]
    assert [p.get_width() for p in fig.axes[1].patches] == [1.0, 1.0, 0.0]  # listed top-down
    png_ok(tmp_path / "success.png")
    # a training run: its latest evaluation's per-site results, templates noted as missing
    fig = plot_success(a)
    assert [p.get_width() for p in fig.axes[0].patches] == [0.2, 0.5, 0.7]
    assert "skipped: per template" in fig.texts[-1].get_text()
    with pytest.raises(ValueError, match="no per_site or per_template"):
        plot_success({"success_rate": 1.0})


async def test_live_dashboard_redraws_as_the_run_grows(tmp_path):
    import asyncio

    run = tmp_path / "live"
    dash = LiveDashboard(run, every=0.05, save=tmp_path / "live.png")
    dash.start()  # before the run has made its directory
    await asyncio.sleep(0.3)
    write_run(run, metrics_rows(steps=3))
    await asyncio.sleep(0.4)
    dash.stop()
    assert dash.refreshes >= 4
    img = png_ok(tmp_path / "live.png")
    assert img.size == (1260, 950)  # the last draw has the curves (3 x 3 panels), not the empty figure


def test_views_and_live_dashboard_in_a_real_jupyter_kernel(episodes, tmp_path):
    """In a kernel: show() is HTML, plot_run() one PNG, and the live dashboard's first output is
    updated in place (display id) while a later cell awaits, without ipywidgets."""
    import base64 as b64

    import nbformat
    from nbclient import NotebookClient

    expert, _ = episodes
    write_jsonl(tmp_path / "t.jsonl", [expert])
    write_run(tmp_path / "done", metrics_rows())
    live = write_run(tmp_path / "live", metrics_rows(steps=12)[:1])  # only the first evaluation so far
    rest = "".join(json.dumps(r) + "\n" for r in metrics_rows(steps=12)[1:])
    cells = [
        "import asyncio, sys, webr1_kit as wk",
        f"wk.show({str(tmp_path / 't.jsonl')!r})",
        f"wk.plot_run({str(tmp_path / 'done')!r})",
        f"dash = wk.LiveDashboard({str(live)!r}, every=0.1)\ndash.start()",
        f"open({str(live / 'metrics.jsonl')!r}, 'a').write({rest!r})\nawait asyncio.sleep(1.5)\ndash.stop()\n"
        "print(dash.refreshes, 'ipywidgets' in sys.modules)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    out = [c.outputs for c in nb.cells]
    assert len(frames(out[1][0]["data"]["text/html"])) == 3
    assert [o["output_type"] for o in out[2]] == ["execute_result"] and "image/png" in out[2][0]["data"]
    (shown,) = out[3]
    assert shown["output_type"] == "display_data"
    size = Image.open(io.BytesIO(b64.b64decode(shown["data"]["image/png"]))).size
    assert size == (1260, 950)  # redrawn with every panel, not the first draw's one row
    refreshes, widgets = out[4][0]["text"].split()
    assert int(refreshes) >= 3 and widgets == "False"


# ---------------------------------------------------------------- the command line and the package


def test_webr1_replay_writes_a_run_directory_replay(episodes, tmp_path, capsys):
    expert, quitter = episodes
    run = write_run(tmp_path / "run", metrics_rows(steps=2))
    write_jsonl(run / "trajectories" / "step-1.jsonl", [quitter])
    write_jsonl(run / "trajectories" / "step-2.jsonl", [expert, quitter])  # the latest step is replayed
    (run / "config.json").write_text("{}")
    out = tmp_path / "replay.html"
    assert main(["replay", str(run), "--out", str(out)]) == 0
    body = out.read_text()
    assert body.startswith("<!DOCTYPE html>") and body.count('class="wr1-controls"') == 2
    assert len(frames(body)) == 3 + 2  # every step of both episodes, plus their end frames
    assert "2 trajectories, 3 steps" in capsys.readouterr().err

    assert main(["replay", str(run / "trajectories" / "step-2.jsonl"), "--out", str(out), "--select", "1"]) == 0
    assert out.read_text().count('class="wr1-controls"') == 1 and HOSTILE not in out.read_text()
    assert main(["replay", str(run), "--out", str(out), "--select", "miniwob/enter-text", "--limit", "1",
                 "--groups"]) == 0
    assert "group: miniwob/enter-text" in out.read_text()
    capsys.readouterr()

    assert main(["replay", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "missing does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"task_id": "x", "tur\n\x89PNG\x00\x01\n')
    assert main(["replay", str(bad), "--out", str(out)]) == 2
    assert "holds no readable trajectory: 2 corrupt line(s)" in capsys.readouterr().err
    assert main(["replay", str(run), "--select", "9"]) == 2
    assert "only 2 trajectories" in capsys.readouterr().err
    help_text = subprocess.run([sys.executable, "-m", "webr1_kit.cli", "replay", "--help"], capture_output=True,
                               text=True)
    assert help_text.returncode == 0 and "RUN_DIR_OR_JSONL" in help_text.stdout and "--select" in help_text.stdout


def test_the_views_are_public_and_import_lightly():
    code = (
        "import json, sys, webr1_kit as wk\n"
        "names = [wk.show, wk.show_group, wk.show_tokens, wk.plot_run, wk.plot_runs, wk.plot_success]\n"
        "print(json.dumps([m for m in ('torch', 'playwright', 'matplotlib', 'transformers') if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
