"""Execution: the coordinator, the executor seam and the local worker processes."""
