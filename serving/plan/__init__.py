"""The capacity plan of a spec: memory, speed, collectives, placement and replica groups,
and the rules a layout must pass (`rules`), which the planner and the policy pack share."""
