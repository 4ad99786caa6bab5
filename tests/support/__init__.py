"""Helpers the tests share: free ports, readiness waits, processes that are always stopped."""
