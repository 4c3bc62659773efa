"""Reports of a run: from its units to tables, text, HTML, figures and CSV.

- :mod:`.build`: ``report_for_run`` / ``build_report`` → :class:`~.build.Report` (Table 1 with
  intervals, paired gains, PII, costs, membership).
- :mod:`.stats`: bootstrap intervals and paired tests; :mod:`.select`: which Mem a unit reports.
- :mod:`.formatting`: numbers, intervals and the small-n mark as text (shared by text and HTML).
- :mod:`.text`: the terminal report; :mod:`.html` (with :mod:`.html_sections`,
  :mod:`.html_template`): the self-contained HTML report; :mod:`.figures`: its plotly figures
  (the dashboard draws the same); :mod:`.export`: formula-safe CSV.
"""
