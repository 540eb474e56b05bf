"""Reward: the best POST to /contact, 0.2 for each of token, name, email, topic, and a
message mentioning INV-2041."""

import contextlib
import secrets

from iclr_cli.replay.checks import norm, pages_handler, serve

FORM = """<html><head><title>Contact us</title></head><body>
<h1>Contact us</h1>
<form method="post" action="/contact">
  <input type="hidden" name="token" value="{token}">
  <label>Name <input name="name"></label>
  <label>Email <input name="email" type="email"></label>
  <label>Topic <select name="topic">
    <option value="sales">Sales</option><option value="billing">Billing</option><option value="support">Support</option>
  </select></label>
  <label>Message <textarea name="message"></textarea></label>
  <button type="submit">Send</button>
</form></body></html>"""


@contextlib.contextmanager
def environment(task_dir, workspace):
    token = secrets.token_hex(8)
    posts = []

    def on_post(path, fields):
        if path != "/contact":
            return 404, "<h1>404 Not Found</h1>"
        posts.append({k: v[0] if v else "" for k, v in fields.items()})
        if fields.get("token", [""])[0] != token:
            return 403, "<h1>Form expired: reload the contact page and send it again.</h1>"
        return 200, f"<h1>Thank you!</h1><p>Your message was received as ticket T-{len(posts):04d}.</p>"

    pages = {"/": "<html><body><h1>Acme Ltd</h1><a href='/contact'>Contact us</a></body></html>", "/contact": FORM.format(token=token)}
    with serve(pages_handler(pages, on_post)) as url:
        yield {"url": url, "token": token, "posts": posts}


def _score(post, token):
    return 0.2 * sum([
        post.get("token") == token,
        norm(post.get("name", "")) == "ada lovelace",
        norm(post.get("email", "")) == "ada@example.org",
        norm(post.get("topic", "")) == "billing",
        "inv-2041" in norm(post.get("message", "")),
    ])


def check(ctx):
    posts = ctx.env.get("posts") or []
    return round(max((_score(p, ctx.env["token"]) for p in posts), default=0.0), 6)
