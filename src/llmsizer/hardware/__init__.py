"""Hardware: speed on a device, whether a workload fits, and which hardware to use (fit / recommend)."""
