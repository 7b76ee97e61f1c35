"""Evaluation and reporting of a trained predictor: leave-family-out tables and headline figures (`evaluation`),
KernelSum/Model ratios (`ratios`), real exported models (`devset`) and their batch sweep (`sweep`), a
prediction against a measurement on this host (`measured`), and the report (`report`, `plots`, `render`,
`glossary`). Nothing here trains: it reads what `hase.predict.train` saved."""
