"""The pure decision core of the Strimzi proposal: no I/O, every time is an argument.

Where a new throttle policy goes: a class in `throttle_factor_policy` implementing
`ThrottleFactorPolicy.volume_factor` (one volume's reading, and its previous one if
`needs_history`, to the factor that volume asks for; operators and `Expressions` only), chosen in
`kvq.settings.config.Config.policy`. The exporter evaluates it on numbers (`PolicyRun`, used by
`throttle_factor_source`); the backfill evaluates the same declaration on Spark Columns
(`spark.volume_history.volume_factor`) and `tests/spark/test_equivalence.py` holds the two equal.
`needs_history` is all a policy reading earlier observations declares: the exporter keeps each
volume's previous reading and the backfill looks it up with a window over the volume's
descriptions.
"""
