"""Reward 1 when the submitted answer's first number is the current price, else 0 (the old,
struck-through price is a distractor)."""

import contextlib
import re

from iclr_cli.replay.checks import pages_handler, serve

PRICE = 149.99

_LAYOUT = "<html><head><title>{title} - Toolbarn</title></head><body><nav><a href='/'>Home</a></nav><h1>{title}</h1>{body}</body></html>"


def _page(title, body):
    return _LAYOUT.format(title=title, body=body)


def _products(items):
    rows = "".join(f"<li><a href='/product/{pid}'>{name}</a></li>" for pid, name in items)
    return f"<ul class='products'>{rows}</ul>"


PAGES = {
    "/": _page("Toolbarn", "<p>Welcome! Browse by category:</p><ul><li><a href='/category/garden'>Garden</a></li><li><a href='/category/tools'>Power tools</a></li><li><a href='/category/kitchen'>Kitchen</a></li></ul>"),
    "/category/garden": _page("Garden", _products([(2001, "Hose Reel 30m"), (2002, "Pruning Shears")])),
    "/category/kitchen": _page("Kitchen", _products([(3001, "Chef Knife 20cm"), (3002, "Cast Iron Pan")])),
    "/category/tools": _page("Power tools", _products([(1041, "Cordless Drill X100"), (1042, "Cordless Drill X200"), (1043, "Angle Grinder G5")])),
    "/product/1041": _page("Cordless Drill X100", "<p class='price'>Price: $99.00</p>"),
    "/product/1042": _page("Cordless Drill X200", "<p>18 V, two batteries, carry case.</p><p class='old-price'><s>Was $179.99</s></p><p class='price'>Now: $149.99</p>"),
    "/product/1043": _page("Angle Grinder G5", "<p class='price'>Price: $64.50</p>"),
    "/product/2001": _page("Hose Reel 30m", "<p class='price'>Price: $39.90</p>"),
    "/product/2002": _page("Pruning Shears", "<p class='price'>Price: $18.75</p>"),
    "/product/3001": _page("Chef Knife 20cm", "<p class='price'>Price: $54.00</p>"),
    "/product/3002": _page("Cast Iron Pan", "<p class='price'>Price: $42.00</p>"),
}


@contextlib.contextmanager
def environment(task_dir, workspace):
    with serve(pages_handler(PAGES)) as url:
        yield {"url": url}


def check(ctx):
    m = re.search(r"\d+(?:\.\d+)?", (ctx.submission or "").replace(",", ""))
    return 1.0 if m and abs(float(m.group()) - PRICE) < 0.005 else 0.0
