"""`python`: run untrusted Python 3 code inside the WebAssembly sandbox.

Each call runs in a fresh instance of this component (the host's tool
router), so nothing one program does is seen by the next. The sandbox has no
filesystem, no network, no subprocesses; the standard library is what
STDLIB_PRELOAD (below) loads at build time; its memory, fuel and wall-clock
deadline are the host's (`call-tool-timeout` tightens the deadline per call).

Arguments: `{"code": str, "stdin": str = "", "max_output_chars": int = 65536}`
(`max_output_chars` at most 16 MiB). Result (JSON text):
`{"stdout": str, "stderr": str, "exit_code": int, "truncated": bool}`; an
uncaught exception prints its traceback to stderr and gives exit code 1, as
`python -c` would.
"""

import builtins
import io
import json
import sys
import traceback

import skyrl_sdk as sk

#: Standard-library modules a program may import. The sandboxed CPython has no
#: standard library on disk at run time: only the modules imported while the
#: component is pre-initialised (at build time) exist. So import here what
#: LiveCodeBench's prelude and typical programs use; one the build's CPython
#: lacks is skipped.
STDLIB_PRELOAD = (
    "abc array ast _ast_unparse base64 binascii bisect calendar cmath collections "
    "collections.abc contextlib copy csv dataclasses datetime decimal difflib enum "
    "fractions functools graphlib hashlib heapq io itertools json math numbers "
    "operator os os.path pprint queue random re statistics string struct textwrap "
    "time types typing unicodedata"
).split()
for _module in STDLIB_PRELOAD:
    try:
        __import__(_module)
    except ImportError:
        pass

#: Output kept per stream by default; the rest is dropped and `truncated` is set.
MAX_OUTPUT_CHARS = 64 * 1024
#: The largest `max_output_chars` a call may ask for.
MAX_OUTPUT_CHARS_LIMIT = 16 * 1024 * 1024


class CappedText(io.TextIOBase):
    """A text stream that keeps at most `cap` characters."""

    def __init__(self, cap=MAX_OUTPUT_CHARS):
        self.cap = cap
        self.parts = []
        self.size = 0
        self.truncated = False

    def writable(self):
        return True

    def write(self, text):
        room = self.cap - self.size
        if len(text) > room:
            self.truncated = True
            text = text[: max(room, 0)]
        if text:
            self.parts.append(text)
            self.size += len(text)
        return len(text)

    def value(self):
        return "".join(self.parts)


def run(code, stdin, max_output_chars=MAX_OUTPUT_CHARS):
    """Execute `code` as `__main__` with `stdin`, capturing stdout/stderr."""
    out, err = CappedText(max_output_chars), CappedText(max_output_chars)
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
    exit_code = 0
    try:
        program = compile(code, "<code>", "exec")
        exec(program, {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as e:
        if e.code is None:
            exit_code = 0
        elif isinstance(e.code, int):
            exit_code = e.code
        else:
            print(e.code, file=err)
            exit_code = 1
    except BaseException:  # noqa: BLE001 - the program's own failure
        traceback.print_exc(file=err)
        exit_code = 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return {
        "stdout": out.value(),
        "stderr": err.value(),
        "exit_code": exit_code,
        "truncated": out.truncated or err.truncated,
    }


class PythonTool(sk.Tool):
    def specs(self):
        return [
            sk.ToolSpec(
                name="python",
                description=(
                    "Run a Python 3 program in a sandbox (no files, no network) and "
                    "return its stdout, stderr and exit code as JSON."
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "description": "The program."},
                        "stdin": {"type": "string", "description": "Its standard input."},
                        "max_output_chars": {
                            "type": "integer",
                            "description": "Characters of stdout and stderr kept each (default 65536).",
                        },
                    },
                    "required": ["code"],
                },
            )
        ]

    def call(self, name, args):
        if name != "python":
            raise sk.InputError(f"unknown tool {name!r}")
        code = args.get("code")
        stdin = args.get("stdin", "")
        if not isinstance(code, str):
            raise sk.InputError("`code` must be a string")
        if not isinstance(stdin, str):
            raise sk.InputError("`stdin` must be a string")
        cap = args.get("max_output_chars", MAX_OUTPUT_CHARS)
        if isinstance(cap, bool) or not isinstance(cap, int) or not 0 < cap <= MAX_OUTPUT_CHARS_LIMIT:
            raise sk.InputError(
                f"`max_output_chars` must be an integer in 1..={MAX_OUTPUT_CHARS_LIMIT}, got {cap!r}"
            )
        return json.dumps(run(code, stdin, cap))


sk.export_tool(
    PythonTool,
    name="python",
    version="0.1.0",
    description="Sandboxed Python 3 code execution (CPython in WebAssembly)",
)
