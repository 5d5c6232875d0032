"""The public face of the library: `train_bpe` and `Tokenizer`.

    >>> vocab, merges = train_bpe("corpus.txt", 1000, ["<|endoftext|>"])
    >>> tok = Tokenizer(vocab, merges, ["<|endoftext|>"])
    >>> tok.decode(tok.encode("Hello<|endoftext|>")) == "Hello<|endoftext|>"
    True

The steps live in packages by job, each with a docstring naming the module to open first: `text`
(patterns, pipelines and added tokens, pre-tokenization, surrogates), `corpora` (reading corpora
into work units and running them on processes or any executor), `formats` (tokenizer files in and
out), `train` (counting, the merge loop, and `trainer`, which runs them), `encode` (BPE on a
pre-token, its cache, one text, streams, corpora to token arrays), `datasets` (token dataset
directories) and `counts` (count tables). None imports this module, which states the contracts.
"""

import concurrent.futures
import os
import time
from array import array
from collections.abc import Callable, Iterable, Iterator

from cs336_basics.corpora import sources
from cs336_basics.counts import table
from cs336_basics.encode import dropout as bpe_dropout, engines, offsets, streaming
from cs336_basics.encode.encoder import EncodeCache, MergeTable, build_merge_table, id_packing
from cs336_basics.encode.text_encoder import TextEncoder, whole_tokens
from cs336_basics.encode.tiktoken_methods import SpecialChoice, TiktokenMethods
from cs336_basics.formats import gpt2
from cs336_basics.formats.definition import (
    TokenizerDefinition, add_special_tokens, checked_added_tokens, checked_merges, checked_vocab,
)
from cs336_basics.formats.hf import template_ids
from cs336_basics.text import patterns
from cs336_basics.text.added_tokens import AddedTokens
from cs336_basics.text.pretokenize import validate_special_tokens
from cs336_basics.text.surrogates import fix_surrogates
from cs336_basics.train import trainer
from cs336_basics.corpora.executors import PARALLEL_MIN_BYTES, default_num_workers  # noqa: F401 (public here)
from cs336_basics.train.trainer import check_vocab_size  # noqa: F401 (public here)


def train_bpe(
    input_path: "str | os.PathLike | list[str | os.PathLike]",
    vocab_size: int,
    special_tokens: list[str],
    *,
    pattern: str | None = None,
    num_workers: int | None = None,
    piece_size: int | None = None,
    executor: "concurrent.futures.Executor | None" = None,
    text_field: str = "text",
    progress: bool = False,
    stats: dict | None = None,
    merge_log: list[tuple[int, int]] | None = None,
    start_from: "str | os.PathLike | Tokenizer | TokenizerDefinition | None" = None,
    superword_from: int | bool | None = None, superword_pattern: str | None = None,
    superword_max_words: int | None = None, superword_colon_rule: bool | None = None,
    min_pretoken_count: int = 1,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer on a UTF-8 text file, exactly as CS336 specifies.

    `input_path` may also be a folder, a glob, a URL (with fsspec) or a list of these, of `.txt`,
    `.jsonl` (the document in field `text_field`) and `.parquet` (column `text_field`) files,
    `.txt` and `.jsonl` possibly compressed (see `sources`). Each record and each file is a document.

    Returns `(vocab, merges)`: ids 0-255 are the single bytes, then one id per merge in creation
    order, then the special tokens in the order given. `len(vocab) == vocab_size` unless the corpus
    runs out of pairs first. Special tokens cut the text into documents and are never merged. Each step
    merges the most frequent pair; ties go to the lexicographically greatest `(left_bytes, right_bytes)`.

    Options: `pattern` is the pre-tokenization pattern: "gpt2" (the default), "cl100k", "o200k",
    "none" (each document is one sequence) or a regex (see `patterns`). `num_workers` processes
    count pre-tokens and share the merge loop (default: all cores, one for small files);
    `executor`, any `concurrent.futures.Executor` (e.g. a Dask client's `get_executor()`), counts
    instead of local processes; `piece_size` is the most bytes one worker task reads (tests use
    tiny ones). The result depends on none of these. `progress` shows progress bars on stderr. A
    `stats` dict, if given, receives `count_seconds`, `merge_seconds`, `distinct_pretokens`,
    `input_bytes`, `pretoken_bytes` (the corpus length in bytes without the special tokens),
    `byte_counts` (how often each byte value occurs in it: with the merge log, each token's count in
    the encoded corpus, see `merge_log.token_occurrences`), `num_workers` and `dropped_pretokens` (see below). A `merge_log` list, if given, receives one `(count, tokens)` per merge: the
    pair's count when it was chosen, and the training corpus's length in tokens after the merge
    (special tokens not counted, so it starts from `pretoken_bytes`).

    Training from what exists (README: "Extending a tokenizer", "SuperBPE"): `start_from` (a
    `Tokenizer`, a folder, a tokenizer.json, a .tiktoken file or a pretrained name) keeps every id,
    merge and special token of that tokenizer, forces its merges first and adds the merges learned
    here, with the next free ids, until `vocab_size`; its pattern is the default (another is
    refused). `superword_from` (SuperBPE's transition, a vocabulary size; True: `start_from`'s size) trains to
    it, then runs SuperBPE's stage 2 as released, or as `superword_pattern`, `superword_max_words` and
    `superword_colon_rule` say (see `trainer.superword_options`); the tokenizer's pattern is `patterns.superword_pattern`'s.
    `min_pretoken_count` N > 1 drops the pre-tokens counted fewer than N times: the merges are those of the rest.
    """
    return trainer.train_on_files(
        input_path, vocab_size, special_tokens, pattern=pattern, num_workers=num_workers, piece_size=piece_size,
        executor=executor, text_field=text_field, progress=progress, stats=stats, merge_log=merge_log,
        start_from=_definition(start_from), superword_from=superword_from, superword_pattern=superword_pattern,
        superword_max_words=superword_max_words, superword_colon_rule=superword_colon_rule,
        min_pretoken_count=min_pretoken_count)


def _definition(tokenizer: "str | os.PathLike | Tokenizer | TokenizerDefinition | None") -> "TokenizerDefinition | None":
    """What `start_from` names, as a definition (loaded as `Tokenizer.from_pretrained` loads)."""
    if tokenizer is None or isinstance(tokenizer, TokenizerDefinition):
        return tokenizer
    if not isinstance(tokenizer, Tokenizer):
        tokenizer = Tokenizer.from_pretrained(tokenizer)
    return TokenizerDefinition(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens, tokenizer.pattern)


def train_bpe_from_iterator(
    documents: Iterable, vocab_size: int, special_tokens: list[str], *, pattern: str = "gpt2",
    num_workers: int | None = None, text_field: str = "text", progress: bool = False, stats: dict | None = None,
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
    return trainer.train_on_documents(
        documents, vocab_size, special_tokens, pattern=pattern, num_workers=num_workers, text_field=text_field,
        progress=progress, stats=stats, merge_log=merge_log,
    )


def train_bpe_from_counts(
    counts: "str | os.PathLike | dict[bytes, int]", vocab_size: int, special_tokens: list[str] | None = None, *,
    pattern: str | None = None, num_workers: int | None = None, progress: bool = False, stats: dict | None = None,
    merge_log: list[tuple[int, int]] | None = None, min_pretoken_count: int | None = None,
    start_from: "str | os.PathLike | Tokenizer | TokenizerDefinition | None" = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """`train_bpe` from pre-token counts made before (no pass over the text): exactly the merges
    `train_bpe` gives on the text they were counted from. `counts`: a count table folder (`bpe
    count`, see `counts.table`), a `pre-token<TAB>count` text file, or a dict of pre-token bytes to
    counts. `special_tokens` and `pattern` default to the table's and must equal them when given (a
    file or dict records none: they default to `["<|endoftext|>"]` and "gpt2", as in `bpe train`). `start_from` extends a tokenizer as
    `train_bpe`'s does: the counts must be of its pattern and cut at its special tokens (among
    theirs). `min_pretoken_count` defaults to the one a table was counted with (else 1). Other options as `train_bpe`'s."""
    started = time.perf_counter()
    base = _definition(start_from)
    read = table.read_counts(counts)
    special_tokens, pattern = table.agreed(read, counts if isinstance(counts, (str, os.PathLike)) else "the counts",
                                           special_tokens, pattern if base is None or pattern else base.pattern)
    handed_over, input_bytes = [read.word_counts], read.input_bytes  # the only reference: see train_bpe
    given, read = read.min_count if min_pretoken_count is None else min_pretoken_count, None  # the table's by default
    return trainer.train_on_counts(handed_over, vocab_size, special_tokens, pattern=pattern, num_workers=num_workers,
                                   progress=progress, stats=stats, merge_log=merge_log, input_bytes=input_bytes,
                                   started=started, start_from=base, min_pretoken_count=given)


class Tokenizer(TiktokenMethods, offsets.OffsetMethods):
    """Encodes text to token ids and decodes ids to text with a byte-level BPE vocabulary.

    Ids equal tiktoken's for the same vocabulary, with the special tokens allowed. Special tokens
    missing from `vocab` are added with the next free ids. The work is delegated: one text to
    `encode.text_encoder` (added tokens of a pipeline: `text.added_tokens`), streams to
    `encode.streaming`, corpora to `encode.corpus` and `datasets`, files to `formats`.

    >>> tok = Tokenizer.from_files("vocab.json", "merges.txt", special_tokens=["<|endoftext|>"])
    >>> tok.decode(tok.encode("hello world"))
    'hello world'
    """

    def __init__(
        self, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str] | None = None,
        *, pattern: str = "gpt2", cache_size: int = 1 << 20,  # entries per cache generation (see EncodeCache)
        added_tokens: "dict[str, tuple[bool, bool]] | None" = None, post_processor: "dict | None" = None,
    ):
        # added_tokens (their flags) and post_processor: a tokenizer.json's, see formats.definition.
        self._pretokenizer = pretokenizer = patterns.get(pattern)
        self.pattern: str = pretokenizer.name  # canonical: "gpt2", "cl100k", "o200k", "none", the regex or a pipeline
        self.added_tokens, self.post_processor = checked_added_tokens(added_tokens, post_processor, self.pattern)
        self.special_tokens = validate_special_tokens(special_tokens)
        self.cache_size = cache_size
        self.vocab = checked_vocab(vocab)
        self.merges = checked_merges(merges)
        ids = add_special_tokens(self.vocab, self.special_tokens)
        next_id = max(self.vocab, default=-1) + 1
        # Everything below is derived from the fields above, here and nowhere else.
        self._table: MergeTable = build_merge_table(self.vocab, self.merges)
        self._decoder: list[bytes | None] = [None] * next_id
        for token_id, token in self.vocab.items():
            self._decoder[token_id] = token
        # Ids travel packed in bytes (2 or 4 per id) from the cache to the output.
        self._id_typecode, codec = id_packing(next_id - 1)
        self.packed_dtype: str = "=u2" if self._id_typecode == "H" else "=u4"  # see encode_packed
        fixed = {t: chr(ids[t.encode("utf-8")]).encode(codec, "surrogatepass") for t in self.special_tokens}
        pipeline = pretokenizer.pipeline
        self._added = AddedTokens(pipeline, self.special_tokens, fixed, self.added_tokens) if pipeline else None
        self._template = template_ids(self.post_processor)  # what add_special_tokens adds
        self.cache = EncodeCache(
            self._table, cache_size, pretokenizer=pretokenizer, codec=codec,
            fixed=fixed if self._added is None else self._added.cache_keys,
            whole=whole_tokens(self.vocab, codec) if pipeline is not None and pipeline.ignore_merges else None,
        )
        # Where a text may be cut, each side encoded alone (`encode_iterable`, and the corpus paths,
        # which cut files into pieces): before any special token, or as the added tokens allow.
        self.cut_tokens: list[str] = self.special_tokens if self._added is None else self._added.cut_tokens
        two_rounds = self._added if self._added is not None and not self._added.plain else None
        self._encode_packed = TextEncoder(pretokenizer, self.cache, self.special_tokens, two_rounds).encode_packed

    @classmethod
    def from_files(
        cls, vocab_filepath: str | os.PathLike, merges_filepath: str | os.PathLike,
        special_tokens: list[str] | None = None, *, pattern: str = "gpt2",
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
        """Write `vocab.json` and `merges.txt` in the GPT-2 format (see `formats.gpt2`)."""
        gpt2.save_vocab_and_merges(self.vocab, self.merges, vocab_filepath, merges_filepath, self.special_tokens)

    @classmethod
    def from_pretrained(
        cls, name_or_path: "str | os.PathLike", *, pattern: str | None = None,
        special_tokens: "list[str] | dict[str, int] | None" = None, sha256: str | None = None,
    ) -> "Tokenizer":
        """Load a pretrained encoding by name ("gpt2", "r50k_base", "p50k_base", "cl100k_base",
        "o200k_base": through tiktoken, an optional extra), a directory, a `tokenizer.json` or a
        `.tiktoken` file (which alone takes `pattern`, `special_tokens` and `sha256`). The contract
        is `formats.pretrained.load`'s.
        """
        from cs336_basics.formats import pretrained

        loaded = pretrained.load(name_or_path, pattern=pattern, special_tokens=special_tokens, sha256=sha256)
        try:
            return cls.from_definition(loaded)
        except ValueError as e:
            raise ValueError(f"{name_or_path}: {e}") from None

    @classmethod
    def from_definition(cls, definition: TokenizerDefinition, *, cache_size: int = 1 << 20) -> "Tokenizer":
        """The tokenizer a `TokenizerDefinition` defines (as `pretrained.load` gives one)."""
        vocab, merges, special_tokens, pattern, added_tokens, post_processor = definition
        return cls(vocab, merges, special_tokens, pattern=pattern, cache_size=cache_size, added_tokens=added_tokens,
                   post_processor=post_processor)

    def save_pretrained(self, directory: "str | os.PathLike") -> None:
        """Write `vocab.json`, `merges.txt` and `tokenizer.json` into `directory`, atomically (see
        `pretrained.save`)."""
        from cs336_basics.formats import pretrained

        pretrained.save(directory, self.vocab, self.merges, self.special_tokens, self.pattern,
                        added_tokens=self.added_tokens, post_processor=self.post_processor)

    def encode(self, text: str, *, add_special_tokens: bool = False, allowed_special: SpecialChoice = None,
               disallowed_special: SpecialChoice = None, dropout: float = 0.0, seed: bpe_dropout.Seed = None) -> list[int]:
        """The token ids of `text`; special tokens in it become their ids. As in tiktoken, a
        surrogate pair in `text` counts as the character it stands for and a lone surrogate as U+FFFD.
        `add_special_tokens=True` adds what the post-processor of a loaded `tokenizer.json` adds to
        one sequence (e.g. Llama 3's beginning-of-text token), as Hugging Face's does; without one
        it changes nothing. `allowed_special`, `disallowed_special`: tiktoken's, when either is given
        (see `encode.tiktoken_methods`). `dropout=p` skips each merge with probability p, as Hugging
        Face's `BPE(dropout=p)`, drawing from `seed` (see `encode.dropout`; the same seed, the same ids).

        >>> tok.encode("hi<|endoftext|>")  # doctest: +SKIP
        [5303, 50256]
        """
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        choosing = allowed_special is not None or disallowed_special is not None
        tok = self._choose_specials([text], allowed_special, disallowed_special) if choosing else self
        ids = tok._encode_valid(fix_surrogates(text), *bpe_dropout.randomness(dropout, seed))
        if add_special_tokens and self._added is not None:
            before, after = self._template
            ids = [*before, *ids, *after]
        return ids

    def _encode_valid(self, text: str, *random) -> list[int]:
        """`encode` of text that holds no surrogates (with dropout: `random` from `randomness`)."""
        return array(self._id_typecode, self._encode_packed(text, *random)).tolist()

    def encode_packed(self, text: str, *, dropout: float = 0.0, seed: bpe_dropout.Seed = None) -> bytes:
        """The ids of `encode(text)` packed as native unsigned ints of `packed_dtype` (16 bits when
        every id fits, else 32): `numpy.frombuffer(data, tokenizer.packed_dtype)` reads them."""
        if not isinstance(text, str):
            raise TypeError(f"encode_packed takes a str, got {type(text).__name__}")
        return self._encode_packed(fix_surrogates(text), *bpe_dropout.randomness(dropout, seed))

    def encode_iterable(self, iterable: Iterable[str], *, dropout: float = 0.0, seed: bpe_dropout.Seed = None) -> Iterator[int]:
        """Yield the ids of `"".join(iterable)`, holding only about one piece of text at a time;
        the ids are exactly those of `encode` on the joined text (see `encode.streaming`), with dropout too."""
        random = bpe_dropout.randomness(dropout, seed)  # one stream for all pieces
        return streaming.encode_iterable(iterable, lambda text: self._encode_valid(text, *random),
                                         self._pretokenizer.last_boundary, self.cut_tokens, self.special_tokens)

    def encode_file(
        self, input_paths: "str | os.PathLike | list[str | os.PathLike]", output_path: str | os.PathLike, *,
        num_workers: int | None = None, executor: "concurrent.futures.Executor | None" = None,
        piece_size: int = 1 << 20, text_field: str = "text", dtype: str | None = None,
        on_progress: Callable[[int], None] | None = None, engine: "str | engines.Choice" = "auto", append_separator=False,
    ) -> int:
        """Encode a corpus (files, folders, globs or URLs of `.txt`, `.jsonl`, `.parquet`, see `sources`),
        in order, into one NumPy array file; return the number of tokens. Workers default to all cores
        (one for small input). `engine`: "python", "tiktoken" or "auto" (the ids are the same). The
        contract is `encode.corpus.encode_files_to_array`'s."""
        from cs336_basics.encode.corpus import encode_files_to_array

        files = sources.resolve(input_paths)
        workers = default_num_workers(sum(f.size for f in files)) if num_workers is None else num_workers
        return encode_files_to_array(
            self, files, output_path, num_workers=workers, executor=executor, piece_size=piece_size,
            text_field=text_field, dtype=dtype, on_progress=on_progress, engine=engine,
            append_separator=append_separator,
        )

    def encode_dataset(
        self, inputs: "str | os.PathLike | list[str | os.PathLike]", directory: str | os.PathLike, *,
        shard_size: int | None = None, num_workers: int | None = None,
        executor: "concurrent.futures.Executor | None" = None, piece_size: int | None = None,
        text_field: str = "text", dtype: str | None = None, overwrite: bool = False,
        on_progress: Callable[[int], None] | None = None, engine: "str | engines.Choice" = "auto", append_separator=False,
    ):
        """Encode a corpus into a dataset directory: shards of about `shard_size` bytes of ids (default
        256 MiB) holding together what `encode_file` writes, and `manifest.json`. Run again after a
        stop, it encodes only what is missing; other settings are refused unless `overwrite`. Returns
        a `datasets.writer.Written`. The contract is `datasets.writer.write_dataset`'s.
        """
        from cs336_basics.datasets.writer import DEFAULT_SHARD_SIZE, write_dataset

        files = sources.resolve(inputs)  # once: the workers' default and the writer both need them
        workers = default_num_workers(sum(f.size for f in files)) if num_workers is None else num_workers
        return write_dataset(
            self, inputs, directory, shard_size=DEFAULT_SHARD_SIZE if shard_size is None else shard_size, files=files,
            piece_size=piece_size, num_workers=workers, executor=executor, dtype=dtype, overwrite=overwrite,
            text_field=text_field, on_progress=on_progress, engine=engine, append_separator=append_separator,
        )

    def encode_dataset_from_iterator(
        self, documents: Iterable, directory: str | os.PathLike, *,
        shard_size: int | None = None, num_workers: int | None = None,
        executor: "concurrent.futures.Executor | None" = None, piece_size: int | None = None,
        text_field: str = "text", dtype: str | None = None, overwrite: bool = False, resume: bool = False,
        on_progress: Callable[[int], None] | None = None, engine: "str | engines.Choice" = "auto", append_separator=False,
    ):
        """`encode_dataset` of documents from any iterable (str, or mappings whose `text_field` holds
        one), in batches on `num_workers` processes (default: all cores). A dataset written from an
        iterable is refused unless `resume=True` (the same documents from the start) or `overwrite`.
        The contract is `datasets.from_documents.write_dataset_from_documents`'s.
        """
        from cs336_basics.datasets.from_documents import write_dataset_from_documents
        from cs336_basics.datasets.writer import DEFAULT_SHARD_SIZE

        return write_dataset_from_documents(
            self, documents, directory, shard_size=DEFAULT_SHARD_SIZE if shard_size is None else shard_size,
            piece_size=piece_size, num_workers=num_workers or default_num_workers(PARALLEL_MIN_BYTES),
            executor=executor, dtype=dtype, overwrite=overwrite, resume=resume, text_field=text_field,
            on_progress=on_progress, engine=engine, append_separator=append_separator,
        )

    def encode_batch(
        self, texts: Iterable[str], *, num_workers: int = 1, engine: "str | engines.Choice" = "auto",
        allowed_special: SpecialChoice = None, disallowed_special: SpecialChoice = None, dropout: float = 0.0,
        seed: bpe_dropout.Seed = None,
    ) -> list[list[int]]:
        """The ids of each text, as `encode` gives them (with the same `allowed_special` and
        `disallowed_special`), in order (as tiktoken's and Hugging Face's `encode_batch`), by
        `num_workers` processes; see `encode.corpus.encode_batch`.
        """
        from cs336_basics.encode.corpus import encode_batch

        if allowed_special is not None or disallowed_special is not None:
            return self._encode_batch_choosing(texts, allowed_special, disallowed_special, num_workers=num_workers,
                                               engine=engine, dropout=dropout, seed=seed)
        return encode_batch(self, texts, num_workers=num_workers, engine=engine, dropout=dropout, seed=seed)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of a sequence of ids; bytes that are not valid UTF-8 become U+FFFD. Raises
        ValueError naming the first id that is not in the vocabulary."""
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
