# Copyright (c) 2026 rdma.k8s_node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container scenarios' transport: run a task's commands in a running podman container with nsenter.

containers.podman.podman runs `podman exec` or `podman cp` four or five times a task (a temporary directory, the
module, its run, the clean-up), each a start of podman, conmon and runc: measured 1.7 s a task on the 2-core CI
machine, the larger part of a container scenario. This plugin asks podman once for the container's init process,
then enters that process's namespaces (user, mount, PID, network, UTS, IPC, cgroup: `nsenter --all`) for each
command, with pipelining (the module goes over stdin): 0.3 s a task, measured the same way.

What a command sees is what `podman exec` gives it, but for three things (test infrastructure only; the container,
its systemd and the collection's modules are real):
- the environment is the container's own (its init process's, as podman exec starts from), not the controller's;
- the process stays in the controller's cgroup (the container's cgroup namespace is entered, its cgroup is not
  joined): a daemon a task starts outside the container's systemd would not be stopped with the container;
- it holds every capability within the container's user namespace, where podman exec gives the container's
  capability set. The user namespace is what protects the host here (a non-initial user namespace gets EPERM on
  global sysctls, module loading and raw devices whatever its capabilities), and it is entered.
"""

from __future__ import annotations

DOCUMENTATION = """
    name: podman_nsenter
    short_description: Run commands in a running podman container through nsenter
    description:
        - Enters the namespaces of the container's init process for each command (C(nsenter --all)), with the
          container's own environment. Test infrastructure of the molecule container scenarios.
    options:
      remote_addr:
        description: The name or ID of the container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      podman_executable:
        description: The podman command, asked once a task for the container's init process.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
    extends_documentation_fragment:
        - connection_pipelining
"""

import subprocess

from ansible.errors import AnsibleConnectionFailure, AnsibleError, AnsibleFileNotFound
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()


class Connection(ConnectionBase):
    """nsenter into a podman container's init process."""

    transport = 'podman_nsenter'
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pid = None
        self._env = None

    def _connect(self):
        if self._connected:
            return self
        name = self.get_option('remote_addr')
        try:
            result = subprocess.run([self.get_option('podman_executable'), 'inspect', '--type', 'container',
                                     '--format', '{{.State.Pid}}', name],
                                    capture_output=True, check=False, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AnsibleConnectionFailure('podman inspect %s: %s' % (name, exc)) from exc
        pid = to_text(result.stdout).strip()
        if result.returncode != 0 or not pid.isdigit() or pid == '0':
            raise AnsibleConnectionFailure('container %s is not running: %s'
                                           % (name, to_text(result.stderr).strip() or 'no init process'))
        try:
            with open('/proc/%s/environ' % pid, 'rb') as handle:
                self._env = [item for item in handle.read().split(b'\0') if b'=' in item]
        except OSError as exc:
            raise AnsibleConnectionFailure('container %s: its init process %s: %s' % (name, pid, exc)) from exc
        self._pid = pid
        self._connected = True
        return self

    def _argv(self, argv):
        # (--root and --wd without a value: the target's own root and working directory; nsenter opens a
        # --wd=DIR before it enters the mount namespace, so a path would be the controller's)
        return [b'nsenter', b'--all', b'--target', to_bytes(self._pid), b'--root', b'--wd', b'--',
                b'/usr/bin/env', b'-i'] + self._env + argv

    def _run(self, argv, in_data=None):
        display.vvv('EXEC %s' % to_text(b' '.join(argv)), host=self.get_option('remote_addr'))
        try:
            proc = subprocess.run(self._argv(argv), input=in_data, capture_output=True, check=False)
        except OSError as exc:
            raise AnsibleConnectionFailure('nsenter: %s' % exc) from exc
        return proc.returncode, proc.stdout, proc.stderr

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        self._connect()
        return self._run([b'/bin/sh', b'-c', to_bytes(cmd)], in_data)

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        self._connect()
        try:
            with open(to_bytes(in_path, errors='surrogate_or_strict'), 'rb') as handle:
                data = handle.read()
        except OSError as exc:
            raise AnsibleFileNotFound('file or module does not exist: %s: %s' % (in_path, exc)) from exc
        rc, _out, err = self._run([b'/bin/sh', b'-c', b'cat > "$1"', b'sh', to_bytes(out_path)], data)
        if rc != 0:
            raise AnsibleError('failed to transfer %s to %s: %s' % (in_path, out_path, to_text(err)))

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        self._connect()
        rc, out, err = self._run([b'cat', b'--', to_bytes(in_path)])
        if rc != 0:
            raise AnsibleError('failed to fetch %s: %s' % (in_path, to_text(err)))
        with open(to_bytes(out_path, errors='surrogate_or_strict'), 'wb') as handle:
            handle.write(out)

    def reset(self):
        self.close()

    def close(self):
        self._connected = False
        self._pid = None
