#!/usr/bin/env python3
"""Checks that the tree refers to itself and to nothing outside it.

    python3 .ci/check_paths.py [--root DIR]

Prints one line per problem, `path:line: problem`, then a count; exits 1 if
there is any problem. Files are the repository's: `git ls-files` plus the
untracked files git does not ignore, so it works on a clean clone and on a
working tree with new files.

(a) Paths named in docs and comments exist. Checked: Markdown files (all of
their text), and the comments of C/C++ (.h .hpp .c .cc .cpp), Python (comments
and docstrings), meson and shell files. A path is checked when it
  * starts with a top-level folder (core/ nn/ tests/ docs/ examples/ bench/ data/):
    relative to the repository's root, wherever it is written;
  * starts with ../ : relative to the folder of the file that names it;
  * is the target of a Markdown link or image (`[x](tensor.md#views)`):
    relative to the Markdown file's folder, as GitHub resolves it;
  * starts with a subfolder of the file's folder or of one of its parent
    folders (`support/check.h` written in tests/ or in a file under it)
    and ends with a file extension or a slash: relative to that folder;
  * is a bare top-level file name (README.md, ember.h, meson.build, ...).
It exists when it is a file or a folder of the repository, or the program
built from one (`bench/ember_bench` from bench/ember_bench.cpp). Trailing
punctuation, `:line` suffixes and `#anchors` are dropped. Not checked:
patterns (anything with < > * { } $ or ...), paths inside URLs, paths that
continue a longer path (`build/examples/train_gpt`, `torch/nn/init.py`: build
outputs and other projects' files), and the file an #include names (the compiler
checks those).

(b) Nothing refers outside the repository, in any text file (code too): no
`/work`, no `../shared` or `shared/{spec,seeds,data}`, no home directory
(/home/..., /root, /Users/..., ~/), no mount point (/mnt, /media), no ../
path that climbs out of the repository, and /tmp only in tests/ and .ci/.
System paths (/usr/bin/python3, /dev/null, /proc/self/exe, /etc/...) are fine.

Python 3 standard library only.
"""
import argparse
import io
import os
import re
import subprocess
import sys
import tokenize

TOP_FOLDERS = ("core", "nn", "tests", "docs", "examples", "bench", "data")
# Bare names checked as top-level files: today's, so that a mention fails
# when one of them is renamed or removed.
TOP_FILES = ("README.md", "ember.h", "meson.build", "meson_options.txt", "LICENSE")
PROGRAM_SOURCES = (".cpp", ".c", ".py", ".sh")

# The characters a path is made of; glob and template characters included so
# that a pattern is read whole and then skipped.
PATH_CHARS = r"[A-Za-z0-9_.\-/<>*{}$%+~]"
LEFT = r"(?<![A-Za-z0-9_.\-/~$@])"  # a path that continues another is not ours
TOP_PATH = re.compile(LEFT + r"((?:\.\./)*(?:\./)?(?:" + "|".join(TOP_FOLDERS) + r")(?:/" + PATH_CHARS + r"*)?)(?![A-Za-z0-9_])")
UP_PATH = re.compile(LEFT + r"((?:\.\./)+" + PATH_CHARS + r"+)")
REL_PATH = re.compile(LEFT + r"([A-Za-z0-9_][A-Za-z0-9_\-]*/" + PATH_CHARS + r"*)")
BARE_NAME = re.compile(LEFT + r"(" + "|".join(re.escape(n) for n in TOP_FILES) + r")(?![A-Za-z0-9_\-/])")
URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s)\]>`'\"]*|\bwww\.[^\s)\]>`'\"]*")
MD_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
MD_REF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HTML_LINK = re.compile(r"\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']")
INCLUDE = re.compile(r"^\s*#\s*include\b")
EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]*$")

# (b). This file names them to forbid them, so (b) skips it (SELF).
OUTSIDE = [
    (re.compile(r"(?<![A-Za-z0-9_.\-~])/work(?![A-Za-z0-9_\-])"), None),
    (re.compile(r"(?:\.\./)+shared(?![A-Za-z0-9_\-])"), None),
    (re.compile(r"(?<![A-Za-z0-9_\-])shared/(?:spec|seeds|data)(?![A-Za-z0-9_\-])"), None),
    (re.compile(r"(?<![A-Za-z0-9_.\-/~])/(?:home|Users)/[A-Za-z0-9_.\-]+"), "a home directory"),
    (re.compile(r"(?<![A-Za-z0-9_.\-/~])/root(?![A-Za-z0-9_.\-])"), "a home directory"),
    (re.compile(r"(?<![A-Za-z0-9_.\-/~\\])~[A-Za-z0-9_\-]*/[A-Za-z0-9_.]"), "a home directory"),
    (re.compile(r"\b[A-Za-z]:\\(?:Users|Documents and Settings)\\"), "a home directory"),
    (re.compile(r"(?<![A-Za-z0-9_.\-/~])/(?:mnt|media)/[A-Za-z0-9_.\-]+"), "a machine's mount point"),
    (re.compile(r"(?<![A-Za-z0-9_.\-/~])/tmp(?![A-Za-z0-9_\-])"), "/tmp"),
]
OUTSIDE_ANY = re.compile(r"/(?:work|home|Users|root|mnt|media|tmp)|\.\./shared|shared/|~|:\\")  # a quick first look
TMP_ALLOWED = ("tests/", ".ci/")
SELF = ".ci/check_paths.py"


def git_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True).stdout.decode("utf-8", "surrogateescape")
    files = sorted({f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))})
    return files


def kind_of(path, first_line):
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    if ext in (".h", ".hpp", ".c", ".cc", ".cpp", ".cxx"):
        return "c"
    if ext == ".py":
        return "python"
    if ext == ".md":
        return "markdown"
    if name in ("meson.build", "meson_options.txt", "meson.options"):
        return "meson"
    if ext in (".sh", ".bash"):
        return "shell"
    if first_line.startswith("#!"):
        if "python" in first_line:
            return "python"
        if re.search(r"\b(ba|da|z|k)?sh\b", first_line):
            return "shell"
    return None


# ---- comments, as (line number, text) pieces ---------------------------------

C_TOKENS = re.compile(r"""
    (?P<line>//(?:[^\n]|\\\n)*)                          # a line comment (continued by backslash-newline)
  | (?P<block>/\*.*?(?:\*/|\Z))                           # a block comment
  | (?<![A-Za-z0-9_])(?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)"   # a raw string
  | "(?:[^"\\\n]|\\.)*"                                   # a string
  | (?<![A-Za-z0-9_])[0-9][A-Za-z0-9_.']*                # a number, with its digit separators (1'000'000)
  | '(?:[^'\\\n]|\\.)*'                                   # a character
""", re.VERBOSE | re.DOTALL)


def c_comments(text):
    """The comments of C/C++ source, skipping string, character and raw string literals."""
    out, pos, line = [], 0, 1
    for m in C_TOKENS.finditer(text):
        kind = m.lastgroup if m.lastgroup in ("line", "block") else None
        if kind:
            line += text.count("\n", pos, m.start())
            pos, first = m.start(), line
            body = m.group(kind)[2:]
            if kind == "block" and body.endswith("*/"):
                body = body[:-2]
            for k, piece in enumerate(body.split("\n")):
                out.append((first + k, piece))
    return out


def hash_comments(text, triple_quotes=False):
    """`#` comments of shell and meson files, outside quoted strings."""
    out, in_triple = [], False
    for number, line in enumerate(text.split("\n"), 1):
        i, quote = 0, None
        while i < len(line):
            if in_triple:
                j = line.find("'''", i)
                if j < 0:
                    break
                in_triple, i = False, j + 3
                continue
            c = line[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 1
                elif c == quote:
                    quote = None
            elif triple_quotes and line.startswith("'''", i):
                in_triple, i = True, i + 3
                continue
            elif c in "'\"":
                quote = c
            elif c == "#" and (i == 0 or line[i - 1] in " \t;|&(") and not line.startswith("#!", 0 if i == 0 else i):
                out.append((number, line[i + 1:]))
                break
            i += 1
    return out


def python_comments(text):
    """Comments and docstrings (strings that are a statement of their own) of Python source."""
    out = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return hash_comments(text)
    skip = (tokenize.NL, tokenize.COMMENT, tokenize.ENCODING)
    significant = [t for t in tokens if t.type not in skip]
    for t in tokens:
        if t.type == tokenize.COMMENT:
            out.append((t.start[0], t.string[1:]))
    for k, t in enumerate(significant):
        if t.type != tokenize.STRING:
            continue
        before = significant[k - 1].type if k > 0 else tokenize.NEWLINE
        after = significant[k + 1].type if k + 1 < len(significant) else tokenize.NEWLINE
        if before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) and after in (tokenize.NEWLINE, tokenize.ENDMARKER):
            for j, piece in enumerate(t.string.split("\n")):
                out.append((t.start[0] + j, piece))
    return out


def doc_pieces(kind, text):
    if kind == "markdown":
        return [(k, line) for k, line in enumerate(text.split("\n"), 1)]
    if kind == "c":
        return c_comments(text)
    if kind == "python":
        return python_comments(text)
    if kind == "meson":
        return hash_comments(text, triple_quotes=True)
    if kind == "shell":
        return hash_comments(text)
    return []


# ---- (a) paths that must exist ----------------------------------------------

class Tree:
    def __init__(self, files):
        self.files = set(files)
        self.dirs = {""}
        for f in files:
            parts = f.split("/")
            for k in range(1, len(parts)):
                self.dirs.add("/".join(parts[:k]))

    def exists(self, path):
        path = path.rstrip("/")
        if path in self.files or path in self.dirs:
            return True
        return any(path + ext in self.files for ext in PROGRAM_SOURCES)


def normalise(folder, path):
    """path relative to folder, as a repository path; None if it climbs out of the repository."""
    parts = [p for p in folder.split("/") if p]
    for p in path.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(p)
    return "/".join(parts) + ("/" if path.endswith("/") else "")


def clean(token):
    """A written path without what follows it in prose: `#anchor`, `:line`, trailing punctuation."""
    token = token.split("#", 1)[0].split("?", 1)[0]
    token = re.sub(r":\d+(?:[-:]\d+)?$", "", token)
    while token and token[-1] in ".,;:!?)]}'\"`-":
        if token.endswith("...") or token.endswith("/."):
            break
        token = token[:-1]
    if token.endswith("/."):
        token = token[:-1]
    return token


def is_pattern(token):
    return any(ch in token for ch in "<>*{}$%~") or "..." in token


def blank(line, spans):
    chars = list(line)
    for a, b in spans:
        for k in range(a, b):
            chars[k] = " "
    return "".join(chars)


def check_line(path, folder, line, markdown, tree, problems):
    if INCLUDE.match(line):
        return
    line = blank(line, [m.span() for m in URL.finditer(line)])
    if OUTSIDE_ANY.search(line):
        line = blank(line, [(a, a + len(w)) for a, w, _ in outside_paths(path, line)])  # (b) reports those
    seen = set()

    def report(written, message):
        if written not in seen:
            seen.add(written)
            problems.append(message)

    if markdown:
        links = list(MD_LINK.finditer(line)) + list(MD_REF.finditer(line)) + list(HTML_LINK.finditer(line))
        for m in links:
            target = m.group(1)
            if target.startswith(("#", "mailto:")) or ":" in target.split("/")[0]:
                continue
            written = clean(target)
            if not written or is_pattern(written):
                continue
            resolved = normalise("" if written.startswith("/") else folder, written)
            if resolved is None:
                report(written, f"link {written} points outside the repository")
            elif not tree.exists(resolved):
                where = f" ({resolved})" if resolved.rstrip("/") != written.rstrip("/") else ""
                report(written, f"link {written}{where} does not exist")
        line = blank(line, [m.span(1) for m in links])

    taken = []
    for regex, kind in ((UP_PATH, "up"), (TOP_PATH, "top"), (REL_PATH, "rel"), (BARE_NAME, "bare")):
        for m in regex.finditer(line):
            if any(a <= m.start(1) < b for a, b in taken):
                continue
            taken.append(m.span(1))
            written = clean(m.group(1))
            if not written or is_pattern(written):
                continue
            if kind == "up":
                resolved = normalise(folder, written)
                if resolved is None:
                    report(written, f"{written} points outside the repository")
                    continue
            elif kind == "top":
                resolved = normalise("", written)
            elif kind == "rel":
                if not (EXTENSION.search(written) or written.endswith("/")):
                    continue
                first = written.split("/")[0]
                base = folder
                while base and (base + "/" + first) not in tree.dirs:
                    base = base.rpartition("/")[0]
                if not base:
                    continue  # not a subfolder of this file's folders: not ours to judge
                resolved = base + "/" + written
            else:
                resolved = written
            if not tree.exists(resolved):
                where = f" ({resolved})" if resolved.rstrip("/") != written.rstrip("/") else ""
                report(written, f"names {written}{where}, which does not exist")


# ---- (b) paths outside the repository ---------------------------------------

def outside_paths(path, line):
    """(start, written path, what) for each path outside the repository on a line."""
    scan = blank(line, [m.span() for m in URL.finditer(line) if not m.group(0).startswith("file:")])
    found = []
    for regex, what in OUTSIDE:
        for m in regex.finditer(scan):
            if any(a <= m.start() < a + len(w) for a, w, _ in found):
                continue  # ../shared/data: one problem, not two
            if what == "/tmp" and path.startswith(TMP_ALLOWED):
                continue
            found.append((m.start(), line[m.start():].split()[0].rstrip(".,;:)]`'\""), what))
    return sorted(found)


def check_outside(path, text, problems):
    if path == SELF or not OUTSIDE_ANY.search(text):
        return
    for number, line in enumerate(text.split("\n"), 1):
        for _, written, what in outside_paths(path, line):
            if what == "/tmp":
                problems.append(f"{path}:{number}: machine path {written} (a temporary directory belongs only "
                                "in tests/ and .ci/)")
            elif what:
                problems.append(f"{path}:{number}: path into {what}: {written}")
            else:
                problems.append(f"{path}:{number}: path outside the repository: {written}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", help="the repository (default: the one holding the current directory)")
    args = parser.parse_args()
    root = args.root
    if root is None:
        found = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True)
        root = found.stdout.strip() if found.returncode == 0 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = git_files(root)
    tree = Tree(files)
    problems = []
    for path in files:
        with open(os.path.join(root, path), "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:
            continue  # binary (safetensors fixtures)
        text = data.decode("utf-8", "replace")
        check_outside(path, text, problems)
        kind = kind_of(path, text.split("\n", 1)[0])
        if kind is None:
            continue
        folder = os.path.dirname(path)
        found = []
        for number, piece in doc_pieces(kind, text):
            line_problems = []
            check_line(path, folder, piece, kind == "markdown", tree, line_problems)
            found += [f"{path}:{number}: {p}" for p in line_problems]
        problems += found
    problems = sorted(set(problems), key=lambda p: (p.split(":")[0], int(p.split(":")[1]), p))
    for p in problems:
        print(p)
    files_with = len({p.split(":")[0] for p in problems})
    print(f"check_paths: {len(problems)} problem{'s' if len(problems) != 1 else ''}"
          f" in {files_with} file{'s' if files_with != 1 else ''} ({len(files)} files checked)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
