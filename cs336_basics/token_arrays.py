"""Encoding whole text files into one NumPy token array (`.npy`), in parallel and in bounded memory.

Each file is cut at safe cuts of the tokenizer's pattern (see `corpus`) into pieces of about `piece_size` bytes; workers encode
the pieces and send back packed ids, which are appended in order to a temporary file beside the
output. The `.npy` header is written last and the file renamed into place, so the array equals one
`encode` of each whole file, in order, and an interrupted run leaves no output behind.
"""

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from cs336_basics import corpus, patterns
from cs336_basics.gpt2_files import temp_file_beside

_HEADER_BYTES = 128  # room reserved for the .npy header; a multiple of 64, as the format wants


def choose_dtype(max_id: int, requested: str | None = None) -> np.dtype:
    """uint16 when every id fits, else uint32; a requested dtype too small for `max_id` is an error."""
    if requested is None:
        return np.dtype(np.uint16 if max_id <= np.iinfo(np.uint16).max else np.uint32)
    dtype = np.dtype(requested)
    if dtype.kind not in "ui" or np.iinfo(dtype).max < max_id:
        raise ValueError(f"dtype {requested} cannot hold token id {max_id}; use uint32 (or leave --dtype out)")
    return dtype


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)}
    text = repr(header).encode("latin-1")
    prefix = b"\x93NUMPY\x01\x00"
    body = text + b" " * (_HEADER_BYTES - len(prefix) - 2 - len(text) - 1) + b"\n"
    return prefix + len(body).to_bytes(2, "little") + body


# --- workers ---------------------------------------------------------------------------------------

_worker_tokenizer = None


def _init_worker(vocab, merges, special_tokens, pattern) -> None:
    global _worker_tokenizer
    from cs336_basics.bpe import Tokenizer

    _worker_tokenizer = Tokenizer(vocab, merges, special_tokens, pattern=pattern)


def _encode_piece(tokenizer, path: str, start: int, end: int, dtype: str) -> tuple[int, bytes]:
    """Bytes [start, end) of the file, encoded: (bytes read, the ids packed as `dtype`)."""
    with open(path, "rb") as f:
        text = corpus.read_text(f, path, start, end)
    return end - start, np.array(tokenizer.encode(text), dtype=dtype).tobytes()


def _encode_piece_in_worker(args) -> tuple[int, bytes]:
    return _encode_piece(_worker_tokenizer, *args)


def _pieces(paths: Sequence[str], piece_size: int, specials: list[bytes], boundary) -> Iterator[tuple[str, int, int]]:
    for path in paths:
        for start, end in corpus.plan_pieces(path, piece_size, specials, boundary):
            yield path, start, end


def encode_files(
    tokenizer,
    input_paths: Sequence[str | os.PathLike],
    output_path: str | os.PathLike,
    *,
    num_workers: int = 1,
    piece_size: int = 1 << 22,
    dtype: str | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """Encode the files, in order, into one 1-D array at `output_path`; return the number of tokens.

    `on_progress(bytes_done)` is called after each piece.
    """
    paths = [str(p) for p in input_paths]
    for p in paths:
        corpus.file_size(p)  # a missing or unreadable input fails here, before any work
    out_dtype = choose_dtype(max(tokenizer.vocab), dtype)
    specials = [s.encode("utf-8") for s in tokenizer.special_tokens]
    output_path = Path(output_path)
    fd, tmp = temp_file_beside(output_path)
    count = 0
    done = 0
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(b"\0" * _HEADER_BYTES)
            boundary = patterns.get(tokenizer.pattern).safe_cut_bytes
            args = ((p, s, e, out_dtype.str) for p, s, e in _pieces(paths, piece_size, specials, boundary))
            if num_workers <= 1:
                results = (_encode_piece(tokenizer, *a) for a in args)
                pool = None
            else:
                pool = corpus.process_context().Pool(
                    num_workers,
                    initializer=_init_worker,
                    initargs=(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens, tokenizer.pattern),
                )
                results = pool.imap(_encode_piece_in_worker, args, chunksize=1)
            try:
                for consumed, data in results:
                    out.write(data)
                    count += len(data) // out_dtype.itemsize
                    done += consumed
                    if on_progress:
                        on_progress(done)
            finally:
                if pool is not None:
                    pool.terminate()
            out.seek(0)
            out.write(_npy_header(out_dtype, count))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, output_path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return count
