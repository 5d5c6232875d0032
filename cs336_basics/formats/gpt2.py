"""The GPT-2 vocabulary and merges files (`vocab.json`, `merges.txt`): reading, checking and writing.

Token bytes are written through GPT-2's byte-to-unicode table, so every byte string, valid UTF-8 or
not, has a printable spelling; special tokens are written as their own text. Files are written all
or none (see `staged`).
"""

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from cs336_basics.formats.staged import atomic_write_texts


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table from each byte to a printable character.

    Printable Latin-1 bytes stand for themselves; the other 68 map to U+0100 and up, in byte order
    (so the space, byte 32, becomes 'Ġ' U+0120).
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


_BYTE_TO_CHAR = bytes_to_unicode()
_CHAR_TO_BYTE = {c: b for b, c in _BYTE_TO_CHAR.items()}


def token_to_text(token: bytes) -> str:
    """The GPT-2 file spelling of a token's bytes."""
    return "".join(_BYTE_TO_CHAR[b] for b in token)


def text_to_token(text: str) -> bytes | None:
    """The bytes a GPT-2 file spelling stands for; None if it holds a character outside the table."""
    try:
        return bytes(_CHAR_TO_BYTE[c] for c in text)
    except KeyError:
        return None


_VOCAB_SHA256 = "vocab-sha256="
MAX_TOKEN_ID = 0x10FFFF  # ids are held as characters chr(id) while encoding and training


def save_vocab_and_merges(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    vocab_path: str | os.PathLike,
    merges_path: str | os.PathLike,
    special_tokens: Iterable[str] = (),
) -> None:
    """Write `vocab.json` and `merges.txt` in the GPT-2 format, atomically (see `atomic_write_texts`).

    Tokens equal to the UTF-8 bytes of a special token are written as the special token's text.
    """
    vocab_text, merges_text = vocab_and_merges_texts(vocab, merges, special_tokens)
    atomic_write_texts({vocab_path: vocab_text, merges_path: merges_text})


def vocab_and_merges_texts(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: Iterable[str] = (),
    *,
    companions: dict[str, str] | None = None,
) -> tuple[str, str]:
    """The texts of `vocab.json` and `merges.txt` (see `save_vocab_and_merges`), to write together
    with other files.

    The version line of merges.txt names the sha256 of vocab.json, and of each `companions` file
    (name -> text) written beside them (see `companion_hashes`).
    """
    specials = {s.encode("utf-8"): s for s in special_tokens}
    spelled = {}
    for token_id in sorted(vocab):
        token = vocab[token_id]
        spelled[specials.get(token) or token_to_text(token)] = token_id
    if len(spelled) != len(vocab):
        raise ValueError("vocabulary holds two ids with the same bytes; it cannot be written as vocab.json")
    vocab_text = json.dumps(spelled, ensure_ascii=False, indent=0) + "\n"
    # The version line also names the vocab.json it belongs to; other readers skip the whole line.
    header = f"#version: 0.2 {_VOCAB_SHA256}{hashlib.sha256(vocab_text.encode('utf-8')).hexdigest()}"
    for name, text in (companions or {}).items():
        header += f" {name}-sha256={hashlib.sha256(text.encode('utf-8')).hexdigest()}"
    lines = [header] + [f"{token_to_text(a)} {token_to_text(b)}" for a, b in merges]
    return vocab_text, "\n".join(lines) + "\n"


def companion_hashes(merges_path: str | os.PathLike) -> dict[str, str]:
    """The files that merges.txt's version line names with their sha256 (vocab.json included)."""
    with open(merges_path, "rb") as f:
        first = f.readline().decode("utf-8-sig", errors="replace")
    if not first.startswith("#version"):
        return {}
    hashes = {}
    for field in first.split()[2:]:
        name, _, digest = field.rpartition("-sha256=")
        if name and digest:
            hashes["vocab.json" if name == "vocab" else name] = digest
    return hashes


def merge_lines(text: bytes) -> int:
    """How many merges a merges.txt of `text` holds (lines other than the version line and blank ones)."""
    lines = text.decode("utf-8-sig", errors="replace").splitlines()
    return sum(1 for n, line in enumerate(lines) if line.strip() and not (n == 0 and line.startswith("#version")))


def load_vocab_and_merges(
    vocab_path: str | os.PathLike,
    merges_path: str | os.PathLike,
    special_tokens: Iterable[str] = (),
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Read and check a GPT-2 `vocab.json` and `merges.txt`.

    A key that is one of `special_tokens`, or that is not written through the byte table, is taken
    as UTF-8 text. Raises ValueError naming the file and the key or line for: malformed JSON, a
    non-object, an id that is not a non-negative integer, two keys with one id or one byte string,
    a merges line without exactly two tokens, a merge naming a token absent from the vocabulary, or whose result is absent.
    """
    specials = set(special_tokens)
    raw = Path(vocab_path).read_bytes()

    def no_repeated_keys(pairs: list[tuple[str, object]]) -> dict:
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            repeated = next(key for key in keys if keys.count(key) > 1)
            raise ValueError(f"{vocab_path}: key {repeated!r} appears more than once")
        return dict(pairs)

    try:
        data = json.loads(raw.decode("utf-8-sig"), object_pairs_hook=no_repeated_keys)
    except UnicodeDecodeError as e:
        raise ValueError(f"{vocab_path}: not UTF-8 at byte {e.start}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{vocab_path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise ValueError(f"{vocab_path}: JSON nested too deeply to read (not a vocab.json)") from None
    if not isinstance(data, dict):
        raise ValueError(f"{vocab_path}: expected a JSON object mapping token to id, got {type(data).__name__}")

    vocab: dict[int, bytes] = {}
    seen: dict[bytes, str] = {}
    for key, token_id in data.items():
        if type(token_id) is not int or not 0 <= token_id <= MAX_TOKEN_ID:
            raise ValueError(
                f"{vocab_path}: key {key!r} has id {token_id!r}; ids must be integers from 0 to {MAX_TOKEN_ID}"
            )
        token = None if key in specials else text_to_token(key)
        if token is None:
            token = key.encode("utf-8")
        if token_id in vocab:
            raise ValueError(f"{vocab_path}: key {key!r} repeats id {token_id}")
        if token in seen:
            raise ValueError(f"{vocab_path}: keys {seen[token]!r} and {key!r} stand for the same bytes")
        vocab[token_id] = token
        seen[token] = key

    merges: list[tuple[bytes, bytes]] = []
    text = Path(merges_path).read_bytes()
    try:
        lines = text.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as e:
        raise ValueError(f"{merges_path}: not UTF-8 at byte {e.start}") from None
    if lines and lines[0].startswith("#version") and _VOCAB_SHA256 in lines[0]:
        expected = lines[0].split(_VOCAB_SHA256, 1)[1].split()[0]
        if hashlib.sha256(raw).hexdigest() != expected:
            raise ValueError(
                f"{merges_path} was written with another vocab.json than {vocab_path} "
                "(an interrupted save?); write both again"
            )
        if not text.endswith(b"\n"):  # ours ends every line; a copy cut short need not
            raise ValueError(f"{merges_path} ends inside line {len(lines)}, where every line of the file as saved "
                             "ends: a copy cut short? copy or save the tokenizer again")
    for number, line in enumerate(lines, start=1):
        if not line.strip() or (number == 1 and line.startswith("#version")):
            continue
        fields = line.split(" ")
        if len(fields) != 2 or not all(fields):
            raise ValueError(f"{merges_path}: line {number} must hold two tokens separated by one space: {line!r}")
        pair = []
        for field in fields:
            token = text_to_token(field)
            if token is None or token not in seen:
                raise ValueError(f"{merges_path}: line {number} names {field!r}, which is not in {vocab_path}")
            pair.append(token)
        if pair[0] + pair[1] not in seen:
            raise ValueError(
                f"{merges_path}: line {number} merges {fields[0]!r} and {fields[1]!r}, "
                f"but the result {token_to_text(pair[0] + pair[1])!r} is not in {vocab_path}"
            )
        merges.append((pair[0], pair[1]))
    return vocab, merges
