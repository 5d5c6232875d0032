"""Reading corpora and running work on them: files, folders, globs and URLs of `.txt`, `.jsonl` and
`.parquet`, cut into work units (`sources`, open it first; its parts are `files`, `compression` and
`readers`); cutting a text file where no pre-token changes (`cutting`); running work units on local
processes or any executor, and how many workers a corpus gets by default (`executors`). Imports
`text` only."""
