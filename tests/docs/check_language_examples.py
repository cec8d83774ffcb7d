#!/usr/bin/env python3
"""Checks the examples of docs/language.md with ssmc.

    check_language_examples.py SSMC LANGUAGE_MD [-I DIR]...

Fenced blocks are told apart by their info string (the word after the opening ```):

  ```ssm         A complete model, simulator or module. A model or simulator is written to NAME.ssm
                 (NAME from `model NAME {`) in a directory of its own and checked with
                 `ssmc check -Werror NAME.ssm` from that directory, which must succeed: no error and
                 no warning. A module is not checked alone (`ssmc check` refuses modules): it is
                 written to NAME.ssm in a directory given with -I to every check, so the models
                 that import it check it, and at least one ```ssm model must import it.
  ```ssm-error   A complete model that `ssmc check` must reject (exit status 1). If the next fenced
                 block is ```diagnostics, ssmc's messages (standard error) must be exactly that
                 block's text; they name the file as NAME.ssm.
  anything else  Not checked: fragments of models, grammar, output, shell commands. A block without
                 an info string must not start with `model`, `module` or `simulator` (mark it
                 ```ssm, or ```text if it shows a grammar rather than a model), so that a whole
                 model is never left unchecked by mistake.

The -I directories (the standard library, for instance) are passed on to ssmc after the one
holding the document's modules. A failure names the block's line in the document and shows ssmc's
output; the exit status is 1 if any block failed.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HEADER = re.compile(r"^\s*(model|module|simulator)\s+([A-Za-z_][A-Za-z0-9_]*)")


class Block:
    def __init__(self, line, info, text):
        self.line = line  # 1-based line of the opening fence
        self.info = info
        self.text = text
        self.kind = self.name = None
        for source_line in text.splitlines():
            stripped = source_line.strip()
            if not stripped or stripped.startswith("//"):
                continue
            match = HEADER.match(source_line)
            if match:
                self.kind, self.name = match.group(1), match.group(2)
            break


def read_blocks(path):
    """The fenced blocks of a Markdown file; raises ValueError on an unclosed fence."""
    blocks = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        words = lines[i][3:].split()
        info = words[0] if words else ""
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path}:{start + 1}: this fenced block is never closed")
        blocks.append(Block(start + 1, info, "\n".join(body) + "\n"))
        i += 1
    return blocks


def indent(text):
    return "".join("    " + line + "\n" for line in text.rstrip("\n").splitlines()) or "    (nothing)\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ssmc")
    parser.add_argument("document")
    parser.add_argument("-I", dest="includes", action="append", default=[])
    args = parser.parse_args()
    doc = args.document
    if not os.access(args.ssmc, os.X_OK):
        print(f"{args.ssmc}: not an executable ssmc", file=sys.stderr)
        return 1
    try:
        blocks = read_blocks(doc)
    except (OSError, ValueError) as e:
        print(e, file=sys.stderr)
        return 1

    failures = []

    def fail(block, message, output=None):
        text = f"{doc}:{block.line}: ```{block.info} block"
        if block.name:
            text += f" ({block.kind} {block.name})"
        text += f": {message}\n"
        if output is not None:
            text += indent(output)
        failures.append(text)

    checked = [b for b in blocks if b.info in ("ssm", "ssm-error")]
    for b in blocks:
        if b.info == "" and b.kind:
            fail(b, f"a whole {b.kind} in a block without an info string: mark it ```ssm to "
                    "check it, or ```text if it is not meant to compile")
    for b in checked:
        if not b.kind:
            fail(b, "is not a complete model: it must start with `model NAME {`, "
                    "`simulator NAME {` or `module NAME {` (after comments); use ```text or a "
                    "plain ``` block for a fragment")
        elif b.kind == "module" and b.info != "ssm":
            fail(b, "a module cannot be checked on its own: mark it ```ssm and import it")

    with tempfile.TemporaryDirectory(prefix="ssmc-doc-examples-") as tmp:
        modules_dir = os.path.join(tmp, "modules")
        os.mkdir(modules_dir)
        modules = {}
        for b in checked:
            if b.kind == "module" and b.info == "ssm":
                if b.name in modules:
                    fail(b, f"module {b.name} is already defined by the block at line "
                            f"{modules[b.name].line}")
                    continue
                modules[b.name] = b
                with open(os.path.join(modules_dir, b.name + ".ssm"), "w", encoding="utf-8") as f:
                    f.write(b.text)
        imported = set()
        includes = ["-I", modules_dir]
        for d in args.includes:
            includes += ["-I", os.path.abspath(d)]

        count = 0
        for index, b in enumerate(blocks):
            if b.info not in ("ssm", "ssm-error") or b.kind in (None, "module"):
                continue
            if b.info == "ssm":
                imported.update(re.findall(r'\bimport\s+"([^"]+)"', b.text))
            work = os.path.join(tmp, f"line{b.line}")
            os.mkdir(work)
            filename = b.name + ".ssm"
            with open(os.path.join(work, filename), "w", encoding="utf-8") as f:
                f.write(b.text)
            command = [os.path.abspath(args.ssmc), "check"]
            if b.info == "ssm":
                command.append("-Werror")
            command += includes + [filename]
            try:
                run = subprocess.run(command, cwd=work, capture_output=True, text=True,
                                     timeout=120)
            except (OSError, subprocess.TimeoutExpired) as e:
                fail(b, f"could not run ssmc: {e}")
                continue
            count += 1
            output = run.stderr + run.stdout
            where = f"(line k of {filename} is line {b.line}+k of {os.path.basename(doc)}"
            for name, module in modules.items():
                if os.path.join(modules_dir, name + ".ssm") in output:
                    where += f"; {name}.ssm is the module at line {module.line}"
            where += ")"
            stderr = run.stderr.replace(modules_dir + os.sep, "")
            output = output.replace(modules_dir + os.sep, "")
            if b.info == "ssm":
                if run.returncode != 0:
                    fail(b, f"`ssmc check -Werror {filename}` failed with exit status "
                            f"{run.returncode} {where}:", output)
                continue
            if run.returncode != 1:
                fail(b, f"`ssmc check {filename}` was expected to report an error (exit status "
                        f"1), but its exit status is {run.returncode}:", output)
                continue
            following = blocks[index + 1] if index + 1 < len(blocks) else None
            if following and following.info == "diagnostics":
                got = [line.rstrip() for line in stderr.rstrip("\n").splitlines()]
                want = [line.rstrip() for line in following.text.rstrip("\n").splitlines()]
                if got != want:
                    fail(b, f"ssmc's messages differ from the ```diagnostics block at line "
                            f"{following.line} {where}; ssmc printed:", stderr)

        for name, b in modules.items():
            if name not in imported:
                fail(b, f"module {name} is imported by no ```ssm model, so nothing checks it")

    for text in failures:
        sys.stderr.write(text)
    if failures:
        sys.stderr.write(f"{len(failures)} problem(s) in the examples of {doc}\n")
        return 1
    print(f"{count} examples of {doc} checked ({len(modules)} module(s) through their imports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
