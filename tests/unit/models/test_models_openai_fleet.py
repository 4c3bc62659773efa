"""The openai backend over a fleet of servers: the choice of server, cool-off, and real local
servers on 127.0.0.1 of which one dies mid-run or keeps failing.
"""

from __future__ import annotations

import socket
import threading
from contextlib import ExitStack

import pytest

from memprobe_core.models import ModelError, load
from memprobe_core.models.fake import FakeGenerator
from memprobe_core.models.openai import Fleet, OpenAIGenerator, parse_base_urls
from tests.helpers.openai_server import serve


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fleet(n: int = 3, **kwargs) -> Fleet:
    kwargs.setdefault("max_outstanding", 4)
    return Fleet([f"http://s{i}" for i in range(n)], **kwargs)


def urls(servers) -> list[str]:
    return [s.url for s in servers]


# --- the choice of server ----------------------------------------------------------------------
def test_least_outstanding_first_and_round_robin_between_equals():
    f = fleet(3)
    first = [f.acquire() for _ in range(4)]
    assert urls(first) == ["http://s0", "http://s1", "http://s2", "http://s0"]
    f.release(first[2], ok=True)  # s2 now has none in flight; round-robin alone would say s1
    assert f.acquire().url == "http://s2"


def test_sequential_requests_spread_evenly():
    f = fleet(3)
    seen = []
    for _ in range(9):
        server = f.acquire()
        seen.append(server.url)
        f.release(server, ok=True)
    assert [seen.count(f"http://s{i}") for i in range(3)] == [3, 3, 3]
    assert [s["answered"] for s in f.stats()] == [3, 3, 3]


def test_max_outstanding_makes_acquire_wait_for_a_release():
    f = fleet(1, max_outstanding=1)
    held = f.acquire()
    got = threading.Event()
    waiter = threading.Thread(target=lambda: (f.acquire(), got.set()))
    waiter.start()
    assert not got.wait(0.3), "a second request went to a server already at max_outstanding"
    f.release(held, ok=True)
    waiter.join(timeout=5)
    assert got.is_set()


def test_down_server_is_skipped_until_its_cooloff_ends():
    clock = Clock()
    f = fleet(2, cooloff_s=30, clock=clock)
    s0 = f.servers[0]
    f.mark_down(s0, "refused")
    assert urls(f.acquire() for _ in range(3)) == ["http://s1"] * 3
    assert f.stats()[0]["down"] and f.stats()[0]["failures"] == 1
    clock.now = 31.0
    assert f.acquire().url == "http://s0"  # back, and it has the fewest in flight
    assert not f.stats()[0]["down"]


def test_when_all_are_down_they_are_still_tried_and_exclude_ends_the_search():
    f = fleet(2, cooloff_s=30, clock=Clock())
    for server in f.servers:
        f.mark_down(server, "refused")
    assert f.acquire() is not None  # one may be back: a request fails only after trying it
    assert f.acquire(exclude=["http://s0", "http://s1"]) is None


def test_an_answer_ends_the_cooloff():
    f = fleet(2, cooloff_s=30, clock=Clock())
    f.mark_down(f.servers[0], "refused")
    server = f.acquire(exclude=["http://s1"])
    f.release(server, ok=True)
    assert not f.stats()[0]["down"]


def test_base_urls_from_a_list_or_a_comma_separated_string():
    expected = ["http://a:1/v1", "http://b:2/v1"]
    assert parse_base_urls(" http://a:1 , http://b:2/v1/ ") == expected
    assert parse_base_urls(["http://a:1/v1", "http://b:2"]) == expected
    with pytest.raises(ModelError, match="lists http://a:1/v1 twice"):
        parse_base_urls("http://a:1,http://a:1/v1")
    with pytest.raises(ModelError, match="holds no URL"):
        parse_base_urls(" , ")
    with pytest.raises(ModelError, match="'ftp://a' is not an http"):
        parse_base_urls(["http://a:1", "ftp://a"])


# --- real servers --------------------------------------------------------------------------------
KEY_ENV = "MEMPROBE_TEST_OPENAI_KEY"


def client(base_url, **kwargs) -> OpenAIGenerator:
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("timeout_s", 10)
    return OpenAIGenerator("m", base_url=base_url, api_key_env=KEY_ENV, **kwargs)


@pytest.fixture
def echo():
    return FakeGenerator("echo")


def _serve_all(stack: ExitStack, echo, behaviours: list[dict]) -> list:
    return [stack.enter_context(serve(echo, "m", **b)) for b in behaviours]


def test_load_spreads_over_the_servers_given_as_one_string(echo):
    with ExitStack() as stack:
        servers = _serve_all(stack, echo, [{}, {}, {}])
        gen = load(
            "openai:m",
            base_url=",".join(s.base_url for s in servers),
            max_concurrency=1,
            cooloff_s=5,
        )
        assert gen.base_urls == [s.base_url for s in servers]
        assert gen.fleet.cooloff_s == 5
        for i in range(9):  # one at a time: round-robin between idle servers
            assert gen.generate([f"request {i}"])[0][0].text == f"request {i}"
        assert [s.answered for s in servers] == [3, 3, 3]
        assert [s["answered"] for s in gen.fleet.stats()] == [3, 3, 3]


def test_a_server_killed_mid_run_loses_and_duplicates_nothing(echo):
    requests = [f"request number {i}" for i in range(60)]
    with ExitStack() as stack:
        # stall: requests overlap, so some are in flight on the server when it dies
        servers = _serve_all(
            stack, echo, [{"stall_s": 0.01}, {"stall_s": 0.01, "die_after": 4}, {"stall_s": 0.01}]
        )
        gen = client([s.base_url for s in servers], max_concurrency=2, max_retries=1)
        out = gen.generate(requests, max_new_tokens=8)
        answered = [s.answered for s in servers]
    assert [row[0].text for row in out] == requests  # every request answered, in order
    assert sum(answered) == len(requests), f"answers per server {answered}: lost or duplicated"
    assert servers[1].dead and answered[1] >= 4
    assert min(answered[0], answered[2]) >= 10, f"load not spread: {answered}"
    stats = gen.fleet.stats()
    assert stats[1]["down"] and stats[1]["failures"] >= 1
    assert [s["answered"] for s in stats] == answered


def test_a_server_failing_past_its_retries_is_set_aside_then_tried_again(echo):
    clock = Clock()
    with ExitStack() as stack:
        bad, good = _serve_all(stack, echo, [{"fail_first": [503, 503]}, {}])
        gen = client([bad.base_url, good.base_url], max_concurrency=1, max_retries=1)
        gen.fleet.clock = clock
        out = gen.generate([f"r{i}" for i in range(10)])
        assert [row[0].text for row in out] == [f"r{i}" for i in range(10)]
        assert len(bad.hits) == 2, "the failing server got requests during its cool-off"
        assert (bad.answered, good.answered) == (0, 10)
        clock.now = gen.fleet.cooloff_s + 1  # cool-off over: the (recovered) server is used again
        gen.generate([f"s{i}" for i in range(10)])
        assert bad.answered > 0
        assert not gen.fleet.stats()[0]["down"]


def test_every_server_failing_is_one_error_naming_the_fleet():
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    gen = client([f"http://127.0.0.1:{p}/v1" for p in ports])
    with pytest.raises(
        ModelError, match="all 2 servers failed this request; the last said: cannot connect"
    ):
        gen.generate(["x"])


def test_a_client_error_is_not_retried_on_other_servers(echo):
    with ExitStack() as stack:
        servers = _serve_all(stack, echo, [{"fail_first": [400]}, {"fail_first": [400]}])
        with pytest.raises(ModelError, match="HTTP 400"):
            client([s.base_url for s in servers]).generate(["x"])
        assert sum(len(s.hits) for s in servers) == 1  # a bad request is bad on every server
        assert not any(s["down"] for s in client([s.base_url for s in servers]).fleet.stats())
