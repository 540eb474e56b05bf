cat > textutil.py <<'PY'
"""Text helpers for the blog engine."""
import re


def slugify(title):
    """URL slug of ``title``: lower case, non-alphanumeric runs -> '-', no edge dashes."""
    return re.sub(r"[^0-9a-z]+", "-", title.lower()).strip("-")


def word_count(text):
    """Number of whitespace-separated words."""
    return len(text.split())
PY
python test_textutil.py
