"""Reasoning carried on a chat-completions style assistant message inside an agent log.

Agent frameworks store the model's message as LiteLLM returned it (mini-swe-agent v2,
SWE-agent history, OpenHands V0 ``model_response`` and V1 events), so the same reasoning
shapes turn up in each of them. One reader for all of them (docs/FORMAT.md):

- string fields ``reasoning_content``, ``reasoning`` and ``thinking`` (gpt-oss through Ollama
  and vLLM): in-place reasoning;
- ``thinking_blocks`` (Anthropic through LiteLLM): ``thinking`` is reasoning, signed when it
  has a signature (an edit strips it; a block emptied leaves its list), ``redacted_thinking``
  is read-only; the entries of one streamed block kept per delta are one reasoning
  (:mod:`iclr_cli.formats.fragments`);
- ``responses_reasoning_item`` (OpenAI Responses through OpenHands): each ``summary`` and
  ``content`` string is reasoning, opaque when the item has ``encrypted_content`` (an edit
  drops the whole item, or leaves it, as ``--encrypted-reasoning`` says).

The same text in several of these places (``reasoning_content`` and a thinking block, or a
copy of the message elsewhere in the log) is one part with a site in each, so it is scored
once and edited everywhere. ``reasoning_details`` (OpenRouter's structured copy) is not
read here: the message's reasoning is then left as it is and reported as unrecognised, so one
copy is never pruned while the other stays full.
"""

from __future__ import annotations

from collections.abc import Sequence

from iclr_cli.formats.fragments import Fragments, streamed_blocks
from iclr_cli.formats.reading import Where, dig
from iclr_cli.formats.writeback import Draft, Path, Site
from iclr_cli.trajectory import WriteBack

TEXT_FIELDS = ("reasoning_content", "reasoning", "thinking")
"""String fields of a message that hold reasoning."""

REDACTED_TEXT = "[redacted thinking]"
_COPIES = "provider_specific_fields"


def message_reasoning(msg: dict, path: Path, where: Where, field_path: Sequence, copies: Sequence[tuple[Path, object]] = ()) -> list[Draft]:
    """The reasoning of one assistant message ``msg`` at records path ``path`` (``field_path``
    names it in notes), as drafts in reading order. ``copies`` are ``(path, value)`` of other
    copies of the same message; equal texts in their same fields become sites too."""
    if msg.get("reasoning_details") not in (None, [], ""):
        where.note((*field_path, "reasoning_details"), "structured reasoning copy (reasoning_details) is not read by this adapter: the message's reasoning is left unpruned")
        return []
    drafts: list[Draft] = []
    by_text: dict[str, Draft] = {}
    # LiteLLM's provider_specific_fields repeats the reasoning fields (an app sends
    # message.model_dump() back): one more copy of the message's fields, edited alike
    copies = [*copies, *(((*cpath, _COPIES), cmsg[_COPIES]) for cpath, cmsg in [(path, msg), *copies]
                         if isinstance(cmsg, dict) and isinstance(cmsg.get(_COPIES), dict))]

    def copy_sites(keys: tuple) -> list[tuple[Path, str]]:
        out = []
        for cpath, cmsg in copies:
            value = dig(cmsg, *keys)
            if isinstance(value, str):
                out.append(((*cpath, *keys), value))
        return out

    for name in TEXT_FIELDS:
        text = msg.get(name)
        if not isinstance(text, str) or not text.strip():
            continue
        # a copy may hold the text under another of the names (LiteLLM fills both)
        sites = [Site((*path, name))] + [Site(p) for other in TEXT_FIELDS for p, v in copy_sites((other,)) if v == text]
        if text in by_text:
            for s in sites:
                by_text[text].add(s)
            continue
        by_text[text] = Draft(text, sites)
        drafts.append(by_text[text])
    blocks = msg.get("thinking_blocks")
    groups = {g.members[0]: g for g in streamed_blocks(blocks)} if isinstance(blocks, list) else {}
    grouped = {k for g in groups.values() for k in g.members}
    for k, block in enumerate(blocks if isinstance(blocks, list) else []):
        if (group := groups.get(k)) is not None:
            drafts.extend(_streamed(group, blocks, path, by_text, copy_sites))
        if not isinstance(block, dict) or k in grouped:
            continue
        bpath = (*path, "thinking_blocks", k)
        if block.get("type") == "redacted_thinking":
            drafts.append(Draft(REDACTED_TEXT, [], label="redacted_thinking", write_back=WriteBack.READ_ONLY))
            continue
        text = block.get("thinking")
        if not isinstance(text, str) or not text.strip():
            continue
        signed = isinstance(block.get("signature"), str) and bool(block["signature"])
        draft = by_text.get(text)
        if draft is None:
            draft = by_text[text] = Draft(text, [], label="thinking")
            draft.remove_when_empty = bpath
            drafts.append(draft)
        draft.add(Site((*bpath, "thinking")))
        for cpath, value in copy_sites(("thinking_blocks", k, "thinking")):
            if value == text:
                draft.add(Site(cpath))
                if signed:
                    draft.strip_keys.append((cpath[:-1], "signature"))
        if signed:  # an empty "signature": "" is kept (anthropic.py)
            draft.strip_keys.append((bpath, "signature"))
        if signed:
            draft.write_back = WriteBack.SIGNED
    item = msg.get("responses_reasoning_item")
    if isinstance(item, dict):
        ipath = (*path, "responses_reasoning_item")
        opaque = isinstance(item.get("encrypted_content"), str) and bool(item["encrypted_content"])
        for key in ("summary", "content"):
            entries = item.get(key)
            for j, text in enumerate(entries if isinstance(entries, list) else []):
                if isinstance(text, str) and text.strip():
                    mode = WriteBack.OPAQUE if opaque else WriteBack.IN_PLACE
                    drafts.append(Draft(text, [Site((*ipath, key, j))], label="reasoning", write_back=mode, drop=[ipath]))
    return drafts


def _streamed(group: Fragments, blocks: list, path: Path, by_text: dict[str, Draft], copy_sites) -> list[Draft]:
    """One streamed block kept per delta (:mod:`iclr_cli.formats.fragments`) as one draft:
    joined to the reasoning field holding its text, or a draft of its own (the new drafts)."""
    sites = [Site((*path, "thinking_blocks", k, "thinking"), f"fragment:{j}") for j, k in enumerate(group.pieces)]
    for j, k in enumerate(group.pieces):  # the same fragments in copies of the message
        piece = blocks[k]["thinking"]
        sites += [Site(cpath, f"fragment:{j}") for cpath, value in copy_sites(("thinking_blocks", k, "thinking")) if value == piece]
    draft = by_text.get(group.text)
    new = draft is None
    if draft is None:
        draft = by_text[group.text] = Draft(group.text, [], label="thinking")
    for site in sites:
        draft.add(site)
    if group.signed is not None:  # the signature covers the joined text: it seals the group
        draft.strip_keys.append(((*path, "thinking_blocks", group.signed), "signature"))
        draft.write_back = WriteBack.SIGNED
    return [draft] if new else []
