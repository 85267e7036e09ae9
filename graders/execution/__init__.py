"""Execution: the trust boundary. The worker (`worker/`, the only process that runs student code),
the sandbox it runs in, and the trusted side's handle on it (`client.py`)."""
