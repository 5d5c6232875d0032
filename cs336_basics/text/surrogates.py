"""Text that is not valid Unicode: a Python `str` can hold UTF-16 surrogates, which have no UTF-8 form.

They come from JSON (`json.loads('"\\ud83d"')`), from text that went through UTF-16 badly, and from
`surrogateescape`d bytes. `fix_surrogates` does what tiktoken does before encoding such text, so the
ids stay identical to tiktoken's: a surrogate pair becomes the one character it stands for, and every
other (lone) surrogate becomes U+FFFD. Anything that turns an outside `str` into token ids or training
text calls it.
"""


def fix_surrogates(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD; `text` itself if it
    has none (the usual case costs one UTF-8 encoding in C, nothing for ASCII).

    >>> fix_surrogates("\\ud83d\\ude00 \\ud83d!")
    '😀 �!'
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
