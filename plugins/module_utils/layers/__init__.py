# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's layers: the registry (``_registry.py``) and one package per layer built as a room (observer,
pure planner, applier, audit judgement; see docs/architecture.md)."""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.validation import check_type_bool

from ansible_collections.rdma.k8s_node.plugins.module_utils._errors import InputError, ParseError


def check(check_id, status, subject=None, desired=None, live=None, *, persisted=None, remedy=None, detail=None):
    """One check of a room's judgement, as the audit reports it (``_audit.audit_host`` adds its layer): the remedy
    of a check that is ok is dropped, as a fix for nothing would read as a fault in the report."""
    return {"id": check_id, "status": status, "subject": subject, "desired": desired, "live": live,
            "persisted": persisted, "remedy": remedy if status != "ok" else None, "detail": detail}


class Checks(object):
    """Collects a judgement's checks through ``add()``, in the order and form of ``_audit``'s own collector (the
    judgements moved from ``_audit`` into the drivers and topology rooms kept that form)."""

    def __init__(self):
        self.items = []

    def add(self, check_id, status, desired=None, live=None, persisted=None, remedy=None, detail=None, subject=None):
        self.items.append(check(check_id, status, subject, desired, live, persisted=persisted, remedy=remedy,
                                detail=detail))


def desired_bool(desired, name, default=True):
    """A role's boolean variable as its module receives it: converted as the argument spec's ``type: bool`` converts
    (``-e rdma_sysctl_live=false`` is the string ``"false"``, which the module takes as False), so a judge plans what
    the module would.  A value the module would refuse counts as ``default``: the role fails on it before any
    change, and the audit's other checks still say what the node is."""
    try:
        return check_type_bool(desired.get(name, default))
    except TypeError:
        return default


def omitted(value):
    """A role's ``value | default(omit, true)``: a value Jinja takes as false (None, "", 0, False, an empty list or
    dict) is not passed to the module."""
    return value if value else None


class _Unfrozen(TypeError):
    """A value :func:`_frozen` has no hashable form for (the caller then does not cache)."""


_SCALARS = (str, int, float, bool, type(None))


def _frozen(value):
    """A hashable stand-in for a JSON-like value (a desired state, validated options), types included (``1``,
    ``1.0``, ``True`` and ``"1"`` are equal keys of a dict but not the same setting), in its order so that
    :func:`_thawed` gives it back as it was; _Unfrozen (a TypeError) for anything else."""
    if isinstance(value, _SCALARS):
        return (type(value), value)
    if isinstance(value, dict):
        return (dict, tuple((_frozen(key), _frozen(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_frozen(item) for item in value))
    raise _Unfrozen()


def _thawed(frozen):
    """The value :func:`_frozen` froze (a fresh copy)."""
    kind, value = frozen
    if kind is dict:
        return dict((_thawed(key), _thawed(item)) for key, item in value)
    if kind in (list, tuple):
        return kind(_thawed(item) for item in value)
    return value


# (prefix, argument spec, params) frozen -> (validated parameters frozen, error message): a fleet's hosts mostly share
# their desired state (group_vars), and the validator is a fair part of a host's audit (about 0.3 ms a call)
_VALIDATED = {}


def role_params(argument_spec, params, prefix):
    """A role's task arguments as its module receives them: ``params`` (the arguments the task passes, None where it
    omits one) checked and converted by ansible-core's own validator with the module's argument spec (defaults
    filled, ``2`` to ``"2"`` for a ``type: str``), so a judge plans with what the module would run and refuses what
    it would refuse.  Raises InputError naming the role's variables (``prefix`` + the option's name).

    The outcome is remembered per argument spec, prefix and parameters (by value and type), and a fresh copy
    returned each time."""
    given = dict((name, value) for name, value in params.items() if value is not None)
    try:
        key = (prefix, _frozen(argument_spec), _frozen(given))
    except _Unfrozen:
        key = None
    known = _VALIDATED.get(key) if key is not None else None
    if known is None:
        result = ArgumentSpecValidator(argument_spec).validate(given)
        if result.error_messages:
            known = (None, "; ".join(dict.fromkeys(result.error_messages)))
        else:
            try:
                known = (_frozen(result.validated_parameters), None)
            except _Unfrozen:  # a raw value of another type: given back as validated, not remembered
                return result.validated_parameters
        if key is not None:
            if len(_VALIDATED) >= 512:
                _VALIDATED.clear()
            _VALIDATED[key] = known
    if known[1] is not None:
        raise InputError("the role's variables are not what its module accepts (option X is the variable %sX): %s"
                         % (prefix, known[1]))
    return _thawed(known[0])


class MissingFacts(ParseError):
    """A judge's plan reads something the facts do not hold: its outcome is unknown, not a refusal."""


class FactFiles(dict):
    """The files the facts hold (``{path: FileState}``), for a judge's planner: a plan that reads another one
    raises MissingFacts saying ``which`` files rdma_facts reads."""

    def __init__(self, items, which):
        super().__init__(items)
        self.which = which

    def __missing__(self, path):
        raise MissingFacts("the facts do not hold %s (rdma_facts reads %s): the plan for it is unknown"
                           % (path, self.which))
