# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""The key of a node's converged-state record, derived from the stack roles themselves.

A node may skip the stack roles only while everything their behaviour depends on is what it was when
the node was recorded. That is, besides the node itself:

- every variable the roles declare in ``meta/argument_specs.yml``, at the value the role would see;
- the content of a controller file a role reads through one of those variables (a lock file);
- the code the roles run: every file of each role, of each role it includes, and of each collection
  plugin their files name (``gpufleet.cluster.<name>``: modules, action plugins, lookups, filters),
  with the ``module_utils`` / ``plugin_utils`` those plugins import, followed transitively;
- the play that runs them: the playbook holding the probe and every task file it includes or imports,
  transitively (which roles run, their entry points, the wheel check), with the roles those task files
  run. The plugins the plan's tasks call reach the key through the values they hand the roles.

Nothing here is a hand-kept list: a knob added to a role's argument spec, or a module a role starts to
call, is in the key with no edit outside that role. Runs on the controller (the stack_record action).
"""

from __future__ import annotations

import hashlib
import json
import os
import re

import yaml

# plugins/plugin_utils/stack_key.py -> the collection root (also inside an installed collection).
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

# Files Ansible reads from a role or a plugin directory; a role's README is not one of them.
_SCANNED = (".yml", ".yaml", ".j2", ".py")
# (ansible_collections.gpufleet.cluster.plugins.* is an import, followed through the import itself)
_PLUGIN_NAME = re.compile(r"\bgpufleet\.cluster\.(?!plugins\.)([a-z_][a-z0-9_]*)")
# from ansible_collections.gpufleet.cluster.plugins.X[.Y] import a, b   /   import ansible_collections...X.Y
_OWN_IMPORT = re.compile(r"^\s*(?:from|import)\s+ansible_collections\.gpufleet\.cluster\.plugins\.([\w.]+)"
                         r"(?:\s+import\s+(\([^)]*\)|[^\n]*))?", re.MULTILINE)
# The dict FilterModule.filters() returns, and its keys (the filter names).
_FILTERS_BODY = re.compile(r"def filters\(self\):(.*?)(?=^\S|\Z)", re.DOTALL | re.MULTILINE)
_DICT_KEY = re.compile(r"[\"']([a-z_][a-z0-9_]*)[\"']\s*:")
# Where a role reads a controller file named by a variable: lookup('file', VAR) or a copy's src: "{{ VAR }}".
_CONTROLLER_FILE = (
    re.compile(r"lookup\(\s*['\"](?:ansible\.builtin\.)?file['\"]\s*,\s*([a-z_][a-z0-9_]*)\s*\)"),
    re.compile(r"\bsrc:\s*['\"]?\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}['\"]?\s*$", re.MULTILINE),
)
# The task keywords that pull another task file into the play (import_playbook starts another play).
_TASK_INCLUDES = tuple(prefix + verb for prefix in ("", "ansible.builtin.", "ansible.legacy.")
                       for verb in ("include_tasks", "import_tasks"))
# The plugin directories a name may resolve to (a filter is looked up by the names its file exports).
_PLUGIN_DIRS = ("modules", "action", "lookup", "test", "doc_fragments")


class StackKeyError(Exception):
    """A role or a plugin the roles name cannot be found or read; the message names it."""


def _yaml(path: str):
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.load(handle, Loader=loader)  # nosec B506 - a safe loader
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError) as exc:
        raise StackKeyError("cannot read %s: %s" % (path, exc)) from exc


def role_options(role: str, root: str = COLLECTION_ROOT) -> list[str]:
    """Every variable the role declares, over all its entry points."""
    specs = _yaml(os.path.join(root, "roles", role, "meta", "argument_specs.yml"))
    if not isinstance(specs, dict) or not isinstance(specs.get("argument_specs"), dict):
        raise StackKeyError("role %s declares no argument_specs in roles/%s/meta/argument_specs.yml: the "
                            "record's key is built from them" % (role, role))
    names = set()
    for entry in specs["argument_specs"].values():
        names.update((entry or {}).get("options") or {})
    return sorted(names)


def role_defaults(role: str, root: str = COLLECTION_ROOT) -> dict:
    return _yaml(os.path.join(root, "roles", role, "defaults", "main.yml")) or {}


def role_internals(role: str, root: str = COLLECTION_ROOT) -> dict:
    """The role's vars/main.yml: internal values a default may read (a version a role pins by default)."""
    return _yaml(os.path.join(root, "roles", role, "vars", "main.yml")) or {}


def _files_below(directory: str, root: str) -> list[str]:
    out = []
    for top, dirs, files in os.walk(directory):
        dirs[:] = sorted(name for name in dirs if name != "__pycache__")
        out.extend(os.path.relpath(os.path.join(top, name), root) for name in sorted(files))
    return out


def _read_text(root: str, relpath: str) -> str:
    try:
        with open(os.path.join(root, relpath), encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise StackKeyError("cannot read %s: %s" % (relpath, exc)) from exc


def filter_files(root: str = COLLECTION_ROOT) -> dict[str, str]:
    """Filter name -> the plugins/filter/*.py file whose FilterModule.filters() returns it."""
    out = {}
    directory = os.path.join(root, "plugins", "filter")
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if name.endswith(".py"):
            relpath = os.path.join("plugins", "filter", name)
            body = _FILTERS_BODY.search(_read_text(root, relpath))
            out.update((filter_name, relpath) for filter_name in _DICT_KEY.findall(body.group(1) if body else ""))
    return out


def _python_imports(root: str, relpath: str) -> list[str]:
    """The collection's own module_utils / plugin_utils files a Python file imports."""
    found = []
    for module, names in _OWN_IMPORT.findall(_read_text(root, relpath)):
        dotted = module.split(".")
        candidates = [dotted] if names == "" else [dotted + [name] for name in re.findall(r"\w+", names)]
        candidates.append(dotted)
        for parts in candidates:
            path = os.path.join("plugins", *parts) + ".py"
            if os.path.isfile(os.path.join(root, path)) and path not in found:
                found.append(path)
    return found


def _resolve(name: str, root: str, filters: dict[str, str], source: str) -> tuple[list[str], list[str]]:
    """A name a role file uses: (roles, plugin files) it stands for."""
    roles = [name] if os.path.isdir(os.path.join(root, "roles", name)) else []
    plugins = [os.path.join("plugins", kind, name + ".py") for kind in _PLUGIN_DIRS
               if os.path.isfile(os.path.join(root, "plugins", kind, name + ".py"))]
    if name in filters:
        plugins.append(filters[name])
    if not roles and not plugins:
        raise StackKeyError("%s names gpufleet.cluster.%s, which is neither a role nor a plugin of the collection "
                            "(looked in roles/ and plugins/{%s,filter}/)" % (source, name, ",".join(_PLUGIN_DIRS)))
    return roles, plugins


def code_files(roles: list[str], root: str = COLLECTION_ROOT, extra_names: tuple = ()) -> list[str]:
    """Every file the roles run: their own, those of roles they include, the plugins they name (found by
    reading the files) and what those plugins import; extra_names are plugins the caller runs itself."""
    filters = filter_files(root)
    seen_roles, files, queue = set(), set(), []
    for name in list(roles) + list(extra_names):
        queue.append((name, "the stack roles"))
    while queue:
        name, source = queue.pop()
        more_roles, plugins = _resolve(name, root, filters, source)
        new_files = []
        for role in more_roles:
            if role not in seen_roles:
                seen_roles.add(role)
                new_files.extend(_files_below(os.path.join(root, "roles", role), root))
        pending = [path for path in new_files + plugins if path not in files]
        while pending:
            path = pending.pop()
            if path in files:
                continue
            files.add(path)
            if not path.endswith(_SCANNED):
                continue
            text = _read_text(root, path)
            queue.extend((found, path) for found in sorted(set(_PLUGIN_NAME.findall(text))))
            if path.endswith(".py") and path.startswith("plugins" + os.sep):
                pending.extend(_python_imports(root, path))
    return sorted(files)


def _included_task_files(node, found: list) -> list:
    """The file names the task keywords of a parsed playbook or task file name, in order."""
    if isinstance(node, list):
        for item in node:
            _included_task_files(item, found)
    elif isinstance(node, dict):
        for keyword, value in node.items():
            if keyword in _TASK_INCLUDES:
                found.append(value.get("file") if isinstance(value, dict) else value)
            elif isinstance(value, (list, dict)):
                _included_task_files(value, found)
    return found


def _play_label(path: str, root: str) -> str:
    relpath = os.path.relpath(path, root)
    return path if relpath.startswith(os.pardir) else relpath


def play_files(play: str, root: str = COLLECTION_ROOT) -> dict[str, str]:
    """{label: path} of the playbook and every task file it includes or imports, transitively; a label is the
    path below the collection root (absolute for a playbook outside it). A task file is looked for beside the
    file that includes it, then beside the playbook, as Ansible does."""
    play = os.path.realpath(play)
    files, queue = {}, [play]
    while queue:
        path = queue.pop(0)
        label = _play_label(path, root)
        if label in files:
            continue
        files[label] = path
        for name in _included_task_files(_yaml(path), []):
            if not isinstance(name, str) or "{{" in name or "{%" in name:
                raise StackKeyError("%s includes %r: the record's key covers the task files a play includes, so name "
                                    "one file, not a computed one" % (label, name))
            candidates = [os.path.join(os.path.dirname(path), name), os.path.join(os.path.dirname(play), name)]
            existing = [candidate for candidate in candidates if os.path.isfile(candidate)]
            if not existing:
                raise StackKeyError("%s includes %s, which is not there (looked in %s)" % (
                    label, name, " and ".join(sorted({os.path.dirname(candidate) for candidate in candidates}))))
            queue.append(os.path.realpath(existing[0]))
    return files


def play_roles(files: dict[str, str], play: str, root: str = COLLECTION_ROOT) -> list[str]:
    """The collection's roles the play's task files name (the playbook's own pre-tasks are not the stack's)."""
    names = set()
    for path in files.values():
        if path != os.path.realpath(play):
            with open(path, encoding="utf-8") as handle:
                names.update(_PLUGIN_NAME.findall(handle.read()))
    return sorted(name for name in names if os.path.isdir(os.path.join(root, "roles", name)))


def controller_file_options(role: str, options: list[str], root: str = COLLECTION_ROOT) -> list[str]:
    """The role's variables that name a file the role reads on the controller (a lock file)."""
    text = "".join(_read_text(root, path) for path in _files_below(os.path.join(root, "roles", role), root)
                   if path.endswith(_SCANNED))
    named = {match for pattern in _CONTROLLER_FILE for match in pattern.findall(text)}
    return sorted(named & set(options))


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def file_digest(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError as exc:
        return "unreadable: %s" % exc.strerror


def key_parts(roles: list[str], resolve, root: str = COLLECTION_ROOT, extra_names: tuple = (),
              locate=os.path.abspath, play: str | None = None) -> dict:
    """{"inputs": {variable: digest}, "code": {file: digest}}. resolve(variable, role_defaults, role_internals)
    returns the value the role would see; locate(path) where a relative controller file lies (Ansible's search path);
    play the playbook that holds the probe (its files and the roles its task files run are code too).
    Values go in by digest only: they may carry credentials (a proxy, a token)."""
    inputs = {}
    for role in roles:
        defaults, internals = role_defaults(role, root), role_internals(role, root)
        options = role_options(role, root)
        values = {option: resolve(option, defaults, internals) for option in options}
        inputs.update((option, digest(value)) for option, value in values.items())
        for option in controller_file_options(role, options, root):
            path = values[option]
            inputs[option + " (content)"] = file_digest(locate(str(path))) if path else ""
    played = play_files(play, root) if play else {}
    names = tuple(extra_names) + tuple(play_roles(played, play, root)) if play else tuple(extra_names)
    code = {path: file_digest(os.path.join(root, path)) for path in code_files(roles, root, names)}
    code.update((label, file_digest(path)) for label, path in played.items())
    return {"inputs": inputs, "code": code}


def key_of(parts: dict) -> str:
    return digest(parts)
