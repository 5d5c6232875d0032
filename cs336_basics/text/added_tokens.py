"""Hugging Face added tokens under a pipeline (see `pipelines`), matched as `tokenizers` matches them.

A `tokenizer.json` marks each added token as normalized or not (`flags`, given beside the pattern: see
`formats.definition`). `tokenizers` matches them in two rounds: those not normalized on the raw text, then, in the text between them once normalized, the
normalized ones (by their normalized text). `AddedTokens`, built once per tokenizer, turns a text
into the keys its encode cache takes: added tokens, marked with a surrogate so that no pre-token
reads as one (text holds no surrogates: they are fixed first), and the chunks or pre-tokens of the
normalized text between them. It also says where a text may be cut, each side encoded alone.
"""

from collections.abc import Callable

from cs336_basics.text.pipelines import Pipeline
from cs336_basics.text.pretokenize import special_token_regex

# The first character of the cache key of an added token matched in the first round (on the raw
# text) and in the second (on normalized text).
RAW_ADDED, NORMALIZED_ADDED = "\ud800", "\ud801"


def can_take_from(later: list[str], first: list[str]) -> bool:
    """Whether an occurrence of a token of `later` (matched in the second round) can start before,
    or where, an occurrence of a token of `first` (the first round) that it overlaps: it holds one,
    or a proper suffix of it is a proper prefix of one. Only then can matching all the tokens in one
    round (leftmost, then longest) differ from matching `first`, then `later` between them. (A
    token is not counted as holding itself: given one list twice, this says whether any two of its
    tokens overlap.)"""
    if not first or not later:
        return False
    suffixes = {token[i:] for token in later for i in range(1, len(token))}
    if any(token[:i] in suffixes for token in first for i in range(1, len(token))):
        return True
    return any(a in b for a in first for b in later if a != b)


def cut_before_normalized(normalized: list[str], tokens: list[str]) -> list[str]:
    """The normalized added tokens before whose occurrences in the raw text a text may be cut, each
    side encoded alone as when whole: those whose first character is ASCII (no ASCII character
    composes with, or is reordered around, the one before it, so the text before the cut normalizes
    alone, and the token itself is unchanged), when no added token overlaps another (holds one, or
    has a proper suffix that is a proper prefix of one), so no match can span the cut."""
    if can_take_from(tokens, tokens):
        return []
    return [t for t in normalized if t[0].isascii()]


class AddedTokens:
    """The added tokens (`special_tokens`) of a tokenizer under `pipeline`; `flags` holds their
    `(special, normalized)` flags where these are not (True, False).

    `plain` is true when one round of all the tokens on the raw text finds what the two rounds
    find (no normalizer, and no token of the second round can take text from one of the first, see
    `can_take_from`): the tokenizer's plain path, with its speed, is then exact, and `keys` is
    not needed. `fixed` maps each token to its packed id; `cache_keys` holds the cache's fixed keys.
    `cut_tokens` are those before which a text may be cut.
    """

    def __init__(self, pipeline: Pipeline, special_tokens: list[str], fixed: dict[str, bytes],
                 flags: dict[str, tuple[bool, bool]]):
        self.pipeline = pipeline
        is_normalized = {t for t, (_, normalized) in flags.items() if normalized}.__contains__
        raw = [t for t in special_tokens if not is_normalized(t)]
        normalized = {pipeline.normalize(t): t for t in special_tokens if is_normalized(t)}
        self.plain: bool = not pipeline.normalizers and not can_take_from(list(normalized), raw)
        self.raw_re = special_token_regex(raw, keep=True)
        self.normalized_re = special_token_regex(normalized, keep=True)
        if self.plain:
            self.cache_keys = fixed
            self.cut_tokens = special_tokens
        else:
            self.cache_keys = {RAW_ADDED + t: fixed[t] for t in raw}
            self.cache_keys.update((NORMALIZED_ADDED + text, fixed[t]) for text, t in normalized.items())
            # Before the tokens of the first round, and the normalized ones `cut_before_normalized`
            # allows (the text around others is normalized, or matched, with them).
            normalized_tokens = [t for t in special_tokens if is_normalized(t)]
            allowed = set(cut_before_normalized(normalized_tokens, special_tokens))
            self.cut_tokens = [t for t in special_tokens if not is_normalized(t) or t in allowed]

    def keys(self, text: str, split: Callable[[str], list[str]]) -> list[str]:
        """The cache keys of text (no surrogates): added tokens (marked, see the module docstring),
        and `split` of the normalized text between them."""
        pipeline = self.pipeline
        raw_re, normalized_re = self.raw_re, self.normalized_re
        normalize = pipeline.normalize if pipeline.normalizers else None
        keys: list[str] = []
        for i, part in enumerate(raw_re.split(text) if raw_re is not None else [text]):
            if i % 2:
                keys.append(RAW_ADDED + part)
                continue
            if not part:
                continue
            if normalize is not None:
                part = normalize(part)
            if normalized_re is None:
                keys += split(part)
                continue
            for j, piece in enumerate(normalized_re.split(part)):
                if j % 2:
                    keys.append(NORMALIZED_ADDED + piece)
                elif piece:
                    keys += split(piece)
        return keys
