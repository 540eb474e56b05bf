"""Text helpers for the blog engine."""


def slugify(title):
    """URL slug of ``title``: lower case, non-alphanumeric runs -> '-', no edge dashes."""
    out = []
    for ch in title.lower():
        if ch.isalnum():
            out.append(ch)
        else:
            out.append("-")
    return "".join(out)


def word_count(text):
    """Number of whitespace-separated words."""
    return len(text.split())
