"""Whole documents: how much of a long text (a book, a report) a model writes back
(docs/method.md §18). :mod:`.nv_recall` scores a generated text against a reference."""
