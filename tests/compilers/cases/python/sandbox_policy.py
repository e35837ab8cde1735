def run(x: str) -> str:
    """Fetch a thing.

    Args:
        x: the thing

    Network: api.github.com, localhost:8080
    Writes: cache, cwd, ~/notes
    Reads: ~/.aws
    Env: GITHUB_TOKEN, AWS_PROFILE
    Memory: 256 MiB
    CPU: 10 s
    Processes: 64
    File size: 10 MiB
    """
    return x
