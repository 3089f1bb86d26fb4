"""The approval domain: policy and approvals as plain Python, no I/O."""
