"""Opening corpus files where they are: a local path, or a `scheme://` URL through `fsspec`.

`filesystem` is the one way into `fsspec` (so a missing `fsspec`, or the missing package of one of
its filesystems, is reported the same everywhere); `open_binary` opens either kind of path for
seekable binary reading; `check_unchanged` refuses a file whose size is not the one it had when the
work on it was planned.
"""

import os

from cs336_basics.errors import missing_extra


def is_url(path: str) -> bool:
    """Whether `path` names a file through `fsspec` (`scheme://...`) rather than a local path."""
    return "://" in path


def filesystem(url: str):
    """`fsspec`'s (filesystem, path inside it) for `url`. Raises `MissingExtra` without `fsspec`,
    ImportError naming `url` when its filesystem's own package (s3fs, gcsfs...) is missing, and
    ValueError naming `url` when `fsspec` cannot read it."""
    try:
        import fsspec
    except ImportError:
        raise missing_extra("fsspec", f"reading {url}") from None
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as e:  # the filesystem's own package (s3fs, gcsfs...) is missing
        raise ImportError(f"{url}: {e}") from None
    except ValueError as e:
        raise ValueError(f"{url}: {e}") from None


def open_binary(path: str):
    """The file at a local path or URL, opened for binary reading (seekable)."""
    if is_url(path):
        fs, p = filesystem(path)
        return fs.open(p, "rb")
    return open(path, "rb")


def check_unchanged(path: str, file_size: int | None, f) -> None:
    """Refuse the open file `f` (at `path`) when its size is not `file_size`, the size it had when
    the work was planned: it changed since. `file_size` None checks nothing. Leaves `f` at its start."""
    if file_size is None:
        return
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    if size != file_size:
        raise ValueError(f"{path}: the file changed while the corpus was being read: it was {file_size:,} "
                         f"bytes and is now {size:,}; read it again once it is complete")
