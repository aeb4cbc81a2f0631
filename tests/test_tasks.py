"""Task records in WebArena's JSON schema: round trips, real WebArena records, every
schema error naming the task and the field, and task files (JSON, JSONL, broken ones)."""

from __future__ import annotations

import copy
import json

import pytest

from webr1_kit.tasks import Task, TaskSchemaError, Verdict, load_task_file, load_tasks, select_tasks

# WebArena's task 0 (config_files/0.json), as the release ships it.
WEBARENA_STRING = {
    "sites": ["shopping_admin"],
    "task_id": 0,
    "require_login": True,
    "storage_state": "./.auth/shopping_admin_state.json",
    "start_url": "http://127.0.0.1:7780/admin",
    "geolocation": None,
    "intent_template": "What is the top-{{n}} best-selling product in {{year}}",
    "instantiation_dict": {"n": 1, "year": 2022},
    "intent": "What is the top-1 best-selling product in 2022",
    "require_reset": False,
    "eval": {
        "eval_types": ["string_match"],
        "reference_answers": {"exact_match": "Quest Lumaflex\u2122 Band"},
        "reference_url": "",
        "program_html": [],
        "string_note": "",
        "reference_answer_raw_annotation": "Quest Lumaflex\u2122 Band",
    },
    "intent_template_id": 279,
}

# A WebArena-shaped url_match + program_html record (GitLab style).
WEBARENA_HTML = {
    "sites": ["gitlab"],
    "task_id": 389,
    "require_login": True,
    "storage_state": "./.auth/gitlab_state.json",
    "start_url": "http://127.0.0.1:8023",
    "geolocation": None,
    "intent_template": "Post \"{{content}}\" for the merge request related to {{mr}} in {{repo}} project",
    "instantiation_dict": {"content": "lgtm", "mr": "octovisuals page", "repo": "primer/design"},
    "intent": "Post \"lgtm\" for the merge request related to octovisuals page in primer/design project",
    "require_reset": False,
    "eval": {
        "eval_types": ["url_match", "program_html"],
        "reference_answers": None,
        "reference_url": "http://127.0.0.1:8023/primer/design/-/merge_requests/450",
        "url_note": "GOLD in PRED",
        "program_html": [
            {
                "url": "last",
                "locator": "document.querySelector('[id=\"notes-list\"').lastElementChild.querySelector('.timeline-discussion-body').outerText",
                "required_contents": {"exact_match": "lgtm"},
            },
            {
                "url": "http://127.0.0.1:8023/primer/design/-/merge_requests/450",
                "locator": "",
                "required_contents": {"must_include": ["lgtm |OR| LGTM", "octovisuals"]},
            },
        ],
    },
    "intent_template_id": 348,
}


def record(**changes) -> dict:
    """A valid kit-style record with `changes` applied (a value of ... deletes the key)."""
    d = {
        "task_id": "shop/7",
        "intent": "What is the total of order 42?",
        "start_url": "http://127.0.0.1:8000/shop.html",
        "eval": {"eval_types": ["string_match"], "reference_answers": {"must_include": ["$25.99"]}},
    }
    for k, v in changes.items():
        if v is ...:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def with_eval(**ev) -> dict:
    return record(eval=ev)


def html_item(**item) -> dict:
    base = {"url": "last", "locator": "", "required_contents": {"must_include": ["ok"]}}
    base.update(item)
    return with_eval(eval_types=["program_html"], program_html=[base])


# ---------------------------------------------------------------- records


def test_round_trip_every_field():
    t = Task(
        task_id="shop/7",
        intent="Cancel order 42",
        start_url="http://127.0.0.1:8000/shop.html",
        eval={
            "eval_types": ["string_match", "url_match", "program_html"],
            "reference_answers": {"must_include": ["a |OR| b", "c"], "fuzzy_match": "N/A"},
            "reference_url": "http://127.0.0.1:8000/order.html?id=42",
            "program_html": [{"url": "last", "locator": "document.title", "required_contents": {"exact_match": "x"},
                              "prep_actions": ["document.querySelector('#more').click()"]}],
        },
        sites=("shopping", "map"),
        template="12",
        min_steps=3,
        allowed_origins=("http://127.0.0.1:8000/", "http://127.0.0.1:9000/"),
        meta={"require_login": True, "geolocation": None, "nested": {"a": [1, 2]}},
    )
    assert Task.from_dict(t.to_dict()) == t
    # ... also through JSON text, as a task file stores it
    assert Task.from_dict(json.loads(json.dumps(t.to_dict()))) == t


def test_round_trip_of_defaults_and_other_suites():
    t = Task(task_id="miniwob/click-button", intent="", start_url="miniwob/click-button.html", suite="miniwob")
    assert Task.from_dict(t.to_dict()) == t
    assert t.to_dict()["sites"] == [] and t.to_dict()["allowed_origins"] == []


def test_round_trip_of_a_webarena_record_is_stable():
    t = Task.from_dict(WEBARENA_HTML)
    assert Task.from_dict(t.to_dict()) == t
    assert Task.from_dict(t.to_dict()).to_dict() == t.to_dict()


def test_real_webarena_record_loads():
    t = Task.from_dict(WEBARENA_STRING)
    assert t.task_id == "0"
    assert t.intent == "What is the top-1 best-selling product in 2022"
    assert t.start_url == "http://127.0.0.1:7780/admin"
    assert t.suite == "json"
    assert t.sites == ("shopping_admin",)
    assert t.template == "279"  # from intent_template_id
    assert t.eval["reference_answers"] == {"exact_match": "Quest Lumaflex\u2122 Band"}
    assert t.eval["string_note"] == "" and t.eval["reference_url"] == ""
    # every key the kit has no field for is kept
    assert t.meta == {
        "require_login": True,
        "storage_state": "./.auth/shopping_admin_state.json",
        "geolocation": None,
        "intent_template": "What is the top-{{n}} best-selling product in {{year}}",
        "instantiation_dict": {"n": 1, "year": 2022},
        "require_reset": False,
    }
    assert "intent_template_id" not in t.meta and "task_id" not in t.meta


def test_webarena_url_and_program_html_record_loads():
    t = Task.from_dict(WEBARENA_HTML)
    assert t.task_id == "389" and t.template == "348" and t.sites == ("gitlab",)
    assert t.eval["eval_types"] == ["url_match", "program_html"]
    assert t.eval["url_note"] == "GOLD in PRED"
    assert t.eval["program_html"][1]["required_contents"]["must_include"] == ["lgtm |OR| LGTM", "octovisuals"]
    assert t.meta["storage_state"] == "./.auth/gitlab_state.json"


def test_template_zero_and_explicit_template_win():
    assert Task.from_dict(record(intent_template_id=0)).template == "0"
    assert Task.from_dict(record(template="t-a", intent_template_id=5)).template == "t-a"
    assert Task.from_dict(record()).template is None


def test_meta_field_and_extra_keys_merge():
    t = Task.from_dict(record(meta={"a": 1}, require_login=True))
    assert t.meta == {"a": 1, "require_login": True}


def test_record_does_not_alias_the_source_dict():
    d = copy.deepcopy(WEBARENA_STRING)
    t = Task.from_dict(d)
    d["eval"]["reference_answers"]["exact_match"] = "changed"
    d["instantiation_dict"]["n"] = 99
    assert t.eval["reference_answers"]["exact_match"] == "Quest Lumaflex\u2122 Band"
    assert t.meta["instantiation_dict"]["n"] == 1


def test_tasks_are_hashable_and_equal_tasks_hash_equal():
    a, b = Task.from_dict(WEBARENA_STRING), Task.from_dict(copy.deepcopy(WEBARENA_STRING))
    assert a == b and hash(a) == hash(b)
    results = {a: 1.0}
    assert results[b] == 1.0
    assert a != Task.from_dict(dict(WEBARENA_STRING, task_id=1))


def test_non_json_suites_skip_the_eval_block():
    t = Task.from_dict(record(suite="miniwob", eval=...))
    assert t.suite == "miniwob" and t.eval == {}


# ---------------------------------------------------------------- schema errors

# (record, words the message must contain). Every message names the task and the field.
SCHEMA_ERRORS = {
    "missing intent": (record(intent=...), ["'intent'", "missing"]),
    "intent not a string": (record(intent=["a"]), ["'intent'", "str"]),
    "start_url wrong type": (record(start_url=8000), ["'start_url'", "str"]),
    "missing start_url": (record(start_url=...), ["'start_url'", "missing"]),
    "suite wrong type": (record(suite=1), ["'suite'"]),
    "eval not an object": (record(eval=["string_match"]), ["'eval'"]),
    "missing eval": (record(eval=...), ["eval.eval_types"]),
    "eval_types empty": (with_eval(eval_types=[]), ["eval.eval_types", "non-empty"]),
    "eval_types a string": (with_eval(eval_types="string_match", reference_answers={"exact_match": "x"}),
                            ["eval.eval_types"]),
    "unknown eval type": (with_eval(eval_types=["string_match", "dom_match"],
                                    reference_answers={"exact_match": "x"}), ["eval.eval_types", "'dom_match'"]),
    "string_match without reference_answers": (with_eval(eval_types=["string_match"]), ["eval.reference_answers"]),
    "string_match with null reference_answers": (with_eval(eval_types=["string_match"], reference_answers=None),
                                                 ["eval.reference_answers"]),
    "string_match with empty reference_answers": (with_eval(eval_types=["string_match"], reference_answers={}),
                                                  ["eval.reference_answers"]),
    "unknown reference kind": (with_eval(eval_types=["string_match"], reference_answers={"contains": ["x"]}),
                               ["eval.reference_answers.contains"]),
    "must_include a number": (with_eval(eval_types=["string_match"], reference_answers={"must_include": 25}),
                              ["eval.reference_answers.must_include"]),
    "must_include a list with a number": (
        with_eval(eval_types=["string_match"], reference_answers={"must_include": ["$25.99", 3]}),
        ["eval.reference_answers.must_include"]),
    "must_include empty list": (with_eval(eval_types=["string_match"], reference_answers={"must_include": []}),
                                ["eval.reference_answers.must_include", "empty"]),
    "must_include empty string": (with_eval(eval_types=["string_match"], reference_answers={"must_include": [" "]}),
                                  ["eval.reference_answers.must_include", "empty"]),
    "fuzzy_match empty list": (with_eval(eval_types=["string_match"], reference_answers={"fuzzy_match": []}),
                               ["eval.reference_answers.fuzzy_match"]),
    "exact_match a list": (with_eval(eval_types=["string_match"], reference_answers={"exact_match": ["a"]}),
                           ["eval.reference_answers.exact_match", "a string"]),
    "url_match without reference_url": (with_eval(eval_types=["url_match"]), ["eval.reference_url"]),
    "url_match with empty reference_url": (with_eval(eval_types=["url_match"], reference_url=""),
                                           ["eval.reference_url"]),
    "program_html missing": (with_eval(eval_types=["program_html"]), ["eval.program_html"]),
    "program_html empty": (with_eval(eval_types=["program_html"], program_html=[]), ["eval.program_html"]),
    "program_html item not an object": (with_eval(eval_types=["program_html"], program_html=["last"]),
                                        ["eval.program_html[0]"]),
    "program_html item without url": (html_item(url=None), ["eval.program_html[0].url"]),
    "program_html locator not a string": (html_item(locator=["#x"]), ["eval.program_html[0].locator"]),
    "program_html without required_contents": (html_item(required_contents=None),
                                               ["eval.program_html[0].required_contents"]),
    "required_contents unknown key": (html_item(required_contents={"must_exclude": ["x"]}),
                                      ["eval.program_html[0].required_contents"]),
    "required_contents.exact_match not a string": (html_item(required_contents={"exact_match": 3}),
                                                   ["eval.program_html[0].required_contents.exact_match"]),
    "required_contents.must_include a string": (html_item(required_contents={"must_include": "ok"}),
                                                ["eval.program_html[0].required_contents.must_include"]),
    "required_contents.must_include empty": (html_item(required_contents={"must_include": []}),
                                             ["eval.program_html[0].required_contents.must_include"]),
    "prep_actions not a list": (html_item(prep_actions="document.body.click()"),
                                ["eval.program_html[0].prep_actions"]),
    "sites not strings": (record(sites=["shopping", 3]), ["'sites'"]),
    "sites a string": (record(sites="shopping"), ["'sites'"]),
    "min_steps a bool": (record(min_steps=True), ["'min_steps'"]),
    "min_steps negative": (record(min_steps=-1), ["'min_steps'"]),
    "min_steps a float": (record(min_steps=2.0), ["'min_steps'"]),
    "template id a bool": (record(intent_template_id=True), ["'intent_template_id'"]),
    "template a list": (record(template=["a"]), ["'template'"]),
    "allowed_origins not strings": (record(allowed_origins=[3]), ["'allowed_origins'"]),
    "meta not an object": (record(meta=[1]), ["'meta'"]),
}


@pytest.mark.parametrize("case", SCHEMA_ERRORS, ids=list(SCHEMA_ERRORS))
def test_schema_error_names_task_and_field(case):
    d, words = SCHEMA_ERRORS[case]
    with pytest.raises(TaskSchemaError) as err:
        Task.from_dict(d)
    msg = str(err.value)
    assert "task 'shop/7'" in msg, msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


def test_int_task_id_is_named_in_errors():
    with pytest.raises(TaskSchemaError, match=r"task 389: .*'intent'"):
        Task.from_dict({k: v for k, v in WEBARENA_HTML.items() if k != "intent"})


@pytest.mark.parametrize("tid", [True, False, 7.0, None, "", ["a"]], ids=repr)
def test_bad_task_ids_are_rejected(tid):
    with pytest.raises(TaskSchemaError, match="task_id"):
        Task.from_dict(record(task_id=tid))


def test_missing_task_id_names_where():
    with pytest.raises(TaskSchemaError, match=r"tasks\.json\[3\]: missing field 'task_id'"):
        Task.from_dict(record(task_id=...), where="tasks.json[3]")


def test_non_object_record():
    with pytest.raises(TaskSchemaError, match="expected a JSON object, got list"):
        Task.from_dict([record()])


def test_int_template_id_and_int_min_steps_are_accepted():
    t = Task.from_dict(record(intent_template_id=12, min_steps=0))
    assert t.template == "12" and t.min_steps == 0


# ---------------------------------------------------------------- task files


def write(tmp_path, name: str, text: str):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_load_json_list(tmp_path):
    p = write(tmp_path, "tasks.json", json.dumps([WEBARENA_STRING, WEBARENA_HTML, record()]))
    tasks = load_task_file(p)
    assert [t.task_id for t in tasks] == ["0", "389", "shop/7"]
    assert tasks[0] == Task.from_dict(WEBARENA_STRING)


def test_load_single_object(tmp_path):
    p = write(tmp_path, "one.json", json.dumps(WEBARENA_HTML, indent=2))
    [t] = load_task_file(p)
    assert t.task_id == "389" and t.eval["url_note"] == "GOLD in PRED"


def test_load_jsonl_with_blank_lines(tmp_path):
    lines = [json.dumps(WEBARENA_STRING), "", json.dumps(record()), "   "]
    p = write(tmp_path, "tasks.jsonl", "\n".join(lines) + "\n")
    assert [t.task_id for t in load_task_file(p)] == ["0", "shop/7"]


def test_corrupt_json_names_file_and_line(tmp_path):
    text = '[\n  {"task_id": 1,\n   "intent": "x",,\n   "start_url": "u"}\n]\n'
    p = write(tmp_path, "broken.json", text)
    with pytest.raises(TaskSchemaError) as err:
        load_task_file(p)
    assert f"{p}:3:" in str(err.value) and "not valid JSON" in str(err.value)


def test_jsonl_with_one_bad_line_names_the_line(tmp_path):
    lines = [json.dumps(record(task_id="a")), "", '{"task_id": "b", "intent": ', json.dumps(record(task_id="c"))]
    p = write(tmp_path, "tasks.jsonl", "\n".join(lines))
    with pytest.raises(TaskSchemaError) as err:
        load_task_file(p)
    assert str(err.value).startswith(f"{p}:3: not valid JSON")


def test_jsonl_schema_error_names_line_task_and_field(tmp_path):
    lines = [json.dumps(record(task_id="a")), "", json.dumps(record(task_id="b", start_url=5))]
    p = write(tmp_path, "tasks.jsonl", "\n".join(lines))
    with pytest.raises(TaskSchemaError) as err:
        load_task_file(p)
    assert str(err.value).startswith(f"{p}:3: task 'b': field 'start_url'")


def test_json_schema_error_names_index_task_and_field(tmp_path):
    bad = with_eval(eval_types=["program_html"], program_html=[{"url": "last", "locator": ""}])
    p = write(tmp_path, "tasks.json", json.dumps([record(task_id="a"), dict(bad, task_id=17)]))
    with pytest.raises(TaskSchemaError) as err:
        load_task_file(p)
    assert str(err.value).startswith(f"{p}[1]: task 17: field 'eval.program_html[0].required_contents'")


def test_duplicate_task_ids(tmp_path):
    # 7 and "7" are the same id once read (ids are strings)
    p = write(tmp_path, "dups.json", json.dumps([record(task_id=7), record(task_id="x"), record(task_id="7")]))
    with pytest.raises(TaskSchemaError, match=r"task id '7' appears more than once") as err:
        load_task_file(p)
    assert str(p) in str(err.value)


def test_missing_file(tmp_path):
    p = tmp_path / "nope.json"
    with pytest.raises(TaskSchemaError, match="cannot read task file") as err:
        load_task_file(p)
    assert str(p) in str(err.value)


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(TaskSchemaError, match="cannot read task file"):
        load_task_file(tmp_path)


def test_non_utf8_file(tmp_path):
    p = tmp_path / "latin1.json"
    p.write_bytes('[{"task_id": 1, "intent": "caf\u00e9"}]'.encode("latin-1"))
    with pytest.raises(TaskSchemaError, match="not UTF-8") as err:
        load_task_file(p)
    assert str(p) in str(err.value)


def test_load_tasks_reads_files_and_filters_by_id(tmp_path):
    p = write(tmp_path, "tasks.json", json.dumps([WEBARENA_STRING, WEBARENA_HTML]))
    assert [t.task_id for t in load_tasks(str(p), names=["389"])] == ["389"]
    with pytest.raises(ValueError, match="no task"):
        load_tasks(str(p), names=["5"])


# ---------------------------------------------------------------- verdict


def test_verdict():
    ok = Verdict(1.0, [{"type": "url_match", "passed": True, "reason": "r"}])
    bad = Verdict(0.0)
    assert ok.success and not bad.success
    assert ok.to_dict() == {"reward": 1.0, "success": True, "checks": ok.checks}
    assert json.loads(json.dumps(bad.to_dict())) == {"reward": 0.0, "success": False, "checks": []}


def test_select_tasks_samples_by_its_seed_and_refuses_an_empty_or_bad_selection():
    whole = load_tasks("arena", split="test")
    a = select_tasks("arena", split="test", limit=5, seed="0/eval")
    assert len(a) == 5 and set(a) <= set(whole)
    assert select_tasks("arena", split="test", limit=5, seed="0/eval") == a  # the same seed, the same tasks
    assert select_tasks("arena", split="test", limit=5, seed="0/train") != a  # salts draw independently
    assert select_tasks("arena", split="test", limit=10_000) == whole  # a limit above the size keeps all, in order
    assert [t.task_id for t in select_tasks("miniwob", names=["focus-text", "click-button"])] == [
        "miniwob/focus-text", "miniwob/click-button"]  # MiniWoB++ keeps the order asked for
    with pytest.raises(ValueError, match="no arena tasks selected"):
        select_tasks("arena", split="test", names=["no-such-template"])
    with pytest.raises(ValueError, match="limit must be at least 1"):
        select_tasks("arena", split="test", limit=0)
