"""Facts of another shape for the rooms' judges: a copy of a section with one value replaced or dropped."""

import copy

#: ``mutated(..., DROP)`` removes the key instead of replacing its value
DROP = object()


def mutated(section, path, value):
    """A deep copy of ``section`` with the value at ``path`` (a tuple of keys) set to ``value``, or removed (DROP)."""
    section = copy.deepcopy(section)
    target = section
    for key in path[:-1]:
        target = target[key]
    if value is DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return section
