"""Small helpers shared by the hwsim tests."""


def errno_of(func, *args, **kwargs):
    """The errno an operation fails with, or None when it succeeds."""
    try:
        func(*args, **kwargs)
    except OSError as exc:
        return exc.errno
    return None
