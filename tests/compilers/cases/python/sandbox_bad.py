def run() -> str:
    """Bad policy values, each named.

    Network: http://example.com
    Writes: somewhere
    Env: 1BAD
    Memory: lots
    CPU: -1
    Processes: many
    File size: 10 parsecs
    """
    return ""
