"""Files in and out: writing files all or none (`staged`); the data that defines a tokenizer
(`definition`); GPT-2's `vocab.json` and `merges.txt` (`gpt2`), Hugging Face's `tokenizer.json`
(`hf`), tiktoken's rank files and the merges recovered from them (`tiktoken`), and pretrained names
and tokenizer directories (`pretrained`, open it first). Token files that trainers read: the `.npy`
header (`npy`), Megatron-LM's indexed dataset (`megatron`) and llm.c's shards (`llmc`). Imports
`text` only."""
