"""Suite-wide test settings.

Hypothesis: no per-example deadline and no too-slow health check. The properties assert values,
never speed (speed lives in benchmarks/), and on a loaded 2-core CI machine an example can take
seconds, which made deadline errors fail tests that were correct.
"""

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("iclr", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("iclr")


@pytest.fixture(autouse=True, scope="session")
def _checkpoints_in_a_temp_folder(tmp_path_factory):
    """Checkpoints of interrupted score / prune runs (iclr_cli.checkpoint) go to a folder of
    this test session, never the user's cache: a test that interrupts a run leaves one."""
    import os

    old = os.environ.get("ICLR_CHECKPOINT_DIR")
    os.environ["ICLR_CHECKPOINT_DIR"] = str(tmp_path_factory.mktemp("checkpoints"))
    yield
    if old is None:
        os.environ.pop("ICLR_CHECKPOINT_DIR", None)
    else:
        os.environ["ICLR_CHECKPOINT_DIR"] = old


@pytest.fixture(autouse=True, scope="session")
def _prompt_cache_base(tmp_path_factory):
    """The shared P cache (iclr_cli.scoring.prefix) of this test session, never the user's:
    scorers that session-scoped fixtures build write under ``session``."""
    import os

    base = tmp_path_factory.mktemp("prompt-cache")
    old = os.environ.get("ICLR_PROMPT_CACHE_DIR")
    os.environ["ICLR_PROMPT_CACHE_DIR"] = str(base / "session")
    yield base
    if old is None:
        os.environ.pop("ICLR_PROMPT_CACHE_DIR", None)
    else:
        os.environ["ICLR_PROMPT_CACHE_DIR"] = old


_TEST_NUMBER = iter(range(1 << 30))


@pytest.fixture(autouse=True)
def _prompt_cache_per_test(_prompt_cache_base, monkeypatch):
    """Each test's scorers get a P cache folder of their own (created only when written):
    a P stored by one test never turns another test's prefill into a disk hit."""
    monkeypatch.setenv("ICLR_PROMPT_CACHE_DIR", str(_prompt_cache_base / f"t{next(_TEST_NUMBER)}"))
