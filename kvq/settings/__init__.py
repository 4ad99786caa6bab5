"""Properties files, ISO 8601 durations, the configuration loader and what every CLI does alike."""
