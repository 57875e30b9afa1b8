"""`python`: run untrusted Python 3 code inside the WebAssembly sandbox.

Each call runs in a fresh instance of this component (the host's tool
router), so nothing one program does is seen by the next. The sandbox has no
filesystem, no network, no subprocesses; its memory, fuel and wall-clock
deadline are the host's (`call-tool-timeout` tightens the deadline per call).

Arguments: `{"code": str, "stdin": str = ""}`. Result (JSON text):
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

#: Output kept per stream; the rest is dropped and `truncated` is set.
MAX_OUTPUT_CHARS = 64 * 1024


class CappedText(io.TextIOBase):
    """A text stream that keeps at most MAX_OUTPUT_CHARS characters."""

    def __init__(self):
        self.parts = []
        self.size = 0
        self.truncated = False

    def writable(self):
        return True

    def write(self, text):
        room = MAX_OUTPUT_CHARS - self.size
        if len(text) > room:
            self.truncated = True
            text = text[: max(room, 0)]
        if text:
            self.parts.append(text)
            self.size += len(text)
        return len(text)

    def value(self):
        return "".join(self.parts)


def run(code, stdin):
    """Execute `code` as `__main__` with `stdin`, capturing stdout/stderr."""
    out, err = CappedText(), CappedText()
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
        return json.dumps(run(code, stdin))


sk.export_tool(
    PythonTool,
    name="python",
    version="0.1.0",
    description="Sandboxed Python 3 code execution (CPython in WebAssembly)",
)
