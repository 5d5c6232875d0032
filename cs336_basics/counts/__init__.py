"""Count tables: the pre-token counts of a corpus on disk, made once and trained from many times.

A table is a folder of Parquet shards of (pre-token bytes, int64 count) with a manifest (`table`,
open it first: the format, reading a table or a `pre-token<TAB>count` file, adding tables up);
`writer` counts a corpus into one, each worker writing the shards it counts, resumable after any
stop. A pipeline stage of its own, between counting (`train`) and the merge loop: it writes files
(`formats.staged`), in a resumable shard folder as token datasets are (`datasets.shard_folder`).
Imports `text`, `corpora`, `formats`, `train` and `datasets`.
"""
