def run(repo: str) -> str:
    """Push a repository.

    Scope: repo:read, repo:write
    """
    return repo
