"""The public face of the library: `train_bpe` and `Tokenizer`.

    >>> vocab, merges = train_bpe("corpus.txt", 1000, ["<|endoftext|>"])
    >>> tok = Tokenizer(vocab, merges, ["<|endoftext|>"])
    >>> tok.decode(tok.encode("Hello<|endoftext|>")) == "Hello<|endoftext|>"
    True

The steps live in packages by job, each with a docstring naming the module to open first: `text`
(patterns, pre-tokenization, surrogates), `corpora` (reading corpora into work units and running
them on processes or any executor), `formats` (tokenizer files in and out), `train` (counting and
the merge loop) and `encode` (BPE on a pre-token, its cache, and corpora to token arrays). Nothing
in them imports this module, the command line or the report.
"""

import concurrent.futures
import contextlib
import os
import time
from array import array
from collections.abc import Callable, Iterable, Iterator

from cs336_basics.corpora import executors, sources
from cs336_basics.encode import engines
from cs336_basics.encode.encoder import EncodeCache, MergeTable, build_merge_table, id_packing
from cs336_basics.formats import gpt2
from cs336_basics.text import patterns
from cs336_basics.text.pretokenize import special_token_regex, validate_special_tokens
from cs336_basics.text.surrogates import fix_surrogates
from cs336_basics.train import counting
from cs336_basics.train.merge import train_merges

# Below these sizes one process is faster than starting workers.
_PARALLEL_MIN_BYTES = 4 << 20
_PARALLEL_MIN_WORDS = 20_000
# `encode` hands the cache at most this many chunks at a time: few enough that the chunks, just
# made, and their ids stay in the processor's cache from lookup to join (8 Ki measured faster than
# 64 Ki on warm and on 2-worker encoding).
_CHUNKS_PER_CALL = 1 << 13


def default_num_workers(file_size: int) -> int:
    """All the cores this process may use, or 1 for a small file."""
    if file_size < _PARALLEL_MIN_BYTES:
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_vocab_size(vocab_size: int, special_tokens: list[str]) -> None:
    """Raise ValueError unless vocab_size is an int of at least 256 + the number of special tokens."""
    minimum = 256 + len(special_tokens)
    if type(vocab_size) is not int:
        raise ValueError(f"vocab_size must be an int, got {vocab_size!r}")
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size {vocab_size} is below the minimum {minimum} "
            f"(256 single bytes + {len(special_tokens)} special tokens)"
        )


def train_bpe(
    input_path: "str | os.PathLike | list[str | os.PathLike]",
    vocab_size: int,
    special_tokens: list[str],
    *,
    pattern: str = "gpt2",
    num_workers: int | None = None,
    piece_size: int | None = None,
    executor: "concurrent.futures.Executor | None" = None,
    text_field: str = "text",
    progress: bool = False,
    stats: dict | None = None,
    merge_log: list[tuple[int, int]] | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer on a UTF-8 text file, exactly as CS336 specifies.

    `input_path` may also be a folder, a glob, a URL (with fsspec) or a list of these, of `.txt`,
    `.jsonl` (the document in field `text_field`) and `.parquet` (column `text_field`) files,
    `.txt` and `.jsonl` possibly compressed (see `sources`). Each record and each file is a document.

    Returns `(vocab, merges)`: ids 0-255 are the single bytes, then one id per merge in creation
    order, then the special tokens in the order given. `len(vocab) == vocab_size` unless the corpus
    runs out of pairs first. Special tokens cut the text into documents and are never merged. Each
    step merges the most frequent pair; ties go to the lexicographically greatest
    `(left_bytes, right_bytes)`.

    Options: `pattern` is the pre-tokenization pattern: "gpt2" (the default), "cl100k", "o200k",
    "none" (each document is one sequence) or a regex (see `patterns`). `num_workers` processes
    count pre-tokens and share the merge loop (default: all cores, one for small files);
    `executor`, any `concurrent.futures.Executor` (e.g. a Dask client's `get_executor()`), counts
    instead of local processes; `piece_size` is the most bytes one worker task reads (tests use
    tiny ones). The result depends on none of these. `progress` shows progress bars on stderr. A
    `stats` dict, if given, receives `count_seconds`, `merge_seconds`, `distinct_pretokens`,
    `input_bytes`, `pretoken_bytes` (the corpus length in bytes without the special tokens),
    `byte_counts` (how often each byte value occurs in it: with the merge log, each token's count in
    the encoded corpus, see `merge_log.token_occurrences`) and `num_workers`. A `merge_log` list, if given, receives one `(count, tokens)` per merge: the
    pair's count when it was chosen, and the training corpus's length in tokens after the merge
    (special tokens not counted, so it starts from `pretoken_bytes`).
    """
    special_tokens, pattern = _checked_training_options(special_tokens, pattern, vocab_size, num_workers)
    files = sources.resolve(input_path)
    size = sum(f.size for f in files)
    workers = default_num_workers(size) if num_workers is None else num_workers

    started = time.perf_counter()
    if piece_size is None:
        width = workers if executor is None else executors.executor_width(executor, workers)
        piece_size = counting.default_piece_size(size, width, local=executor is None)
    units = sources.plan_units(
        files, piece_size=piece_size, special_tokens=special_tokens, text_field=text_field, pattern=pattern
    )
    with _progress_bar(progress, total=size, unit="B", unit_scale=True, desc="counting") as bar:
        word_counts = counting.count_pretokens(
            units,
            num_workers=workers,
            executor=executor,
            task_size=piece_size,
            on_progress=(lambda done: bar.update(done - bar.n)) if bar else None,
        )
    handed_over = [word_counts]  # the only reference: the merge loop may free the counts (see below)
    del word_counts
    return _train_from_counts(handed_over, vocab_size, special_tokens, workers, started, size, progress, stats,
                              merge_log)


def train_bpe_from_iterator(
    documents: Iterable,
    vocab_size: int,
    special_tokens: list[str],
    *,
    pattern: str = "gpt2",
    num_workers: int | None = None,
    text_field: str = "text",
    progress: bool = False,
    stats: dict | None = None,
    merge_log: list[tuple[int, int]] | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """`train_bpe` on documents from any iterable: a list, a generator, a `datasets` dataset.

    Each item is one document: a str, or a mapping (a dataset's row) whose `text_field` holds
    one. The merges are those of `train_bpe` on a `.txt` of the documents joined by the first
    special token (with none, of a `.jsonl` of them: each stays a document of its own). Batches of
    documents go to `num_workers` processes (default: all cores), a few at a time, so memory
    stays flat on an endless stream. The options are `train_bpe`'s.

    >>> vocab, merges = train_bpe_from_iterator((row["text"] for row in rows), 10_000, ["<|endoftext|>"])  # doctest: +SKIP
    """
    special_tokens, pattern = _checked_training_options(special_tokens, pattern, vocab_size, num_workers)
    if isinstance(documents, (str, bytes, os.PathLike)):
        raise TypeError("train_bpe_from_iterator takes an iterable of documents; for a file or folder use train_bpe")
    workers = num_workers or default_num_workers(_PARALLEL_MIN_BYTES)
    started = time.perf_counter()
    handed_over = [counting.count_documents(
        documents, special_tokens=special_tokens, pattern=pattern, num_workers=workers, text_field=text_field
    )]
    return _train_from_counts(handed_over, vocab_size, special_tokens, workers, started, None, progress, stats,
                              merge_log)


def _train_from_counts(handed_over, vocab_size, special_tokens, workers, started, size, progress, stats, merge_log):
    """The merges and vocabulary learned from pre-token counts, given as the one item of the list
    `handed_over`, which holds the only reference to them (the part `train_bpe` and
    `train_bpe_from_iterator` share once the corpus is counted)."""
    word_counts = handed_over.pop()
    distinct = len(word_counts)
    wanted = stats is not None or merge_log is not None
    corpus_bytes = sum(len(word) * n for word, n in word_counts.items()) if wanted else 0
    byte_counts = counting.byte_counts(word_counts) if stats is not None else None
    counted = time.perf_counter()

    num_merges = vocab_size - 256 - len(special_tokens)
    steps: list[tuple[int, int]] | None = [] if merge_log is not None else None
    # train_merges is given the only reference to the counts, so it can free them once it has
    # copied them into its own form, before the loop grows.
    handed_over = [word_counts]
    del word_counts
    with _progress_bar(progress, total=num_merges, unit="merge", desc="merging") as bar:
        merges = train_merges(
            handed_over.pop(),
            num_merges,
            num_shards=workers if distinct >= _PARALLEL_MIN_WORDS else 1,
            on_merge=(lambda k: bar.update(1)) if bar else None,
            merge_log=steps,
        )
    if merge_log is not None:
        tokens = corpus_bytes
        for count, shrink in steps:
            tokens -= shrink
            merge_log.append((count, tokens))
    if stats is not None:
        stats.update(
            count_seconds=counted - started,
            merge_seconds=time.perf_counter() - counted,
            distinct_pretokens=distinct,
            pretoken_bytes=corpus_bytes,
            input_bytes=corpus_bytes if size is None else size,
            num_workers=workers,
            byte_counts=byte_counts,
        )

    vocab = {i: bytes([i]) for i in range(256)}
    for left, right in merges:
        vocab[len(vocab)] = left + right
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def _checked_training_options(special_tokens, pattern, vocab_size, num_workers) -> tuple[list[str], str]:
    """The special tokens as a list and the canonical pattern; ValueError for anything wrong."""
    special_tokens = validate_special_tokens(special_tokens)
    pattern = patterns.canonical(pattern)
    for token in special_tokens:
        if len(token.encode("utf-8")) == 1:
            raise ValueError(
                f"special token {token!r} is a single byte, which is already token {ord(token)}; "
                "special tokens for training need at least two bytes"
            )
    check_vocab_size(vocab_size, special_tokens)
    if num_workers is not None and (type(num_workers) is not int or num_workers < 1):
        raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
    return special_tokens, pattern


def _progress_bar(enabled: bool, **kwargs):
    """A tqdm bar, or a context giving None when progress is off (the library is quiet by default)."""
    if not enabled:
        return contextlib.nullcontext()
    from tqdm import tqdm

    return tqdm(**kwargs)


def _can_take_from(later: list[str], first: list[str]) -> bool:
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


def _cut_before_normalized(normalized: list[str], tokens: list[str]) -> list[str]:
    """The normalized added tokens before whose occurrences in the raw text a text may be cut, each
    side encoded alone as when whole: those whose first character is ASCII (no ASCII character
    composes with, or is reordered around, the one before it, so the text before the cut normalizes
    alone, and the token itself is unchanged), when no added token overlaps another (holds one, or
    has a proper suffix that is a proper prefix of one), so no match can span the cut."""
    if _can_take_from(tokens, tokens):
        return []
    return [t for t in normalized if t[0].isascii()]


# Marks the cache keys of added tokens under a Hugging Face pipeline (see `Tokenizer._set_up_pipeline`).
_RAW_ADDED, _NORMALIZED_ADDED = "\ud800", "\ud801"


class Tokenizer:
    """Encodes text to token ids and decodes ids to text with a byte-level BPE vocabulary.

    Ids equal tiktoken's for the same vocabulary, with the special tokens allowed. Special tokens
    missing from `vocab` are added with the next free ids.

    >>> tok = Tokenizer.from_files("vocab.json", "merges.txt", special_tokens=["<|endoftext|>"])
    >>> tok.decode(tok.encode("hello world"))
    'hello world'
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: list[str] | None = None,
        *,
        pattern: str = "gpt2",
        cache_size: int = 1 << 20,  # entries per cache generation (see EncodeCache)
    ):
        self._pretokenizer = patterns.get(pattern)
        self.pattern: str = self._pretokenizer.name  # canonical: "gpt2", "cl100k", "o200k", "none" or the regex
        self.special_tokens = validate_special_tokens(special_tokens)
        self.cache_size = cache_size
        self.vocab = _checked_vocab(vocab)
        self.merges = _checked_merges(merges)
        ids = {token: token_id for token_id, token in self.vocab.items()}
        next_id = max(self.vocab, default=-1) + 1
        for token in self.special_tokens:
            token_bytes = token.encode("utf-8")
            if token_bytes not in ids:
                self.vocab[next_id] = token_bytes
                ids[token_bytes] = next_id
                next_id += 1

        # Everything below is derived from the three fields above, here and nowhere else.
        self._table: MergeTable = build_merge_table(self.vocab, self.merges)
        self._special_ids = {token: ids[token.encode("utf-8")] for token in self.special_tokens}
        self._special_re = special_token_regex(self.special_tokens, keep=True)
        self._max_special_len = max(map(len, self.special_tokens), default=0)
        self._decoder: list[bytes | None] = [None] * next_id
        for token_id, token in self.vocab.items():
            self._decoder[token_id] = token
        pretokenizer = self._pretokenizer
        # Ids travel packed in bytes (2 or 4 per id) from the cache to the output.
        self._id_typecode, codec = id_packing(next_id - 1)
        self.packed_dtype: str = "=u2" if self._id_typecode == "H" else "=u4"  # see encode_packed
        fixed = {token: chr(i).encode(codec, "surrogatepass") for token, i in self._special_ids.items()}
        self._pipeline = pipeline = pretokenizer.pipeline
        whole = None
        if pipeline is not None:
            fixed, whole = self._set_up_pipeline(pipeline, fixed, codec)
        self.cache = EncodeCache(
            self._table, cache_size, pretokenizer=pretokenizer, codec=codec, fixed=fixed, whole=whole,
        )
        self._split = pretokenizer.chunks if pretokenizer.boundary else pretokenizer.pretokens
        # Where a text may be cut, each side encoded alone (`encode_iterable`, see `_last_safe_cut`, and
        # the corpus paths, which cut files into pieces): before any special token, but under a pipeline
        # that matches added tokens in two rounds only before those of the first round and the normalized
        # ones `_cut_before_normalized` allows (the text around others is normalized, or matched, with them).
        self.cut_tokens = self.special_tokens
        if pipeline is not None and not self._plain_added:
            normalized = [t for t in self.special_tokens if pipeline.is_normalized(t)]
            allowed = set(_cut_before_normalized(normalized, self.special_tokens))
            self.cut_tokens = [t for t in self.special_tokens if not pipeline.is_normalized(t) or t in allowed]
        if pipeline is not None and not pretokenizer.boundary:
            self._split = pipeline.pretokens  # of text already normalized

    def _set_up_pipeline(self, pipeline, fixed: dict[str, bytes], codec: str):
        """The cache's fixed keys and whole pre-tokens for a Hugging Face pipeline (see `text.pipelines`).

        Added tokens are matched in two rounds, as `tokenizers` does: those not normalized on the
        raw text, then, in the text between them once normalized, the normalized ones (by their
        normalized text). Their cache keys start with a surrogate, which no text holds (surrogates
        are fixed first), so a pre-token never reads as an added token.
        """
        raw = [t for t in self.special_tokens if not pipeline.is_normalized(t)]
        normalized = {pipeline.normalize(t): t for t in self.special_tokens if pipeline.is_normalized(t)}
        # Without a normalizer, and when no token of the second round can take text from one of the
        # first (see `_can_take_from`), the two rounds find what one round of all tokens finds, and
        # text between added tokens never spells one: the plain path, with its speed, is exact.
        self._plain_added = not pipeline.normalizers and not _can_take_from(list(normalized), raw)
        self._raw_added_re = special_token_regex(raw, keep=True)
        self._normalized_added_re = special_token_regex(normalized, keep=True)
        if self._plain_added:
            keys = fixed
        else:
            keys = {_RAW_ADDED + t: fixed[t] for t in raw}
            keys.update((_NORMALIZED_ADDED + text, fixed[t]) for text, t in normalized.items())
        whole = None
        if pipeline.ignore_merges:
            # The vocabulary's tokens that are text (a pre-token is), with their ids packed.
            whole = {}
            for token_id, token in self.vocab.items():
                try:
                    whole[token.decode("utf-8")] = chr(token_id).encode(codec, "surrogatepass")
                except UnicodeDecodeError:
                    pass
        self._template = ([], [])
        if pipeline.post_processor is not None:
            from cs336_basics.formats.hf import template_ids

            self._template = template_ids(pipeline.post_processor)
        return keys, whole

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: list[str] | None = None,
        *,
        pattern: str = "gpt2",
    ) -> "Tokenizer":
        """Load a GPT-2 format `vocab.json` and `merges.txt` (see `formats.gpt2`), to pre-tokenize with `pattern`."""
        special_tokens = validate_special_tokens(special_tokens)
        patterns.canonical(pattern)  # a bad pattern fails before the files are read
        vocab, merges = gpt2.load_vocab_and_merges(vocab_filepath, merges_filepath, special_tokens)
        try:
            return cls(vocab, merges, special_tokens, pattern=pattern)
        except ValueError as e:
            raise ValueError(f"{vocab_filepath}, {merges_filepath}: {e}") from None

    def save(self, vocab_filepath: str | os.PathLike, merges_filepath: str | os.PathLike) -> None:
        """Write `vocab.json` and `merges.txt` in the GPT-2 format; an interrupted save leaves the old
        files, or new files that `from_files` refuses as a mismatched pair (see `formats.gpt2`)."""
        gpt2.save_vocab_and_merges(self.vocab, self.merges, vocab_filepath, merges_filepath, self.special_tokens)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: "str | os.PathLike",
        *,
        pattern: str | None = None,
        special_tokens: "list[str] | dict[str, int] | None" = None,
        sha256: str | None = None,
    ) -> "Tokenizer":
        """Load a pretrained encoding by name, a directory, a `tokenizer.json` or a `.tiktoken` file.

        Names: "gpt2", "r50k_base", "p50k_base", "cl100k_base", "o200k_base", read through tiktoken
        (an optional extra) with tiktoken's ids. A directory written by `save_pretrained` (or a
        `tokenizer.json`) brings its own pattern and special tokens; a directory with only
        `vocab.json` and `merges.txt` uses the GPT-2 pattern. A `.tiktoken` rank file takes
        `pattern` (default "gpt2"), `special_tokens` (a dict text -> id, or a list given the next
        ids) and `sha256`, checked before anything is read. See `pretrained.load`.

        >>> tok = Tokenizer.from_pretrained("cl100k_base")  # doctest: +SKIP
        >>> tok.encode("hello world")  # doctest: +SKIP
        [15339, 1917]
        """
        from cs336_basics.formats import pretrained

        loaded = pretrained.load(name_or_path, pattern=pattern, special_tokens=special_tokens, sha256=sha256)
        try:
            return cls(loaded.vocab, loaded.merges, loaded.special_tokens, pattern=loaded.pattern)
        except ValueError as e:
            raise ValueError(f"{name_or_path}: {e}") from None

    def save_pretrained(self, directory: "str | os.PathLike") -> None:
        """Write `vocab.json`, `merges.txt` and `tokenizer.json` (Hugging Face's format, holding the
        pattern and the special tokens) into `directory`, atomically (see `pretrained.save`)."""
        from cs336_basics.formats import pretrained

        pretrained.save(directory, self.vocab, self.merges, self.special_tokens, self.pattern)

    def to_tiktoken(self, *, name: str = "cs336"):
        """A `tiktoken.Encoding` giving our ids on any text (special tokens allowed with
        `allowed_special="all"`); ValueError when our ids cannot be tiktoken ranks."""
        from cs336_basics.formats import pretrained

        patterns.regex_string(self.pattern)  # a pipeline is refused here, before the ranks are checked
        return pretrained.to_tiktoken(self.vocab, self.merges, self.special_tokens, self.pattern, name=name)

    def save_tiktoken(self, path: "str | os.PathLike") -> None:
        """Write our ids as a `.tiktoken` rank file (special tokens are not part of it), atomically;
        ValueError when the ids cannot be ranks (e.g. a vocabulary imported from Hugging Face)."""
        from cs336_basics.formats.tiktoken import ranks_from_vocab, save_ranks

        save_ranks(ranks_from_vocab(self.vocab, self.merges, self.special_tokens), path)

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        """The token ids of `text`; special tokens in it become their ids. As in tiktoken, a
        surrogate pair in `text` counts as the character it stands for and a lone surrogate as U+FFFD.

        `add_special_tokens=True` adds what the post-processor of a loaded `tokenizer.json` adds to
        one sequence (e.g. Llama 3's beginning-of-text token), as Hugging Face's
        `encode(text, add_special_tokens=True)`; without one it changes nothing.

        >>> tok.encode("hi<|endoftext|>")  # doctest: +SKIP
        [5303, 50256]
        """
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        ids = self._encode_valid(fix_surrogates(text))
        if add_special_tokens and self._pipeline is not None:
            before, after = self._template
            ids = [*before, *ids, *after]
        return ids

    def _encode_valid(self, text: str) -> list[int]:
        """`encode` of text that holds no surrogates."""
        return array(self._id_typecode, self._encode_packed(text)).tolist()

    def encode_packed(self, text: str) -> bytes:
        """The ids of `encode(text)` packed as native unsigned ints of `packed_dtype` (16 bits when
        every id fits, else 32): `numpy.frombuffer(data, tokenizer.packed_dtype)` reads them."""
        if not isinstance(text, str):
            raise TypeError(f"encode_packed takes a str, got {type(text).__name__}")
        return self._encode_packed(fix_surrogates(text))

    def _encode_packed(self, text: str) -> bytes:
        """The ids of text that holds no surrogates, packed as `id_packing` says. The chunks of its
        documents and its special tokens (the cache knows their ids) go to the cache together, some
        `_CHUNKS_PER_CALL` at a time."""
        if self._pipeline is not None and not self._plain_added:
            return self._encode_chunks(self._pipeline_keys(text))
        if self._special_re is None:
            return self._encode_chunks(self._split(text))
        out: list[bytes] = []
        chunks: list[str] = []
        split = self._split
        for i, part in enumerate(self._special_re.split(text)):
            if i % 2:
                chunks.append(part)
            elif part:
                chunks += split(part)
                if len(chunks) >= _CHUNKS_PER_CALL:
                    out.append(self._encode_chunks(chunks))
                    chunks = []
        out.append(self.cache.encode(chunks))
        return b"".join(out)

    def _pipeline_keys(self, text: str) -> list[str]:
        """The cache keys of text (no surrogates) for a Hugging Face pipeline: added tokens (marked,
        see `_set_up_pipeline`), and chunks or pre-tokens of the normalized text between them."""
        pipeline = self._pipeline
        raw_re, normalized_re, split = self._raw_added_re, self._normalized_added_re, self._split
        normalize = pipeline.normalize if pipeline.normalizers else None
        keys: list[str] = []
        for i, part in enumerate(raw_re.split(text) if raw_re is not None else [text]):
            if i % 2:
                keys.append(_RAW_ADDED + part)
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
                    keys.append(_NORMALIZED_ADDED + piece)
                elif piece:
                    keys += split(piece)
        return keys

    def _encode_chunks(self, chunks: list[str]) -> bytes:
        """The packed ids of chunks, handed to the cache `_CHUNKS_PER_CALL` at a time."""
        encode = self.cache.encode
        if len(chunks) <= _CHUNKS_PER_CALL:
            return encode(chunks)
        return b"".join([encode(chunks[i : i + _CHUNKS_PER_CALL]) for i in range(0, len(chunks), _CHUNKS_PER_CALL)])

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Yield the ids of `"".join(iterable)`, holding only about one piece of text at a time.

        Text is encoded up to the last place where it can be cut without changing any pre-token or
        special token, so the ids are exactly those of `encode` on the joined text (also when a
        surrogate pair is split between two pieces).
        """
        buffer = ""
        searched = 0  # where the next search for a cut starts: before it, none was found
        held = ""  # a high surrogate ending the last piece: the next may start with its other half
        for piece in iterable:
            piece = held + piece
            held = piece[-1] if piece and "\ud800" <= piece[-1] <= "\udbff" else ""
            buffer += fix_surrogates(piece[: len(piece) - len(held)])  # so cuts are found in fixed text
            if len(buffer) - searched < 4096:
                continue
            cut, searched = self._last_safe_cut(buffer, searched)
            if cut > 0:
                yield from self._encode_valid(buffer[:cut])
                buffer = buffer[cut:]
                searched = 0
        buffer += fix_surrogates(held)
        if buffer:
            yield from self._encode_valid(buffer)

    def _last_safe_cut(self, text: str, start: int) -> tuple[int, int]:
        """The last offset after `start` where `text` can be cut whatever follows it (0 if none
        is found), and where the next search may start.

        A cut is a safe boundary of the pattern (see `patterns`; for GPT-2, the start of a
        whitespace run after a non-whitespace character) or the start of a special token, with no
        special token spanning it, and far enough from the end that no special token could start
        before it and end after the text. Only a few candidates are tried, so text
        that offers none (all whitespace, or overlapping special tokens) costs linear time.
        """
        last_boundary = self._pretokenizer.last_boundary
        limit = len(text) - max(self._max_special_len, 1)
        next_start = max(limit, start)
        for _ in range(16):
            if limit <= start:
                break
            m = last_boundary.match(text, start, limit + 1) if last_boundary is not None else None
            cut = m.end() if m else -1
            for token in self.cut_tokens:
                cut = max(cut, text.rfind(token, start, limit + len(token)))
            if cut < max(start, 1):
                break
            if not self._spanned_by_special(text, cut):
                return cut, next_start
            limit = cut - 1
        return 0, next_start

    def _spanned_by_special(self, text: str, pos: int) -> bool:
        for token in self.special_tokens:
            i = text.find(token, max(pos - len(token) + 1, 0), pos + len(token) - 1)
            if i != -1 and i < pos:
                return True
        return False

    def encode_file(
        self,
        input_paths: "str | os.PathLike | list[str | os.PathLike]",
        output_path: str | os.PathLike,
        *,
        num_workers: int | None = None,
        executor: "concurrent.futures.Executor | None" = None,
        piece_size: int = 1 << 20,
        text_field: str = "text",
        dtype: str | None = None,
        on_progress: Callable[[int], None] | None = None,
        engine: "str | engines.Choice" = "auto",
    ) -> int:
        """Encode a corpus, in order, into one NumPy array file (`np.load(path, mmap_mode="r")`).

        The corpus is files, folders, globs or URLs of `.txt`, `.jsonl` and `.parquet` (see
        `sources`; `text_field` names the JSON field or Parquet column). Its documents are joined
        with the first special token, so the ids equal `encode` of one `.txt` of them; a single
        `.txt` file encodes exactly as `encode` of its text. Workers (default: all cores, one for
        small input; or any `concurrent.futures.Executor`, e.g. Dask's) encode pieces of about
        `piece_size` bytes, so memory stays bounded whatever the corpus size (local workers also
        share the words they encode, see `token_arrays`); the array is uint16
        when every id fits (else uint32) unless `dtype` says otherwise. The output appears only
        when complete. Returns the number of tokens.

        `engine`: "python" (ours), "tiktoken" (tiktoken's BPE over our vocabulary, one thread per
        worker; refused, with the reason, where it cannot give our ids), "auto" (tiktoken where it
        is installed and gives our ids, on inputs of 4 MB or more; else ours), or a choice made by
        `engines.choose`, which also says why. The ids are the same with each (see
        `encode/engines.py`).
        """
        from cs336_basics.encode.token_arrays import encode_files

        files = sources.resolve(input_paths)
        sources.refuse_output_among_inputs(output_path, files)  # before planning: an empty file has no units
        if num_workers is None:
            num_workers = default_num_workers(sum(f.size for f in files))
        units = sources.plan_units(
            files, piece_size=piece_size, special_tokens=self.cut_tokens, text_field=text_field,
            pattern=self.pattern,
        )
        return encode_files(
            self, units, output_path, num_workers=num_workers, executor=executor, dtype=dtype,
            on_progress=on_progress, engine=engines.choose(self, engine, input_bytes=sum(f.size for f in files)),
        )

    def encode_dataset(
        self,
        inputs: "str | os.PathLike | list[str | os.PathLike]",
        directory: str | os.PathLike,
        *,
        shard_size: int | None = None,
        num_workers: int | None = None,
        executor: "concurrent.futures.Executor | None" = None,
        piece_size: int | None = None,
        text_field: str = "text",
        dtype: str | None = None,
        overwrite: bool = False,
        on_progress: Callable[[int], None] | None = None,
        engine: "str | engines.Choice" = "auto",
    ):
        """Encode a corpus into a dataset directory for training: shards of about `shard_size`
        bytes of ids (default 256 MiB), each with its document starts, and `manifest.json`
        written last (see `cs336_basics.datasets.layout`). Concatenated, the shards hold exactly
        what `encode_file` writes for the same corpus.

        Each shard is written by the worker that encodes it. Run again after any stop, it keeps
        what is complete and checks out (size and sha256) and encodes only the rest; the result is
        byte-identical to an uninterrupted run. A directory written with another tokenizer,
        pattern, input file or shard size is refused, naming what changed, unless `overwrite`.
        `engine` is as for `encode_file` (the ids are the same with each). Returns a
        `datasets.writer.Written` (totals, and how much was reused).

        >>> tok.encode_dataset("corpus/", "data/corpus", shard_size=64 << 20)  # doctest: +SKIP
        """
        from cs336_basics.datasets.writer import DEFAULT_SHARD_SIZE, write_dataset

        if shard_size is None:
            shard_size = DEFAULT_SHARD_SIZE
        if num_workers is None:
            num_workers = default_num_workers(sum(f.size for f in sources.resolve(inputs)))
        return write_dataset(
            self, inputs, directory, shard_size=shard_size, piece_size=piece_size, num_workers=num_workers,
            executor=executor, dtype=dtype, overwrite=overwrite, text_field=text_field, on_progress=on_progress,
            engine=engine,
        )

    def encode_dataset_from_iterator(
        self,
        documents: Iterable,
        directory: str | os.PathLike,
        *,
        shard_size: int | None = None,
        num_workers: int | None = None,
        executor: "concurrent.futures.Executor | None" = None,
        piece_size: int | None = None,
        text_field: str = "text",
        dtype: str | None = None,
        overwrite: bool = False,
        resume: bool = False,
        on_progress: Callable[[int], None] | None = None,
        engine: "str | engines.Choice" = "auto",
    ):
        """`encode_dataset` of documents from any iterable (a list, a generator, a `datasets`
        dataset; items are str, or mappings whose `text_field` holds one): the dataset of a `.txt`
        of them joined by the first special token, each document ending at its separator. Batches
        of about `piece_size` characters go to `num_workers` processes (default: all cores), two
        per worker in flight, so memory stays flat on an endless stream.

        An iterable cannot be replayed, so a directory that already holds a dataset written from
        one is refused unless `resume=True`: pass the same documents from the start, and the shards
        whose documents check out (read again and hashed, not encoded) are kept; or
        `overwrite=True` to write it anew. See `cs336_basics.datasets.from_documents`. Returns a
        `datasets.writer.Written`; `on_progress` counts UTF-8 bytes of documents done.

        >>> tok.encode_dataset_from_iterator((row["text"] for row in rows), "data/web")  # doctest: +SKIP
        """
        from cs336_basics.datasets.from_documents import write_dataset_from_documents
        from cs336_basics.datasets.writer import DEFAULT_SHARD_SIZE

        return write_dataset_from_documents(
            self, documents, directory, shard_size=DEFAULT_SHARD_SIZE if shard_size is None else shard_size,
            piece_size=piece_size, num_workers=num_workers or default_num_workers(_PARALLEL_MIN_BYTES),
            executor=executor, dtype=dtype, overwrite=overwrite, resume=resume, text_field=text_field,
            on_progress=on_progress, engine=engine,
        )

    def encode_batch(
        self, texts: Iterable[str], *, num_workers: int = 1, engine: "str | engines.Choice" = "auto"
    ) -> list[list[int]]:
        """The ids of each text, as `encode` gives them, in order (as tiktoken's and Hugging
        Face's `encode_batch`). `engine` is as for `encode_file` (the texts' characters count as
        bytes for "auto"); with `num_workers` above 1 the texts are encoded by that many processes
        (tiktoken: threads), a batch of them at a time.

        >>> tok.encode_batch(["hello", "world<|endoftext|>"])  # doctest: +SKIP
        [[31373], [6894, 50256]]
        """
        if isinstance(texts, str):
            raise TypeError(f"encode_batch takes a list of texts, not one str: write [{texts[:20]!r}]")
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"encode_batch takes str texts, got {type(text).__name__}")
        if type(num_workers) is not int or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        choice = engines.choose(self, engine, threads=num_workers, input_bytes=sum(map(len, texts)))
        if choice.engine == "tiktoken" or num_workers == 1 or len(texts) < 2:
            return [ids.tolist() for ids in engines.encode_texts(choice, self, texts)]
        from cs336_basics.encode.token_arrays import encode_batch_in_processes

        return encode_batch_in_processes(self, texts, num_workers)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of a sequence of ids; bytes that are not valid UTF-8 become U+FFFD.

        Raises ValueError naming the first id that is not in the vocabulary.
        """
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes of a sequence of ids (see `decode`)."""
        if getattr(ids, "ndim", None) == 0:
            raise ValueError(f"decode takes a sequence of ids, got a 0-d array ({ids!r}); for one id write [token_id]")
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        try:
            if ids and min(ids) < 0:
                raise IndexError
            return b"".join(map(self._decoder.__getitem__, ids))
        except (IndexError, TypeError):
            for token_id in ids:
                if type(token_id) is bool or not isinstance(token_id, int):
                    raise ValueError(f"token ids must be integers, got {token_id!r}") from None
                if not 0 <= token_id < len(self._decoder) or self._decoder[token_id] is None:
                    raise ValueError(f"token id {token_id} is not in the vocabulary") from None
            raise


def _checked_merges(merges: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    checked = []
    for n, merge in enumerate(merges, start=1):
        if type(merge) is tuple and len(merge) == 2 and type(merge[0]) is bytes and type(merge[1]) is bytes:
            checked.append(merge)  # the usual case, without copying
            continue
        if (
            not isinstance(merge, (tuple, list))
            or len(merge) != 2
            or not all(isinstance(part, (bytes, bytearray)) for part in merge)
        ):
            raise ValueError(f"merge {n} is {merge!r}; each merge must be a pair of bytes")
        checked.append((bytes(merge[0]), bytes(merge[1])))
    return checked


def _checked_vocab(vocab: dict[int, bytes]) -> dict[int, bytes]:
    if not isinstance(vocab, dict):
        raise ValueError(f"vocab must be a dict from id to bytes, got {type(vocab).__name__}")
    checked: dict[int, bytes] = {}
    seen: dict[bytes, int] = {}
    for token_id, token in vocab.items():
        if type(token_id) is not int or not 0 <= token_id <= gpt2.MAX_TOKEN_ID:
            raise ValueError(f"vocab ids must be ints from 0 to {gpt2.MAX_TOKEN_ID}, got {token_id!r}")
        if type(token) is not bytes:
            if not isinstance(token, (bytes, bytearray)):
                raise ValueError(f"vocab id {token_id} maps to {token!r}; tokens must be bytes")
            token = bytes(token)
        if token in seen:
            raise ValueError(f"vocab ids {seen[token]} and {token_id} both map to {token!r}")
        seen[token] = token_id
        checked[token_id] = token
    return checked
