"""Offline stand-in for pip's get-pip.py, used by ansible-test to put pip into its sanity virtualenvs.

ansible-test downloads get-pip.py from ci-files.testing.ansible.com, which CI machines without general
internet access cannot reach (PyPI itself is reachable).  This script does the same job with the standard
library's ensurepip and then installs the requested pip release from the configured package index.
scripts/test places it in ansible-test's cache only when no real get-pip.py is cached there.
"""

import subprocess
import sys

# get-pip.py options that are not pip install options
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main():
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    main()
