def run(repo: str) -> str:
    """Push a repository.

    Scope: repo:"write"
    """
    return repo
