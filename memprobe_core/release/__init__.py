"""memprobe in a release pipeline: one model's audit against another's (:mod:`.diff`), limits a
run must stay under (:mod:`.policy`, :mod:`.gate`) and reports CI systems read (:mod:`.junit`).
"""
