"""Tokenizer files in and out: GPT-2's `vocab.json` and `merges.txt` and atomic writes (`gpt2`),
Hugging Face's `tokenizer.json` (`hf`), tiktoken's rank files and the merges recovered from them
(`tiktoken`), and pretrained names and tokenizer directories (`pretrained`, open it first).
Token files that trainers read: Megatron-LM's indexed dataset (`megatron`) and llm.c's shards
(`llmc`), written through `staged`. Imports `text` only."""
