"""What runs inside the user's process: the harness, its windows and warm-up, the step clock, the hooks."""
