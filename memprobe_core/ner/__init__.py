"""NER memorization audits (docs/method.md §5): does a token classifier recognise names it was trained
on more confidently than names it never saw, and which prompts reveal it best?

Modules:
    labels      PER label discovery in ``config.id2label``.
    model       ``NerModel``: loading, name confidence by character offsets, attentions.
    prompts     the ``{name}`` slot, validation, properties, template generator, prompt files.
    generation  LLM prompt generation through the ``Generator`` contract, with parsing.
    conll       CoNLL-2003 reader/writer, PER names per split, hub loader (needs ``datasets``).
    names       name lists, (in, out) pairs with the paper's filters, dev/test split.
    scoring     M-MEM ``pairwise`` and ``all_pairs``; ``score_prompts`` → ``NerScores``.
    analyses    ranking, spread, M-MEM by property, Kendall τ, ensembles.
    importance  iterated leave-one-token-out (paper Figure 4).
    attention   name-position attention, in-train vs out-of-train (paper Figure 5).
    embedded    the MiniLM NER model trained here on names we know.
    registry    NER models by name (``embedded``, registered ones, hub ids, folders), cached.
    audit       ``run_ner_audit(NerAuditConfig) -> NerAuditResult``: all of the above for one or
                several models; the one entry of the NER page and of ``memprobe ner``.
    cli         the ``memprobe ner`` command (arguments → config, result → report).

Long-running functions take ``on_progress(done: int, total: int, message: str)``.
"""
