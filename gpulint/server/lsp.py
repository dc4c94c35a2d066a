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
  that can resolve edits, and otherwise only for the diagnostics the request is about.
- **Hover** on a diagnostic, or on a rule id in a suppression comment: the rule's explanation.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from gpulint import __version__
from gpulint.server import engine_adapter as engine
from gpulint.server.engine_adapter import Problem, TextChange

SOURCE = "gpulint"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.gpulint"
_RULE_ID = re.compile(r"GL\d{3}")
_LEVELS = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "hint": types.DiagnosticSeverity.Information,
}

log = logging.getLogger(__name__)


class Checked:
    """What was last reported for one text document (a file, or a notebook cell)."""

    def __init__(self, version: int | None, problems: list[Problem], diagnostics: list[types.Diagnostic], owner: str):
        self.version = version
        self.problems = problems
        self.diagnostics = diagnostics  # problems[i] is shown as diagnostics[i]
        self.owner = owner  # the uri that was linted: the document itself, or its notebook


class GpulintServer(LanguageServer):
    def __init__(self) -> None:
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
        )
        self.projects = engine.Projects()
        self.checked: dict[str, Checked] = {}
        self._reported_settings_errors: set[str] = set()

    # -- where a document lives ---------------------------------------------------------------
    def path_of(self, uri: str) -> Path:
        """The file a document is (or will be saved as); an unsaved buffer counts as a file in the
        workspace root, so the project's settings still apply."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path:
            return Path(path)
        return Path(self.workspace.root_path or Path.cwd()) / "untitled.py"

    def project_for(self, uri: str) -> engine.Project | None:
        try:
            return self.projects.for_path(self.path_of(uri))
        except engine.SettingsError as exc:
            message = f"gpulint: {exc}"
            if message not in self._reported_settings_errors:  # once, not on every keystroke
                self._reported_settings_errors.add(message)
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
            return None

    # -- linting ------------------------------------------------------------------------------
    def check(self, uri: str) -> None:
        """Lint a document (or the notebook a cell belongs to) and publish its diagnostics."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            self.check_notebook(notebook.uri)
            return
        document = self.workspace.get_text_document(uri)
        project = self.project_for(uri) if _is_python(document) else None
        problems: list[Problem] = []
        if project is not None:
            report = project.lint(document.source, str(self.path_of(uri)))
            problems = report.problems
            self._log_errors(report.errors)
        self._publish(document, problems, owner=uri)

    def check_notebook(self, notebook_uri: str) -> None:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return
        cells = [
            self.workspace.get_text_document(c.document)
            for c in notebook.cells
            if c.kind == types.NotebookCellKind.Code
        ]
        project = self.project_for(notebook_uri)
        problems: list[Problem] = []
        if project is not None:
            report = project.lint_cells([c.source for c in cells], str(self.path_of(notebook_uri)))
            problems = report.problems
            self._log_errors(report.errors)
        for number, cell in enumerate(cells, start=1):
            self._publish(cell, [p for p in problems if p.cell == number], owner=notebook_uri)

    def _publish(self, document: TextDocument, problems: list[Problem], owner: str) -> None:
        lines = document.lines
        diagnostics = [self._diagnostic(document, lines, p) for p in problems]
        self.checked[document.uri] = Checked(document.version, problems, diagnostics, owner)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=document.uri, diagnostics=diagnostics, version=document.version)
        )

    def forget(self, uri: str) -> None:
        self.checked.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def _log_errors(self, errors: list[str]) -> None:
        for line in errors:
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=f"gpulint: {line}"))

    def current(self, uri: str) -> Checked | None:
        """The report for the document's current version (linting it again if it changed since)."""
        checked = self.checked.get(uri)
        document = self.workspace.get_text_document(uri)
        if checked is None or checked.version != document.version:
            self.check(uri)
            checked = self.checked.get(uri)
        return checked

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

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        checked = self.current(uri)
        if checked is None:
            return []
        wanted = params.context.only
        actions: list[types.CodeAction] = []
        if _asks_for(wanted, types.CodeActionKind.QuickFix):
            for index, (problem, diagnostic) in enumerate(zip(checked.problems, checked.diagnostics, strict=True)):
                if not _overlaps(diagnostic.range, params.range):
                    continue
                if problem.fix_title is not None:
                    unsafe = " (unsafe: may change behaviour)" if problem.unsafe_fix else ""
                    actions.append(
                        self._action(
                            f"gpulint: {problem.fix_title} ({problem.code}){unsafe}",
                            types.CodeActionKind.QuickFix,
                            uri,
                            checked.version,
                            index,
                            "fix",
                            diagnostic,
                            preferred=not problem.unsafe_fix,
                        )
                    )
                if problem.suppressible:
                    actions.append(
                        self._action(
                            f"gpulint: suppress {problem.code} on this line",
                            types.CodeActionKind.QuickFix,
                            uri,
                            checked.version,
                            index,
                            "suppress",
                            diagnostic,
                        )
                    )
        project = self.project_for(uri) if checked.owner == uri else None
        unsafe_too = project is not None and project.applies_unsafe_fixes
        fixable = any(p.fix_title is not None and (unsafe_too or not p.unsafe_fix) for p in checked.problems)
        if fixable and _asks_for(wanted, FIX_ALL) and (wanted or self.can_resolve_edits()):
            title = "gpulint: apply every fix `gpulint --fix` would"
            actions.append(self._action(title, FIX_ALL, uri, checked.version, None, "fix-all"))
        if not self.can_resolve_edits():
            actions = [a for a in (self.resolve(a) for a in actions) if a.edit is not None]
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

    def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """Compute an action's edit; an action for an older version of the document gets none
        (the client asks again for the new one)."""
        data = action.data if isinstance(action.data, dict) else {}
        uri = data.get("uri")
        if not isinstance(uri, str):
            return action
        checked = self.checked.get(uri)
        if checked is None or checked.version != data.get("version"):
            return action
        document = self.workspace.get_text_document(uri)
        project = self.project_for(checked.owner)
        if project is None:
            return action
        what, index = data.get("what"), data.get("index")
        problem = checked.problems[index] if isinstance(index, int) and 0 <= index < len(checked.problems) else None
        changes: list[TextChange] | None = None
        if what == "fix" and problem is not None:
            if checked.owner == uri:
                changes = project.fix_changes(document.source, str(self.path_of(uri)), problem)
            else:
                texts, cell_number = self._cell_texts(checked.owner, uri)
                if cell_number is not None and cell_number == problem.cell:
                    changes = project.cell_fix_changes(texts, str(self.path_of(checked.owner)), problem)
        elif what == "suppress" and problem is not None:
            changes = engine.suppression_changes(document.source, problem)
        elif what == "fix-all":
            fixed = project.fix_all(document.source, str(self.path_of(uri)))
            if fixed is not None:
                lines = len(document.lines)
                changes = [TextChange(1, 1, lines + 1, 1, fixed)]
        if changes:
            action.edit = types.WorkspaceEdit(changes={uri: self.text_edits(document, changes)})
        return action

    def _cell_texts(self, notebook_uri: str, cell_uri: str) -> tuple[list[str], int | None]:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return [], None
        code = [c.document for c in notebook.cells if c.kind == types.NotebookCellKind.Code]
        texts = [self.workspace.get_text_document(u).source for u in code]
        return texts, (code.index(cell_uri) + 1 if cell_uri in code else None)

    # -- hover --------------------------------------------------------------------------------
    def hover(self, params: types.HoverParams) -> types.Hover | None:
        """The explanation of every rule reported where the cursor is, or of the rule id under it
        (in a suppression comment)."""
        uri = params.text_document.uri
        checked = self.current(uri)
        here = [d for d in checked.diagnostics if _contains(d.range, params.position)] if checked is not None else []
        codes = list(dict.fromkeys(d.code for d in here if isinstance(d.code, str)))
        if not codes:
            word = self.workspace.get_text_document(uri).word_at_position(params.position)
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


def create_server() -> GpulintServer:
    server = GpulintServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GpulintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GpulintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GpulintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GpulintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(ls: GpulintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.check_notebook(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(ls: GpulintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.check_notebook(params.notebook_document.uri)
        structure = params.change.cells.structure if params.change.cells is not None else None
        for closed in (structure.did_close or []) if structure is not None else []:
            ls.forget(closed.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(ls: GpulintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.check_notebook(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: GpulintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            ls.forget(cell.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=True),
    )
    def code_action(ls: GpulintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return ls.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    def code_action_resolve(ls: GpulintServer, action: types.CodeAction) -> types.CodeAction:
        return ls.resolve(action)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: GpulintServer, params: types.HoverParams) -> types.Hover | None:
        return ls.hover(params)

    return server


def serve(allow_local_rules: bool = False) -> None:
    """Run the server on standard input and output until the client says exit; workspaces' local
    rules are loaded only with `allow_local_rules`."""
    server = create_server()
    server.projects = engine.Projects(allow_local_rules)
    server.start_io()
