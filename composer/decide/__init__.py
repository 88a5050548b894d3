"""One round's decisions in the device-plugin placement mode: plan, reconcile, reclaim, gate (pure)."""
