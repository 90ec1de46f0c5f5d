"""What users see, built once: run reports, step rows, progress events, the words of a plan.

The CLI renders these for a terminal, the Python API returns them, the server serialises them;
none of the three builds its own. Views read the driver's results and the store's queries and
never print.
"""
