def run() -> str:
    """Twice.

    Warm: yes
    Warm: no
    """
    return "no"
