"""Derived seeds are the same in every process and keep the values runs were recorded with."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from webr1_kit.seeds import derive_seed


def test_derived_seeds_keep_each_call_sites_width():
    def blake(parts, size):
        return int.from_bytes(hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=size).digest(), "little")

    parts = (3, "miniwob/click-button", 2, 5)
    assert derive_seed(*parts) == blake(parts, 8) & (2**63 - 1)  # a turn's sampling seed
    assert derive_seed(*parts, bits=31) == blake(parts, 8) & (2**31 - 1)  # an episode's sampling seed
    assert derive_seed(*parts, bits=32, digest_size=4) == blake(parts, 4)  # a training step's rollout seed
    assert derive_seed(1, 2) != derive_seed(2, 1) and derive_seed("1/2") == derive_seed(1, 2)
    with pytest.raises(ValueError, match="bits must be between 1 and 32"):
        derive_seed(1, bits=40, digest_size=4)


def test_derived_seeds_do_not_depend_on_the_process():
    code = "from webr1_kit.seeds import derive_seed; print(derive_seed(0, 'a', 1))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": str(s)}).stdout for s in (1, 2)}
    assert outs == {f"{derive_seed(0, 'a', 1)}\n"}


PLAY = """
import asyncio, json
from webr1_kit.experts import Expert
from webr1_kit.prompt import PromptConfig, messages
from webr1_kit.rollout import run_episodes
from webr1_kit.sites import get_arena
from webr1_kit.tasks import load_tasks, miniwob

tasks = load_tasks("arena", split="train")[:1] + load_tasks("miniwob", names=["click-button"])
res = asyncio.run(run_episodes(Expert(), tasks, seed=3))
read = []
for t in res.trajectories:
    assert t.reward == 1.0, (t.task_id, t.status)
    for k, turn in enumerate(t.turns):  # the prompt of every turn, with compressed history
        read.append(messages(t.intent, t.turns[:k], turn.observation, PromptConfig()))
    read.append(t.final_observation["url"])
print(json.dumps({"read": read, "served": sorted(get_arena(0).urls.values()) + [miniwob.server().url]}))
"""


@pytest.mark.slow
def test_two_processes_demonstrations_read_alike_though_their_sites_listen_on_other_ports():
    """The bundled sites listen on free ports, which differ from process to process. The
    agent reads them under fixed names (`observation.show_origin_as`), so the prompts of
    the same expert episodes, and so BC's training tokens, are the same in every process."""
    runs = [json.loads(subprocess.run([sys.executable, "-c", PLAY], capture_output=True, text=True, check=True,
                                      timeout=300).stdout.strip().splitlines()[-1]) for _ in range(2)]
    assert runs[0]["served"] != runs[1]["served"]  # other ports: what makes this test mean something
    assert runs[0]["read"] == runs[1]["read"]
    text = json.dumps(runs[0]["read"])
    assert "127.0.0.1" not in text and "http://shop.arena/" in text and "http://miniwob.local/" in text


def test_urls_of_registered_origins_are_read_by_their_names_and_others_as_they_are():
    from webr1_kit.observation import show_origin_as, shown_url

    show_origin_as("http://127.0.0.9:4321", "http://site.test")
    assert shown_url("http://127.0.0.9:4321/a/b?q=1") == "http://site.test/a/b?q=1"
    assert shown_url("http://127.0.0.9:4321") == "http://site.test"
    assert shown_url("http://127.0.0.9:43210/a") == "http://127.0.0.9:43210/a"  # another port
    assert shown_url("http://example.com/") == "http://example.com/"
