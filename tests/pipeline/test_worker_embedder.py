"""Which workers hold the embedder: those of the queues that embed load it once, in the worker's main process
before the prefork pool starts (the children inherit the weights); a summarise worker never loads it."""

from __future__ import annotations

import time

import pytest

from tests.conftest import WorkerProcess, service_env

LOADED = "embedder: local MiniLM loaded"


@pytest.mark.django_db(transaction=True)
def test_only_embedding_queues_load_the_embedder_and_prefork_loads_it_before_the_pool(redis_url):
    env = service_env(redis_url)
    embed = WorkerProcess("embed", env, pool="prefork", name="embed-mem")
    summarise = WorkerProcess("summarise", env, pool="prefork", name="summarise-mem")
    try:
        log = embed.log()
        assert LOADED in log and log.index(LOADED) < log.index("ready.")  # in the main process, before the pool
        time.sleep(5)  # a child's warm-up would load it now, after ready
        assert LOADED not in summarise.log()
        assert embed.log().count(LOADED) == 1  # the child inherited it
    finally:
        embed.stop()
        summarise.stop()
