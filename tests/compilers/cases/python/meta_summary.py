def run(query: str) -> str:
    """Search the notes for a phrase.

    Without a Summary: field the summary is the first line of the description.

    Args:
        query: What to look for.

    Tags: notes
    Destructive: false
    """
    return query
