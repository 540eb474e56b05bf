from textutil import slugify, word_count


def test_simple():
    assert slugify("Hello World") == "hello-world"


def test_punctuation_runs():
    assert slugify("Hello,   World!!") == "hello-world"


def test_edges():
    assert slugify("  --Rust & Go--  ") == "rust-go"


def test_digits():
    assert slugify("Top 10 Tips (2024)") == "top-10-tips-2024"


def test_word_count():
    assert word_count("a b  c") == 3


if __name__ == "__main__":
    failed = 0
    for name, fn in sorted(globals().items()):
        if name.startswith("test_"):
            try:
                fn()
                print("PASS", name)
            except AssertionError as exc:
                failed += 1
                print("FAIL", name, exc)
    raise SystemExit(1 if failed else 0)
