"""What benchctl and benchd say to a user who mistypes, runs them bare or asks
their version (issue 38's CLI points): the word that is not a command and the
nearest ones, the help instead of "A subcommand is required", and a model
request without a model named as such; help examples, shell completion and
one flag per idea across kinds (the older spellings still accepted). No
daemon but for the last test: every other case is refused or answered before
a call."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import BIN, cpu_daemon

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


def test_help_has_examples_and_only_the_one_vocabulary():
    r = benchctl("help", "submit", "collective")
    assert r.returncode == 0, r
    assert "Examples:\n  benchctl submit collective " in r.stdout, r.stdout
    for shown in ("--device", "--steps", "--warmup"):
        assert f"  {shown} " in r.stdout, (shown, r.stdout)
    for hidden in ("--devices", "--iters"):
        assert hidden not in r.stdout, (hidden, r.stdout)
    r = benchctl("submit", "collective", "--group", "g1", "--iters", "3", "--steps", "4")
    assert r.returncode == 2, r
    assert ("--iters and --steps: one flag given twice (--iters is the older spelling of "
            "--steps); give --steps once") in r.stderr, r.stderr


def test_completion_scripts_from_the_commands():
    script = benchctl("completion", "bash")
    assert script.returncode == 0, script
    for words, offered in ((["benchctl", "submit", "col"], "collective"),
                           (["benchctl", "submit", "collective", "--it"], ""),
                           (["benchctl", "submit", "collective", "--ste"], "--steps"),
                           (["benchctl", "list", "--kind", "dd"], "ddp")):
        driver = (script.stdout + "\nCOMP_WORDS=(" + " ".join(f"'{w}'" for w in words) +
                  f")\nCOMP_CWORD={len(words) - 1}\n_benchctl_complete\necho \"${{COMPREPLY[*]}}\"\n")
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c", driver], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == offered, (words, r.stdout, r.stderr)
    zsh = benchctl("completion", "zsh")
    assert zsh.returncode == 0 and zsh.stdout.startswith("#compdef benchctl\n"), zsh
    if shutil.which("zsh"):
        r = subprocess.run(["zsh", "-n"], input=zsh.stdout, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
    fish = benchctl("completion", "fish")
    assert fish.returncode == 2, fish
    assert "unknown command 'fish' for 'benchctl completion'; expected bash or zsh" in fish.stderr


# Each kind with the one vocabulary, then with its older spellings: the same
# spec reaches the daemon, with the value given (`path` in the JobSpec).
SPELLINGS = [
    (["collective", "--device", "cpu:0", "--device", "cpu:1", "--sizes", "4KiB", "--warmup", "1",
      "--steps", "3"],
     ["collective", "--devices", "cpu:0,cpu:1", "--sizes", "4KiB", "--warmup", "1", "--iters", "3"],
     ("collective", "iters"), "3"),
    (["attention", "--device", "cpu:1", "--batch-size", "1", "--seq-len", "16", "--head-dim", "16",
      "--steps", "2"],
     ["attention", "--device", "cpu:1", "--batch-size", "1", "--seq-len", "16", "--head-dim", "16",
      "--passes", "2"],
     ("attention", "passes"), "2"),
    (["benchmark", "--device", "cpu:1", "--preset", "small", "--warmup", "2", "--steps", "1"],
     ["benchmark", "--device", "cpu:1", "--preset", "small", "--warmup-steps", "2", "--steps", "1"],
     ("benchmark", "warmupSteps"), "2"),
    (["ddp", "--device", "cpu:0,cpu:1", "--preset", "small", "--warmup", "1", "--steps", "1",
      "--no-traces"],
     ["ddp", "--devices", "cpu:0,cpu:1", "--preset", "small", "--warmup-steps", "1", "--steps",
      "1", "--no-traces"],
     ("ddp", "step", "warmupSteps"), "1"),
]


def test_the_older_spellings_submit_the_same_spec():
    with cpu_daemon(["cpu:0", "cpu:1"], "benchd-vocab-") as d:
        for new, old, path, value in SPELLINGS:
            specs = []
            for args in (new, old):
                r = d.benchctl("submit", *args, "--json", check=0)
                job = json.loads(r.stdout)
                specs.append(job["spec"])
                d.benchctl("cancel", job["id"])  # it may have ended already
            got = specs[0]
            for key in path:
                got = got[key]
            assert str(got) == value, (new, specs[0])
            assert specs[0] == specs[1], (new, old, specs)
