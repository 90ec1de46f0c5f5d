"""A project helper: editing `money` reruns `summary`, its only user."""


def money(value: float) -> str:
    return f"{value:.2f}"
