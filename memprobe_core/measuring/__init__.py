"""What is measured beside each result, below the methods: its options
(:mod:`.options`, ``MeasureOptions``) and the pure scores whose parameters they hold (DC-PDD's
token frequencies, PAC's augmentations, the sampler p_z is measured under). Imports nothing
itself, so importing one module loads only what that module needs."""
