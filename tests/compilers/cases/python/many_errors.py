def run(a, /, *rest, **options):
    pass
