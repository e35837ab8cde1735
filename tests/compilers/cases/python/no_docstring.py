def run(x: int) -> int:
    return x
