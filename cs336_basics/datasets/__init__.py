"""Token datasets for training: a corpus encoded into shards with document boundaries and a
manifest (`layout`, open it first, says what is on disk), in the formats trainers read (`convert`),
and read back for training (`loader`: `TokenDataset`, `get_batch`). Imports `text`, `corpora`,
`formats` and `encode`."""
