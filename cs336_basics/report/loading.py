"""What a report measures besides the tokenizer itself: held-out text read from a file, pretrained
tokenizers to compare with (loaded by name, or a reason why not), and the tokenizer cut to fewer
merges for the held-out curve.
"""

from dataclasses import dataclass
from pathlib import Path

from cs336_basics.bpe import Tokenizer

PRETRAINED = ["gpt2", "cl100k_base", "o200k_base"]  # what the report compares with unless told otherwise


@dataclass
class HeldOut:
    """A text the tokenizer was not trained on: its name and (a sample of) its content, the whole
    file's or its first part (`whole` False)."""

    name: str
    text: str
    whole: bool = True


def read_sample(path: str | Path, max_bytes: int) -> HeldOut:
    """The first `max_bytes` of a UTF-8 file (cut after the last whole line when it is longer)."""
    path = Path(path)
    data = bytearray()
    with open(path, "rb") as f:
        # In blocks: one read of `max_bytes` would allocate that much first (1T: MemoryError).
        while len(data) <= max_bytes:
            block = f.read(min(max_bytes + 1 - len(data), 1 << 20))
            if not block:
                break
            data += block
    data = bytes(data)
    cut = len(data) > max_bytes
    if cut:
        data = data[:max_bytes]
        newline = data.rfind(b"\n")
        if newline > max_bytes // 2:
            data = data[: newline + 1]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if not (cut and e.reason == "unexpected end of data" and len(data) - e.start < 4):
            raise ValueError(f"{path} is not valid UTF-8 at byte offset {e.start}") from None
        text = data[: e.start].decode("utf-8")  # the cut fell inside a character
    return HeldOut(path.name, text, whole=not cut)


def truncated(tokenizer: Tokenizer, num_merges: int) -> Tokenizer:
    """The tokens and merges that training would have given with only the first `num_merges` merges
    (the ids of the tokens kept stay as in `tokenizer`)."""
    merges = tokenizer.merges[:num_merges]
    keep = {bytes([b]) for b in range(256)} | {a + b for a, b in merges}
    keep |= {t.encode("utf-8") for t in tokenizer.special_tokens}
    vocab = {i: t for i, t in tokenizer.vocab.items() if t in keep}
    return Tokenizer(vocab, merges, tokenizer.special_tokens, pattern=tokenizer.pattern,
                     added_tokens=tokenizer.added_tokens, post_processor=tokenizer.post_processor)


def load_pretrained(name: str) -> tuple[Tokenizer | None, str]:
    """A pretrained tokenizer by name through `Tokenizer.from_pretrained`, or None and the reason."""
    load = getattr(Tokenizer, "from_pretrained", None)
    if load is None:
        return None, "this version of the package has no Tokenizer.from_pretrained"
    try:
        return load(name), ""
    except Exception as e:  # any failure (missing files, no network) only leaves this column out
        if _failed_download(e):
            return None, OFFLINE.format(name=name)
        return None, f"{type(e).__name__}: {e}".splitlines()[0][:200]


OFFLINE = ("not available offline: tiktoken downloads {name}'s rank file once; "
           "set TIKTOKEN_CACHE_DIR to a folder that holds it")


def _failed_download(error: BaseException) -> bool:
    """Whether a network failure (no connection, unknown host, timeout) is among the causes of `error`:
    tiktoken's download goes through `requests`, whose errors are OSErrors that name the host."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        names = {cls.__name__ for cls in type(error).__mro__}
        if isinstance(error, OSError) and names & {"ConnectionError", "Timeout", "TimeoutError", "URLError"}:
            return True
        error = error.__cause__ or error.__context__
    return False
