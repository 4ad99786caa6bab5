"""One cluster's apply and restore, in phases that each journal before they act; `Applier`
(enforcer/applier.py) runs them in order, one module per phase:

- `view.py`: one DescribeClientQuotas the apply acts on (taking in first what a lost journal
  left in Kafka's copy of the originals, originals_recovery.py);
- `plan.py`: what to set, from the journal's originals and that view; writes nothing;
- `intend.py`: journal the originals found (a new episode when none is active), the operators'
  changes and the values about to be set (pending);
- `send.py`: validate, then Kafka's copy ahead of the changes that depend on it, each request
  journaled as in doubt until it is answered (`ClusterIO.alter`);
- `verify.py`: describe until the values show (what did land is journaled when not all did);
- `confirm.py`: journal the values that landed, and the factor as applied once nothing is in
  doubt;
- `finish.py` (a restore): remove Kafka's copy, its marker first, then journal the episode
  finished.

Besides them: `dry_run.py` (validate and log instead of acting), `check.py` (the look between
applies: would an apply change something?), `failures.py` (every failure counted, kept and raised
as ApplyError), `report.py` (an apply's log line and metrics), `cluster_io.py` (what every phase
acts through), `status.py` and `result.py` (what callers see).

A crash between two phases leaves Kafka at the previous or the pending values, both known from
the journal as the enforcer's own. A restore is the same protocol at UNTHROTTLED.

The plan always starts from the originals in the journal, so repeating, duplicating or resuming
an apply after a crash converges on the same values and never compounds a factor. The originals
are also copied into Kafka (kafka_originals.py) before the first change that depends on them, so
a lost journal is recovered from Kafka instead of taking throttled values for originals.
"""
