"""Experiment drivers: the glue between chunkwise's pieces and the book's chapters."""
