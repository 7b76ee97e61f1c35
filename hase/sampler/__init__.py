"""The kernel sampler: kernel sizes counted in real graphs (`ranges`), sampled block models drawn over them
(`draw`), zoo configs with their `[sampler]` table expanded (`config`) and the adaptive rounds that sample
more where the trained predictor errs most (`refine`)."""
