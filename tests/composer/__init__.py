"""Tests of the composer (issue 7): planner, controller logic, chart, lab agent, end to end."""
