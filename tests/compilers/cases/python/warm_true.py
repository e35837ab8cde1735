import json


def run(text: str) -> str:
    """Parse once, answer fast.

    Warm: true

    Args:
        text: JSON text.
    """
    return json.dumps(json.loads(text))
