"""What benchctl and benchd say to a user who mistypes, runs them bare or asks
their version (issue 38's CLI points): the word that is not a command and the
nearest ones, the help instead of "A subcommand is required", and a model
request without a model named as such. No daemon: every case is refused or
answered before a call."""
import os
import subprocess

import pytest

from conftest import BIN

NOWHERE = ["--address", "127.0.0.1:1"]


def benchctl(*args):
    return subprocess.run([os.path.join(BIN, "benchctl"), *NOWHERE, *args], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("args, said", [
    (["lsit"], "benchctl: unknown command 'lsit' for 'benchctl'; did you mean 'list'?"),
    (["sumbit", "benchmark"], "unknown command 'sumbit' for 'benchctl'; did you mean 'submit'?"),
    (["submit", "benchmrk", "--preset", "small"],
     "unknown command 'benchmrk' for 'benchctl submit'; did you mean 'benchmark'?"),
    (["frobnicate"], "unknown command 'frobnicate' for 'benchctl'; expected "),
])
def test_a_mistyped_command_is_named_with_the_nearest(args, said):
    r = benchctl(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert said in r.stderr, r.stderr
    assert "A subcommand is required" not in r.stderr


def test_bare_benchctl_and_help_print_the_help():
    bare = subprocess.run([os.path.join(BIN, "benchctl")], capture_output=True, text=True,
                          timeout=60)
    assert bare.returncode == 2 and "Subcommands:" in bare.stdout, bare
    assert "submit" in bare.stdout and "A subcommand is required" not in bare.stderr
    flag = subprocess.run([os.path.join(BIN, "benchctl"), "--bogus"], capture_output=True,
                          text=True, timeout=60)
    assert flag.returncode == 2 and "benchctl: unknown option '--bogus'" in flag.stderr, flag
    helped = benchctl("help")
    assert helped.returncode == 0 and "Subcommands:" in helped.stdout, helped
    submit = benchctl("help", "submit")
    assert submit.returncode == 0, submit
    for kind in ("benchmark", "profile", "memory", "collective", "attention", "precision", "ddp"):
        assert kind in submit.stdout, (kind, submit.stdout)


def test_versions():
    for program, name in (("benchctl", "0."), ("benchd", "benchd 0.")):
        r = subprocess.run([os.path.join(BIN, program), "--version"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and name in r.stdout, (program, r.stdout, r.stderr)


def test_a_request_without_a_model_says_a_model_is_needed():
    r = benchctl("estimate", "--offline")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "model.preset: no model given; expected a preset (one of" in r.stderr, r.stderr
    assert "vocab_size: expected a positive integer" not in r.stderr
