"""The precise prefix router and the replica ledger behind it: the router's holders are what
each engine says it caches (its block events), the sent-history only fills the gap since the
last report and stands in for replicas that do not report."""

from __future__ import annotations

import pytest
from precise_router_support import BLOCK, REPLICAS, Replica, chat, router, text_of

from serving.local.engine.simulation import PrefixCache, chat_prompt, tokenize
from serving.router.cache_report import REPORT_KEY, CacheLedger, EngineView
from serving.router.prompts import DEFAULT_CHUNK_CHARS, chunk_hashes


def test_the_report_lists_what_the_engine_holds_and_drops_what_it_evicts() -> None:
    replica = Replica(capacity_prompts=1.5)  # one prompt fits, not two
    replica.serve(chat(0, "first"), now=1.0)
    held = set(replica.stats(now=100.0)[REPORT_KEY]["held"])
    prompt0 = chunk_hashes(text_of(chat(0, "x")), DEFAULT_CHUNK_CHARS, 256)[:8]
    assert set(prompt0) <= held
    # Prompt 1 evicts prompt 0's blocks, least recently used (its first ones) first: its leading
    # chunk is no longer held, so no prefix of it matches.
    replica.serve(chat(1, "second"), now=2.0)
    held = set(replica.stats(now=100.0)[REPORT_KEY]["held"])
    assert prompt0[0] not in held
    prompt1 = chunk_hashes(text_of(chat(1, "x")), DEFAULT_CHUNK_CHARS, 256)[:8]
    assert set(prompt1) <= held


def test_a_cleared_cache_reports_nothing_even_for_prompts_just_sent() -> None:
    replica = Replica()
    replica.serve(chat(0, "first"), now=1.0)
    epoch = replica.stats(now=1.5)[REPORT_KEY]["epoch"]
    replica.cache.clear()
    report = replica.stats(now=1.6)[REPORT_KEY]
    assert report["held"] == []
    assert report["epoch"] != epoch


def test_a_prompt_is_pending_until_the_engine_stores_it() -> None:
    """Arrived but not yet prefilled (queued in the engine): held for the router, so the
    prompt's next requests follow it; once stored and evicted, no longer."""
    ledger = CacheLedger(BLOCK, pending_s=30.0)
    body = chat(0, "q")
    ledger.served(text_of(body), tokenize(chat_prompt(body["messages"])), now=10.0)
    assert ledger.held_chunks(now=11.0)
    assert not ledger.held_chunks(now=41.0)
    cache = PrefixCache(100_000, BLOCK)
    cache.listeners.append(ledger)
    cache.admit(tokenize(chat_prompt(body["messages"])))
    cache.clear()
    assert not ledger.held_chunks(now=11.0)


def test_a_prompt_served_from_the_cache_is_not_held_once_the_engine_evicts_it() -> None:
    """A request that hits the cache makes the engine store nothing (no event for blocks it
    holds already): when those blocks are evicted soon after, its prompt is not held, pending
    or not (it was reported held for the whole pending time: a false hit for the router)."""
    import time

    replica = Replica(capacity_prompts=1.5)  # one prompt fits, not two
    # On the wall clock, as the engine's events are: each request arrives, then is served.
    replica.serve(chat(0, "first"), now=time.time())
    assert replica.serve(chat(0, "again"), now=time.time()) > 0
    replica.serve(chat(1, "other"), now=time.time())
    held = set(replica.stats(now=time.time())[REPORT_KEY]["held"])
    prompt0 = chunk_hashes(text_of(chat(0, "x")), DEFAULT_CHUNK_CHARS, 256)[:8]
    assert prompt0[0] not in held
    assert set(chunk_hashes(text_of(chat(1, "x")), DEFAULT_CHUNK_CHARS, 256)[:8]) <= held


def test_blocks_under_an_unknown_parent_are_left_out() -> None:
    """A lost store event: what follows it cannot be named, so it is not claimed."""
    ledger = CacheLedger(BLOCK)
    ledger.stored(["b2"], "never-seen", ["t"] * BLOCK)
    assert ledger.unknown_parents == 1
    assert ledger.report()[REPORT_KEY]["blocks"] == 0


def test_the_ledger_stays_bounded() -> None:
    ledger = CacheLedger(BLOCK, max_anchors=50, max_report=10)
    cache = PrefixCache(10_000_000, BLOCK)
    cache.listeners.append(ledger)
    for system in range(20):
        body = chat(system, "q")
        tokens = tokenize(chat_prompt(body["messages"]))
        ledger.served(text_of(body), tokens, now=1.0)
        cache.admit(tokens)
    assert len(ledger.held_chunks(now=100.0)) == 10


def test_the_router_stops_treating_a_cleared_replica_as_a_holder_at_its_next_report() -> None:
    replicas = {name: Replica() for name in REPLICAS}
    chosen = router()
    first = chosen.pick(REPLICAS, text_of(chat(0, "a")), now=0.0, wall=1.0)
    replicas[first].serve(chat(0, "a"), now=1.0)
    for name, replica in replicas.items():
        chosen.observe(name, replica.stats(now=3.0))
    assert chosen.pick(REPLICAS, text_of(chat(0, "b")), now=0.1, wall=3.1) == first
    replicas[first].cache.clear()  # reset_prefix_cache
    for name, replica in replicas.items():
        chosen.observe(name, replica.stats(now=5.0))
    holders = chosen._longest_match(
        chunk_hashes(text_of(chat(0, "c")), 256, 256), dict.fromkeys(REPLICAS, 0)
    )
    assert holders == []


# 128: vLLM's CPU build's block, longer than the prompt's first text chunk (about 40 tokens).
@pytest.mark.parametrize("block", [BLOCK, 128])
def test_a_new_router_knows_the_holders_from_the_reports_alone(block: int) -> None:
    """A router restart loses nothing the engines can tell again."""
    replicas = {name: Replica(block=block) for name in REPLICAS}
    for system, name in enumerate(REPLICAS):
        replicas[name].serve(chat(system, "warm"), now=1.0)
    fresh = router()
    for name, replica in replicas.items():
        fresh.observe(name, replica.stats(now=2.0))
    for system, name in enumerate(REPLICAS):
        assert fresh.pick(REPLICAS, text_of(chat(system, "again")), now=0.0, wall=2.5) == name


def test_prompts_sent_since_the_last_report_count_until_the_next() -> None:
    chosen = router()
    for name in REPLICAS:
        chosen.observe(name, Replica().stats(now=1.0))
    first = chosen.pick(REPLICAS, text_of(chat(0, "a")), now=0.0, wall=2.0)
    assert chosen.pick(REPLICAS, text_of(chat(0, "b")), now=0.1, wall=2.1) == first
    # The next report of that replica (made after the send) does not list it: no longer held.
    for name in REPLICAS:
        chosen.observe(name, Replica().stats(now=3.0))
    assert (
        chosen._longest_match(
            chunk_hashes(text_of(chat(0, "c")), 256, 256), dict.fromkeys(REPLICAS, 0)
        )
        == []
    )


def test_replicas_without_reports_fall_back_to_the_sent_history() -> None:
    chosen = router()
    first = chosen.pick(REPLICAS, text_of(chat(0, "a")), now=0.0, wall=1.0)
    chosen.observe(first, {"other": 1})  # stats without servestack's report
    assert chosen.pick(REPLICAS, text_of(chat(0, "b")), now=5.0, wall=60.0) == first


def test_a_report_of_another_chunk_size_is_ignored() -> None:
    report = Replica().stats(now=1.0)
    assert EngineView.parse(report, DEFAULT_CHUNK_CHARS) is not None
    assert EngineView.parse(report, 128) is None
    assert EngineView.parse({REPORT_KEY: {"v": 99}}, DEFAULT_CHUNK_CHARS) is None


def test_the_text_chunk_approximation_predicts_the_engines_hits() -> None:
    """The router matches text chunks; the engine caches token blocks. On shared system
    prompts with distinct questions, the prefix the router predicts as cached (its longest
    held run of chunks, in characters) is within 5% of the prompt of what the engine hits."""
    replica = Replica()
    errors = []
    for n in range(40):
        body = chat(n % 4, f"question {n} " + "extra words " * (n % 7))
        text = text_of(body)
        hashes = chunk_hashes(text, DEFAULT_CHUNK_CHARS, 256)
        held = set(replica.stats(now=1000.0 + n)[REPORT_KEY]["held"])
        run = next((i for i, h in enumerate(hashes) if h not in held), len(hashes))
        predicted = run * DEFAULT_CHUNK_CHARS / len(text)
        tokens = tokenize(chat_prompt(body["messages"]))
        actual = replica.serve(body, now=float(n)) / len(tokens)
        if n >= 4:  # each prompt's first request is a miss on both sides
            errors.append(abs(predicted - actual))
    assert max(errors) < 0.05, errors
