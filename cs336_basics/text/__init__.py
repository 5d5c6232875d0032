"""What every step shares about text: the pre-tokenization patterns and where their pre-tokens never
span (`patterns`, open it first), special tokens and cutting text into chunks and pre-tokens
(`pretokenize`), Hugging Face pre-tokenization pipelines (`pipelines`) and their added tokens
(`added_tokens`), the time limit for regexes from elsewhere (`timeouts`), and text holding UTF-16
surrogates (`surrogates`). Imports no other package; inside it, `pipelines` imports neither
`patterns` nor `added_tokens`."""
