"""Measuring a deployed service against its plan: `servestack bench --url` and the calibration
records `servestack calibrate` makes from its runs."""
