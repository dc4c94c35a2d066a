"""The runtime checker: `gpulint profile` measures where a real training run spends its time,
`gpulint verify` runs the original and the fixed script interleaved and says whether the fix is
faster; every run is kept in a history (`gpulint history`, `compare`, `report`) for regression
gates and reports.  See docs/runtime.md (how) and
docs/method.md (the method and its thresholds)."""
