"""Encoding: the merge table, BPE applied to one pre-token and the cache that encodes chunks in
batches (`encoder`, open it first), and whole corpora encoded into token arrays in parallel
(`token_arrays`). Imports `text`, `corpora` and `formats`."""
