"""Whole corpora through a tokenizer: files to one token array (`encode_files_to_array`, behind
`Tokenizer.encode_file`) and a list of texts to their ids (`encode_batch`, behind
`Tokenizer.encode_batch`). Here the corpus is planned and the engine chosen; `token_arrays` runs
the work on processes or an executor.
"""

import concurrent.futures
import os
from collections.abc import Callable

from cs336_basics.corpora import sources
from cs336_basics.encode import engines
from cs336_basics.encode.protocol import TokenizerLike
from cs336_basics.encode.token_arrays import encode_batch_in_processes, encode_files


def encode_files_to_array(
    tokenizer: TokenizerLike,
    files: list[sources.Source],
    output_path: str | os.PathLike,
    *,
    num_workers: int,
    executor: "concurrent.futures.Executor | None",
    piece_size: int,
    text_field: str,
    dtype: str | None,
    on_progress: Callable[[int], None] | None,
    engine: "str | engines.Choice",
    append_separator: bool = False,
) -> int:
    """Encode the resolved corpus `files`, in order, into one NumPy array file; return the number of
    tokens. With `append_separator` the last document ends with the separator (see `encode_files`).

    Its documents are joined with the first special token, so the ids equal `encode` of one `.txt`
    of them; a single `.txt` file encodes exactly as `encode` of its text. `num_workers` local
    processes, or `executor`, encode pieces of about `piece_size` bytes (cut only before
    `tokenizer.cut_tokens` and at the pattern's safe boundaries), so memory stays bounded; the array
    is uint16 when every id fits (else uint32) unless `dtype` says otherwise, and appears only when
    complete. `engine` is "python", "tiktoken", "auto" (tiktoken on inputs of 4 MB or more where it
    gives our ids) or a `engines.Choice`; the ids are the same with each. An output that is one of
    the inputs is refused before anything is read.
    """
    sources.refuse_output_among_inputs(output_path, files)  # before planning: an empty file has no units
    units = sources.plan_units(
        files, piece_size=piece_size, special_tokens=tokenizer.cut_tokens, text_field=text_field,
        pattern=tokenizer.pattern,
    )
    return encode_files(
        tokenizer, units, output_path, num_workers=num_workers, executor=executor, dtype=dtype,
        on_progress=on_progress, engine=engines.choose(tokenizer, engine, input_bytes=sum(f.size for f in files)),
        append_separator=append_separator,
    )


def encode_batch(
    tokenizer: TokenizerLike, texts, *, num_workers: int, engine: "str | engines.Choice", dropout: float = 0.0,
    seed=None,
) -> list[list[int]]:
    """The ids of each text, as `tokenizer.encode` gives them, in order. `engine` is as for
    `encode_files_to_array` (the texts' characters count as bytes for "auto"); with `num_workers`
    above 1 the texts are encoded by that many processes (tiktoken: threads), a batch at a time.
    With `dropout` (BPE-dropout, ours only), text i is `tokenizer.encode(text, dropout=dropout,
    seed=(*seed, i))`, the seed's numbers and i, whatever `num_workers`.
    TypeError for a single str or a text that is not one; ValueError for a bad `num_workers`."""
    if isinstance(texts, str):
        raise TypeError(f"encode_batch takes a list of texts, not one str: write [{texts[:20]!r}]")
    texts = list(texts)
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"encode_batch takes str texts, got {type(text).__name__}")
    if type(num_workers) is not int or num_workers < 1:
        raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
    choice = engines.choose(tokenizer, engine, threads=num_workers, input_bytes=sum(map(len, texts)),
                            dropout=dropout, seed=seed)
    if choice.dropout:
        if num_workers == 1 or len(texts) < 2:
            return [tokenizer.encode(text, dropout=choice.dropout, seed=(*choice.seed, i)) for i, text in enumerate(texts)]
        return encode_batch_in_processes(tokenizer, texts, num_workers, choice.dropout, choice.seed)
    if choice.engine == "tiktoken" or num_workers == 1 or len(texts) < 2:
        return [ids.tolist() for ids in engines.encode_texts(choice, tokenizer, texts)]
    return encode_batch_in_processes(tokenizer, texts, num_workers)
