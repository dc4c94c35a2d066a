"""The language server: gpulint's findings in an editor, with quick fixes, over stdio.

Built on pygls (the Language Server Protocol library Fixit's `fixit lsp` uses): it keeps the open
documents in sync, negotiates position encodings and speaks JSON-RPC, so this module holds only
what is gpulint's.

- **Diagnostics** when a Python file (or a notebook's code cells) is opened, changed or saved, with
  the settings of the file's nearest `pyproject.toml` and its suppression comments, exactly as
  `gpulint FILE` would report them.  Opt-in (hint) rules show as information, syntax errors as
  errors; each diagnostic links to its rule's page.
- **Code actions** on a diagnostic: its fix (safe fixes are preferred; unsafe ones say so in the
  title), "suppress on this line" (the comment `--add-suppressions` writes), and for a Python file
  `source.fixAll.gpulint`, the fixes `gpulint --fix` would apply.  A fix's edits cost a code
  generation, so they are computed when the action is chosen (`codeAction/resolve`) for clients
  that can resolve edits, and otherwise only for the diagnostics the request is about.  A line
  with several fixes is the exception: its fixes are computed with the actions, so that one
  action, "fix all on this line", applies them together as `gpulint --fix` does, and two rules
  whose fixes make the same edit share one action.
- **Hover** on a diagnostic, or on a rule id in a suppression comment: the rule's explanation.

On a workspace that may be hostile (docs/safety.md, "The language server"): only documents the
editor has open are linted or answered about, never a file read from disk; a document over
`max-file-size` is one "not linted" diagnostic; every lint, fix and suppression edit runs in the
worker process (worker.py), under memory and time limits, and only for the latest text of a
document (a burst of edits is taken in whole first, and a result for a text edited meanwhile is
dropped); frames are read by transport.py, which skips a malformed one, and their JSON by
`datajson.load_json`, which refuses one nested too deep to parse safely; no single message ends
the server (a request that cannot be handled is answered with an error, without a traceback); a
configuration that cannot be loaded, or a lint that fails, is one diagnostic on the document, and
the requests about it are still answered.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, TypeGuard
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from gpulint import __version__
from gpulint.linter.run.datajson import ShapeError, load_json
from gpulint.server import engine_adapter as engine
from gpulint.server.engine_adapter import Problem, TextChange
from gpulint.server.transport import MAX_JSON_DEPTH, read_frames, top_level_scalar
from gpulint.server.worker import START_TIME_LIMIT_S, JobAbandoned, JobFailed, Limits, LintWorker

SOURCE = "gpulint"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.gpulint"
_RULE_ID = re.compile(r"GL\d{3}")
_LEVELS = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "hint": types.DiagnosticSeverity.Information,
}

# A lint of an old text is abandoned (its worker killed) once it has run this long: starting a
# fresh worker takes about half a second, and a lint that has taken a second has likely as much
# to go.  A shorter one is left to finish (its result is dropped).
ABANDON_AFTER_S = 1.0
INTERNAL_ERROR = "gpulint: internal error; the details are in the server's log"

log = logging.getLogger(__name__)


class Checked:
    """What was last reported for one text document (a file, or a notebook cell)."""

    def __init__(self, version: int | None, problems: list[Problem], diagnostics: list[types.Diagnostic], owner: str):
        self.version = version
        self.problems = problems
        self.diagnostics = diagnostics  # problems[i] is shown as diagnostics[i]
        self.owner = owner  # the uri that was linted: the document itself, or its notebook


class GpulintProtocol(LanguageServerProtocol):
    """pygls's protocol, but an error response never carries a traceback: pygls puts one in the
    `data` of every internal error.  The traceback is in the server's log (stderr) already."""

    def _send_response(self, msg_id, result=None, error=None):
        if error is not None and error.data is not None:
            error = types.ResponseError(code=error.code, message=INTERNAL_ERROR)
        super()._send_response(msg_id, result, error)


class GpulintServer(LanguageServer):
    def __init__(self, limits: Limits | None = None, allow_local_rules: bool = False) -> None:
        super().__init__(
            "gpulint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
                    )
                ],
                save=True,
            ),
            protocol_cls=GpulintProtocol,
        )
        self.limits = limits or Limits()
        # Settings only (no local rules: they are project code, and run in the worker alone).
        self.projects = engine.Projects()
        self.worker = LintWorker(self.limits, allow_local_rules)
        self.checked: dict[str, Checked] = {}
        self._reported_settings_errors: set[str] = set()
        # Coalescing: every change to an owner (a document, or a notebook for its cells) bumps its
        # edit count and queues it; the lint loop lints each queued owner's text as it is then, and
        # publishes only if no edit came in meanwhile.
        self.edits: dict[str, int] = {}
        self.queued: dict[str, None] = {}  # owners waiting for a lint, oldest first
        self.linted: dict[str, int] = {}  # owner -> the edit count its published diagnostics are for
        self._waiting: dict[str, list[tuple[int, asyncio.Future[None]]]] = {}
        self._wake: asyncio.Event | None = None
        # Set while no message from the client is waiting to be handled: a lint starts only then,
        # so a burst of edits is taken in whole before its last text is linted.
        self.caught_up = asyncio.Event()
        self.caught_up.set()
        # The background tasks, held here: the event loop keeps only weak references to tasks.
        self._lint_loop: asyncio.Task[None] | None = None
        self.worker_started: asyncio.Future[None] | None = None

    # -- where a document lives ---------------------------------------------------------------
    def path_of(self, uri: str) -> Path:
        """The file a document is (or will be saved as); an unsaved buffer counts as a file in the
        workspace root, so the project's settings still apply."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path:
            return Path(path)
        return Path(self.workspace.root_path or Path.cwd()) / "untitled.py"

    def open_document(self, uri: str) -> TextDocument | None:
        """The document as the editor sent it, or None when it is not open.  (pygls's
        `get_text_document` would read a document that is not open from disk, past the safe reader
        and the size limit: a FIFO there hangs the server, /dev/zero fills its memory.)"""
        return self.workspace.text_documents.get(unquote(uri))

    def owner_of(self, uri: str) -> str | None:
        """The uri that is linted for a document: its notebook's for a cell, its own for a file;
        None when it is not open."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            return notebook.uri
        return uri if self.open_document(uri) is not None else None

    def project_for(self, uri: str) -> engine.Project | None:
        return self.settings_for(uri)[0]

    def settings_for(self, uri: str) -> tuple[engine.Project | None, str | None]:
        """The project that lints a document, or None and why its configuration cannot be used
        (the file and the reason, which the document's diagnostics say; a message says it once)."""
        try:
            return self.projects.for_path(self.path_of(uri)), None
        except engine.SettingsError as exc:
            message = f"gpulint: {exc}"
            if message not in self._reported_settings_errors:  # once, not on every keystroke
                self._reported_settings_errors.add(message)
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
            return None, str(exc)

    # -- scheduling ---------------------------------------------------------------------------
    def changed(self, owner: str) -> None:
        """An owner's text (or its project's settings, on save) changed: lint it again, once the
        lint loop gets to it.  A lint of an older text still running is abandoned when it has run
        long enough that a fresh worker (about half a second to start) is the quicker way on."""
        self.edits[owner] = self.edits.get(owner, 0) + 1
        self.queued[owner] = None
        running_for = self.worker.running(owner)
        if running_for is not None and running_for > ABANDON_AFTER_S:
            self.worker.abandon()
        if self._wake is None:
            self._wake = asyncio.Event()
            self._lint_loop = asyncio.ensure_future(self._lint_queued())
        self._wake.set()

    def forget(self, uri: str) -> None:
        """A document was closed: drop what was reported for it and clear its diagnostics."""
        self.checked.pop(uri, None)
        self.closed(uri)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def closed(self, owner: str) -> None:
        """An owner was closed: a lint of it that is queued or running publishes nothing, and the
        requests waiting for it get nothing."""
        self.queued.pop(owner, None)
        if owner in self.edits:
            self.edits[owner] += 1
        self._release_waiting(owner, everyone=True)

    async def _lint_queued(self) -> None:
        assert self._wake is not None
        while True:
            if not self.queued:
                self._wake.clear()
                await self._wake.wait()
                continue
            if not self.caught_up.is_set():
                await self.caught_up.wait()
                continue
            owner = next(iter(self.queued))
            del self.queued[owner]
            edit = self.edits.get(owner, 0)
            try:
                await self._lint(owner)
            except Exception:  # a bug: logged, said on the document, and the loop goes on
                log.exception("gpulint server: linting %s failed", owner)
                self._lint_failed(owner, edit)

    def _documents(self, owner: str) -> tuple[bool, list[TextDocument]]:
        """Whether `owner` is a notebook, and its open documents (its code cells, or itself)."""
        notebook = self.workspace.get_notebook_document(notebook_uri=owner)
        if notebook is None:
            document = self.open_document(owner)
            return False, [document] if document is not None else []
        cells = (self.open_document(c.document) for c in notebook.cells if c.kind == types.NotebookCellKind.Code)
        return True, [d for d in cells if d is not None]

    async def _lint(self, owner: str) -> None:
        """Lint one owner's current text in the worker and publish the result, unless it was
        edited or closed meanwhile (then a newer lint is queued, or nothing is wanted)."""
        edit = self.edits.get(owner, 0)
        is_notebook, documents = self._documents(owner)
        if not is_notebook and not documents:
            return
        job = "lint_cells" if is_notebook else "lint"
        problems: list[Problem] = []
        skipped: list[str] = []
        project, settings_problem = (
            self.settings_for(owner) if is_notebook or _is_python(documents[0]) else (None, None)
        )
        if settings_problem is not None:
            skipped.append(settings_problem)
        if project is not None:
            texts = [d.source for d in documents]
            size = sum(engine.source_size(t) for t in texts)
            if size > project.max_file_size:
                skipped.append(engine.too_large(size, project.max_file_size))
            else:
                argument = texts if is_notebook else texts[0]
                try:
                    report = await self.worker.run(owner, job, str(self.path_of(owner)), argument)
                except JobAbandoned:
                    return  # the newer text is queued
                except JobFailed as exc:
                    skipped.append(str(exc))
                else:
                    problems, skipped = report.problems, report.errors
        if self.edits.get(owner, 0) != edit:
            return  # stale: the newer text is queued (or the document was closed)
        for number, document in enumerate(documents, start=1):
            mine = [p for p in problems if p.cell == number] if is_notebook else problems
            self._publish(document, mine, owner, skipped if number == 1 else [])
        self.linted[owner] = edit
        self._release_waiting(owner)

    def _lint_failed(self, owner: str, edit: int) -> None:
        """After a lint that raised: its documents say so in one diagnostic, and the requests
        waiting for it are answered (from that), unless a newer text is queued."""
        if self.edits.get(owner, 0) == edit:
            try:
                for number, document in enumerate(self._documents(owner)[1], start=1):
                    self._publish(
                        document, [], owner, [INTERNAL_ERROR.removeprefix("gpulint: ")] if number == 1 else []
                    )
            except Exception:
                log.exception("gpulint server: saying that linting %s failed failed too", owner)
            self.linted[owner] = edit
        self._release_waiting(owner)

    def _publish(self, document: TextDocument, problems: list[Problem], owner: str, skipped: list[str]) -> None:
        """Publish a document's diagnostics; `skipped`: why it was not (fully) linted, each shown
        as one diagnostic on its first line."""
        lines = document.lines
        diagnostics = [self._diagnostic(document, lines, p) for p in problems]
        self.checked[document.uri] = Checked(document.version, problems, diagnostics, owner)
        notes = [
            types.Diagnostic(
                range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
                message=f"gpulint: not linted: {reason}",
                severity=types.DiagnosticSeverity.Warning,
                source=SOURCE,
            )
            for reason in skipped
        ]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=document.uri, diagnostics=diagnostics + notes, version=document.version)
        )

    async def current(self, uri: str) -> Checked | None:
        """The report for the open document's current text, once the lint of that text is done;
        None for a document that is not open (nothing is read from disk) or was not linted."""
        owner = self.owner_of(uri)
        if owner is None:
            return None
        edit = self.edits.get(owner, 0)
        if self.linted.get(owner, -1) < edit:
            waiting: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(owner, []).append((edit, waiting))
            try:
                await asyncio.wait_for(waiting, self.limits.time_limit + START_TIME_LIMIT_S)
            except asyncio.TimeoutError:
                return None
            if self.linted.get(owner, -1) < edit:
                return None  # closed meanwhile
        return self.checked.get(uri)

    def _release_waiting(self, owner: str, everyone: bool = False) -> None:
        """Wake the requests waiting for `owner`'s lint: those whose text has been linted now, or
        all of them (the document was closed)."""
        done = self.linted.get(owner, -1)
        still = []
        for edit, waiting in self._waiting.pop(owner, []):
            if everyone or edit <= done:
                if not waiting.done():
                    waiting.set_result(None)
            else:
                still.append((edit, waiting))
        if still:
            self._waiting[owner] = still

    # -- positions ----------------------------------------------------------------------------
    @staticmethod
    def client_range(
        document: TextDocument, lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]
    ) -> types.Range:
        """1-based (row, code-point column) pairs as an LSP range in the client's position encoding
        (`lines`: the document's, split once by the caller)."""
        return document.position_codec.range_to_client_units(
            lines,
            ServerTextRange(
                start=ServerTextPosition(line=start[0] - 1, character=start[1] - 1),
                end=ServerTextPosition(line=end[0] - 1, character=end[1] - 1),
            ),
        )

    def _diagnostic(self, document: TextDocument, lines: Sequence[str], problem: Problem) -> types.Diagnostic:
        page = engine.rule_page(problem.code)
        return types.Diagnostic(
            range=self.client_range(document, lines, problem.start, problem.end),
            message=problem.message,
            severity=_LEVELS[problem.level],
            code=problem.code,
            code_description=types.CodeDescription(href=page) if page else None,
            source=SOURCE,
            tags=[types.DiagnosticTag.Unnecessary] if problem.unused_suppression else None,
            related_information=[_related(*related) for related in problem.related] or None,
        )

    def text_edits(self, document: TextDocument, changes: list[TextChange]) -> list[types.TextEdit]:
        lines = document.lines
        return [
            types.TextEdit(
                range=self.client_range(document, lines, (c.start_row, c.start_column), (c.end_row, c.end_column)),
                new_text=c.text,
            )
            for c in changes
        ]

    # -- code actions -------------------------------------------------------------------------
    def can_resolve_edits(self) -> bool:
        capability = self.client_capabilities.text_document
        code_action = capability.code_action if capability is not None else None
        resolve = code_action.resolve_support if code_action is not None else None
        return resolve is not None and "edit" in resolve.properties

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        checked = await self.current(uri)
        if checked is None:
            return []
        wanted = params.context.only
        actions: list[types.CodeAction] = []
        if _asks_for(wanted, types.CodeActionKind.QuickFix):
            touching = [i for i, d in enumerate(checked.diagnostics) if _overlaps(d.range, params.range)]
            actions.extend(await self._fix_actions(uri, checked, touching))
            for index in touching:
                problem = checked.problems[index]
                if problem.suppressible:
                    actions.append(
                        self._action(
                            f"gpulint: suppress {problem.code} on this line",
                            types.CodeActionKind.QuickFix,
                            uri,
                            checked.version,
                            index,
                            "suppress",
                            checked.diagnostics[index],
                        )
                    )
        project = self.project_for(uri) if checked.owner == uri else None
        unsafe_too = project is not None and project.applies_unsafe_fixes
        fixable = any(p.fix_title is not None and (unsafe_too or not p.unsafe_fix) for p in checked.problems)
        if fixable and _asks_for(wanted, FIX_ALL) and (wanted or self.can_resolve_edits()):
            title = "gpulint: apply every fix `gpulint --fix` would"
            actions.append(self._action(title, FIX_ALL, uri, checked.version, None, "fix-all"))
        if not self.can_resolve_edits():
            actions = [a for a in [await self.resolve(a) for a in actions] if a.edit is not None]
        return actions

    async def _fix_actions(self, uri: str, checked: Checked, touching: list[int]) -> list[types.CodeAction]:
        """The fix actions for the problems `touching` the request's range (indices into `checked`).

        One action per problem, its edit computed on resolve; but where several fixable problems
        share lines (in a Python file), their fixes are computed now, so that two rules whose fixes
        make the same edit get one action naming both, and one more action applies every fix on
        those lines together, as `gpulint --fix` would (one fix's edit alone would be undone by
        applying another's)."""
        problems = checked.problems
        fixable = [i for i in touching if problems[i].fix_title is not None]
        if fixable and checked.owner == uri:
            rows = {row for i in fixable for row in range(problems[i].start[0], problems[i].end[0] + 1)}
            on_lines = [
                i
                for i, p in enumerate(problems)
                if p.fix_title is not None and any(p.start[0] <= row <= p.end[0] for row in rows)
            ]
            if len(on_lines) > 1:
                grouped = await self._line_fix_actions(uri, checked, on_lines)
                if grouped is not None:
                    return grouped
        actions = []
        for index in fixable:
            problem = problems[index]
            unsafe = " (unsafe: may change behaviour)" if problem.unsafe_fix else ""
            actions.append(
                self._action(
                    f"gpulint: {problem.fix_title} ({problem.code}){unsafe}",
                    types.CodeActionKind.QuickFix,
                    uri,
                    checked.version,
                    index,
                    "fix",
                    checked.diagnostics[index],
                    preferred=not problem.unsafe_fix,
                )
            )
        return actions

    async def _line_fix_actions(self, uri: str, checked: Checked, on_lines: list[int]) -> list[types.CodeAction] | None:
        """`_fix_actions` for fixable problems on the same lines (indices into `checked`), with their
        edits; None when they cannot be computed for the open text (the caller falls back to one
        action per problem)."""
        document = self.open_document(uri)
        if document is None or document.version != checked.version or self.project_for(uri) is None:
            return None
        edit = self.edits.get(uri, 0)
        problems = [checked.problems[i] for i in on_lines]
        try:
            fixes = await self.worker.run(uri, "line_fixes", str(self.path_of(uri)), document.source, problems)
        except JobFailed as exc:
            log.warning("gpulint server: no fixes for the lines of %s: %s", uri, exc)
            return None
        if self.edits.get(uri, 0) != edit:
            return None  # edited meanwhile: the edits are for an old text

        def action(title: str, indices: list[int], changes: list[TextChange], preferred: bool) -> types.CodeAction:
            return types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[checked.diagnostics[on_lines[i]] for i in indices],
                is_preferred=preferred or None,
                edit=types.WorkspaceEdit(changes={uri: self.text_edits(document, changes)}),
            )

        actions = []
        together_safe = False
        if fixes.together is not None:
            everything = list(range(len(problems)))
            unsafe = any(p.unsafe_fix for p in problems)
            codes = ", ".join(dict.fromkeys(p.code for p in problems))
            where = "this line" if len({p.start[0] for p in problems}) == 1 else "these lines"
            caution = " (unsafe: may change behaviour)" if unsafe else ""
            together_safe = not unsafe
            actions.append(
                action(f"gpulint: fix all on {where} ({codes}){caution}", everything, fixes.together, not unsafe)
            )
        titles = [
            f"{problems[indices[0]].fix_title} ({', '.join(dict.fromkeys(problems[i].code for i in indices))})"
            for indices, _ in fixes.each
        ]
        for title, (indices, changes) in zip(titles, fixes.each, strict=True):
            first = problems[indices[0]]
            if titles.count(title) > 1:  # the same fix at two places on the line: say where
                title += f" at {first.start[0]}:{first.start[1]}"
            unsafe = any(problems[i].unsafe_fix for i in indices)
            caution = " (unsafe: may change behaviour)" if unsafe else ""
            actions.append(action(f"gpulint: {title}{caution}", indices, changes, not unsafe and not together_safe))
        return actions

    @staticmethod
    def _action(title, kind, uri, version, index, what, diagnostic=None, preferred=False) -> types.CodeAction:
        return types.CodeAction(
            title=title,
            kind=kind,
            diagnostics=[diagnostic] if diagnostic is not None else None,
            is_preferred=preferred or None,
            data={"uri": uri, "version": version, "index": index, "what": what},
        )

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """Compute an action's edit (in the worker); an action for another version of the document
        than the open one gets none (the client asks again for the new one), and so does one
        whose document changed while its edit was being computed."""
        data = action.data if isinstance(action.data, dict) else {}
        uri = data.get("uri")
        if not isinstance(uri, str):
            return action
        checked = self.checked.get(uri)
        document = self.open_document(uri)
        if checked is None or document is None or not checked.version == document.version == data.get("version"):
            return action
        owner = checked.owner
        if self.owner_of(uri) != owner or self.project_for(owner) is None:
            return action
        edit = self.edits.get(owner, 0)
        what, index = data.get("what"), data.get("index")
        problem = checked.problems[index] if isinstance(index, int) and 0 <= index < len(checked.problems) else None
        path = str(self.path_of(owner))
        try:
            changes = await self._changes(what, problem, uri, owner, path, document)
        except JobFailed as exc:
            log.warning("gpulint server: no edit for %r: %s", action.title, exc)
            return action
        if changes and self.edits.get(owner, 0) == edit:
            action.edit = types.WorkspaceEdit(changes={uri: self.text_edits(document, changes)})
        return action

    async def _changes(
        self, what: object, problem: Problem | None, uri: str, owner: str, path: str, document: TextDocument
    ) -> list[TextChange] | None:
        if what == "fix" and problem is not None:
            if owner == uri:
                return await self.worker.run(owner, "fix_changes", path, document.source, problem)
            texts, cell_number = self._cell_texts(owner, uri)
            if cell_number is None or cell_number != problem.cell:
                return None
            return await self.worker.run(owner, "cell_fix_changes", path, texts, problem)
        if what == "suppress" and problem is not None:
            return await self.worker.run(owner, "suppression_changes", document.source, problem)
        if what == "fix-all" and owner == uri:
            fixed = await self.worker.run(owner, "fix_all", path, document.source)
            return [TextChange(1, 1, len(document.lines) + 1, 1, fixed)] if fixed is not None else None
        return None

    def _cell_texts(self, notebook_uri: str, cell_uri: str) -> tuple[list[str], int | None]:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return [], None
        code = [c.document for c in notebook.cells if c.kind == types.NotebookCellKind.Code]
        documents = [self.open_document(u) for u in code]
        texts = [d.source for d in documents if d is not None]
        if len(texts) != len(code):
            return [], None
        return texts, (code.index(cell_uri) + 1 if cell_uri in code else None)

    # -- hover --------------------------------------------------------------------------------
    async def hover(self, params: types.HoverParams) -> types.Hover | None:
        """The explanation of every rule reported where the cursor is, or of the rule id under it
        (in a suppression comment)."""
        uri = params.text_document.uri
        checked = await self.current(uri)
        here = [d for d in checked.diagnostics if _contains(d.range, params.position)] if checked is not None else []
        codes = list(dict.fromkeys(d.code for d in here if isinstance(d.code, str)))
        document = self.open_document(uri)
        if not codes and document is not None:
            word = document.word_at_position(params.position)
            codes = [word.upper()] if _RULE_ID.fullmatch(word.upper()) else []
        sections = []
        for code in codes:
            found = engine.rule_help(code)
            if found is not None:
                markdown, page = found
                sections.append(f"{markdown}\n[{code} on the web]({page})")
        if not sections:
            return None
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(sections)),
            range=here[0].range if here else None,
        )


def _is_python(document: TextDocument) -> bool:
    """Whether to lint a document: Python by its language or its name (a client may send others)."""
    return document.language_id == "python" or (document.path or "").endswith((".py", ".pyw", ".pyi"))


def _asks_for(only: Sequence[str] | None, kind: str) -> bool:
    """Whether a request limited to the kinds `only` (None: every kind) wants actions of `kind`."""
    return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)


def _before(a: types.Position, b: types.Position) -> bool:
    return (a.line, a.character) < (b.line, b.character)


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return not _before(a.end, b.start) and not _before(b.end, a.start)


def _contains(r: types.Range, p: types.Position) -> bool:
    return not _before(p, r.start) and not _before(r.end, p)


def create_server(limits: Limits | None = None, allow_local_rules: bool = False) -> GpulintServer:
    server = GpulintServer(limits, allow_local_rules)

    @server.feature(types.INITIALIZED)
    def initialized(ls: GpulintServer, params: types.InitializedParams) -> None:
        ls.worker_started = asyncio.ensure_future(ls.worker.start())  # while the editor opens files

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GpulintServer, params: types.DidOpenTextDocumentParams) -> None:
        _changed(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GpulintServer, params: types.DidChangeTextDocumentParams) -> None:
        _changed(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GpulintServer, params: types.DidSaveTextDocumentParams) -> None:
        _changed(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GpulintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(ls: GpulintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.changed(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(ls: GpulintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.changed(params.notebook_document.uri)
        structure = params.change.cells.structure if params.change.cells is not None else None
        for closed in (structure.did_close or []) if structure is not None else []:
            ls.forget(closed.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(ls: GpulintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.changed(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: GpulintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            ls.forget(cell.uri)
        ls.closed(params.notebook_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=True),
    )
    async def code_action(ls: GpulintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return await ls.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: GpulintServer, action: types.CodeAction) -> types.CodeAction:
        return await ls.resolve(action)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: GpulintServer, params: types.HoverParams) -> types.Hover | None:
        return await ls.hover(params)

    @server.feature(types.EXIT)
    def on_exit(ls: GpulintServer, *args) -> None:
        ls.worker.close()

    return server


def _changed(server: GpulintServer, uri: str) -> None:
    owner = server.owner_of(uri)
    if owner is not None:
        server.changed(owner)


async def _serve_stdio(server: GpulintServer, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """pygls's stdio loop, with gpulint's frame reader (see transport.py): the frames are read in a
    thread and handled here, in the event loop, one by one."""
    loop = asyncio.get_running_loop()
    server.protocol.set_writer(StdoutWriter(stdout))
    frames: asyncio.Queue[bytes | None] = asyncio.Queue()

    def read() -> None:
        try:
            for body in read_frames(stdin):
                loop.call_soon_threadsafe(frames.put_nowait, body)
        finally:
            loop.call_soon_threadsafe(frames.put_nowait, None)

    threading.Thread(target=read, name="gpulint-lsp-reader", daemon=True).start()
    try:
        while (body := await frames.get()) is not None:
            try:
                _handle_frame(server, body)
            except SystemExit:
                raise
            except Exception:  # no message may end the server: logged, and the next one is read
                log.exception("gpulint server: a message could not be handled")
            if frames.empty():
                server.caught_up.set()
            else:
                server.caught_up.clear()
    except SystemExit as exc:  # the client said exit: 0 after shutdown, 1 without
        return exc.code if isinstance(exc.code, int) else 1
    finally:
        server.worker.close()
    return 0


def _handle_frame(server: GpulintServer, body: bytes) -> None:
    """Handle one message; a body that is not a JSON-RPC message is one line in the log, and a
    request that cannot be handled as sent (parameters that do not fit its method, an id that is
    neither a string nor an integer, JSON nested too deep to read) gets an error response, where
    its id can be read, instead of none (pygls would leave it unanswered, or end)."""
    protocol = server.protocol
    try:
        raw = load_json(body, MAX_JSON_DEPTH)
    except ShapeError as exc:  # nested too deep to parse (the only shape load_json checks)
        method, request_id = top_level_scalar(body, "method"), top_level_scalar(body, "id")
        log.warning(
            "gpulint server: skipped a message (%s): %s", method if isinstance(method, str) else "no method", exc
        )
        if isinstance(method, str) and _is_request_id(request_id):
            _refuse(server, request_id, types.ErrorCodes.InvalidRequest, f"gpulint: message refused: {exc}")
        return
    except ValueError as exc:
        log.warning("gpulint server: skipped a message that is not JSON (%s)", exc)
        return
    if not isinstance(raw, dict):
        log.warning("gpulint server: skipped a message that is not a JSON object")
        return
    if "id" in raw and not _is_request_id(raw["id"]):
        log.warning("gpulint server: skipped a message whose id is neither a string nor an integer")
        if "method" in raw:  # a request: answered, with the null id JSON-RPC gives an id it cannot read
            _refuse(server, None, types.ErrorCodes.InvalidRequest, "gpulint: the id must be a string or an integer")
        return
    is_request = "id" in raw and "method" in raw
    try:
        message = protocol.structure_message(raw)
    except JsonRpcException as exc:
        if is_request:
            _refuse(server, raw["id"], exc.code, exc.message)
        return
    except Exception:  # a bug in reading it: logged, and a request still gets an answer
        log.exception("gpulint server: reading a %s message failed", raw.get("method", "response"))
        if is_request:
            _refuse(server, raw["id"], types.ErrorCodes.InternalError, INTERNAL_ERROR)
        return
    try:
        protocol.handle_message(message)
    except SystemExit:
        raise
    except Exception:  # (pygls answers a request whose handler fails: it may have answered this one)
        log.exception("gpulint server: handling a %s message failed", raw.get("method", "response"))


def _is_request_id(value: object) -> TypeGuard[str | int]:
    """Whether `value` can be a request's id: LSP's integer or string (not a float, a bool, null)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _refuse(server: GpulintServer, request_id: str | int | None, code: int, message: str) -> None:
    """An error response, written out here: pygls leaves a null id out, and JSON-RPC answers a
    request whose id cannot be read with `"id": null`."""
    server.protocol._send_data({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def serve(limits: Limits | None = None, allow_local_rules: bool = False) -> int:
    """Run the server on standard input and output until the client says exit; the exit code.
    Workspaces' local rules are loaded (in the worker) only with `allow_local_rules`."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    # The reader thread is still blocked in a read of stdin when the server exits.  Reading a file
    # object of its own (on a copy of the descriptor) keeps the interpreter's shutdown, which
    # flushes sys.stdin, from waiting on that read's lock (a fatal error).
    stdin = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    return asyncio.run(_serve_stdio(create_server(limits, allow_local_rules), stdin, sys.stdout.buffer))


def _related(path: str, row: int, column: int, message: str) -> types.DiagnosticRelatedInformation:
    """A call on the way from another module's training loop to a diagnostic, as LSP related
    information (columns in code points: the other file's text is not at hand, and for the ASCII
    of a call site they are the client's units too)."""
    position = types.Position(line=row - 1, character=column - 1)
    return types.DiagnosticRelatedInformation(
        location=types.Location(uri=Path(path).as_uri(), range=types.Range(start=position, end=position)),
        message=message,
    )
