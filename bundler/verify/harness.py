"""The page.evaluate expressions that call onnx-bundler's harness (web/dev/*.mjs, served by
bundler.server.bundle_server at HARNESS_MODULES on the harness page's origin). The programs are
JavaScript modules, linted and tested as such; Python only names the module and the function to
call."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

from bundler.server.bundle_server import HARNESS_MODULES


def harness_call(module: str, function: str) -> str:
    """An expression for page.evaluate(expression, argument): `function` of `module` called
    with the argument(s), its result awaited. `module`: a web/dev/ module's name, or a path on
    the harness page's server."""
    url = urllib.parse.urljoin(HARNESS_MODULES, module)
    return (f"(...args) => import({json.dumps(url)})"
            f".then((harness) => harness.{function}(...args))")


def harness_init_script(page_url: str, module: str, function: str,
                        argument: Mapping[str, Any], promise: str) -> str:
    """An init script that calls `function`(argument, when its import started) as `page_url`
    begins to load (no Playwright round trip before it), its promise left in
    globalThis[`promise`] for a page.evaluate to await."""
    return (f"if (location.href === {json.dumps(page_url)}) globalThis[{json.dumps(promise)}] ="
            f" ({harness_call(module, function)})({json.dumps(argument)}, performance.now());")
