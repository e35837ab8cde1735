def run(plain, typed, optional_typed=None, multi=False):
    """Show each form of an Args entry.

    Arguments:
        plain: A parameter with just a description.
        typed (int): A parameter whose type comes from the docstring.
        optional_typed (list[str], optional): Optional, typed in the docstring,
            with a continuation line
            and another one.
        multi (bool): Description that
            continues here.
    """
