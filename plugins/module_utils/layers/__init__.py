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


def role_params(argument_spec, params, prefix):
    """A role's task arguments as its module receives them: ``params`` (the arguments the task passes, None where it
    omits one) checked and converted by ansible-core's own validator with the module's argument spec (defaults
    filled, ``2`` to ``"2"`` for a ``type: str``), so a judge plans with what the module would run and refuses what
    it would refuse.  Raises InputError naming the role's variables (``prefix`` + the option's name)."""
    result = ArgumentSpecValidator(argument_spec).validate(
        dict((name, value) for name, value in params.items() if value is not None))
    if result.error_messages:
        raise InputError("the role's variables are not what its module accepts (option X is the variable %sX): %s"
                         % (prefix, "; ".join(dict.fromkeys(result.error_messages))))
    return result.validated_parameters


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
