import functools


def traced(fn):
    @functools.wraps(fn)
    async def wrapper(**kwargs):
        return await fn(**kwargs)

    return wrapper


@traced
@functools.lru_cache(maxsize=None)
async def run(query: str) -> str:
    """Search the notes asynchronously."""
    return query
