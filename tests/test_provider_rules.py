"""The provider rule table applied alike by every file adapter and every serve wire
(iclr_cli/providers.py, iclr_cli/formats/sealing.py): what a provider requires back stays,
one reasoning counts its blocks once wherever it is stored, --restore-reasoning on every wire."""

from __future__ import annotations

import json

import orjson
import pytest

from format_helpers import run_cli, summary_value
from iclr_cli import providers
from iclr_cli.blocks import SKIP
from iclr_cli.compress import Settings
from iclr_cli.formats import registry
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve import replies
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.chat import CHAT, read_stream
from iclr_cli.serve.dialect import Reply
from iclr_cli.serve.messages import MessagesDialect
from iclr_cli.serve.responses import ResponsesDialect
from iclr_cli.serve.state import ServeState

R = "Read the loader before the fixtures.\n\nThe cache is keyed by the path only.\n\nA rewritten file hits the stale entry.\n\nKey it by path and mtime."
SUMMARY = "Checked why the cache returns stale settings."


def write(tmp_path, name: str, value) -> str:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(v) + "\n" for v in value))
    else:
        path.write_text(json.dumps(value, indent=2) + "\n")
    return str(path)


def prune(capsys, path: str, *args: str) -> tuple[bytes, str]:
    out = path + ".out"
    code, stdout, err = run_cli(capsys, "prune", path, "--model", "fake", "-o", out, *args)
    assert (code, stdout) == (0, ""), err
    return open(out, "rb").read(), err


# -- which provider a file's reasoning belongs to ---------------------------------------------

@pytest.mark.parametrize("model, kind", [
    ("claude-opus-4-7", "anthropic"), ("anthropic/claude-sonnet-4.5", "anthropic"), ("us.anthropic.claude-sonnet-4-5-v1:0", "anthropic"),
    ("deepseek-v4-pro", "deepseek"), ("gpt-5-codex", "openai"), ("o3", "openai"), ("openai/gpt-oss-120b", "local"),
    ("google/gemini-3-pro-preview", "google"), ("Qwen3-30B-A3B-Q4_K_M.gguf", "local"), ("kimi-k2-thinking", "local"),
])
def test_the_model_a_file_records_tells_the_provider(model, kind):
    found, why = providers.for_record(model)
    assert found is not None and found.name == kind and model in why


def test_provider_and_base_url_tell_it_when_the_model_does_not():
    assert providers.for_record("my-model", provider="bedrock")[0].name == "anthropic"
    assert providers.for_record("my-model", base_url="https://api.deepseek.com/anthropic")[0].name == "deepseek"
    kind, why = providers.for_record("my-model")
    assert kind is None and "not in the table" in why
    assert providers.for_record()[0] is None


# -- a plain provider's signature is kept; Anthropic's sealed; unknown: key kept, warned once ---

def anthropic_doc(model: str | None, signature: str) -> dict:
    doc = {"messages": [
        {"role": "user", "content": "Why is the test flaky?"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": R, "signature": signature},
                                          {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "loader.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "_CACHE = {}"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Keyed by path only."}]},
    ]}
    if model:
        doc["model"] = model
    return doc


def claude_code_lines(model: str, signature: str) -> list[dict]:
    base = {"isSidechain": False, "sessionId": "s-1", "cwd": "/w"}
    return [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "Why is the test flaky?"}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"model": model, "id": "m1", "role": "assistant",
                                                                                     "content": [{"type": "thinking", "thinking": R, "signature": signature}]}},
        {**base, "type": "assistant", "uuid": "a2", "parentUuid": "a1", "message": {"model": model, "id": "m1", "role": "assistant",
                                                                                     "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]}},
        {**base, "type": "user", "uuid": "u2", "parentUuid": "a2", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}},
    ]


def litellm_chat(model: str, signature: str) -> dict:
    return {"model": model, "messages": [
        {"role": "user", "content": "Why is the test flaky?"},
        {"role": "assistant", "content": None, "reasoning_content": R,
         "thinking_blocks": [{"type": "thinking", "thinking": R, "signature": signature}],
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "assistant", "content": "Keyed by path only."},
    ]}


def _thinking_of(fmt: str, out: bytes) -> dict:
    if fmt == "claude_code":
        return json.loads(out.splitlines()[1])["message"]["content"][0]
    value = json.loads(out)
    msg = value["messages"][1]
    return msg["content"][0] if fmt == "anthropic" else msg["thinking_blocks"][0]


FILES = {
    "anthropic": (lambda m, s: anthropic_doc(m, s), "a.json"),
    "claude_code": (lambda m, s: claude_code_lines(m or "", s), "c.jsonl"),
    "openai": (lambda m, s: litellm_chat(m or "", s), "o.json"),
}


@pytest.mark.parametrize("fmt", FILES)
@pytest.mark.parametrize("signature", ["c2lnLWRz", ""])
def test_a_plain_providers_block_is_edited_and_keeps_its_signature_key(tmp_path, capsys, fmt, signature):
    make, name = FILES[fmt]
    path = write(tmp_path, name, make("deepseek-reasoner", signature))
    out, err = prune(capsys, path, "--variant", "iclr")
    block = _thinking_of(fmt, out)
    assert SKIP in block["thinking"] and block["signature"] == signature
    assert "left sealed" not in err


@pytest.mark.parametrize("fmt", FILES)
def test_anthropic_signed_thinking_is_sealed_by_default_and_edited_on_request(tmp_path, capsys, fmt):
    make, name = FILES[fmt]
    path = write(tmp_path, name, make("claude-sonnet-4-5", "c2lnLWFudA"))
    out, err = prune(capsys, path, "--variant", "delete-all")
    assert out == open(path, "rb").read()
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (anthropic signed 1)"
    out, _ = prune(capsys, path, "--variant", "iclr", "--signed-thinking", "edit")
    block = _thinking_of(fmt, out)
    assert SKIP in block["thinking"] and "signature" not in block


@pytest.mark.parametrize("fmt", ["anthropic"])
def test_where_the_provider_cannot_be_told_the_key_is_kept_and_warned_once(tmp_path, capsys, fmt):
    path = write(tmp_path, "a.json", anthropic_doc(None, "c2ln"))
    out, err = prune(capsys, path, "--variant", "iclr")
    assert out == open(path, "rb").read() and " ".join(err.split()).count("whose provider the file does not say") == 1
    out, err = prune(capsys, path, "--variant", "iclr", "--signed-thinking", "edit")
    block = _thinking_of(fmt, out)
    assert SKIP in block["thinking"] and block["signature"] == "c2ln"
    assert " ".join(err.split()).count("whose provider the file does not say") == 1


def test_display_omitted_thinking_is_never_a_candidate(tmp_path, capsys):
    doc = anthropic_doc("claude-opus-4-7", "c2ln")
    doc["messages"][1]["content"][0]["thinking"] = ""
    path = write(tmp_path, "a.json", doc)
    for mode in ("seal", "edit"):
        code, stdout, err = run_cli(capsys, "score", path, "--model", "fake", "--signed-thinking", mode, "-q")
        assert code == 0 and stdout == ""
        out, _ = prune(capsys, path, "--variant", "delete-all", "--signed-thinking", mode)
        assert out == open(path, "rb").read()


def serve_state(**kw) -> ServeState:
    scorer = FakeScorer()
    return ServeState(Settings(parse_variant("iclr")), BatchingScorer(scorer), scorer.tokenizer, **kw)


def serve(state: ServeState, dialect, body: dict) -> dict:
    raw = orjson.dumps(body)
    return orjson.loads(state.rewrite(orjson.loads(raw), raw, None, dialect).body)


def test_messages_wire_on_a_plain_upstream_keeps_the_signature_too():
    doc = anthropic_doc("deepseek-reasoner", "c2lnLWRz")
    sent = serve(serve_state(), MessagesDialect(sealed=False), doc)
    block = sent["messages"][1]["content"][0]
    assert SKIP in block["thinking"] and block["signature"] == "c2lnLWRz"


# -- a signature bound to a tool call stays with its call, in files and on the chat wire --------

def gemini_chat(extra_on: str) -> dict:
    first = {"role": "assistant", "content": "", "reasoning": R,
             "tool_calls": [{"id": "function-call-1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    if extra_on == "openai-compatible":  # Gemini's own endpoint
        first["tool_calls"][0]["extra_content"] = {"google": {"thought_signature": "Q2lRQldHMjF"}}
    else:  # OpenRouter
        first["reasoning_details"] = [{"type": "reasoning.text", "text": R, "format": "google-gemini-v1", "index": 0},
                                      {"type": "reasoning.encrypted", "data": "Q2lRQldHMjF", "id": "function-call-1", "format": "google-gemini-v1", "index": 0}]
    return {"model": "google/gemini-3-pro-preview", "messages": [
        {"role": "user", "content": "Why is the test flaky?"}, first,
        {"role": "tool", "tool_call_id": "function-call-1", "content": "_CACHE = {}"},
        {"role": "assistant", "content": "Keyed by path only."},
    ]}


def _signatures(msg: dict) -> list:
    return [e for e in msg.get("reasoning_details", []) if e["type"] == "reasoning.encrypted"] + [c.get("extra_content") for c in msg["tool_calls"]]


@pytest.mark.parametrize("where", ["openai-compatible", "openrouter"])
@pytest.mark.parametrize("variant", ["iclr", "delete-all"])
def test_call_signatures_stay_in_files(tmp_path, capsys, where, variant):
    doc = gemini_chat(where)
    path = write(tmp_path, "g.json", doc)
    out, _ = prune(capsys, path, "--variant", variant, "--encrypted-reasoning", "drop")
    msg = json.loads(out)["messages"][1]
    assert _signatures(msg) == _signatures(doc["messages"][1]) and msg["tool_calls"] == doc["messages"][1]["tool_calls"]
    assert msg["reasoning"] != R
    code, _, err = run_cli(capsys, "convert", path, "--to", "openai", "-o", str(tmp_path / "c.jsonl"))
    assert code == 2 and "thought signature" in err


@pytest.mark.parametrize("where", ["openai-compatible", "openrouter"])
def test_call_signatures_stay_on_the_chat_wire_and_are_restored(where):
    doc = gemini_chat(where)
    sent = serve(serve_state(), CHAT, doc)
    assert _signatures(sent["messages"][1]) == _signatures(doc["messages"][1]) and SKIP in sent["messages"][1]["reasoning"]
    # a client that drops them (LibreChat-AI/agents #37) gets them back with --restore-reasoning
    state = serve_state(restore_reasoning=True)
    replies.record_reply(state, None, CHAT.parse({"messages": doc["messages"][:1]}), Reply((doc["messages"][1],)))
    dropped = json.loads(json.dumps(doc))
    for key in ("reasoning", "reasoning_details"):
        dropped["messages"][1].pop(key, None)
    dropped["messages"][1]["tool_calls"][0].pop("extra_content", None)
    sent = serve(state, CHAT, dropped)["messages"][1]
    assert _signatures(sent) == _signatures(doc["messages"][1]) and SKIP in sent["reasoning"]


@pytest.mark.parametrize("model, sealed", [("anthropic/claude-sonnet-4.5", True), ("deepseek/deepseek-r1", False)])
def test_restore_puts_back_a_reasoning_details_signature_sent_empty(model, sealed):
    """A client that keeps OpenRouter's reasoning_details but blanks the signature: an empty
    signature is no signature; the reply's is put back where the entry is the reply's own."""
    signed = {"type": "reasoning.text", "text": R, "signature": "c2ln", "format": "anthropic-claude-v1", "index": 0}
    reply = {"role": "assistant", "content": "", "reasoning": R, "reasoning_details": [signed],
             "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    first = {"model": model, "messages": [{"role": "user", "content": "go"}]}
    state = serve_state(restore_reasoning=True)
    replies.record_reply(state, None, CHAT.parse(first), Reply((reply,)))
    blank = {**reply, "reasoning_details": [{**signed, "signature": ""}]}
    sent = serve(state, CHAT, {**first, "messages": [*first["messages"], blank, {"role": "tool", "tool_call_id": "toolu_1", "content": "ok"}]})
    entry = sent["messages"][1]["reasoning_details"][0]
    assert entry["signature"] == "c2ln"
    if sealed:  # Anthropic checks it: the turn goes back as generated, signed
        assert sent["messages"][1] == reply
    else:
        assert SKIP in entry["text"] and entry["text"] == sent["messages"][1]["reasoning"]
    # another text at that place is not the reply's entry: nothing put back
    other = serve_state(restore_reasoning=True)
    replies.record_reply(other, None, CHAT.parse(first), Reply((reply,)))
    changed = {**reply, "reasoning": "Another thought.", "reasoning_details": [{**signed, "text": "Another thought.", "signature": ""}]}
    sent = serve(other, CHAT, {**first, "messages": [*first["messages"], changed, {"role": "tool", "tool_call_id": "toolu_1", "content": "ok"}]})
    assert sent["messages"][1]["reasoning_details"][0]["signature"] == ""


def test_streamed_chat_replies_keep_details_and_call_signatures():
    chunks = [
        {"choices": [{"delta": {"role": "assistant", "reasoning": "Read ", "reasoning_details": [{"type": "reasoning.text", "text": "Read ", "index": 0}]}}]},
        {"choices": [{"delta": {"reasoning": "it.", "reasoning_details": [{"type": "reasoning.text", "text": "it.", "index": 0},
                                                                           {"type": "reasoning.encrypted", "data": "QUJD", "id": "c1", "index": 0}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"},
                                                "extra_content": {"google": {"thought_signature": "QUJD"}}}]}}]},
    ]
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    message, _ = read_stream(body)
    assert message["reasoning"] == "Read it."
    assert message["reasoning_details"] == [{"type": "reasoning.text", "text": "Read it.", "index": 0},
                                            {"type": "reasoning.encrypted", "data": "QUJD", "id": "c1", "index": 0}]
    assert message["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": "QUJD"}}


# -- one reasoning stored twice counts its blocks once, and every form says the same -----------

def responses_items(encrypted: bool = False) -> list[dict]:
    item = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": SUMMARY}],
            "content": [{"type": "reasoning_text", "text": R.rsplit("\n\n", 1)[0]}]}
    return [{"role": "user", "content": "Why is the test flaky?"}, item,
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "_CACHE = {}"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Keyed by path only."}]}]


def codex_lines() -> list[dict]:
    items = [{"type": "message", **i} if "type" not in i else i for i in responses_items()]  # Codex types every item
    return [{"type": "session_meta", "payload": {"id": "s"}}, *({"type": "response_item", "payload": i} for i in items)]


def test_a_summary_beside_content_is_no_block_in_serve_in_front_of_a_local_upstream():
    state = serve_state()
    sent = serve(state, ResponsesDialect(), {"model": "gpt-oss-20b", "input": responses_items(), "store": False})
    item = sent["input"][1]
    paragraphs = item["content"][0]["text"].split("\n\n")
    assert len(paragraphs) == 3 and paragraphs.count(SKIP) == 2  # floor(0.8 * 3): the summary is not a fourth block
    assert item["summary"] == [{"type": "summary_text", "text": SUMMARY}]


@pytest.mark.parametrize("fmt", ["openai-responses", "codex"])
def test_a_summary_beside_content_is_no_block_in_files_and_goes_with_all_of_it(tmp_path, capsys, fmt):
    path = write(tmp_path, "r.json", responses_items()) if fmt == "openai-responses" else write(tmp_path, "r.jsonl", codex_lines())
    assert registry.detect(open(path, "rb").read(), path).name == fmt
    code, stdout, _ = run_cli(capsys, "score", path, "--model", "fake", "-q")
    assert code == 0 and [json.loads(x)["n_blocks"] for x in stdout.splitlines()] == [3, 3, 3]
    out, _ = prune(capsys, path, "--variant", "iclr")
    item = _reasoning_item(fmt, out)
    assert item["content"][0]["text"].split("\n\n").count(SKIP) == 2 and item["summary"][0]["text"] == SUMMARY
    out, _ = prune(capsys, path, "--variant", "delete-all")
    item = _reasoning_item(fmt, out)
    assert item["content"][0]["text"] == "" and item["summary"][0]["text"] == ""  # nothing left to summarise


def _reasoning_item(fmt: str, out: bytes) -> dict:
    if fmt == "codex":
        return next(json.loads(x)["payload"] for x in out.splitlines() if b'"reasoning"' in x)
    return json.loads(out)[1]


@pytest.mark.parametrize("variant", ["iclr", "delete-all"])
def test_think_copy_of_reasoning_content_on_the_chat_wire(variant):
    msg = {"role": "assistant", "content": f"<think>\n{R}\n</think>\n\nReading it.", "reasoning_content": R,
           "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    state = ServeState(Settings(parse_variant(variant)), BatchingScorer(FakeScorer()), FakeScorer().tokenizer)
    sent = serve(state, CHAT, {"model": "Qwen3-30B", "messages": [{"role": "user", "content": "go"}, msg,
                                                                   {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]})["messages"][1]
    inner, answer = sent["content"].split("<think>", 1)[1].split("</think>")
    assert inner.strip() == sent["reasoning_content"] != R and answer == "\n\nReading it."


# -- --restore-reasoning on every wire ----------------------------------------------------------

def test_restore_reasoning_on_the_messages_wire():
    """Claude Code drops thinking blocks Anthropic did not sign; DeepSeek then answers 400
    (Alishahryar1/free-claude-code PR #599): the proxy puts the reply's blocks back."""
    state, dialect = serve_state(restore_reasoning=True), MessagesDialect(sealed=False)
    reply = {"role": "assistant", "content": [{"type": "thinking", "thinking": R, "signature": ""},
                                              {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "loader.py"}}]}
    first = {"model": "deepseek-reasoner", "messages": [{"role": "user", "content": "Why is the test flaky?"}]}
    replies.record_reply(state, None, dialect.parse(first), Reply((reply,)), dialect)
    dropped = {**first, "messages": [*first["messages"], {"role": "assistant", "content": reply["content"][1:]},
                                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]}
    sent = serve(state, dialect, dropped)["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["thinking", "tool_use"] and SKIP in sent[0]["thinking"] and sent[0]["signature"] == ""
    plain = serve_state()
    replies.record_reply(plain, None, dialect.parse(first), Reply((reply,)), dialect)
    assert [b["type"] for b in serve(plain, dialect, dropped)["messages"][1]["content"]] == ["tool_use"]


def test_restore_reasoning_on_the_responses_wire():
    state, dialect = serve_state(restore_reasoning=True), ResponsesDialect()
    items = responses_items()
    first = {"model": "gpt-oss-20b", "input": items[:1], "store": False}
    replies.record_reply(state, None, dialect.parse(first), Reply(tuple(items[1:3])), dialect)
    dropped = {**first, "input": [items[0], items[2], items[3]]}
    sent = serve(state, dialect, dropped)["input"]
    assert [i.get("type") for i in sent] == [None, "reasoning", "function_call", "function_call_output"]
    assert sent[1]["id"] == "rs_1" and SKIP in sent[1]["content"][0]["text"]


def test_restore_reasoning_puts_back_what_nothing_compressed_too():
    """A restored turn goes upstream even when compression changes nothing in it (a single
    paragraph: N = 1), never the client's bytes without it."""
    state, dialect = serve_state(restore_reasoning=True), MessagesDialect(sealed=False)
    reply = {"role": "assistant", "content": [{"type": "thinking", "thinking": "One paragraph.", "signature": ""},
                                              {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]}
    first = {"model": "deepseek-reasoner", "messages": [{"role": "user", "content": "go"}]}
    replies.record_reply(state, None, dialect.parse(first), Reply((reply,)), dialect)
    dropped = {**first, "messages": [*first["messages"], {"role": "assistant", "content": reply["content"][1:]},
                                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]}
    assert serve(state, dialect, dropped)["messages"][1]["content"] == reply["content"]


# -- /stats, previous_response_id -------------------------------------------------------------

def test_a_step_with_nothing_to_compress_is_not_counted_as_compressed():
    state = serve_state()
    no_reasoning = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}
    serve(state, CHAT, {"model": "m", "messages": [{"role": "user", "content": "go"}, no_reasoning, {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]})
    record = state.stats.total.to_record()
    assert record["steps_compressed"] == 0 and record["steps_nothing_to_compress"] == 1


def test_previous_response_id_is_passed_on_with_a_line_that_says_the_history_is_on_the_server(caplog):
    state = serve_state()
    body = {"model": "gpt-5", "previous_response_id": "resp_1", "input": [{"type": "function_call_output", "call_id": "c", "output": "ok"}]}
    raw = orjson.dumps(body)
    with caplog.at_level("WARNING", logger="iclr.serve"):
        assert state.rewrite(body, raw, None, ResponsesDialect()).body == raw
        state.rewrite(body, raw, None, ResponsesDialect())
    said = [r.getMessage() for r in caplog.records if "held by the upstream" in r.getMessage()]
    assert len(said) == 1 and "previous_response_id" in said[0]
    assert state.stats.total.server_history == {"previous_response_id": 2}


def test_a_file_continuing_with_previous_response_id_is_refused_saying_why(tmp_path, capsys):
    path = write(tmp_path, "p.json", {"model": "gpt-5", "previous_response_id": "resp_1", "input": [{"type": "function_call_output", "call_id": "c", "output": "ok"}]})
    code, _, err = run_cli(capsys, "prune", path, "--model", "fake")
    assert code == 2 and "history is held by the server (previous_response_id resp_1)" in " ".join(err.split())


def test_convert_to_anthropic_refuses_call_ids_the_api_rejects(tmp_path, capsys):
    doc = {"model": "kimi-k2", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "functions.read_file:0", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}]},
        {"role": "tool", "tool_call_id": "functions.read_file:0", "content": "x"},
        {"role": "assistant", "content": "done"},
    ]}
    path = write(tmp_path, "k.json", doc)
    out = tmp_path / "k.out.jsonl"
    code, _, err = run_cli(capsys, "convert", path, "--to", "anthropic", "-o", str(out))
    assert code == 2 and not out.exists()
    assert "'functions.read_file:0' is not a valid Anthropic tool_use id" in " ".join(err.split())
    code, _, err = run_cli(capsys, "convert", path, "--to", "openai", "-o", str(out))
    assert code == 0 and b"functions.read_file:0" in out.read_bytes()


@pytest.mark.parametrize("model, sealed", [("anthropic/claude-sonnet-4.5", True), ("deepseek/deepseek-r1", False)])
def test_chat_wire_seals_the_signed_entry_of_a_model_whose_provider_checks_it(model, sealed):
    msg = {"role": "assistant", "content": "", "reasoning": R,
           "reasoning_details": [{"type": "reasoning.text", "text": R, "signature": "c2ln", "format": "anthropic-claude-v1", "index": 0}],
           "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    state = serve_state()
    sent = serve(state, CHAT, {"model": model, "messages": [{"role": "user", "content": "go"}, msg, {"role": "tool", "tool_call_id": "toolu_1", "content": "ok"}]})
    out = sent["messages"][1]
    if sealed:
        assert out == msg and sum(state.stats.total.sealed.values()) == 1
    else:
        # a provider named as plain does not check it: edited with its signature kept, as prune does in files
        assert SKIP in out["reasoning"] and out["reasoning_details"][0]["text"] == out["reasoning"] and out["reasoning_details"][0]["signature"] == "c2ln"


def test_a_reasoning_nested_in_another_part_is_never_written_as_two_compressions():
    from iclr_cli.formats.writeback import Site, TextRef, UnregisteredCopy, apply_edits
    from iclr_cli.trajectory import Part, Step, Trajectory

    outer_text = f"<think>\n{R}\n</think>\n\nTHOUGHT: read the loader."
    values = [{"reasoning_content": R, "content": outer_text}]
    inner = Part("reasoning", R, ref=TextRef((Site((0, "reasoning_content")),)))
    outer = Part("reasoning", outer_text, ref=TextRef((Site((0, "content")),)))
    traj = Trajectory("t", (), (Step(0, (inner, outer)),))
    skipped = R.replace("The cache is keyed by the path only.", SKIP)
    with pytest.raises(UnregisteredCopy):  # the inner copy edited, the outer one not
        apply_edits(values, [traj], [traj.with_steps([Step(0, (inner.__class__("reasoning", skipped, ref=inner.ref), outer))])])
    # both emptied, or the outer edited exactly as the inner: one reasoning, written alike
    apply_edits(values, [traj], [traj.with_steps([Step(0, (Part("reasoning", "", ref=inner.ref), Part("reasoning", "", ref=outer.ref)))])])
    same = outer_text.replace(R, skipped)
    apply_edits(values, [traj], [traj.with_steps([Step(0, (Part("reasoning", skipped, ref=inner.ref), Part("reasoning", same, ref=outer.ref)))])])
