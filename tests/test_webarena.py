"""Real WebArena support, without the Docker sites: configuration, task files and splits,
placeholders, the func: helpers on pages with the structure they read, the LLM judge,
auto-login with saved storage state, the site check, the suite end to end, and the CLI.

The sites are stand-ins (tests/webarena_standin.py): small Flask apps on 127.0.0.1 with
WebArena's login pages, the REST/API reads and the page structures the kit touches.
Nothing here has been run against real WebArena images.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from webr1_kit.browser import BrowserEnv, InfraError
from webr1_kit.cli import main
from webr1_kit.rollout import run_episodes
from webr1_kit.tasks import Task, TaskSchemaError, load_tasks
from webr1_kit.tasks.evaluators import EvaluationUnavailable, program_html, string_match
from webr1_kit.tasks.webarena import (
    ACCOUNTS,
    JudgeConfig,
    WebArenaConfig,
    WebArenaConfigError,
    configure,
    format_paper_table,
    load_config,
    paper_table,
    tasks as webarena_tasks,
)
from webr1_kit.tasks.webarena.auth import AuthManager, LoginError, apply_state, merged_state
from webr1_kit.tasks.webarena.helpers import Helpers, parse_call, reddit_get_post_url
from webr1_kit.tasks.webarena.judge import OpenAIJudge, judge_for
from webr1_kit.tasks.webarena.sitecheck import check, changed_sites, format_table, preflight
from webr1_kit.tasks.webarena.taskfiles import read_split, start_urls
from webr1_kit.trajectory import Trajectory

from webarena_standin import Judge, Server, admin, gitlab, reddit, shop, task_record, write_json

# Small split files stand in for WebArena-Lite's 165/647 ids: their size warnings are expected.
pytestmark = pytest.mark.filterwarnings("ignore:.*the WebArena-Lite (train|test) split has:UserWarning")

ENV_VARS = ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "MAP", "WIKIPEDIA", "HOMEPAGE", "WEBR1_WEBARENA_CONFIG",
            "WEBR1_WEBARENA_TASKS", "WEBR1_WEBARENA_SPLIT", "WEBR1_WEBARENA_CACHE", "WEBR1_JUDGE_BASE_URL",
            "WEBR1_JUDGE_MODEL", "WEBR1_JUDGE_API_KEY", "OPENAI_API_KEY")


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No WebArena settings leak in from the machine or between tests."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    configure(None)
    yield
    configure(None)


@pytest.fixture
def sites():
    """Stand-ins for the four sites with logins, plus a judge."""
    made = {"shopping": shop(), "shopping_admin": admin(), "reddit": reddit(), "gitlab": gitlab()}
    servers = {name: Server(app) for name, (app, _) in made.items()}
    judge = Judge()
    judge_server = Server(judge.app)
    urls = {name: s.url for name, s in servers.items()}
    urls["shopping_admin"] += "/admin"
    yield SimpleNamespace(urls=urls, state={n: site for n, (_, site) in made.items()}, judge=judge,
                          judge_url=judge_server.url + "/v1")
    for s in [*servers.values(), judge_server]:
        s.stop()


def config_for(sites, tmp_path, judge: bool = False, **kw) -> WebArenaConfig:
    return WebArenaConfig(sites=dict(sites.urls), cache_dir=str(tmp_path / "cache"),
                          judge=JudgeConfig(sites.judge_url, "judge-model") if judge else None, **kw)


# ---------------------------------------------------------------- configuration


def test_config_from_webarena_environment_variables(tmp_path):
    env = {"SHOPPING": "http://myhost:7770/", "SHOPPING_ADMIN": "http://myhost:7780/admin", "REDDIT": " http://myhost:9999 ",
           "WEBR1_WEBARENA_CACHE": str(tmp_path)}
    cfg = load_config(env=env)
    assert cfg.sites == {"shopping": "http://myhost:7770", "shopping_admin": "http://myhost:7780/admin",
                         "reddit": "http://myhost:9999"}
    assert cfg.url("reddit") == "http://myhost:9999" and cfg.cache == tmp_path and cfg.judge is None
    assert cfg.account("gitlab") == {"username": "byteblaze", "password": "hello1234"}
    with pytest.raises(WebArenaConfigError, match=r"'gitlab' is not configured: set GITLAB="):
        cfg.url("gitlab")
    assert cfg.missing(["reddit", "map", "gitlab"]) == ["map", "gitlab"]


def test_config_file_relative_paths_and_environment_precedence(tmp_path):
    (tmp_path / "wa").mkdir()
    path = write_json(tmp_path / "wa" / "webarena.json", {
        "sites": {"shopping": "http://filehost:7770", "GITLAB": "http://filehost:8023"},
        "tasks": "config_files/test.raw.json", "split_file": "/abs/lite.json", "cache_dir": "cache",
        "accounts": {"reddit": {"password": "other"}},
        "judge": {"base_url": "http://judge:8000/v1", "model": "m", "api_key_env": "MY_KEY"}})
    cfg = load_config(path, env={"GITLAB": "http://envhost:8023", "MY_KEY": "unused-here"})
    assert cfg.sites == {"shopping": "http://filehost:7770", "gitlab": "http://envhost:8023"}  # env wins
    assert cfg.tasks == str(tmp_path / "wa" / "config_files" / "test.raw.json")
    assert cfg.split_file == "/abs/lite.json" and cfg.cache == tmp_path / "wa" / "cache"
    assert cfg.accounts["reddit"] == {"username": ACCOUNTS["reddit"]["username"], "password": "other"}
    assert cfg.judge == JudgeConfig("http://judge:8000/v1", "m", "MY_KEY")
    assert cfg.source == str(path)
    # explicit arguments beat both
    cfg = load_config(path, env={"WEBR1_WEBARENA_TASKS": "/env/tasks.json"}, tasks="/cli/tasks.json")
    assert cfg.tasks == "/cli/tasks.json"
    assert load_config(path, env={"WEBR1_WEBARENA_TASKS": "/env/tasks.json"}).tasks == "/env/tasks.json"


def test_config_yaml_named_by_environment(tmp_path):
    path = tmp_path / "wa.yaml"
    path.write_text("sites:\n  map: http://maps:3000\njudge:\n  base_url: http://j/v1\n  model: qwen\n")
    cfg = load_config(env={"WEBR1_WEBARENA_CONFIG": str(path), "WEBR1_JUDGE_MODEL": "gpt-x"})
    assert cfg.sites == {"map": "http://maps:3000"} and cfg.judge.model == "gpt-x" and cfg.judge.base_url == "http://j/v1"


@pytest.mark.parametrize("data,match", [
    ({"site": {}}, r"unknown key\(s\) site"),
    ({"sites": {"shop": "http://x:1"}}, r"unknown site 'shop'"),
    ({"sites": {"reddit": "myhost:9999"}}, r"not an http\(s\) URL"),
    ({"accounts": {"reddit": {"user": "x"}}}, r"accounts.reddit must be"),
    ({"judge": {"base_url": "http://j/v1"}}, r"judge needs a model: set WEBR1_JUDGE_MODEL"),
    ({"judge": {"model": "m", "key": "x"}}, r"unknown judge key\(s\) key"),
])
def test_config_errors_name_the_key(tmp_path, data, match):
    with pytest.raises(WebArenaConfigError, match=match):
        load_config(write_json(tmp_path / "c.json", data), env={})


def test_config_file_that_does_not_parse(tmp_path):
    (tmp_path / "c.yaml").write_text("sites: [unclosed\n")
    with pytest.raises(WebArenaConfigError, match="not valid YAML"):
        load_config(tmp_path / "c.yaml", env={})
    with pytest.raises(WebArenaConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json", env={})


# ---------------------------------------------------------------- task files, placeholders, splits

SITES4 = {"shopping": "http://shop.test:7770", "shopping_admin": "http://shop.test:7780/admin",
          "reddit": "http://forum.test:9999", "gitlab": "http://git.test:8023"}


def raw_tasks() -> list[dict]:
    """Records in WebArena's raw shape, placeholders in every field that holds URLs."""
    return [
        task_record(3, ["shopping_admin"], "__SHOPPING_ADMIN__", {
            "eval_types": ["string_match"], "reference_answers": {"must_include": ["Impulse Duffle"]}}),
        task_record(27, ["reddit"], "__REDDIT__/f/books", {
            "eval_types": ["url_match"], "reference_url": "__REDDIT__/f/books/new |OR| __REDDIT__/f/books/hot",
            "url_note": "GOLD in PRED"}),
        task_record(44, ["gitlab"], "__GITLAB__", {
            "eval_types": ["program_html"],
            "program_html": [{"url": "__GITLAB__/byteblaze/dotfiles/-/project_members",
                              "locator": "func:gitlab_get_project_memeber_role(__page__, 'vinta')",
                              "required_contents": {"must_include": ["Guest"]}},
                             {"url": "func:reddit_get_post_url('__last_url__')", "locator": "",
                              "required_contents": {"must_include": ["__GITLAB__/x"]}}]}),
        task_record(5, ["shopping", "reddit"], ["__SHOPPING__/a.html", "__REDDIT__/f/deals"], {
            "eval_types": ["string_match"], "reference_answers": {"fuzzy_match": "N/A"},
            "string_note": "no such product"}),
        task_record(9, ["shopping"], "__SHOPPING__/a.html |AND| __SHOPPING__/b.html", {
            "eval_types": ["program_html"],
            "program_html": [{"url": "__SHOPPING_ADMIN__/../antonia.html", "locator": "",
                              "required_contents": {"exact_match": "x"}}]}),
    ]


def test_list_file_placeholders_filled_everywhere(tmp_path):
    cfg = WebArenaConfig(sites=SITES4, tasks=str(write_json(tmp_path / "test.raw.json", raw_tasks())))
    ts = {t.meta["webarena_id"]: t for t in webarena_tasks("webarena", config=cfg)}
    assert list(ts) == ["3", "5", "9", "27", "44"]  # numeric id order
    t3 = ts["3"]
    assert (t3.task_id, t3.suite, t3.start_url, t3.template) == ("webarena/3", "webarena", "http://shop.test:7780/admin", "103")
    assert t3.allowed_origins == ("http://shop.test:7780",)  # origins, not the /admin path: assets live elsewhere
    assert t3.meta["require_login"] is True and t3.meta["storage_state"] is None
    assert ts["27"].eval["reference_url"] == "http://forum.test:9999/f/books/new |OR| http://forum.test:9999/f/books/hot"
    ph = ts["44"].eval["program_html"]
    assert ph[0]["url"] == "http://git.test:8023/byteblaze/dotfiles/-/project_members"
    assert ph[0]["locator"] == "func:gitlab_get_project_memeber_role(__page__, 'vinta')"  # __page__ is not a site
    assert ph[1]["required_contents"]["must_include"] == ["http://git.test:8023/x"]
    assert ph[1]["url"] == "func:reddit_get_post_url('__last_url__')"
    # a list start_url becomes WebArena's " |AND| " form; both sites' origins are allowed
    t5 = ts["5"]
    assert t5.start_url == "http://shop.test:7770/a.html |AND| http://forum.test:9999/f/deals"
    assert start_urls(t5) == ["http://shop.test:7770/a.html", "http://forum.test:9999/f/deals"]
    assert t5.allowed_origins == ("http://forum.test:9999", "http://shop.test:7770")
    assert t5.eval["reference_answers"] == {"fuzzy_match": "N/A"} and t5.eval["string_note"] == "no such product"
    # a site named only by a placeholder in the eval block is needed (and allowed) too
    t9 = ts["9"]
    assert t9.sites == ("shopping", "shopping_admin")
    assert t9.eval["program_html"][0]["url"] == "http://shop.test:7780/admin/../antonia.html"
    assert start_urls(t9) == ["http://shop.test:7770/a.html", "http://shop.test:7770/b.html"]
    assert "__" not in json.dumps([t.to_dict() for t in ts.values()]).replace("__page__", "").replace("__last_url__", "")
    # records round-trip
    assert all(Task.from_dict(t.to_dict()) == t for t in ts.values())


def test_per_task_folder(tmp_path):
    folder = tmp_path / "config_files"
    for r in raw_tasks()[:3]:
        resolved = json.loads(json.dumps(r).replace("__SHOPPING_ADMIN__", SITES4["shopping_admin"])
                              .replace("__REDDIT__", SITES4["reddit"]).replace("__GITLAB__", SITES4["gitlab"]))
        write_json(folder / f"{r['task_id']}.json", resolved)
    write_json(folder / "test.json", [{"ignored": True}])  # not an N.json: ignored
    (folder / "README.txt").write_text("x")
    cfg = WebArenaConfig(sites=SITES4, tasks=str(folder))
    ts = load_tasks("webarena", config=cfg)
    assert [t.task_id for t in ts] == ["webarena/3", "webarena/27", "webarena/44"]
    assert ts[1].start_url == "http://forum.test:9999/f/books"
    assert ts[1].allowed_origins == ("http://forum.test:9999",)
    # files generated for other hosts are refused with a clear message
    other = WebArenaConfig(sites={**SITES4, "reddit": "http://elsewhere:9999"}, tasks=str(folder))
    with pytest.raises(WebArenaConfigError, match=r"start URL http://forum.test:9999/f/books is on none of the configured"):
        load_tasks("webarena", config=other)
    # a folder with only test.raw.json reads that
    only_raw = tmp_path / "raw_only"
    write_json(only_raw / "test.raw.json", raw_tasks()[:1])
    assert [t.task_id for t in load_tasks("webarena", config=WebArenaConfig(sites=SITES4, tasks=str(only_raw)))] == ["webarena/3"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskSchemaError, match="no per-task files"):
        load_tasks("webarena", config=WebArenaConfig(sites=SITES4, tasks=str(tmp_path / "empty")))


def test_task_file_errors_name_file_and_task(tmp_path):
    bad = raw_tasks()[:1]
    bad[0]["eval"]["reference_answers"] = {"must_include": []}
    cfg = WebArenaConfig(sites=SITES4, tasks=str(write_json(tmp_path / "bad.json", bad)))
    with pytest.raises(TaskSchemaError, match=r"bad.json\[0\]: task 'webarena/3': field 'eval.reference_answers.must_include'"):
        load_tasks("webarena", config=cfg)
    dup = raw_tasks()[:1] * 2
    with pytest.raises(TaskSchemaError, match="task id 3 appears more than once"):
        load_tasks("webarena", config=WebArenaConfig(sites=SITES4, tasks=str(write_json(tmp_path / "dup.json", dup))))
    odd = [task_record(1, ["shop"], "__SHOPPING__", {"eval_types": ["url_match"], "reference_url": "__SHOPPING__/x"})]
    with pytest.raises(TaskSchemaError, match=r"unknown site\(s\) \['shop'\]"):
        load_tasks("webarena", config=WebArenaConfig(sites=SITES4, tasks=str(write_json(tmp_path / "odd.json", odd))))


def test_missing_site_is_named_with_its_variable(tmp_path):
    cfg = WebArenaConfig(sites={"shopping": SITES4["shopping"]}, tasks=str(write_json(tmp_path / "t.json", raw_tasks())))
    with pytest.raises(WebArenaConfigError) as err:
        load_tasks("webarena", config=cfg)
    msg = str(err.value)
    assert "gitlab (GITLAB; 1 task)" in msg and "reddit (REDDIT; 2 tasks)" in msg and "shopping_admin (SHOPPING_ADMIN; 2 tasks)" in msg
    # picking tasks whose sites are configured works
    cfg_ok = WebArenaConfig(sites={"shopping": SITES4["shopping"], "shopping_admin": SITES4["shopping_admin"]},
                            tasks=cfg.tasks)
    assert [t.task_id for t in load_tasks("webarena", names=["9", "webarena/3"], config=cfg_ok)] == ["webarena/3", "webarena/9"]
    with pytest.raises(ValueError, match="no WebArena task"):
        load_tasks("webarena", names=["999"], config=cfg_ok)


@pytest.fixture
def no_released(monkeypatch):
    """As on a machine where the packages with the released task files are not installed."""
    from webr1_kit.tasks.webarena import released

    monkeypatch.setattr(released, "find", lambda name: None)


def test_nothing_configured(tmp_path, no_released):
    with pytest.raises(WebArenaConfigError, match="no WebArena site is configured: set the site URLs in environment variables"):
        load_tasks("webarena-lite", split="test")
    with pytest.raises(WebArenaConfigError, match="no WebArena task file: install the released one with "
                       "`webr1 install-webarena`.*or pass --tasks-file"):
        load_tasks("webarena", config=WebArenaConfig(sites=SITES4))
    with pytest.raises(WebArenaConfigError, match="Lite's task file was not found. Install it with `webr1 "
                       "install-webarena` .*--split-file.*VisualAgentBench"):
        load_tasks("webarena-lite", config=WebArenaConfig(sites=SITES4, tasks="x.json"))
    with pytest.raises(WebArenaConfigError, match="WebArena has no 'test' split"):
        load_tasks("webarena", split="test", config=WebArenaConfig(sites=SITES4, tasks="x.json"))


def test_split_file_with_train_and_test_ids(tmp_path):
    tasks_file = write_json(tmp_path / "test.raw.json", raw_tasks())
    split = write_json(tmp_path / "split.json", {"train": [3, "27", 5], "test": [44, 9]})
    cfg = WebArenaConfig(sites=SITES4, tasks=str(tasks_file), split_file=str(split))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        test = load_tasks("webarena-lite", split="test", config=cfg)
    assert [t.task_id for t in test] == ["webarena/9", "webarena/44"]
    assert {t.meta["split"] for t in test} == {"test"}
    assert any("test split has 2 tasks, not 165" in str(w.message) for w in caught)
    assert [t.task_id for t in load_tasks("webarena-lite", split="train", config=cfg)] == ["webarena/3", "webarena/5", "webarena/27"]
    assert len(load_tasks("webarena-lite", split="all", config=cfg)) == 5
    assert [t.task_id for t in load_tasks("webarena-lite", config=cfg)] == ["webarena/9", "webarena/44"]  # default: test
    # test only: train is every other task of the WebArena file
    write_json(split, {"test": [44]})
    assert [t.meta["webarena_id"] for t in load_tasks("webarena-lite", split="train", config=cfg)] == ["3", "5", "9", "27"]


@pytest.mark.parametrize("data,match", [
    ({"train": [1, 2], "test": [2]}, r"in both train and test: 2"),
    ({"test": [1, 1]}, r"listed more than once: 1"),
    ({"tests": [1]}, r"unknown key\(s\) tests"),
    ({"test": "1,2"}, r"'test' must be a list of task ids"),
    ([{"task_id": 0, "intent": "x"}], r"needs old_task_id"),
    ("ids", r"expected a JSON object"),
])
def test_split_file_errors(tmp_path, data, match):
    with pytest.raises(WebArenaConfigError, match=match):
        read_split(write_json(tmp_path / "s.json", data))
    with pytest.raises(WebArenaConfigError, match="does not exist"):
        read_split(tmp_path / "nope.json")


def test_split_ids_not_in_the_task_file(tmp_path):
    cfg = WebArenaConfig(sites=SITES4, tasks=str(write_json(tmp_path / "t.json", raw_tasks())),
                         split_file=str(write_json(tmp_path / "s.json", {"test": [3, 400, 401]})))
    with pytest.raises(WebArenaConfigError, match=r"2 task id\(s\) of the test split are not in .*t.json: 400, 401"):
        load_tasks("webarena-lite", split="test", config=cfg)


def test_lite_test_file_keyed_by_original_ids(tmp_path, no_released):
    """WebArena-Lite's own file renumbers tasks 0..164 and keeps the WebArena id in old_task_id;
    its (human-verified) eval blocks replace WebArena's. (Without the released WebArena file
    installed, the training split needs one named.)"""
    full = raw_tasks()
    lite = [dict(full[4], task_id=0, old_task_id=9), dict(full[0], task_id=1, old_task_id=3)]
    lite[1] = {**lite[1], "eval": {**lite[1]["eval"], "reference_answers": {"must_include": ["Overnight Duffle"]}}}
    lite_file = write_json(tmp_path / "test_webarena_lite.raw.json", lite)
    # the Lite file alone serves the test split
    cfg = WebArenaConfig(sites=SITES4, split_file=str(lite_file))
    test = load_tasks("webarena-lite", split="test", config=cfg)
    assert [(t.task_id, t.meta["lite_task_id"]) for t in test] == [("webarena/3", 1), ("webarena/9", 0)]
    assert test[0].eval["reference_answers"] == {"must_include": ["Overnight Duffle"]}
    assert "old_task_id" not in test[0].meta
    with pytest.raises(WebArenaConfigError, match="training split is every WebArena task outside its test split"):
        load_tasks("webarena-lite", split="train", config=cfg)
    # with WebArena's file too: train is the rest, and Lite's eval blocks win for test tasks
    cfg = WebArenaConfig(sites=SITES4, split_file=str(lite_file), tasks=str(write_json(tmp_path / "t.json", full)))
    assert [t.task_id for t in load_tasks("webarena-lite", split="train", config=cfg)] == ["webarena/5", "webarena/27", "webarena/44"]
    every = {t.task_id: t for t in load_tasks("webarena-lite", split="all", config=cfg)}
    assert every["webarena/3"].eval["reference_answers"] == {"must_include": ["Overnight Duffle"]}
    assert every["webarena/3"].meta["split"] == "test" and every["webarena/27"].meta["split"] == "train"


def released_lite_file() -> Path:
    """WebArena-Lite's test file as released in browsergym-webarenalite 0.14.3 (Apache-2.0,
    byte-identical to VisualAgentBench's), which `make test` installs without its
    dependencies: only the file is read, never the package's code."""
    from webr1_kit.tasks.webarena.released import find

    found = find("webarena-lite")
    assert found is not None, "browsergym-webarenalite is not installed: `make test` installs it (webr1 install-webarena)"
    return Path(found.path)


ALL_SITES = {**SITES4, "map": "http://map.test:3000", "wikipedia": "http://wiki.test:8888",
             "homepage": "http://home.test:4399"}


def test_the_released_files_load_from_their_packages_with_no_file_given(tmp_path, capsys):
    """WebArena's 812 tasks (libwebarena) and WebArena-Lite's 165 test and 647 training tasks
    (browsergym-webarenalite's file, the rest of WebArena's) load with no file named, each
    task naming the file it came from (package, version, SHA-256); the same files named
    explicitly give the same tasks; the CLI lists them with no site configured."""
    from webr1_kit.tasks.webarena.released import RELEASES, find, task_files

    cfg = WebArenaConfig(sites=ALL_SITES)
    every = load_tasks("webarena", config=cfg)
    test = load_tasks("webarena-lite", split="test", config=cfg)
    train = load_tasks("webarena-lite", split="train", config=cfg)
    assert (len(every), len(test), len(train)) == (812, 165, 647)
    assert not {t.task_id for t in test} & {t.task_id for t in train}
    assert {t.task_id for t in test} | {t.task_id for t in train} == {t.task_id for t in every}
    full, lite = find("webarena"), find("webarena-lite")
    assert (full.package, full.version, lite.package, lite.version) == ("libwebarena", RELEASES["webarena"].pin,
                                                                         "browsergym-webarenalite", "0.14.3")
    assert full.sha256 == "7b50386fd69163dbc05d615d834df4c6ed2c35596e97a1b10d17451c02537652"  # WebArena's own file
    assert task_files(every) == [full.to_dict()]
    assert task_files(test) == [lite.to_dict()] and task_files(train) == [full.to_dict()]
    # Lite's test tasks carry Lite's own (verified) evaluators, not WebArena's
    lite_record = json.loads(Path(lite.path).read_text())[0]
    assert test[0].eval == json.loads(json.dumps(lite_record["eval"]).replace("__GITLAB__", ALL_SITES["gitlab"])
                                      .replace("__SHOPPING_ADMIN__", ALL_SITES["shopping_admin"])
                                      .replace("__SHOPPING__", ALL_SITES["shopping"]).replace("__REDDIT__", ALL_SITES["reddit"])
                                      .replace("__MAP__", ALL_SITES["map"]))
    # named explicitly: the same tasks; a copy elsewhere is recorded by path and hash alone
    explicit = load_tasks("webarena-lite", split="test", config=WebArenaConfig(sites=ALL_SITES, tasks=full.path,
                                                                               split_file=lite.path))
    assert [t.to_dict() for t in explicit] == [t.to_dict() for t in test]
    copy = tmp_path / "lite.json"
    copy.write_bytes(Path(lite.path).read_bytes())
    copied = load_tasks("webarena-lite", split="test", config=WebArenaConfig(sites=ALL_SITES, split_file=str(copy)))
    assert task_files(copied) == [{"path": str(copy), "sha256": lite.sha256}]
    assert main(["tasks", "list", "--suite", "webarena-lite", "--split", "test"]) == 0
    out, err = capsys.readouterr()
    assert err.strip().endswith("165 tasks") and out.splitlines()[0].startswith("webarena/")
    assert main(["tasks", "list", "--suite", "webarena-lite", "--split", "train", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 647 and "__REDDIT__" in json.dumps(listed)  # no sites: placeholders kept


def test_webarena_verified_loads_from_its_package_with_its_hard_subset_and_is_refused_as_unscorable(tmp_path, capsys):
    """WebArena-Verified's 812 tasks and its 258 hard ones load from the webarena-verified
    package (its records: start_urls lists, evaluator lists); the kit does not score its
    evaluators yet, so a run refuses every one by id, and a malformed evaluator is refused
    at loading, named."""
    from webr1_kit.tasks.webarena.judge import scorable
    from webr1_kit.tasks.webarena.released import find, task_files

    cfg = WebArenaConfig(sites=ALL_SITES)
    every = load_tasks("webarena-verified", config=cfg)
    hard = load_tasks("webarena-verified", subset="hard", config=cfg)
    assert (len(every), len(hard)) == (812, 258) and {t.task_id for t in hard} < {t.task_id for t in every}
    assert every[0].task_id == "webarena-verified/0" and every[0].eval["eval_types"] == ["verified"]
    released = json.loads(Path(find("webarena-verified").path).read_text())
    assert [[e["evaluator"] for e in t.eval["verified"]] for t in every] == \
        [[e["evaluator"] for e in r["eval"]] for r in released]  # 812 agent-response, 663 network-event checks
    assert "__GITLAB__" not in json.dumps([t.eval for t in every])  # reference URLs point at the sites
    two_tabs = next(t for t, r in zip(every, released) if len(r["start_urls"]) == 2)
    assert len(start_urls(two_tabs)) == 2 and "__" not in two_tabs.start_url  # placeholders filled, one tab each
    assert task_files(every)[0]["package"] == "webarena-verified" and task_files(every)[0]["version"] == "1.2.3"
    with pytest.raises(WebArenaConfigError, match=r"812 of 812 tasks cannot be scored: webarena-verified/0, .* "
                       r"\(812\): WebArena-Verified's evaluators .* are not implemented in the kit yet"):
        scorable(every, cfg)
    kept, left = scorable(every[:3], cfg, leave_out=True)
    assert kept == [] and [x["task_id"] for x in left] == [t.task_id for t in every[:3]]
    with pytest.raises(ValueError, match="no WebArena-Verified subset 'easy'; subsets: hard, non-hard"):
        load_tasks("webarena-verified", subset="easy", config=cfg)
    broken = [dict(released[0], eval=[{"evaluator": "LLMJudge", "expected": {}}])]
    with pytest.raises(TaskSchemaError, match=r"eval.verified\[0\]' must be an object with evaluator"):
        load_tasks("webarena-verified", config=cfg, tasks_file=str(write_json(tmp_path / "v.json", broken)))
    assert main(["tasks", "list", "--suite", "webarena-verified", "--subset", "hard"]) == 0
    assert capsys.readouterr().err.strip().endswith("258 tasks")


def test_the_released_lite_test_file_loads_whole_and_its_fuzzy_page_checks_need_the_judge(tmp_path):
    """All 165 tasks of the released file load, with every site configured; the four whose
    program_html checks are fuzzy_match (WebArena ids 528, 641, 645, 657) need the judge, and
    a task file whose fuzzy_match list is empty is refused by name."""
    from webr1_kit.tasks.webarena.judge import needs_judge

    sites = ALL_SITES
    path = released_lite_file()
    tasks = load_tasks("webarena-lite", split="test", config=WebArenaConfig(sites=sites, split_file=str(path)))
    assert len(tasks) == 165
    fuzzy_pages = sorted(int(t.meta["webarena_id"]) for t in tasks
                         if any("fuzzy_match" in item["required_contents"] for item in t.eval.get("program_html") or []))
    assert fuzzy_pages == [528, 641, 645, 657]
    by_id = {int(t.meta["webarena_id"]): t for t in tasks}
    assert all(needs_judge(by_id[i]) for i in fuzzy_pages)
    assert not any(needs_judge(t) for t in tasks if "fuzzy_match" not in json.dumps(t.eval))
    record = next(r for r in json.loads(path.read_text()) if r["old_task_id"] == 528)
    for item in record["eval"]["program_html"]:
        item["required_contents"] = {"fuzzy_match": []}  # would pass whatever the page shows
    bad = WebArenaConfig(sites=sites, split_file=str(write_json(tmp_path / "lite.json", [record])))
    with pytest.raises(TaskSchemaError, match=r"required_contents.fuzzy_match' must be a non-empty list"):
        load_tasks("webarena-lite", split="test", config=bad)


def test_load_tasks_reads_paths_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOPPING_ADMIN", SITES4["shopping_admin"])
    monkeypatch.setenv("SHOPPING", SITES4["shopping"])
    monkeypatch.setenv("WEBR1_WEBARENA_TASKS", str(write_json(tmp_path / "t.json", raw_tasks())))
    monkeypatch.setenv("WEBR1_WEBARENA_SPLIT", str(write_json(tmp_path / "s.json", {"test": [3, 9], "train": [5]})))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = load_tasks("webarena-lite", split="test")
    assert [t.task_id for t in ts] == ["webarena/3", "webarena/9"]
    from webr1_kit.tasks.webarena import active_config

    assert active_config().sites["shopping"] == SITES4["shopping"]  # loading made it the suite's config


# ---------------------------------------------------------------- paper table


def traj(sites, reward, status="done") -> Trajectory:
    return Trajectory(task_id="t", intent="", seed=0, reward=reward, status=status, meta={"sites": sites})


def test_paper_table_columns_and_not_evaluated():
    trajs = [traj(["reddit"], 1.0), traj(["reddit"], 0.0), traj(["gitlab"], 1.0), traj(["shopping_admin"], 0.0),
             traj(["shopping"], 1.0), traj(["shopping"], 0.0, "infra_failure"), traj(["map"], 0.0),
             traj(["gitlab", "reddit"], 1.0)]
    table = paper_table(trajs)
    assert list(table) == ["Reddit", "GitLab", "CMS", "Map", "OSS", "Multi", "Avg"]
    assert table["Reddit"] == {"success_rate": 0.5, "successes": 1, "evaluated": 2, "not_evaluated": 0}
    assert table["OSS"] == {"success_rate": 1.0, "successes": 1, "evaluated": 1, "not_evaluated": 1}
    assert table["Multi"]["success_rate"] == 1.0 and table["Map"]["success_rate"] == 0.0
    assert table["Avg"] == {"success_rate": 4 / 7, "successes": 4, "evaluated": 7, "not_evaluated": 1}
    text = format_paper_table(table)
    assert text.splitlines()[0].split() == ["Reddit", "|", "GitLab", "|", "CMS", "|", "Map", "|", "OSS", "|", "Multi", "|", "Avg"]
    assert "57.1" in text and "1 (+1 n/e)" in text
    empty = paper_table([traj(["wikipedia"], 0.0, "infra_failure")])
    assert empty["Avg"]["success_rate"] is None and empty["Other"]["not_evaluated"] == 1
    assert "n/a" in format_paper_table(empty)


# ---------------------------------------------------------------- helpers and judge (no browser)


def test_parse_call_accepts_only_literal_calls():
    assert parse_call("gitlab_get_project_memeber_role(__page__, 'byteblaze')")[1][1] == "byteblaze"
    assert parse_call("shopping_get_latest_order_url()") == ("shopping_get_latest_order_url", [])
    for bad in ("__import__('os').system('x')", "f(x)", "f(a=1)", "1 + 1", "f(", "obj.method('x')"):
        with pytest.raises(EvaluationUnavailable):
            parse_call(bad)


def test_reddit_get_post_url():
    base = "http://forum.test:9999"
    assert reddit_get_post_url(f"{base}/f/books/120/title-x/comment/901") == f"{base}/f/books/120/"
    assert reddit_get_post_url(f"{base}/f/books/120") == f"{base}/f/books/120/"
    assert reddit_get_post_url(f"{base}/f/books") == f"{base}/f/books"
    assert reddit_get_post_url(f"{base}/user/x/account") == f"{base}/user/x/account"


def fuzzy_task(refs: dict, note: str = "") -> Task:
    return Task(task_id="webarena/1", intent="How long is the walk?", start_url="http://x/", suite="webarena",
                eval={"eval_types": ["string_match"], "reference_answers": refs, "string_note": note})


def judged(task: Task, answer: str | None, llm) -> bool:
    return asyncio.run(string_match(task, answer, judge=judge_for(task, llm)))["passed"]


def test_fuzzy_match_through_the_judge_endpoint(sites, monkeypatch):
    monkeypatch.setenv("WEBR1_JUDGE_API_KEY", "sk-test")
    llm = OpenAIJudge(JudgeConfig(sites.judge_url, "judge-model"))
    t = fuzzy_task({"fuzzy_match": ["11 min"]})
    assert judged(t, "About 11 min on foot", llm)
    assert not judged(t, "half an hour", llm)
    assert not judged(t, "11 min PARTIAL", llm)  # "partially correct" fails
    req = sites.judge.requests[0]
    assert req["auth"] == "Bearer sk-test"
    assert req["body"]["model"] == "judge-model" and req["body"]["temperature"] == 0
    prompt = req["body"]["messages"][-1]["content"]
    assert "Question: How long is the walk?" in prompt and "Reference answer: 11 min" in prompt
    n = len(sites.judge.requests)
    assert judged(t, "About 11 min on foot", llm) and len(sites.judge.requests) == n  # asked once per process
    # every reference must pass
    both = fuzzy_task({"fuzzy_match": ["driving: 13min", "walking: 1h 45min"]})
    assert judged(both, "driving: 13min, walking: 1h 45min", llm)
    assert not judged(both, "driving: 13min", llm)


def test_fuzzy_match_unachievable_tasks(sites):
    llm = OpenAIJudge(JudgeConfig(sites.judge_url, "m"))
    t = fuzzy_task({"fuzzy_match": "N/A"}, note="System message: We cannot add order history.")
    n = len(sites.judge.requests)
    assert judged(t, "N/A", llm) and len(sites.judge.requests) == n  # exact N/A: no judge needed
    assert judged(t, "I could not: system message: we cannot add order history.", llm)
    assert not judged(t, "The order total is $25", llm)
    assert "Actual reason it cannot be done: System message" in sites.judge.requests[-1]["body"]["messages"][-1]["content"]
    assert judged(t, "n/a", None)  # no judge configured, but none needed
    with pytest.raises(EvaluationUnavailable, match="needs an LLM judge and none is configured"):
        judged(t, "The order total is $25", None)


def test_no_judge_or_broken_judge_is_not_evaluated(sites):
    t = fuzzy_task({"fuzzy_match": ["11 min"]})
    with pytest.raises(EvaluationUnavailable, match="fuzzy_match needs an LLM judge and none is configured: set WEBR1_JUDGE_BASE_URL"):
        judged(t, "11 min", None)
    llm = OpenAIJudge(JudgeConfig(sites.judge_url, "m"))
    with pytest.raises(EvaluationUnavailable, match="HTTP 500"):
        judged(t, "11 min HTTP500", llm)
    with pytest.raises(EvaluationUnavailable, match="no verdict"):
        judged(t, "11 min NOVERDICT", llm)
    with pytest.raises(EvaluationUnavailable, match="unreachable"):
        judged(t, "11 min", OpenAIJudge(JudgeConfig(dead_url() + "/v1", "m", timeout_s=5)))
    # no answer at all is a plain failure, judge or not
    assert judged(t, None, None) is False


# ---------------------------------------------------------------- program_html helpers (real Chromium)


def html_task(*items: dict) -> Task:
    return Task(task_id="webarena/h", intent="", start_url="http://x/", suite="webarena",
                eval={"eval_types": ["program_html"], "program_html": list(items)})


def item(url: str, locator: str, **required) -> dict:
    return {"url": url, "locator": locator, "required_contents": required}


@pytest.fixture
async def page_ctx(browser):
    ctx = await browser.new_context()
    page = await ctx.new_page()
    yield page, ctx
    await ctx.close()


async def passes(task, page, ctx, config) -> bool:
    return (await program_html(task, page, ctx, Helpers(config)))["passed"]


async def test_page_helpers_on_recorded_pages(page_ctx, fixture_server, tmp_path):
    page, ctx = page_ctx
    cfg = WebArenaConfig(sites={"shopping": dead_url()}, cache_dir=str(tmp_path))
    base = f"{fixture_server.url}/webarena"

    async def on(url, locator, **required) -> bool:
        # Each page is opened once and checked as the agent's page ("last"): one context, fast.
        if page.url != url:
            await page.goto(url)
        return await passes(html_task(item("last", locator, **required)), page, ctx, cfg)

    members = f"{base}/gitlab_members.html"
    role = "func:gitlab_get_project_memeber_role(__page__, '{}')"
    assert await on(members, role.format("vinta"), must_include=["Guest"])
    assert await on(members, role.format("byteblaze"), exact_match="Owner")
    assert await on(members, role.format("abisubramanya27"), exact_match="Developer")
    assert not await on(members, role.format("vinta"), must_include=["Developer"])
    assert not await on(members, role.format("nobody"), must_include=["Guest"])
    assert not await on(members, role.format("vint"), must_include=["Guest"])
    assert await on(members, "func:get_query_text(__page__, '.user-email')", exact_match="Byte.Blaze@Example.COM")
    assert await on(members, "func:get_query_text_lowercase(__page__, '.user-email')", must_include=["byte.blaze@example.com"])
    assert not await on(members, "func:get_query_text(__page__, '#nope')", must_include=["Byte"])
    assert not await on(members, "func:get_query_text(__page__, '##bad selector')", must_include=["Byte"])
    assert not await on(members, "func:shopping_get_product_price(__page__)", exact_match="27")  # no price here: 0

    post = f"{base}/reddit_post.html"
    latest = "func:reddit_get_latest_comment_content_by_username(__page__, '{}')"
    parent = "func:reddit_get_parent_comment_username_of_latest_comment_by_username(__page__, '{}')"
    assert await on(post, latest.format("MarvelsGrantMan136"), exact_match="Agreed, Sapiens is great.")
    assert not await on(post, latest.format("MarvelsGrantMan136"), must_include=["older"])
    assert await on(post, parent.format("MarvelsGrantMan136"), exact_match="bob")
    assert await on(post, parent.format("carol"), exact_match="Poster")  # a top-level comment's parent: the post
    assert not await on(post, latest.format("nobody"), must_include=["Sapiens"])

    order = f"{base}/shop_order.html"
    qty = "func:shopping_get_order_product_quantity(__page__, '{}')"
    assert await on(order, qty.format("B00MXUFL0E"), exact_match="2")
    assert await on(order, qty.format("X |OR| B07ZD2PB9F"), exact_match="1")
    assert await on(order, qty.format("NOPE"), exact_match="0")
    assert not await on(order, qty.format("B07ZD2PB9F"), exact_match="2")
    assert await on(order, "func:shopping_get_order_product_option(__page__, 'B00MXUFL0E', 'Flavor')", exact_match="Strawberry")
    assert await on(order, "func:shopping_get_order_product_option(__page__, 'B00MXUFL0E', 'Color')", exact_match="")
    assert await on(order, "func:shopping_get_order_product_name_list(__page__)",
                    must_include=["Special K Protein Bars", "Sapiens Paperback"])

    product = f"{base}/shop_product.html"
    for locator, want in (("func:shopping_get_product_price(__page__)", "27"),
                          ("func:shopping_get_num_reviews(__page__)", "12"),
                          ("func:shopping_get_rating_as_percentage(__page__)", "87"),
                          ("func:shopping_get_product_attributes(__page__, 'weight |OR| dimensions')",
                           "10 x 5 x 2 inches, 1.2 pounds")):
        assert await on(product, locator, exact_match=want), locator
    # an explicit URL opens in a context of its own; the agent's page stays where it was
    t = html_task(item(members, role.format("vinta"), exact_match="Guest"))
    assert await passes(t, page, ctx, cfg)
    assert page.url == product and ctx.pages == [page]


@pytest.mark.parametrize("check,match", [
    (item("last", "func:no_such_helper(__page__)", must_include=["x"]), "unknown or misused locator helper"),
    (item("last", "func:gitlab_get_project_memeber_role('byteblaze')", must_include=["x"]), "takes __page__ first"),
    (item("last", "func:get_query_text(__page__)", must_include=["x"]), "wrong number of arguments"),
    (item("func:os.system('x')", "", must_include=["x"]), "must be name"),
    (item("func:reddit_get_post_url(__page__)", "", must_include=["x"]), "takes no page"),
])
async def test_helper_calls_that_cannot_run_are_not_evaluated(page_ctx, tmp_path, check, match):
    page, ctx = page_ctx
    cfg = WebArenaConfig(sites={"shopping": dead_url()}, cache_dir=str(tmp_path))
    with pytest.raises(EvaluationUnavailable, match=match):
        await program_html(html_task(check), page, ctx, Helpers(cfg))
    with pytest.raises(EvaluationUnavailable, match="not supported"):  # and without helpers at all
        await program_html(html_task(check), page, ctx)


async def test_magento_api_helpers_on_the_stand_in(sites, browser, tmp_path):
    cfg = config_for(sites, tmp_path)
    auth = AuthManager(cfg)
    ctx = await browser.new_context()
    try:
        await apply_state(ctx, await auth.state("shopping", browser.new_context))  # the agent is logged in
        page = await ctx.new_page()
        await page.goto(sites.urls["shopping"] + "/")
        # the latest order's page, opened in the evaluation context with the agent's login
        latest = html_task(item("func:shopping_get_latest_order_url()",
                                "document.querySelector('.order-details-items.ordered').outerText",
                                must_include=["B00MXUFL0E"]),
                           item("func:shopping_get_latest_order_url()", "document.querySelector('h1').outerText",
                                exact_match="Order # 000000190"))
        assert await passes(latest, page, ctx, cfg)
        sites.state["shopping"].rest["orders"]["items"][0]["increment_id"] = "000000191"
        assert not await passes(html_task(latest.eval["program_html"][1]), page, ctx, cfg)
        review = "func:shopping_get_sku_latest_review_{}('B00MXUFL0E')"
        assert await passes(html_task(item("last", review.format("author"), exact_match="Emma Lopez")), page, ctx, cfg)
        assert await passes(html_task(item("last", review.format("rating"), exact_match="80")), page, ctx, cfg)
        assert await passes(html_task(item("last", review.format("title"), exact_match="Great bars")), page, ctx, cfg)
        assert await passes(html_task(item("last", review.format("text"), must_include=["filling"])), page, ctx, cfg)
        assert not await passes(html_task(item("last", review.format("author"), exact_match="Old Reviewer")), page, ctx, cfg)
        none = "func:shopping_get_sku_latest_review_author('NOREVIEWS')"
        assert not await passes(html_task(item("last", none, must_include=["Emma"])), page, ctx, cfg)
        url = html_task(item("func:shopping_get_sku_product_page_url('MSH03')", "func:shopping_get_product_price(__page__)",
                             exact_match="27"))
        assert await passes(url, page, ctx, cfg)
        # the API failing is not the agent's fault: not evaluated
        with pytest.raises(EvaluationUnavailable, match=r"HTTP 404"):
            await passes(html_task(item("last", "func:shopping_get_sku_latest_review_author('UNKNOWN')",
                                        must_include=["x"])), page, ctx, cfg)
        down = WebArenaConfig(sites={**cfg.sites, "shopping": dead_url()}, cache_dir=cfg.cache_dir)
        with pytest.raises(EvaluationUnavailable, match="unreachable"):
            await passes(latest, page, ctx, down)
        # __last_url__ is the agent's final URL
        await page.goto(sites.urls["reddit"] + "/f/books/120/title-120/comment/901")
        post = html_task(item("func:reddit_get_post_url('__last_url__')", "document.title",
                              must_include=["Which book changed your mind?"]))
        assert await passes(post, page, ctx, cfg)
    finally:
        await ctx.close()


# ---------------------------------------------------------------- auto-login


async def test_auto_login_saves_and_reuses_storage_state(sites, browser, tmp_path):
    cfg = config_for(sites, tmp_path)
    shop_site = sites.state["shopping"]
    auth = AuthManager(cfg)
    state = await auth.state("shopping", browser.new_context)
    assert auth.how("shopping") == "login" and shop_site.login_posts == 1
    saved = json.loads(auth.path("shopping").read_text())
    assert auth.path("shopping").parent == tmp_path / "cache" / "auth"
    assert [c["name"] for c in saved["cookies"]] == ["shop_session"] and saved == state
    # a context given the state is logged in
    ctx = await browser.new_context()
    await apply_state(ctx, state)
    page = await ctx.new_page()
    await page.goto(sites.urls["shopping"] + "/")
    assert await page.inner_text(".greet") == "Welcome, Emma Lopez!"
    await ctx.close()
    # within the recheck window: no browser work at all; a new process reuses the saved file
    assert await auth.state("shopping", browser.new_context) is state
    other = AuthManager(cfg)
    assert await other.state("shopping", browser.new_context) == state
    assert other.how("shopping") == "saved" and shop_site.login_posts == 1
    # the site forgets the session: the saved state no longer works, a new login replaces it
    shop_site.sessions.clear()
    fresh = await other.state("shopping", browser.new_context, recheck_s=0)
    assert other.how("shopping") == "login" and shop_site.login_posts == 2 and fresh != state
    assert json.loads(auth.path("shopping").read_text()) == fresh


async def test_auto_login_flows_of_every_site(sites, browser, tmp_path):
    auth = AuthManager(config_for(sites, tmp_path))
    for site in ("shopping_admin", "reddit", "gitlab"):
        state = await auth.state(site, browser.new_context)
        assert auth.how(site) == "login" and sites.state[site].login_posts == 1, site
        assert state["cookies"][0]["value"] in sites.state[site].sessions
    assert len({auth.path(s) for s in ("shopping_admin", "reddit", "gitlab")}) == 3


async def test_auto_login_failures_name_the_site(sites, browser, tmp_path):
    cfg = config_for(sites, tmp_path)
    wrong = WebArenaConfig(sites=cfg.sites, cache_dir=cfg.cache_dir,
                           accounts={**cfg.accounts, "reddit": {"username": "MarvelsGrantMan136", "password": "nope"}})
    with pytest.raises(LoginError, match=r"reddit: signing in as 'MarvelsGrantMan136' did not work: /user/MarvelsGrantMan136/account does not show a login.*wrong account or password"):
        await AuthManager(wrong).state("reddit", browser.new_context)
    down = WebArenaConfig(sites={**cfg.sites, "gitlab": dead_url()}, cache_dir=cfg.cache_dir)
    with pytest.raises(LoginError, match="gitlab: the login steps failed"):
        await AuthManager(down).state("gitlab", browser.new_context)


def test_merged_states_warn_when_logins_collide():
    a = {"cookies": [{"name": "PHPSESSID", "value": "shop", "domain": "127.0.0.1", "path": "/"}], "origins": []}
    b = {"cookies": [{"name": "PHPSESSID", "value": "forum", "domain": "127.0.0.1", "path": "/"},
                     {"name": "remember", "value": "1", "domain": "127.0.0.1", "path": "/"}],
         "origins": [{"origin": "http://127.0.0.1:9999", "localStorage": [{"name": "k", "value": "v"}]}]}
    with pytest.warns(UserWarning, match="shopping and reddit logins both set cookie 'PHPSESSID'"):
        merged = merged_state({"shopping": a, "reddit": b})
    assert [(c["name"], c["value"]) for c in merged["cookies"]] == [("PHPSESSID", "shop"), ("remember", "1")]
    assert merged["origins"] == b["origins"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        merged_state({"shopping": a, "again": a})  # the same cookie twice is no collision


# ---------------------------------------------------------------- site check and state fingerprints


async def test_check_sites_logins_and_changes_since_reset(sites, browser, tmp_path):
    cfg = WebArenaConfig(sites={**sites.urls, "map": dead_url()}, cache_dir=str(tmp_path / "cache"))
    rows = {r.site: r for r in await check(cfg, login=False)}  # before any login or mark
    assert list(rows) == ["shopping", "shopping_admin", "reddit", "gitlab", "map"]
    assert rows["map"].reachable is False and "unreachable" in rows["map"].detail and not rows["map"].ok
    assert rows["shopping"].state == "no reset mark" and rows["shopping"].login == "not checked"
    assert rows["reddit"].state == "unreadable: submissions (no saved login), comments (no saved login)"
    rows = {r.site: r for r in await check(cfg, browser=browser, mark_reset=True)}
    assert all(rows[s].reachable and rows[s].login == "ok (new login)" and rows[s].state == "marked"
               for s in ("shopping", "shopping_admin", "reddit", "gitlab"))
    assert set(rows["shopping_admin"].fingerprint) == {"orders", "products", "cms pages", "customers"}
    assert set(rows["reddit"].fingerprint) == {"submissions", "comments"}
    assert rows["map"].state == "-"
    rows = {r.site: r for r in await check(cfg, login=False)}
    assert {s: rows[s].state for s in ("shopping", "shopping_admin", "reddit", "gitlab")} == dict.fromkeys(
        ("shopping", "shopping_admin", "reddit", "gitlab"), "unchanged")
    # agents change things: a new order, a new forum post, a GitLab event
    sites.state["shopping"].rest["orders"]["items"][0]["updated_at"] = "2024-01-01 00:00:00"
    sites.state["reddit"].rest["posts"].append(122)
    sites.state["gitlab"].rest["events"].insert(0, {"id": 5002, "action_name": "opened"})
    rows = {r.site: r for r in await check(cfg, login=False)}
    assert rows["shopping"].state == "CHANGED: orders"
    assert rows["reddit"].state == "CHANGED: submissions" and rows["gitlab"].state == "CHANGED: events"
    assert rows["shopping_admin"].state == "unchanged"
    assert changed_sites(cfg, ["shopping", "shopping_admin", "map"]) == {"shopping": "CHANGED: orders"}
    # a probe that cannot be read says so rather than "unchanged"
    sites.state["gitlab"].sessions.clear()
    rows = {r.site: r for r in await check(cfg, login=False)}
    assert rows["gitlab"].state.startswith("unreadable: events (HTTP 401)")
    table = format_table(list(rows.values()))
    assert "DOWN, unreachable" in table and "CHANGED: orders" in table


def test_preflight_names_down_sites_and_warns(sites, tmp_path):
    cfg = WebArenaConfig(sites={"shopping": sites.urls["shopping"], "reddit": dead_url()}, cache_dir=str(tmp_path))
    shop_task = fuzzy_task({"fuzzy_match": ["x"]})
    shop_task = Task.from_dict({**shop_task.to_dict(), "sites": ["shopping"]})
    with pytest.raises(InfraError, match=r"down: reddit \(http://127.0.0.1:\d+: unreachable"):
        preflight([shop_task, Task.from_dict({**shop_task.to_dict(), "task_id": "webarena/2", "sites": ["reddit"]})], cfg)
    warns = preflight([shop_task], cfg)
    assert len(warns) == 1 and warns[0].startswith("shopping: no reset mark")
    asyncio.run(check(cfg.__class__(sites={"shopping": cfg.sites["shopping"]}, cache_dir=cfg.cache_dir), login=False,
                      mark_reset=True))
    assert preflight([shop_task], cfg) == []  # marked and unchanged: nothing to say
    sites.state["shopping"].rest["carts/search"]["total_count"] = 2
    assert preflight([shop_task], cfg)[0].startswith("shopping: state CHANGED: carts since the last reset mark")


# ---------------------------------------------------------------- the suite, end to end through BrowserEnv


@pytest.fixture
def e2e(sites, tmp_path):
    u = sites.urls
    records = [
        task_record(1, ["shopping"], "__SHOPPING__/", {
            "eval_types": ["string_match", "url_match"], "reference_answers": {"must_include": ["Emma Lopez"]},
            "reference_url": "__SHOPPING__/"}, intent="Who is logged in?"),
        task_record(2, ["shopping"], "__SHOPPING__/", {
            "eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ["Emma"]}}),
        task_record(4, ["shopping"], "__SHOPPING__/", {
            "eval_types": ["program_html"],
            "program_html": [{"url": "func:shopping_get_latest_order_url()", "locator": "",
                              "required_contents": {"must_include": ["B00MXUFL0E"]}}]}),
        task_record(3, ["shopping", "reddit"], "__SHOPPING__/a.html |AND| __REDDIT__/f/books/120/t |AND| __SHOPPING__/c.html", {
            "eval_types": ["program_html"],
            "program_html": [{"url": "func:shopping_get_latest_order_url()",
                              "locator": "func:shopping_get_order_product_quantity(__page__, 'B00MXUFL0E')",
                              "required_contents": {"exact_match": "2"}},
                             {"url": "last", "locator": "document.title", "required_contents": {"must_include": ["Page a"]}}]}),
    ]
    cfg = config_for(sites, tmp_path, tasks=str(write_json(tmp_path / "test.raw.json", records)))
    ts = {t.meta["webarena_id"]: t for t in webarena_tasks("webarena", config=cfg)}
    assert u["shopping"] in ts["1"].start_url
    return SimpleNamespace(tasks=ts, config=cfg)


async def test_episode_logged_in_and_scored(browser, e2e, sites):
    env = BrowserEnv(browser)
    try:
        obs = await env.reset(e2e.tasks["1"], seed=0)
        assert "Welcome, Emma Lopez!" in obs.text  # the saved login is in the episode's context
        _, reward, done, info = await env.step('exit(message="Emma Lopez")')
        assert (reward, done) == (1.0, True) and [c["passed"] for c in info["verdict"]["checks"]] == [True, True]
        await env.reset(e2e.tasks["1"], seed=0)
        _, reward, _, _ = await env.step('exit(message="nobody")')
        assert reward == 0.0
        # several start URLs: one tab each, the first one current
        obs = await env.reset(e2e.tasks["3"], seed=0)
        assert len(env.pages) == 3 and env.page.url == sites.urls["shopping"] + "/a.html"
        assert sorted(p.url for p in env.pages) == sorted(start_urls(e2e.tasks["3"]))
        assert obs.tabs[env.active] == "Page a"
        _, reward, _, info = await env.step('exit(message="done")')
        assert reward == 1.0, info["verdict"]
        assert sites.state["shopping"].login_posts == 1 and sites.state["reddit"].login_posts == 1  # logged in once each
    finally:
        await env.close()


async def test_fuzzy_task_without_judge_is_not_evaluated(browser, e2e):
    class Exit:
        def __init__(self):
            self.asked: list[str] = []

        async def act(self, task, intent, observation, history, seed=0):
            self.asked.append(task.task_id)
            return 'exit(message="Emma Lopez")'

    policy = Exit()
    result = await run_episodes(policy, [e2e.tasks["1"], e2e.tasks["2"]], concurrency=2, browser=browser, retries=0)
    by_id = {t.task_id: t for t in result.trajectories}
    assert by_id["webarena/1"].status == "done" and by_id["webarena/1"].reward == 1.0
    failed = by_id["webarena/2"]
    assert failed.status == "infra_failure" and "needs an LLM judge and none is configured" in failed.infra_error
    assert policy.asked == ["webarena/1"]  # refused before the policy ran: no wasted episode
    assert result.metrics["success_rate"] == 1.0 and result.metrics["infra_failures"] == 1
    assert paper_table(result.trajectories)["OSS"] == {"success_rate": 1.0, "successes": 1, "evaluated": 1, "not_evaluated": 1}


async def test_fuzzy_task_with_judge_is_judged(browser, e2e, sites):
    configure(config_for(sites, Path(e2e.config.cache_dir).parent, judge=True))
    env = BrowserEnv(browser)
    try:
        await env.reset(e2e.tasks["2"], seed=0)
        _, reward, _, info = await env.step('exit(message="It is Emma")')
        assert reward == 1.0 and info["verdict"]["checks"][0]["passed"]
        await env.reset(e2e.tasks["2"], seed=0)
        _, reward, _, _ = await env.step('exit(message="It is Bob")')
        assert reward == 0.0
    finally:
        await env.close()


async def test_site_down_during_evaluation_is_not_evaluated(browser, e2e, sites):
    env = BrowserEnv(browser)
    try:
        await env.reset(e2e.tasks["4"], seed=0)
        configure(WebArenaConfig(sites={**e2e.config.sites, "shopping": dead_url()}, cache_dir=e2e.config.cache_dir))
        with pytest.raises(InfraError, match="not evaluated: Magento API .* unreachable"):
            await env.step('exit(message="done")')
    finally:
        await env.close()


# ---------------------------------------------------------------- CLI


def test_cli_eval_without_sites_names_what_is_missing(capsys, tmp_path, monkeypatch):
    assert main(["eval", "--suite", "webarena-lite", "--split", "test", "--policy", "random"]) == 2
    err = capsys.readouterr().err
    assert "no WebArena site is configured" in err and "SHOPPING" in err and "--webarena-config" in err
    monkeypatch.setenv("SHOPPING", "http://127.0.0.1:1")
    assert main(["eval", "--suite", "webarena-lite", "--split", "test", "--policy", "random"]) == 2
    err = capsys.readouterr().err  # the released Lite file's tasks, with one site of six configured
    assert "need WebArena site(s) that are not configured" in err and "gitlab (GITLAB; " in err
    from webr1_kit.tasks.webarena import released

    monkeypatch.setattr(released, "find", lambda name: None)
    assert main(["eval", "--suite", "webarena-lite", "--split", "test", "--policy", "random"]) == 2
    assert "--split-file" in capsys.readouterr().err
    tasks_file = write_json(tmp_path / "t.json", raw_tasks())
    assert main(["eval", "--suite", "webarena", "--tasks-file", str(tasks_file), "--policy", "random"]) == 2
    err = capsys.readouterr().err
    assert "reddit (REDDIT; 2 tasks)" in err and "gitlab (GITLAB; 1 task)" in err


def test_cli_eval_runs_and_prints_the_paper_table(sites, tmp_path, capsys, monkeypatch):
    """A WebArena-Lite evaluation through the CLI on the stand-in shop. A task that needs the
    judge, with none configured, stops the run before it starts, named; with
    --leave-out-unscorable the run goes on without it and metrics.json lists it."""
    records = [task_record(1, ["shopping"], "__SHOPPING__/", {
        "eval_types": ["string_match"], "reference_answers": {"must_include": ["Emma Lopez"]}}),
        task_record(2, ["shopping"], "__SHOPPING__/", {
            "eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ["Emma Lopez"]}})]
    cfg = write_json(tmp_path / "wa.json", {"sites": {"shopping": sites.urls["shopping"]}, "cache_dir": "cache"})
    monkeypatch.setenv("WEBR1_WEBARENA_SPLIT", str(write_json(tmp_path / "split.json", {"test": [1, 2]})))
    command = ["eval", "--suite", "webarena-lite", "--split", "test", "--policy", "random", "--webarena-config",
               str(cfg), "--tasks-file", str(write_json(tmp_path / "t.json", records)), "--max-turns", "1",
               "--quiet", "--concurrency", "1", "--out", str(tmp_path / "run")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "1 of 2 tasks cannot be scored: webarena/2 (1): its fuzzy_match check needs the LLM judge" in err
        assert "--leave-out-unscorable" in err and not (tmp_path / "run").exists()
        rc = main(command + ["--leave-out-unscorable"])
    out, err = capsys.readouterr()
    assert rc == 0 and "leaving out 1 task(s) that cannot be scored: webarena/2" in err
    assert "per site, as in the paper's table" in out and "OSS" in out and "Reddit" in out
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["suite"] == "webarena-lite" and metrics["by_paper_site"]["OSS"]["evaluated"] == 1
    assert metrics["by_paper_site"]["Avg"]["evaluated"] == 1 and metrics["infra_failures"] == 0
    assert metrics["left_out"] == [{"task_id": "webarena/2",
                                    "reason": "its fuzzy_match check needs the LLM judge, and none is configured"}]
    assert sites.state["shopping"].login_posts == 1
    tasks_file = tmp_path / "t.json"  # the denominator: the file its tasks came from
    assert metrics["task_files"] == [{"path": str(tasks_file),
                                      "sha256": hashlib.sha256(tasks_file.read_bytes()).hexdigest()}]


def test_cli_webarena_check_up_and_down(sites, tmp_path, capsys):
    cfg = write_json(tmp_path / "wa.json", {"sites": {"shopping": sites.urls["shopping"], "reddit": dead_url(),
                                                       "map": sites.urls["gitlab"]}, "cache_dir": "cache"})
    assert main(["webarena", "check", "--webarena-config", str(cfg), "--no-login"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split() == ["site", "url", "reachable", "login", "state", "since", "reset"]
    assert any(line.startswith("reddit") and "DOWN" in line for line in lines)
    assert any(line.startswith("shopping") and "up, HTTP 200" in line for line in lines)
    assert "not ready: reddit" in captured.err
    assert main(["webarena", "check", "--webarena-config", str(cfg), "--no-login", "--json"]) == 1
    rows = {r["site"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["map"]["reachable"] and rows["map"]["login"] == "not needed" and not rows["reddit"]["reachable"]
    ok = write_json(tmp_path / "ok.json", {"sites": {"map": sites.urls["gitlab"]}, "cache_dir": "cache"})
    assert main(["webarena", "check", "--webarena-config", str(ok), "--no-login"]) == 0
    assert main(["webarena", "check"]) == 2  # nothing configured
    assert "no WebArena site is configured" in capsys.readouterr().err


def test_cli_help_mentions_webarena(capsys):
    with pytest.raises(SystemExit):
        main(["webarena", "check", "--help"])
    assert "--mark-reset" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    out = capsys.readouterr().out
    assert "--tasks-file" in out and "--split-file" in out and "webarena-lite" in out


async def test_the_suite_keeps_the_environment_contract(browser, e2e):
    from webr1_kit.conformance import check_tasks

    assert await check_tasks([e2e.tasks["1"], e2e.tasks["3"]], browser) == []
