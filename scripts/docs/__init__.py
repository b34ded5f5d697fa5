"""The documentation's generated regions, each made from the code that holds its facts.

Every page (README.md and docs/**/*.md) may hold regions between `<!-- generated:NAME -->` and
`<!-- /generated:NAME -->`; `regions` finds them, fills each from its maker and, with `--check`,
fails on any that drifted. One module per group of pages: `front` (the set-up commands the
README and the site's home share), `reference` (profile, stack keys, CLI, policies,
verdicts, fast paths), `observe` (metrics, dashboard, alerts, `servestack top`), `planning`
(the planner's error bands, autoscaling knobs) and `measured` (the committed bench and fault
runs under results/).
"""
