"""Encoding: the merge table, BPE applied to one pre-token and the cache that encodes chunks in
batches (`encoder`, open it first), one text through the cache (`text_encoder`), a stream of text
(`streaming`), BPE-dropout, random segmentations as Hugging Face's (`dropout`), whole corpora planned (`corpus`) and encoded into token arrays in parallel
(`token_arrays`), the engines (`engines`), tiktoken's `Encoding` methods for the tokenizer
(`tiktoken_methods`), and what all of these need of a tokenizer (`protocol.TokenizerLike`).
Imports `text`, `corpora` and `formats`."""
