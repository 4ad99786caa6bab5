"""What every app reads its configuration with, and what every CLI does alike.

- `properties`: Java `.properties` files; `durations`: ISO 8601 durations; `values`: value parsers,
  each saying what it accepts; `setting`: Setting, one property's declaration.
- `config`: the shared Config (the Strimzi proposal's properties and `kvq.cluster.name`).
- `app_settings`: AppSettings, the base of each app's typed, frozen `kvq.<app>.*` settings
  (exporter/settings.py, enforcer/settings.py, spark/settings.py).
- `cli_support`: the argparse head (`--version`, `--log.*`), load-or-exit-2, `--check-config`;
  `logging_setup`: one logfmt/JSON log format for every command.
"""
