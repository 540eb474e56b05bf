"""Non-text parts (images, audio, documents) between each format's own form and :class:`Media`,
and the content lists that mix them with text.

Readers turn an OpenAI ``image_url`` part, an Anthropic ``image`` block, a Gemini
``inlineData`` / ``fileData`` part or a pi ``image`` block into a :class:`Media`; ``iclr
convert`` writes it back in the target's form, or refuses (docs/FORMAT.md, "convert"). The
payload itself is never decoded: base64 stays the same string, URLs stay the same address.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from iclr_cli.trajectory import Media, Part, PartKind

_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[\w-]+=[^;,]*)*;base64,(?P<data>.*)\Z", re.DOTALL)


class NoForm(ValueError):
    """A :class:`Media` the target format has no faithful form for; the message says why."""


def kind_of(mime: str | None) -> str:
    """``image``, ``audio``, ``video`` or ``document`` from a media type; ``file`` otherwise."""
    top = (mime or "").split("/", 1)[0]
    if top in ("image", "audio", "video"):
        return top
    return "document" if mime in ("application/pdf", "text/plain") else "file"


def from_url(url: str, detail: str | None = None) -> Media:
    """An image given by URL: a ``data:`` URL becomes inline base64, any other stays a URL."""
    m = _DATA_URL.match(url)
    if m:
        return Media("image", mime=m.group("mime"), data=m.group("data"), detail=detail)
    return Media("image", url=url, detail=detail)


def data_url(media: Media) -> str:
    """``data:MIME;base64,DATA`` for inline media, the URL itself otherwise."""
    return f"data:{media.mime};base64,{media.data}" if media.data is not None else str(media.url)


# --- OpenAI chat -------------------------------------------------------------------------

def openai_image(part: dict) -> Media | None:
    """The image of an OpenAI ``{"type": "image_url", "image_url": {...}}`` part, or None
    when it has no URL. ``detail: "auto"`` is the API's default and reads as no detail."""
    value = part.get("image_url")
    if isinstance(value, str):
        url, detail = value, None
    elif isinstance(value, dict):
        url, detail = value.get("url"), value.get("detail")
    else:
        return None
    if not isinstance(url, str):
        return None
    return from_url(url, None if detail in (None, "auto") else str(detail))


def to_openai(media: Media) -> dict:
    """An OpenAI ``image_url`` content part.

    Raises:
        NoForm: for anything but an image (chat messages take images only, as URLs).
    """
    if media.kind != "image" or (media.data is not None and not media.mime):
        raise NoForm(f"{media.kind} has no OpenAI chat content part (only images, as image_url)")
    body: dict = {"url": data_url(media)}
    if media.detail is not None:
        body["detail"] = media.detail
    return {"type": "image_url", "image_url": body}


# --- Anthropic Messages ------------------------------------------------------------------

def anthropic_image(block: dict) -> Media | None:
    """The image of an Anthropic ``image`` block (``base64`` or ``url`` source), or None for
    a source this project does not read (a Files API ``file_id``)."""
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        mime = source.get("media_type")
        return Media("image", mime=mime if isinstance(mime, str) else None, data=source["data"])
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return Media("image", url=source["url"])
    return None


def to_anthropic(media: Media) -> dict:
    """An Anthropic ``image`` block.

    Raises:
        NoForm: for anything but an image, an inline image with no media type, or an
        OpenAI ``detail`` (the resolution the model saw; Anthropic has no such setting).
    """
    if media.kind != "image":
        raise NoForm(f"{media.kind} has no Anthropic block here (only images are carried)")
    if media.detail is not None:
        raise NoForm(f"OpenAI image detail {media.detail!r} (the resolution the model saw) has no Anthropic form")
    if media.data is not None:
        if not media.mime:
            raise NoForm("inline image without a media type")
        return {"type": "image", "source": {"type": "base64", "media_type": media.mime, "data": media.data}}
    return {"type": "image", "source": {"type": "url", "url": media.url}}


# --- Gemini and pi -----------------------------------------------------------------------

def gemini_media(part: dict) -> Media | None:
    """The payload of a Gemini ``inlineData`` / ``fileData`` part (camelCase or snake_case
    keys), or None when the part holds neither."""
    inline = part.get("inlineData", part.get("inline_data"))
    if isinstance(inline, dict) and isinstance(inline.get("data"), str):
        mime = inline.get("mimeType", inline.get("mime_type"))
        mime = mime if isinstance(mime, str) else None
        return Media(kind_of(mime), mime=mime, data=inline["data"])
    ref = part.get("fileData", part.get("file_data"))
    if isinstance(ref, dict):
        uri = ref.get("fileUri", ref.get("file_uri"))
        mime = ref.get("mimeType", ref.get("mime_type"))
        if isinstance(uri, str):
            mime = mime if isinstance(mime, str) else None
            return Media(kind_of(mime), mime=mime, url=uri)
    return None


def pi_image(block: dict) -> Media | None:
    """The image of a pi ``{"type": "image", "data", "mimeType"}`` block, or None."""
    if not isinstance(block.get("data"), str):
        return None
    mime = block.get("mimeType")
    return Media("image", mime=mime if isinstance(mime, str) else None, data=block["data"])


def describe(media: Media) -> str:
    """``image/png`` style name of a payload for messages (``image`` when the type is unknown)."""
    return media.mime or media.kind


# --- content lists that mix text and media -----------------------------------------------

def mixed_parts(
    items: list,
    kind: PartKind,
    label: str,
    *,
    read_media: Callable[[dict], Media | None],
    call_id: str | None = None,
) -> list[Part]:
    """The parts of a content list, in order: consecutive text items (objects with a string
    ``text``) joined by a newline into one part, each item ``read_media`` accepts a media
    part of its own, any other item a part labelled by its ``type`` with its JSON as text.
    Every part gets ``kind``, ``label`` and ``call_id``; a list with nothing in it gives one
    empty text part, so an empty message or tool result is still there."""
    parts: list[Part] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            parts.append(Part(kind, "\n".join(texts), label=label, call_id=call_id))
            texts.clear()

    for item in items:
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            texts.append(item["text"])
            continue
        flush()
        found = read_media(item) if isinstance(item, dict) else None
        if found is not None:
            parts.append(Part(kind, "", label=label, call_id=call_id, media=found))
        else:
            other = item.get("type", label) if isinstance(item, dict) else label
            parts.append(Part(kind, json.dumps(item, ensure_ascii=False), label=str(other), call_id=call_id))
    flush()
    return parts or [Part(kind, "", label=label, call_id=call_id)]


def openai_media(item: dict) -> Media | None:
    """The media of an OpenAI content part (``image_url``), or None for any other part."""
    return openai_image(item) if item.get("type") == "image_url" else None


def anthropic_media(item: dict) -> Media | None:
    """The media of an Anthropic content block (``image``), or None for any other block."""
    return anthropic_image(item) if item.get("type") == "image" else None
