"""Tests of the composer: planner, controller logic, chart, lab agent, end to end."""
