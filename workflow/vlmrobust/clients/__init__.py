"""The clients layer: backends that answer a request (VLM backends, LLM judge/writer
backends, the content-addressed LLM cache, the sentence-embedding model, the shared API
retry loop and chat client). They know nothing of datasets, studies or files beyond
their own cache."""
