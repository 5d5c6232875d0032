"""Decompressing corpus files (`.gz`, `.bz2`, `.xz`, `.zst`) so that damage names the file.

The standard library's readers raise a bare `EOFError` for a file cut short and `OSError`s without
the file's name for corrupt data, and `zstandard`'s stream reader ends silently at a cut. The stream
`decompressed` returns turns all of these into one ValueError naming the file and how much text was
read before the damage; `.zst` files are read frame by frame through `zstandard`'s decompressor
objects, which say whether a frame is complete.
"""

import bz2
import gzip
import lzma
import zlib

from cs336_basics.errors import missing_extra

# File suffix -> the compression's name, as `Source.compression` and `WorkUnit.compression` hold it.
COMPRESSION_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}


def decompressed(f, compression: str | None, path: str):
    """The decompressed stream of the binary file `f` (only `read(n)` is offered), or `f` itself when
    `compression` is None. Its reads raise ValueError naming `path` and how far it got when the data
    is damaged or cut short; without `zstandard`, a `.zst` file raises `MissingExtra`."""
    if compression is None:
        return f
    if compression == "gzip":
        stream = gzip.GzipFile(fileobj=f, mode="rb")
    elif compression == "bz2":
        stream = bz2.BZ2File(f, mode="rb")
    elif compression == "xz":
        stream = lzma.LZMAFile(f, mode="rb")
    else:
        stream = _ZstdFrames(f, path)
    return _Decompressed(stream, path, compression)


class _Decompressed:
    """A decompressed stream whose errors name the file and how much text was read before them."""

    def __init__(self, stream, path: str, compression: str):
        self.stream, self.path, self.compression = stream, path, compression
        self.done = 0  # bytes of decompressed data read so far

    def read(self, n: int) -> bytes:
        try:
            data = self.stream.read(n)
        except (EOFError, OSError, zlib.error, lzma.LZMAError, _ZstdFrames.Error) as e:
            raise ValueError(
                f"{self.path}: damaged {self.compression} data after {self.done:,} bytes of decompressed "
                f"text ({e or type(e).__name__}); the file is cut short or corrupt"
            ) from None
        self.done += len(data)
        return data


# Compressed bytes handed to zstd at a time: a small input bounds what one call can produce
# (each block of a few bytes may stand for 128 KiB).
_ZSTD_INPUT = 1 << 10


class _ZstdFrames:
    """The frames of a `.zst` file decompressed one after another, through `zstandard`'s decompressor
    objects, which say whether a frame is complete (its stream reader stops silently at a cut)."""

    class Error(Exception):
        pass

    def __init__(self, raw, path: str):
        try:
            import zstandard
        except ImportError:
            raise missing_extra("zstd", f"reading {path}", package="zstandard") from None
        self.raw = raw
        self.new = zstandard.ZstdDecompressor().decompressobj
        self.zstd_error = zstandard.ZstdError
        self.frame = None  # the decompressor of the frame being read, if one is open
        self.pending = bytearray()

    def read(self, n: int) -> bytes:
        while len(self.pending) < n:
            rest = b""
            if self.frame is not None and self.frame.eof:
                rest, self.frame = self.frame.unused_data, None
            chunk = rest or self.raw.read(_ZSTD_INPUT)
            if not chunk:
                if self.frame is not None:
                    raise self.Error("the file ends inside a zstd frame")
                break
            if self.frame is None:
                self.frame = self.new()
            try:
                self.pending += self.frame.decompress(chunk)
            except self.zstd_error as e:
                raise self.Error(str(e)) from None
        data = bytes(self.pending[:n])
        del self.pending[:n]
        return data
