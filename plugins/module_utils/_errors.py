# -*- coding: utf-8 -*-
# Copyright: (c) 2026, rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Typed errors raised by the collection's planners, parsers and host I/O.

Only a module's ``main()`` turns these into ``fail_json``; everything below it raises.
Each error carries a human sentence (``msg``), machine-readable ``details`` and, when
something was already observed or applied, the partial ``result`` so that the failure
output still says what the module saw and what it undid.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name


class RdmaNodeError(Exception):
    """Base class: one sentence that says what failed and where, plus structured details."""

    def __init__(self, msg, details=None, result=None):
        super().__init__(msg)
        self.msg = msg
        self.details = dict(details or {})
        self.result = result

    def to_fail_kwargs(self):
        """Keyword arguments for ``module.fail_json``: the message, details and any partial result."""
        kwargs = {"msg": self.msg}
        if self.details:
            kwargs["details"] = self.details
        if self.result is not None:
            kwargs.update(self.result)
            kwargs["msg"] = self.msg
        return kwargs


class InputError(RdmaNodeError):
    """The caller asked for something that cannot be valid, detected before any I/O."""


class HostRootError(RdmaNodeError):
    """``host_root`` is unusable, or a path tried to leave it."""


class HostReadError(RdmaNodeError):
    """A node file could not be read or parsed although it should have been readable."""


class ParseError(RdmaNodeError):
    """Text from the node (a sysfs attribute, a config file, a command's output) has an unexpected shape."""


class ApplyError(RdmaNodeError):
    """A change failed while being applied; ``details['rolled_back']`` says whether it was undone."""


class VerifyError(RdmaNodeError):
    """The change was applied but observing the node again does not show the desired state."""


class ConflictError(RdmaNodeError):
    """Something else on the node contradicts the request, and overriding it silently would be unsafe."""
