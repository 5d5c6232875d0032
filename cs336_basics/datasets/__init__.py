"""Token datasets for training: a corpus encoded into shards with document boundaries and a
manifest (`layout`, open it first, says what is on disk), in the formats trainers read (`convert`),
and read back for training (`loader`: `TokenDataset`, `get_batch`). The resumable folder the shards
are written in (`shard_folder`: its lock, checks, records and manifest, and the default piece size)
is shared with count tables (`counts`). Imports `text`, `corpora`, `formats` and `encode`."""
