"""The pure decision core of the Strimzi proposal: no I/O, every time is an argument.

Where a new throttle policy goes: a module of its own beside `stop_on_violation` and
`graceful_slowdown`, a class implementing `throttle_factor_policy.ThrottleFactorPolicy` (one
volume's reading, its `history` previous ones, the aggregates of its readings by time it declares
(`growth_windows`, `looks_back`) and, if it `accumulates`, its depth, to the factor
that volume asks for; operators and `policy_expressions.Expressions` only), chosen in
`kvq.settings.config.Config.policy` (`kvq.throttle.policy`). The exporter evaluates it on numbers
(`policy_run.PolicyRun`, used by `throttle_factor_source`); the backfill evaluates the same
declaration on Spark Columns (`spark.volume_history.with_policy_columns`) and
`tests/spark/test_equivalence.py` holds the two equal.
`history`, `growth_windows`, `looks_back` and `accumulates` are all a policy reading earlier
observations declares: the exporter keeps each volume's previous readings, its readings of the
longest window (`reading_trail`), peak and depth (`depth_accumulator`), the backfill computes them
with windows over the volume's descriptions.
"""
