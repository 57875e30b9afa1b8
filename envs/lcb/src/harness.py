# LiveCodeBench's test harness for ONE test, run by the sandboxed `python`
# tool. The program transformations and the stdin patching are LiveCodeBench's
# (lcb_runner/evaluation/testing_util.py, MIT licence, as skyrl-gym 0.4.0's
# envs/lcb/livecodebench.py copies them): the import prelude, clean_if_name and
# make_function (on the syntax tree: see stdin_program), call_method's patches
# of builtins.open / sys.stdin, SystemExit
# swallowed, `class Solution` instantiated for functional tests, a top-level
# tuple result made a list.
#
# call_method's patches, as they take effect (unittest.mock is not in the
# sandboxed CPython, and LiveCodeBench's stacked @patch decorators enter
# innermost first, so its readline/readlines/read lambdas land on the stdin
# being replaced): sys.stdin is a fresh StringIO of the input, and every
# open(...) call returns a fresh reader of the input (mock_open), whose
# writes go nowhere.
#
# What differs: the expected output never enters the sandbox. The harness
# prints one JSON line (the last line of its stdout) with what the program
# produced, and the lcb env compares it outside, with LiveCodeBench's rules:
#   {"status": "ok", "output": <captured stdout>}          stdin tests
#   {"status": "ok", "result": <typed value>}              functional tests
#   {"status": "error", "error": repr(exception), "phase": "compile"|"run"}
#   plus "seconds": how long the test itself ran.
# The payload (JSON on stdin): {"code", "input", "fn_name" (null: stdin test)}.
import ast
import json
import sys
import time as _time
import types
import builtins
from io import StringIO

BASE_IMPORTS = """from itertools import accumulate, chain, combinations, count, permutations, product, groupby, islice, repeat
from copy import deepcopy
from string import ascii_lowercase, ascii_uppercase
from math import floor, log2, log10, sqrt, comb, gcd, ceil, inf, isqrt, factorial, atan2, pi
from collections import defaultdict, deque, Counter
from bisect import bisect, bisect_left, bisect_right, insort
from heapq import heappush, heappop, heapify, merge, nlargest, nsmallest, heapreplace
from functools import reduce, cache, lru_cache, cmp_to_key, reduce
from random import randrange, shuffle
from operator import itemgetter, sub, xor, or_
from re import search as re_search  # Assuming 're' refers to a regex search
from os.path import commonprefix
from typing import List, Tuple, Dict, Set, Optional, Union, Any, Callable, Iterable, Iterator, Generator, Deque
import copy
import string
import math
import collections
import bisect
import heapq
import functools
import random
import itertools
import operator
import re
import datetime
from time import time
import numpy as np
import pandas as pd
from math import log, prod  # 'log' and 'prod' are functions in the math module
from collections import deque, defaultdict, Counter, OrderedDict
from itertools import accumulate, permutations, combinations, product, groupby, islice, chain, repeat, zip_longest, cycle, pairwise
from functools import lru_cache, reduce, partial
from operator import iand
import sys
import io, os
"""


class _Unavailable(types.ModuleType):
    """Stands in for a module the sandboxed CPython lacks (numpy, pandas):
    the prelude's import succeeds, any use fails naming the module."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise ModuleNotFoundError(
            f"No module named '{self.__name__}' (not available in the sandbox)"
        )


for _name in ("numpy", "pandas"):
    try:
        __import__(_name)
    except ImportError:
        sys.modules[_name] = _Unavailable(_name)


class Capturing(list):
    def __enter__(self):
        self._stdout = sys.stdout
        sys.stdout = self._stringio = StringIO()
        self._stringio.close = lambda x: 1
        return self

    def __exit__(self, *args):
        self.append(self._stringio.getvalue())
        del self._stringio
        sys.stdout = self._stdout


def _is_main_guard(test):
    """`ast.unparse(test).strip() == "__name__ == '__main__'"`, on the tree."""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and isinstance(test.comparators[0].value, str)
        and test.comparators[0].value == "__main__"
    )


def stdin_program(code):
    """LiveCodeBench's clean_if_name then make_function, on the syntax tree.

    LiveCodeBench rebuilds the program as text with ast.unparse, which the
    sandboxed CPython 3.14 lacks (its `_ast_unparse` module is not bundled),
    so the same tree is compiled directly: the import prelude, the program's
    imports, and `def wrapped_function():` holding everything else, with a
    final `if __name__ == '__main__':` block replaced by its body (its
    `else` dropped, as LiveCodeBench does). A program that does not parse is
    returned as text, as LiveCodeBench leaves it."""
    try:
        body = ast.parse(code).body
    except Exception:
        return code
    if body and isinstance(body[-1], ast.If) and _is_main_guard(body[-1].test):
        body = body[:-1] + body[-1].body
    imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]
    others = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    function = ast.FunctionDef(
        name="wrapped_function",
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=others,
        decorator_list=[],
        returns=None,
        lineno=1,
        **extra,
    )
    module = ast.Module(body=ast.parse(BASE_IMPORTS).body + imports + [function], type_ignores=[])
    return ast.fix_missing_locations(module)


class _MockFile(StringIO):
    """What mock_open's handle does for a program: reads the input; writes
    and closing do nothing."""

    def write(self, text):
        return len(text)

    def close(self):
        pass


def call_method(method, inputs):
    if isinstance(inputs, list):
        inputs = "\n".join(inputs)
    saved_open, saved_stdin = builtins.open, sys.stdin
    builtins.open = lambda *args, **kwargs: _MockFile(inputs)
    sys.stdin = StringIO(inputs)
    try:
        return method()
    except SystemExit:
        pass
    finally:
        builtins.open, sys.stdin = saved_open, saved_stdin


def defines_solution(code):
    """LiveCodeBench's `"class Solution" in code` (on its unparsed text)."""
    if "class Solution" in code:
        return True
    try:
        return any(
            isinstance(n, ast.ClassDef) and n.name.startswith("Solution")
            for n in ast.walk(ast.parse(code))
        )
    except Exception:
        return False


def compile_code(program, solution):
    tmp_sol = types.ModuleType("tmp_sol", "")
    if isinstance(program, ast.Module):
        program = compile(program, "<string>", "exec")
    exec(program, tmp_sol.__dict__)
    if solution:
        return tmp_sol.Solution()
    return tmp_sol


def typed(value, depth=0):
    """`value` with its Python type kept, for the comparison outside."""
    if depth > 200:
        raise RecursionError("result nested too deeply")
    if value is None:
        return ["none"]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", str(value)]
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, list):
        return ["list", [typed(v, depth + 1) for v in value]]
    if isinstance(value, tuple):
        return ["tuple", [typed(v, depth + 1) for v in value]]
    if isinstance(value, dict):
        return ["dict", [[typed(k, depth + 1), typed(v, depth + 1)] for k, v in value.items()]]
    return ["other", repr(value)[:300]]


def run_stdin(code, inputs):
    method = getattr(compile_code(stdin_program(code), defines_solution(code)), "wrapped_function")
    with Capturing() as captured:
        start = _time.time()
        call_method(method, inputs)
    return {"status": "ok", "output": captured[0], "seconds": _time.time() - start}


def run_functional(code, inputs, fn_name):
    compiled = compile_code(BASE_IMPORTS + "\n\n" + code, defines_solution(code))
    method = getattr(compiled, fn_name)
    args = [json.loads(line) for line in inputs.split("\n")]
    start = _time.time()
    # The program's prints are not part of a functional test's result.
    with Capturing():
        prediction = method(*args)
    seconds = _time.time() - start
    if isinstance(prediction, tuple):
        prediction = list(prediction)
    return {"status": "ok", "result": typed(prediction), "seconds": seconds}


def main():
    payload = json.loads(sys.stdin.read())
    code, inputs, fn_name = payload["code"], payload["input"], payload["fn_name"]
    try:
        if fn_name is None:
            verdict = run_stdin(code, inputs)
        else:
            verdict = run_functional(code, inputs, fn_name)
    except BaseException as e:  # noqa: BLE001 - the program's own failure
        verdict = {"status": "error", "error": repr(e)[:1000]}
    out = sys.stdout
    out.write("\n" + json.dumps(verdict) + "\n")


main()
