"""Tests for the batch calls LLMClient.chat_many / chat_json_many and the helpers that use them.

Everything runs against :class:`chunkwise.llm.fake_server.FakeChatServer` on 127.0.0.1 (a
thread per connection, a small fixed latency per request); the server counts the requests
it receives and the most it served at once, so "cache hits are never sent" and "at most
max_concurrency in flight" are checked on the server side. No test measures speed.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chunkwise.llm import LLMCache, LLMClient, LLMJSONError, LLMRequestError, LLMResponse, LLMResult
from chunkwise.llm.batch import chat_json_many, chat_many
from chunkwise.llm.fake_server import FAIL_MARKER, SLOW_MARKER, FakeChatServer
from fakes import FakeChatModel


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("CHUNKWISE_LLM_BASE_URL", "CHUNKWISE_LLM_MODEL", "CHUNKWISE_LLM_MAX_CONCURRENCY",
                 "CHUNKWISE_LLM_CACHE_MODE", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "default-cache"))


@pytest.fixture
def server() -> Any:
    # 0.2 s per request: wide enough that concurrent workers overlap even on a loaded machine
    with FakeChatServer(latency_s=0.2, slow_latency_s=3.0) as fake:
        yield fake


def make(server: FakeChatServer, tmp_path: Path, **kw: Any) -> LLMClient:
    kw.setdefault("base_url", server.base_url)
    kw.setdefault("model", "fake-model")
    kw.setdefault("timeout", 5.0)
    kw.setdefault("backoff", 0.001)
    kw.setdefault("cache", tmp_path / "llm.sqlite")
    return LLMClient(**kw)


def test_results_in_input_order_and_concurrency_bounded(server: FakeChatServer, tmp_path: Path) -> None:
    client = make(server, tmp_path)
    prompts = [f"q{i}" for i in range(12)]
    results = client.chat_many(prompts, max_concurrency=3, max_tokens=8)
    assert [r.index for r in results] == list(range(12))
    assert [r.get().text for r in results] == [f"echo: q{i}" for i in range(12)]
    assert all(isinstance(r.response, LLMResponse) and not r.response.cached for r in results)
    assert server.chat_count == 12
    # bounded, and actually concurrent (12 requests of 200 ms with 3 workers overlap)
    assert 2 <= server.max_in_flight <= 3
    assert all(body["max_tokens"] == 8 for body in server.requests)
    stats = client.stats()
    assert (stats["calls"], stats["cache_hits"], stats["requests"]) == (12, 0, 12)


def test_concurrency_one_is_sequential_in_input_order(server: FakeChatServer, tmp_path: Path) -> None:
    client = make(server, tmp_path, max_concurrency=1)
    client.chat_many(["a", "b", "c", "d"])
    assert server.max_in_flight == 1
    assert [b["messages"][-1]["content"] for b in server.requests] == ["a", "b", "c", "d"]


def test_cache_hits_are_never_sent(server: FakeChatServer, tmp_path: Path) -> None:
    client = make(server, tmp_path)
    client.chat_many(["a", "c"])
    server.reset()
    results = client.chat_many(["a", "b", "c", "d"], max_concurrency=4)
    sent = sorted(b["messages"][-1]["content"] for b in server.requests)
    assert sent == ["b", "d"]  # a and c came from the cache
    assert [r.get().cached for r in results] == [True, False, True, False]
    assert [r.get().text for r in results] == ["echo: a", "echo: b", "echo: c", "echo: d"]
    # a third run sends nothing
    server.reset()
    again = client.chat_many(["a", "b", "c", "d"])
    assert server.chat_count == 0 and all(r.get().cached for r in again)


def test_identical_requests_in_one_batch_are_sent_once(server: FakeChatServer, tmp_path: Path) -> None:
    client = make(server, tmp_path)
    results = client.chat_many(["x", "y", "x", "x"], max_concurrency=4)
    assert server.chat_count == 2
    assert [r.get().text for r in results] == ["echo: x", "echo: y", "echo: x", "echo: x"]
    assert [r.get().cached for r in results] == [False, False, True, True]
    assert client.stats()["cache_hits"] == 2
    # without a cache each is sent, as a loop of chat() calls would
    server.reset()
    make(server, tmp_path, cache=False).chat_many(["x", "x"])
    assert server.chat_count == 2


def test_errors_are_held_per_item_and_never_zero_filled(server: FakeChatServer, tmp_path: Path) -> None:
    client = make(server, tmp_path)
    results = client.chat_many(["ok1", f"bad {FAIL_MARKER}", "ok2"], max_concurrency=2)
    assert [r.ok for r in results] == [True, False, True]
    bad = results[1]
    assert bad.output is None and bad.response is None
    assert isinstance(bad.error, LLMRequestError) and bad.error.status_code == 400
    with pytest.raises(LLMRequestError, match="non-retryable"):
        bad.get()
    assert results[2].get().text == "echo: ok2"


def test_errors_raise_after_the_others_finish(server: FakeChatServer, tmp_path: Path) -> None:
    client = make(server, tmp_path)
    with pytest.raises(LLMRequestError) as info:
        client.chat_many([f"first {FAIL_MARKER}", "fine", f"second {FAIL_MARKER}"], errors="raise")
    assert "400" in str(info.value)
    assert "first" in str(info.value) and "second" not in str(info.value)  # the first in input order
    # the item that succeeded was sent and cached before the error was raised
    server.reset()
    assert client.chat_many(["fine"])[0].get().cached and server.chat_count == 0


def test_deadline_is_per_request_under_threads(tmp_path: Path) -> None:
    """A request that overruns its deadline fails alone; the others, sent beside it, succeed."""
    with FakeChatServer(latency_s=0.05, slow_latency_s=15.0) as server:
        client = make(server, tmp_path, timeout=5.0, max_retries=0)
        results = client.chat_many(["a", f"b {SLOW_MARKER}", "c", "d", "e"], max_concurrency=5)
    assert [r.ok for r in results] == [True, False, True, True, True]
    err = results[1].error
    assert isinstance(err, LLMRequestError) and "timeout=5" in str(err)


def test_per_item_overrides_and_validation(server: FakeChatServer, tmp_path: Path) -> None:
    client = make(server, tmp_path, max_concurrency=1)
    results = client.chat_many(
        ["plain", {"messages": [{"role": "user", "content": "capped"}], "max_tokens": 3, "top_p": 0.5}],
        max_tokens=50,
    )
    assert [r.get().text for r in results] == ["echo: plain", "echo: capped"]
    assert server.requests[0]["max_tokens"] == 50
    assert server.requests[1]["max_tokens"] == 3 and server.requests[1]["top_p"] == 0.5
    server.reset()
    with pytest.raises(ValueError, match=r"requests\[1\]: max_tokens"):
        client.chat_many(["fine", {"messages": "x", "max_tokens": 0}])
    with pytest.raises(TypeError, match=r"requests\[0\] is a single message"):
        client.chat_many([{"role": "user", "content": "x"}])
    with pytest.raises(TypeError, match=r"requests\[0\] is a mapping without 'messages'"):
        client.chat_many([{"content": "x"}])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_concurrency must be an int >= 1"):
            client.chat_many(["x"], max_concurrency=bad)
    with pytest.raises(ValueError, match="errors must be"):
        client.chat_many(["x"], errors="ignore")
    assert server.chat_count == 0  # nothing was sent for a malformed batch
    assert client.chat_many([]) == []


def test_client_max_concurrency_from_argument_and_environment(
    server: FakeChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert make(server, tmp_path).max_concurrency == 4
    monkeypatch.setenv("CHUNKWISE_LLM_MAX_CONCURRENCY", "2")
    client = make(server, tmp_path)
    assert client.max_concurrency == 2
    client.chat_many([f"p{i}" for i in range(8)])
    assert server.max_in_flight == 2
    assert make(server, tmp_path, max_concurrency=6).max_concurrency == 6
    monkeypatch.setenv("CHUNKWISE_LLM_MAX_CONCURRENCY", "many")
    with pytest.raises(ValueError, match=r"\$CHUNKWISE_LLM_MAX_CONCURRENCY must be an int >= 1.*'many'"):
        make(server, tmp_path)
    monkeypatch.setenv("CHUNKWISE_LLM_MAX_CONCURRENCY", "0")
    with pytest.raises(ValueError, match="CHUNKWISE_LLM_MAX_CONCURRENCY must be an int >= 1"):
        make(server, tmp_path)


def test_progress_bar_counts_every_item(server: FakeChatServer, tmp_path: Path, capsys: Any) -> None:
    client = make(server, tmp_path)
    client.chat_many(["a"])
    client.chat_many(["a", "b", "c"], progress="answers")
    err = capsys.readouterr().err
    assert "answers" in err and "3/3" in err
    with pytest.raises(TypeError, match="progress must be"):
        client.chat_many(["a"], progress=1)


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _json_reply(body: dict[str, Any]) -> str:
    last = body["messages"][-1]["content"]
    if last.startswith("num "):
        return json.dumps({"n": int(last.split()[1])})
    if body["messages"][0]["content"].startswith("never"):
        return "no json here"
    if last.startswith("Your previous reply could not be used"):  # a repair turn
        return json.dumps({"n": len(body["messages"])})
    return json.dumps({"n": "not an int"})


def test_chat_json_many_matches_chat_json(tmp_path: Path) -> None:
    with FakeChatServer(latency_s=0.02, reply=_json_reply) as server:
        client = make(server, tmp_path)
        results = client.chat_json_many(["num 1", "num 2", "wrong", "never", "num 5"], SCHEMA,
                                        max_repairs=1, max_concurrency=3)
        assert [r.value for r in results[:3]] == [{"n": 1}, {"n": 2}, {"n": 3}]  # 'wrong' repaired once
        assert results[4].get()[0] == {"n": 5}
        assert isinstance(results[3].error, LLMJSONError) and results[3].value is None
        assert results[3].response is not None and results[3].response.text == "no json here"
        sent = server.chat_count
        assert sent == 5 + 2  # two repairs: 'wrong' and 'never'
        # the same exchange through chat_json replays entirely from the cache
        server.reset()
        value, resp = client.chat_json("wrong", SCHEMA, max_repairs=1)
        assert value == {"n": 3} and resp.cached and server.chat_count == 0
        # and the batch replays all turns (repairs included) without a request
        again = client.chat_json_many(["num 1", "num 2", "wrong", "never", "num 5"], SCHEMA, max_repairs=1)
        assert server.chat_count == 0
        assert [r.value for r in again] == [r.value for r in results]
        assert isinstance(again[3].error, LLMJSONError)


def test_chat_json_many_sends_a_repair_only_when_it_is_not_cached(tmp_path: Path) -> None:
    with FakeChatServer(latency_s=0.01, reply=_json_reply) as server:
        client = make(server, tmp_path)
        client.chat("wrong", response_format={"type": "json_object"})  # first turn cached, repair not
        server.reset()
        [result] = client.chat_json_many(["wrong"], SCHEMA)
        assert result.value == {"n": 3}
        assert server.chat_count == 1 and len(server.requests[0]["messages"]) == 3


def test_cache_is_safe_under_concurrent_writes(tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "c.sqlite")
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(50):
                cache.put(f"k{t}-{i}", text=f"v{t}-{i}", model="m", usage={"prompt_tokens": i})
                assert cache.get(f"k{t}-{i}").text == f"v{t}-{i}"
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(cache) == 400
    assert cache.get("k7-49").usage == {"prompt_tokens": 49}


def _echo(call: Any) -> Any:
    text = f"r:{call.prompt}:{call.kwargs.get('max_tokens')}"
    return {"t": text} if call.method == "chat_json" else text


def _boom(call: Any) -> Exception | None:
    return LLMRequestError("boom", endpoint="x", model="m", attempts=1) if "boom" in call.prompt else None


def test_batch_helpers_fall_back_to_a_loop_for_plain_llms() -> None:
    fake = FakeChatModel(_echo, fail=_boom)
    llm = SimpleNamespace(chat=fake.chat, chat_json=fake.chat_json)  # chat / chat_json only, no batch calls
    out = chat_many(llm, ["a", {"messages": "b", "max_tokens": 2}, "boom"], max_tokens=9)
    assert [r.ok for r in out] == [True, True, False]
    assert [r.output.text for r in out[:2]] == ["r:a:9", "r:b:2"]
    assert fake.prompts == ["a", "b", "boom"]
    with pytest.raises(LLMRequestError, match="boom"):
        chat_many(llm, ["boom", "c"], errors="raise")
    assert fake.prompts[-1] == "c"  # the others finished first
    res = chat_json_many(llm, ["q"], schema={"type": "object"})
    assert isinstance(res[0], LLMResult) and res[0].value == {"t": "r:q:None"}


def test_sequential_batches_loop_a_models_own_calls_and_count_them() -> None:
    """SequentialBatches (here through the tests' shared fake): LLMClient's batch results, one call at a time."""
    fake = FakeChatModel(lambda call: "not json" if "bad" in call.messages[0]["content"] else '{"n": 1}')
    assert all(callable(getattr(fake, name)) for name in ("chat", "chat_json", "chat_many", "chat_json_many",
                                                         "stats", "reset_stats"))
    results = fake.chat_json_many(["ok", "bad", "ok"], {"type": "object"}, max_repairs=1, temperature=0.0)
    assert [r.ok for r in results] == [True, False, True] and results[0].value == {"n": 1}
    assert isinstance(results[1].error, LLMJSONError) and [r.calls for r in results] == [1, 2, 1]
    assert fake.stats()["calls"] == 4 and [c.turn for c in fake.calls] == [0, 0, 1, 0]
    assert [r.get().text for r in fake.chat_many(["x", "y"], max_tokens=3)] == ['{"n": 1}'] * 2
    assert fake.calls[-1].kwargs == {"max_tokens": 3}
    with pytest.raises(ValueError, match="errors must be"):
        fake.chat_many(["x"], errors="ignore")


def test_batch_helpers_use_the_client_batch_call(server: FakeChatServer, tmp_path: Path) -> None:
    client = make(server, tmp_path)
    out = chat_many(client, [f"p{i}" for i in range(6)], max_concurrency=3)
    assert [r.get().text for r in out] == [f"echo: p{i}" for i in range(6)]
    assert 2 <= server.max_in_flight <= 3


def test_prefix_order_sends_shared_prefixes_together_and_keeps_results_in_input_order(
    server: FakeChatServer, tmp_path: Path
) -> None:
    client = make(server, tmp_path, max_concurrency=1)
    prompts = ["ctx B / q1", "ctx A / q1", "ctx B / q2", "ctx A / q2"]
    results = client.chat_many(prompts, order="prefix")
    assert [r.get().text for r in results] == [f"echo: {p}" for p in prompts]
    assert [b["messages"][-1]["content"] for b in server.requests] == sorted(prompts)
    with pytest.raises(ValueError, match="order must be"):
        client.chat_many(prompts, order="random")


def test_results_count_the_chat_calls_of_each_item(tmp_path: Path) -> None:
    with FakeChatServer(latency_s=0.01, reply=_json_reply) as server:
        client = make(server, tmp_path)
        results = client.chat_json_many(["num 1", "wrong", "never"], SCHEMA, max_repairs=2)
        assert [r.calls for r in results] == [1, 2, 3]  # 'never' used its 2 repairs
        # 'never''s second repair repeats its first (same reply, same error): served by the cache
        assert client.stats()["calls"] == 6 and server.chat_count == 5
        again = client.chat_json_many(["num 1", "wrong", "never"], SCHEMA, max_repairs=2)  # from the cache
        assert [r.calls for r in again] == [1, 2, 3] and server.chat_count == 5
        assert [r.calls for r in client.chat_many(["a", "b"])] == [1, 1]


def _quest_reply(body: dict[str, Any]) -> str:
    """Answers each listed question with the word after 'ans:' in the text, else the unanswerable marker."""
    import re

    from chunkwise.crud.answer_metrics import UNANSWERABLE

    prompt = body["messages"][-1]["content"]
    text = prompt.split("<<<", 1)[1].split(">>>", 1)[0]
    n = len(re.findall(r"^\d+\. ", prompt.split(">>>", 1)[1], flags=re.M))
    words = re.findall(r"ans:(\w+)", text)
    return json.dumps({"answers": [words[i] if i < len(words) else UNANSWERABLE for i in range(n)]},
                      ensure_ascii=False)


def test_quest_eval_score_many_equals_score_and_holds_errors(tmp_path: Path) -> None:
    from chunkwise.crud.answer_metrics import QuestEval, score_answer_texts

    gt = {
        "a": {"key_info": [], "question": ["q1", "q2"], "answers": ["x", "y"]},
        "b": {"key_info": [], "question": ["q1"], "answers": ["z"]},
    }
    cands = ["ans:x ans:y", "ans:x", "", f"ans:z {FAIL_MARKER}", "ans:z"]
    ids = ["a", "a", "a", "b", "b"]
    with FakeChatServer(latency_s=0.2, reply=_quest_reply) as server:
        client = make(server, tmp_path, max_concurrency=4)
        qe = QuestEval(client, gt_cache=gt)
        many = qe.score_many(cands, [None] * 5, ids)
        assert server.chat_count == 4  # the empty candidate needs no request
        assert server.max_in_flight >= 2
        assert [m.recall.value for m in many if not isinstance(m, Exception)] == [1.0, 0.5, 0.0, 1.0]
        assert [m.avg_f1.value for m in many if not isinstance(m, Exception)] == [1.0, 1.0, 0.0, 1.0]
        assert isinstance(many[3], LLMRequestError)
        # one at a time through score(): the same results, all from the cache
        server.reset()
        for i in (0, 1, 2, 4):
            one = qe.score(cands[i], None, ids[i])
            assert (one.recall.value, one.avg_f1.value, one.candidate_answers) == (
                many[i].recall.value, many[i].avg_f1.value, many[i].candidate_answers)
        assert server.chat_count == 0
        # score_answer_texts records the failed item as missing, never 0
        df = score_answer_texts(cands, ["r"] * 5, ids=ids, metrics=["quest_eval"], quest_eval=qe)
        assert df["quest_recall"].tolist()[:3] == [1.0, 0.5, 0.0] and df["quest_recall"].isna().tolist()[3]
        assert "LLMRequestError" in df["missing"][3][0]


def test_an_interrupt_stops_starting_new_requests() -> None:
    """A KeyboardInterrupt in a worker (as Ctrl-C would be in the caller) ends the batch at once:
    it is raised, and the groups not yet started are never run."""
    ran: list[int] = []
    lock = threading.Lock()

    def run(group: list[int]) -> None:
        with lock:
            ran.append(group[0])
        if group[0] == 1:
            raise KeyboardInterrupt
        threading.Event().wait(0.05)

    with pytest.raises(KeyboardInterrupt):
        LLMClient._run_groups([[i] for i in range(20)], run, 2)
    assert 1 in ran and len(ran) < 20
    assert sorted(ran) == list(range(len(ran)))  # started in list order
