"""Kernodeck: reproduction manifests for ML environments."""
