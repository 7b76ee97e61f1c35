"""What the sampler tests share: a quick collect config at ORT's default level `all`, the canary off."""

FAST = """
[kernel_timing]
warmup = 1
min_runs = 3
max_runs = 10
min_time_s = 0.0
max_time_s = 0.03
[model_timing]
warmup = 1
min_runs = 3
max_runs = 10
min_time_s = 0.0
max_time_s = 0.1
[profile]
warmup = 1
runs = 2
[cold]
sessions = 2
max_mb = 16
[canary]
enabled = false
[[device]]
name = "cpu-test"
ep = "cpu"
intra_op_threads = 1
opt_level = "all"
"""
