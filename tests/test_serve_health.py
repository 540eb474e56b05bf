"""``/health/liveliness``, ``/health/readiness`` and ``/healthz`` (:mod:`iclr_cli.serve.health`).

Liveness answers whatever the scorer is doing; readiness is 503 until the proxy scorer says
its shared-prefix state (P) is warm (``is_warm()``), 200 after, in LiteLLM's shapes.
"""

from __future__ import annotations

import httpx
import pytest

from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve.health import ALIVE, proxy_scorer, readiness
from serve_fixtures import proxy, scripted_upstream

pytest.importorskip("starlette")


class WarmingScorer(FakeScorer):
    """A fake scorer that keeps P state: warm once ``warm`` is set; ``broken`` makes the check raise."""

    name = "warming-fake"

    def __init__(self):
        super().__init__()
        self.warm = False
        self.broken: Exception | None = None

    def is_warm(self) -> bool:
        if self.broken is not None:
            raise self.broken
        return self.warm


def test_liveness_and_healthz_answer_and_readiness_is_healthy_for_a_scorer_without_p_state():
    with scripted_upstream() as up, proxy(up.url) as (url, _):
        root = url.removesuffix("/v1")
        live, k8s, old, ready = (httpx.get(root + p) for p in ("/health/liveliness", "/health/liveness", "/healthz", "/health/readiness"))
        head = httpx.head(root + "/health/readiness")
    assert live.status_code == k8s.status_code == 200 and live.json() == k8s.json() == ALIVE == "I'm alive!"
    assert old.json() == {"status": "ok"}
    assert ready.status_code == 200 and head.status_code == 200
    body = ready.json()
    assert body["status"] == "healthy" and body["proxy_model"] == "fake" and body["p_cache"] == "not kept"
    assert body["upstream"] == up.url and "detail" not in body and body["iclr_version"]


def test_readiness_waits_for_p_to_be_warm_while_liveness_answers():
    scorer = WarmingScorer()
    with scripted_upstream() as up, proxy(up.url, scorer=scorer, tokenizer=scorer.tokenizer) as (url, _):
        root = url.removesuffix("/v1")
        cold = httpx.get(root + "/health/readiness")
        live = httpx.get(root + "/health/liveliness")
        scorer.warm = True
        warm = httpx.get(root + "/health/readiness")
        scorer.broken = OSError("p-cache.bin: unreadable")
        broken = httpx.get(root + "/health/readiness")
    assert live.status_code == 200
    assert cold.status_code == 503 and cold.json()["status"] == "unhealthy" and cold.json()["p_cache"] == "warming"
    assert cold.json()["detail"] == "Service Unhealthy (P cache not warm yet)" and cold.json()["proxy_model"] == "warming-fake"
    assert warm.status_code == 200 and warm.json()["p_cache"] == "warm" and warm.json()["status"] == "healthy"
    assert broken.status_code == 503 and "OSError: p-cache.bin: unreadable" in broken.json()["detail"]


def test_readiness_reads_the_scorer_behind_the_serve_wrappers_and_needs_none_without_scoring():
    class Wrapper:
        def __init__(self, inner):
            self.inner = inner

    scorer = WarmingScorer()
    assert proxy_scorer(Wrapper(Wrapper(scorer))) is scorer and proxy_scorer(None) is None
    assert readiness(Wrapper(Wrapper(scorer)), "http://u")[0] == 503
    status, body = readiness(None, "http://u")  # variant none: nothing to load
    assert status == 200 and body["proxy_model"] is None and body["p_cache"] == "not kept"
    with scripted_upstream() as up, proxy(up.url, variant="none") as (url, _):
        assert httpx.get(url.removesuffix("/v1") + "/health/readiness").status_code == 200


def test_the_scorer_thread_warms_p_before_its_first_batch():
    """The real scorer's ``warm()`` (iclr_cli.scoring.prefix: the P states of earlier runs
    read into memory) runs in the scorer thread, before anything is scored."""
    import threading

    from iclr_cli.scoring.base import ScoreRequest
    from iclr_cli.serve.batching import BatchingScorer

    class Recording(FakeScorer):
        def __init__(self):
            super().__init__()
            self.seen = []

        def warm(self):
            self.seen.append(("warm", threading.current_thread().name))
            return 0

        def score(self, requests):
            self.seen.append(("score", threading.current_thread().name))
            return super().score(requests)

    inner = Recording()
    batching = BatchingScorer(inner)
    try:
        [result] = batching.score([ScoreRequest("s", (), (), "one two\n\nthree four", ((0, 7), (9, 19)))])
    finally:
        batching.close()
    assert len(result.blocks) == 2
    assert inner.seen == [("warm", "iclr-scorer"), ("score", "iclr-scorer")]
