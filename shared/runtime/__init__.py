"""Service start/stop machinery every service shares: the shell (lifecycle, runner),
the exit bound (exit_watchdog, threads), the admin app, metrics, explicit state
machines, retries and test fault injection.
"""
