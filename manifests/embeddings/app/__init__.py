"""A small embedding application: the sample Kernodeck runs as the `embeddings` check."""
