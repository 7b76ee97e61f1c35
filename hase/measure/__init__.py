"""The measure stage: ORT sessions per device config, timed units of work (kernel, model), resumable collect, store."""
