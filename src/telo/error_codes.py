"""The catalogue of every error code telo raises, reports or recognises (spec §9, §6.5; telo-reference §11).

Each :class:`Code` member is the exact wire string (``Code.DURABLE_CLAIM_LOST == "ERR_DURABLE_CLAIM_LOST"``) and
carries ``when`` (when it is raised) and ``hint`` (what to do about it); docs/errors.md is generated from them
(tests/unit/test_error_catalogue.py keeps it current). Import it as ``telo.errors.Code``.

Members are ``str``, so comparing with, hashing like, formatting and ``json.dumps`` of a code all behave as the
plain string. They are not *exactly* ``str``, though, and the CEL value domain and the typed-frame writer take
exact types only: plain data that may be journaled or reach a CEL scope holds ``str(code)`` or ``Code.X.value``.
:class:`telo.errors.TeloError` stores its ``code`` that way already.

The naming rule: a member's name is its value without the ``ERR_`` prefix. The five codes the upstream runtime
named outside that scheme (telo-reference §11) keep their wire strings, because manifests test them in a
``catch`` and failed runs recorded them; their members are named in the same order as the others (noun first):
see :data:`UPSTREAM_NAMED`.
"""

from __future__ import annotations

from enum import StrEnum, unique


@unique
class Code(StrEnum):
    """Every code of telo: ``value`` is the wire string, ``when`` says when it is raised, ``hint`` what to do."""

    _value_: str
    when: str
    hint: str

    def __new__(cls, value: str, when: str, hint: str) -> Code:
        member = str.__new__(cls, value)
        member._value_ = value
        member.when = when
        member.hint = hint
        return member

    # --- spec §9 and §6.5 (SPEC_CODES) ----------------------------------------------------------------------
    DURABLE_UNJOURNALABLE_VALUE = ("ERR_DURABLE_UNJOURNALABLE_VALUE", "spec §9: a step result or decision "
                                   "cannot be journaled (a live value, a value outside the CEL domain, a cycle)",
                                   "return plain CEL values from steps; read streams inside the step")
    JOURNAL_ENTRY_MISMATCH = ("ERR_JOURNAL_ENTRY_MISMATCH", "spec §9: a replay reached a different target than "
                              "the journal entry at that path records", "the workflow's steps changed under a "
                              "running run: restore the previous manifest, or fork the run")
    DURABLE_MANIFEST_CHANGED = ("ERR_DURABLE_MANIFEST_CHANGED", "spec §9: a resume would replay a run against a "
                                "manifest that changed since it started (the run is held)",
                                "restore the previous manifest, or accept the change: `telo resume <run> --force`")
    DURABLE_NO_RUN = ("ERR_DURABLE_NO_RUN", "spec §9: a kind that needs a durable run (Sleep, Await, Value) was "
                      "dispatched outside one", "use it inside a durable workflow's steps")
    DURABLE_SUSPENDED = ("ERR_DURABLE_SUSPENDED", "spec §9: not an error — the code of the suspension signal "
                         "that unwinds a parking run (spec §7.7)", "none: the run is parked, not failed")
    DURABLE_SUSPENSION_SWALLOWED = ("ERR_DURABLE_SUSPENSION_SWALLOWED", "spec §9: a body returned normally "
                                    "while a suspension was latched (spec §7)",
                                    "let BaseException through: do not catch the suspension signal")
    DURABLE_SUSPEND_FORBIDDEN = ("ERR_DURABLE_SUSPEND_FORBIDDEN", "spec §9: a park was attempted inside a zone "
                                 "declaring noSuspend", "move the wait out of the zone, or shorten the backoff")
    DURABLE_TARGET_UNENCODABLE = ("ERR_DURABLE_TARGET_UNENCODABLE", "spec §9: a step target cannot be written "
                                  "down completely enough to cross a process boundary (§5.3)",
                                  "give the target a kind, a name and, for a library, its module")
    DURABLE_TARGET_UNDECODABLE = ("ERR_DURABLE_TARGET_UNDECODABLE", "spec §9: a step target arrived malformed "
                                  "or in an encoding version this runtime does not read (§5.3)",
                                  "read the journal with the runtime that wrote it")
    DURABLE_ENTRY_UNDECODABLE = ("ERR_DURABLE_ENTRY_UNDECODABLE", "spec §9: a journal entry or run record is "
                                 "written under a codec version this runtime does not read (§5.2)",
                                 "read the journal with a telo that knows that codec version")
    TYPED_FRAME_UNENCODABLE = ("ERR_TYPED_FRAME_UNENCODABLE", "spec §6.5: a value outside the CEL value domain "
                               "was given to the typed-frame writer (data.path points into the value)",
                               "journal only CEL values: null, bool, int, uint, double, string, bytes, "
                               "timestamp, duration, list, map, Telo.Url")
    TYPED_FRAME_UNDECODABLE = ("ERR_TYPED_FRAME_UNDECODABLE", "spec §6.5: a typed frame is malformed, has an "
                               "unknown tag or a non-canonical payload (data.path points into the frame)",
                               "the frame was damaged in storage or not written by a conforming writer")

    # --- the durable backend ---------------------------------------------------------------------------------
    DURABLE_JOURNAL_CORRUPT = ("ERR_DURABLE_JOURNAL_CORRUPT", "a journal's stored content is unreadable: a bad "
                               "line, a checksum mismatch, a frame that does not decode", "restore the journal "
                               "from a backup, or fork the run from its last good checkpoint")
    DURABLE_CLAIM_LOST = ("ERR_DURABLE_CLAIM_LOST", "a fenced write was refused: the run's claim is no longer "
                          "this execution's, or another execution recorded first at that path",
                          "none: this execution stops, the run continues where its claim now is")
    DURABLE_CHAIN_BROKEN = ("ERR_DURABLE_CHAIN_BROKEN", "a deferred write was refused because an earlier write of "
                            "the same execution failed", "resume the run to continue from what the journal holds")
    DURABLE_SHUTTING_DOWN = ("ERR_DURABLE_SHUTTING_DOWN", "the process is draining after SIGTERM/SIGINT and "
                             "stops a run before its next step", "none: the next worker continues the run")
    DURABLE_RUN_CANCELLED = ("ERR_DURABLE_RUN_CANCELLED", "the error stored in a cancelled run's record, and what "
                             "stops its execution", "none: an operator cancelled the run")
    DURABLE_RUN_FAILED = ("ERR_DURABLE_RUN_FAILED", "attaching to a failed run whose record carries no error code",
                          "inspect the run: `telo status <run>`")
    DURABLE_RUN_EXISTS = ("ERR_DURABLE_RUN_EXISTS", "a run id is already taken and the workflow's onConflict is "
                          "reject (or a fork/restore targets an existing run), or a live run holds the start's "
                          "dedupKey in a queue whose onDuplicate is reject",
                          "choose another run id, or attach (onConflict / onDuplicate: attach)")
    DURABLE_RUN_ID_INVALID = ("ERR_DURABLE_RUN_ID_INVALID", "a run id is not a non-empty string (or cannot name "
                              "a journal file), or an addressing kind got none", "pass a non-empty string id")
    DURABLE_RUN_NOT_FOUND = ("ERR_DURABLE_RUN_NOT_FOUND", "no run has that id in the journal",
                             "list the runs: `telo runs list`")
    DURABLE_RUN_SETTLED = ("ERR_DURABLE_RUN_SETTLED", "an operation that needs an unsettled run (resolve) found it "
                           "completed, failed or cancelled", "fork the run instead")
    DURABLE_SLEEP_INVALID = ("ERR_DURABLE_SLEEP_INVALID", "Durable.Sleep got neither or both of `for`/`until`, or "
                             "an `until` that is neither epoch ms nor a timestamp", "give exactly one of them")
    DURABLE_AWAIT_TIMEOUT = ("ERR_DURABLE_AWAIT_TIMEOUT", "Durable.Await re-entered after its deadline with nothing "
                             "delivered", "deliver before the deadline, or catch the timeout")
    DURABLE_TOKEN_REQUIRED = ("ERR_DURABLE_TOKEN_REQUIRED", "an Await or a delivery got an empty or non-string "
                              "token", "pass the token the run parked on")
    DURABLE_MESSAGE_INVALID = ("ERR_DURABLE_MESSAGE_INVALID", "a message's topic or key, or an event's name, is not a "
                               "non-empty string", "name the topic (and key) as non-empty strings")
    DURABLE_EVENT_NOT_SET = ("ERR_DURABLE_EVENT_NOT_SET", "`telo events get` waited for an event the run had not "
                             "published by the end of the wait (or settled without publishing)",
                             "wait longer (`--wait`), or check the name with `telo events list RUN`")
    DURABLE_STREAM_NOT_FOUND = ("ERR_DURABLE_STREAM_NOT_FOUND", "`telo stream read` asked for a stream a settled "
                                "run never wrote", "check the name with `telo stream list RUN`")
    DURABLE_STREAM_CLOSED = ("ERR_DURABLE_STREAM_CLOSED", "Durable.StreamWrite wrote to a stream of its run that an "
                             "earlier step closed", "write every value before the step that closes the stream")
    DURABLE_PAYLOAD_INVALID = ("ERR_DURABLE_PAYLOAD_INVALID", "a delivered payload is not JSON or does not match "
                               "the awaiting step's declared type", "send a payload of the awaited type")
    DURABLE_SCHEDULE_INVALID = ("ERR_DURABLE_SCHEDULE_INVALID", "a schedule has no `after`/`at`, or an `at` that "
                                "is not a valid time", "give `after: <duration>` or `at: <timestamp>`")
    DURABLE_EFFECT_UNCONFIRMED = ("ERR_DURABLE_EFFECT_UNCONFIRMED", "an effect may or may not have happened (the "
                                  "process died during it) and its policy is to fail rather than repeat it",
                                  "check the outside system, then `telo resolve <run> <path> --redrive|--fail`")
    DURABLE_NESTING_TOO_DEEP = ("ERR_DURABLE_NESTING_TOO_DEEP", "a step would start a run nested more than 64 "
                                "runs deep (runs started by each other's steps: workflows that start each other "
                                "without end)", "guard the start with `when:` on an input that ends the chain, give "
                                "the workflow a fixed runId, or schedule the next run (Local.Schedule)")
    DURABLE_EFFECT_NOT_UNCONFIRMED = ("ERR_DURABLE_EFFECT_NOT_UNCONFIRMED", "a resolution names a step that has "
                                      "no effect of unknown outcome", "list the run's unconfirmed effects first")

    # --- journal stores ------------------------------------------------------------------------------------
    JOURNAL_WRITE_FAILED = ("ERR_JOURNAL_WRITE_FAILED", "a file or SQLite journal could not write (disk full, "
                            "I/O error, a lock held too long)", "fix the storage; the run continues on resume")
    JOURNAL_UNAVAILABLE = ("ERR_JOURNAL_UNAVAILABLE", "the PostgreSQL journal cannot reach its server",
                           "check that the server is up and reachable at the journal's URL")
    JOURNAL_FAILED = ("ERR_JOURNAL_FAILED", "the PostgreSQL journal's statement or commit failed",
                      "see data.sqlstate and the server log")
    JOURNAL_CLOSED = ("ERR_JOURNAL_CLOSED", "a journal store was used after it was closed",
                      "open the journal again")
    JOURNAL_FORKED = ("ERR_JOURNAL_FORKED", "a SQLite journal store opened before fork() was used in the child",
                      "open the journal in the child process")
    JOURNAL_IN_TRANSACTION = ("ERR_JOURNAL_IN_TRANSACTION", "a run-lifecycle write was attempted inside an open "
                              "SQLite journal transaction", "make the call before or after the transaction")
    JOURNAL_CONFIG_INVALID = ("ERR_JOURNAL_CONFIG_INVALID", "a journal's configuration is refused (a claimTtl "
                              "too short or unreadable, a table prefix that is not a plain SQL name, a journal "
                              "compat mode that is not typed or legacy)",
                              "fix the journal resource's configuration")
    JOURNAL_REQUIRED = ("ERR_JOURNAL_REQUIRED", "a command that reads or operates on runs found no journal: "
                        "no --journal, --manifest, TELO_JOURNAL, TELO_MANIFEST or project file (telo.toml, "
                        "[tool.telo] in pyproject.toml) names one", "name a journal with --journal PATH-or-URL or "
                        "--manifest FILE, set TELO_JOURNAL, or write `journal = \"…\"` in a telo.toml")
    JOURNAL_LEGACY_UNENCODABLE = ("ERR_JOURNAL_LEGACY_UNENCODABLE", "journal compat legacy (docs/compat.md): a "
                                  "value plain JSON cannot carry back with its CEL type — a uint, bytes, timestamp, "
                                  "duration, Telo.Url, an int (on a file or memory journal), NaN or an infinity, a "
                                  "map with a non-string key — was to be written for a runtime that predates the "
                                  "codec (data.path points into the value, data.type names its type)",
                                  "convert it where it is produced (string(t), double(n) …), or write this journal "
                                  "with typed frames (no --journal-compat / TELO_JOURNAL_COMPAT)")
    JOURNAL_SCHEMA_MISSING = ("ERR_JOURNAL_SCHEMA_MISSING", "the PostgreSQL journal tables lack columns telo "
                              "needs", "let telo create the tables, or migrate them")
    JOURNAL_SCHEMA_NEWER = ("ERR_JOURNAL_SCHEMA_NEWER", "a SQLite journal has a schema version newer than this "
                            "telo knows", "upgrade telo")
    JOURNAL_URL_INVALID = ("ERR_JOURNAL_URL_INVALID", "a journal URL names no known store",
                           "pass a *.db file, a directory (or file:///dir), a postgresql:// URL, or memory:")
    JOURNAL_NOT_FOUND = ("ERR_JOURNAL_NOT_FOUND", "there is no journal at the given path or URL",
                         "check the --journal argument")
    JOURNAL_AMBIGUOUS = ("ERR_JOURNAL_AMBIGUOUS", "a manifest declares several journals and none was chosen",
                         "name the journal (--journal, or the workflow's `journal:`)")
    RUN_BUSY = ("ERR_RUN_BUSY", "a compaction or restore would race the run's live execution",
                "wait until the run parks or settles, or stop its worker")
    CHECKPOINT_NOT_FOUND = ("ERR_CHECKPOINT_NOT_FOUND", "a fork or restore names a checkpoint the run does not "
                            "have", "list the run's checkpoints: `telo runs checkpoints <run>`")
    INVALID_CURSOR = ("ERR_INVALID_CURSOR", "a paging cursor is not one this journal handed out",
                      "start again without --after, then pass the previous page's `next`")

    # --- steps and the engine (telo-reference §2, §3) -------------------------------------------------------
    EXECUTION_FAILED = ("ERR_EXECUTION_FAILED", "an invoked resource raised a plain (non-telo) exception; the "
                        "kernel wraps it", "see the message for the original exception")
    PREDICATE_NOT_BOOLEAN = ("ERR_PREDICATE_NOT_BOOLEAN", "an if/while/when predicate produced a non-boolean "
                             "(spec §4)", "make the expression produce true or false")
    STEP_NAME_REQUIRED = ("ERR_STEP_NAME_REQUIRED", "a step has no name (telo-reference §3)", "add `name:`")
    INVALID_STEP_NAME = ("ERR_INVALID_STEP_NAME", "a step name breaks the grammar of spec §5.1",
                         "a letter or '_', then letters, digits or '_' (no hyphen)")
    DUPLICATE_STEP_NAME = ("ERR_DUPLICATE_STEP_NAME", "two sibling steps of a durable body share a name (one "
                           "journal path)", "rename one of them")
    INVALID_PATH = ("ERR_INVALID_PATH", "a step path breaks the grammar of spec §5.1",
                    "write paths as telo prints them")
    STEP_TIMEOUT = ("ERR_STEP_TIMEOUT", "an attempt of a step exceeded its `timeout`",
                    "raise the timeout, or retry the step")
    NO_MATCH = ("ERR_NO_MATCH", "a Run.Choice matched no choice, or a switch step no case, and there is no "
                "default", "add a `default:` branch")
    INVALID_PREDICATE = ("ERR_INVALID_PREDICATE", "a Run.Choice `when` is not a boolean (telo-reference §2)",
                         "make `when` produce true or false")
    INVALID_VALUE = ("ERR_INVALID_VALUE", "a configured or requested value is malformed (a duration, a retry "
                     "policy, a resolution action, an HTTP query or body)", "fix the value the message names")
    INVOKE_CANCELLED = ("ERR_INVOKE_CANCELLED", "upstream: a dispatch or a retry wait was cancelled; telo-python "
                        "raises no such error but never retries it", "none")
    INPUT_INVALID = ("ERR_INPUT_INVALID", "a dispatch's inputs do not match the target's declared inputType",
                     "fix the inputs, or the declared inputType")
    OUTPUT_INVALID = ("ERR_OUTPUT_INVALID", "a resource's result does not match its declared outputType",
                      "fix the result, or the declared outputType")
    CONTRACT_UNRESOLVABLE = ("ERR_CONTRACT_UNRESOLVABLE", "upstream: a contract's schema cannot be resolved; "
                             "telo-python raises no such error but never retries it", "none")
    SCHEMA_PROJECTION_UNRESOLVED = ("ERR_SCHEMA_PROJECTION_UNRESOLVED", "upstream: a schema projection cannot be "
                                    "resolved; telo-python raises no such error but never retries it", "none")
    RESOURCE_NOT_FOUND = ("ERR_RESOURCE_NOT_FOUND", "a reference or name designates no (suitable) resource",
                          "check the `!ref` and the resource names")
    RESOURCE_NOT_INVOKABLE = ("ERR_RESOURCE_NOT_INVOKABLE", "a step dispatches to a resource that cannot be "
                              "invoked", "invoke a runnable or invocable resource")

    # --- manifests (telo-reference §1) ----------------------------------------------------------------------
    MANIFEST_VALIDATION_FAILED = ("ERR_MANIFEST_VALIDATION_FAILED", "a manifest does not load (the aggregate "
                                  "code), or breaks its schema or a variable's", "fix each diagnostic listed")
    MANIFEST_YAML = ("ERR_MANIFEST_YAML", "YAML syntax, an unknown tag, a duplicate key, an alias cycle",
                     "fix the YAML at the position given")
    MANIFEST_NOT_FOUND = ("ERR_MANIFEST_NOT_FOUND", "a manifest (or an imported library) cannot be read",
                          "check the path")
    MANIFEST_INVALID_NAME = ("ERR_MANIFEST_INVALID_NAME", "a resource name, import alias, target or `!ref` part "
                             "is off the name grammar", "use ^[A-Za-z_][A-Za-z0-9_]*$")
    MANIFEST_DUPLICATE_RESOURCE = ("ERR_MANIFEST_DUPLICATE_RESOURCE", "two resources (or kinds) share a name",
                                   "rename one of them")
    MANIFEST_UNKNOWN_ALIAS = ("ERR_MANIFEST_UNKNOWN_ALIAS", "`X.Kind` or `!ref X.name` with no import aliased X",
                              "import the module as X")
    MANIFEST_UNKNOWN_KIND = ("ERR_MANIFEST_UNKNOWN_KIND", "the alias is imported but has no such (concrete) kind",
                             "check the kind's spelling")
    MANIFEST_UNKNOWN_MODULE = ("ERR_MANIFEST_UNKNOWN_MODULE", "an import names no built-in module or library",
                               "check the import's name or path")
    MANIFEST_UNKNOWN_RESOURCE = ("ERR_MANIFEST_UNKNOWN_RESOURCE", "`!ref` names no resource",
                                 "declare the resource, or fix the reference")
    MANIFEST_BARE_REFERENCE = ("ERR_MANIFEST_BARE_REFERENCE", "a plain string stands in a reference slot",
                               "write `!ref <name>`")
    MANIFEST_REFERENCE_KIND = ("ERR_MANIFEST_REFERENCE_KIND", "`!ref x` where x's kind does not fit the slot",
                               "reference a resource of the kind the slot takes")
    MANIFEST_REFERENCE_CYCLE = ("ERR_MANIFEST_REFERENCE_CYCLE", "resources invoke each other in a cycle that no "
                                "condition breaks (a → b → a, or a step invoking its own resource): a call would "
                                "never return", "guard an invoke of the cycle with `when:` or `if:`, or start the "
                                "next round as a new durable run")
    MANIFEST_INVALID_STEP = ("ERR_MANIFEST_INVALID_STEP", "a step has not exactly one step-kind key",
                             "give the step one of invoke, if, while, switch, try, throw, value")
    MANIFEST_INCLUDE = ("ERR_MANIFEST_INCLUDE", "`!include-bytes` names an unreadable file", "check the path")
    MANIFEST_CEL = ("ERR_MANIFEST_CEL", "the code a CEL checker hook (telo.manifest's cel_checker) may report",
                    "fix the expression")
    KIND_NOT_IMPLEMENTED = ("ERR_KIND_NOT_IMPLEMENTED", "a manifest declares a kind telo-python does not "
                            "implement", "use an implemented kind")

    # --- CEL (telo-reference §2) ----------------------------------------------------------------------------
    CEL_COMPILE = ("ERR_CEL_COMPILE", "an expression does not parse or type-check (at load time)",
                   "fix the expression at the position given")
    CEL_EVAL = ("ERR_CEL_EVAL", "an expression failed while evaluating", "see data.reason")
    CEL_NO_SUCH_KEY = ("ERR_CEL_NO_SUCH_KEY", "an expression read a key or field that is not there",
                       "guard with has(…) or `?.`, or check the step ran")
    CEL_OVERFLOW = ("ERR_CEL_OVERFLOW", "an expression's arithmetic overflowed", "use smaller values")

    # --- built-in kinds ---------------------------------------------------------------------------------------
    ASSERTION_FAILED = ("ERR_ASSERTION_FAILED", "Assert.Equals found a mismatch", "see expected and actual")
    INVALID_INPUT = ("ERR_INVALID_INPUT", "Timer.Delay got a malformed duration (upstream's code, telo-reference "
                     "§13; contracts use ERR_INPUT_INVALID)", "write e.g. 250ms, 2s, 1m or 1h")
    PYTHON_FUNCTION_INVALID = ("ERR_PYTHON_FUNCTION_INVALID", "Python.Function's `function` is not "
                               "'package.module:attr', or not callable", "name a callable as package.module:attr")
    PYTHON_FUNCTION_NOT_FOUND = ("ERR_PYTHON_FUNCTION_NOT_FOUND", "Python.Function's module cannot be imported or "
                                 "lacks the attribute", "check the module is importable and has it")
    PLAIN_VALUE_INVALID = ("ERR_PLAIN_VALUE_INVALID", "a plain-encoded value (spec §6.4) does not read under the "
                           "slot's declared schema", "send the value in the declared type's plain form")
    SQL_URL_INVALID = ("ERR_SQL_URL_INVALID", "a Sql.Connection url is empty, unsupported or names no database",
                       "use sqlite:///absolute/path.db or postgresql://…")
    SQL_PARAM_INVALID = ("ERR_SQL_PARAM_INVALID", "statement parameters are neither a map nor a list, or hold a "
                         "value no driver takes", "pass scalars in a map or a list")
    SQL_FAILED = ("ERR_SQL_FAILED", "the database refused a statement, or the connection is closed",
                  "see the driver's message (and data.sqlstate)")
    ZONE_REQUIRED = ("ERR_ZONE_REQUIRED", "a statement whose `transaction:` requires a Sql.Transaction on its "
                     "connection ran outside one (upstream's `sql` module)",
                     "invoke it from the steps of a Sql.Transaction on the same connection")

    # --- the Python API, the CLI and the dashboard ----------------------------------------------------------
    APP_CLOSED = ("ERR_APP_CLOSED", "a telo.App was used after it was closed", "load the manifest again")
    WORKFLOW_NOT_FOUND = ("ERR_WORKFLOW_NOT_FOUND", "a manifest declares no durable workflow of that name",
                          "check the workflow name")
    QUEUE_NOT_FOUND = ("ERR_QUEUE_NOT_FOUND", "a manifest declares no Local.Queue of that name (`telo queues "
                       "show`), or the journal has no run of that queue (the dashboard)",
                       "list the queues with `telo queues list MANIFEST`")
    SCHEDULE_NOT_FOUND = ("ERR_SCHEDULE_NOT_FOUND", "a manifest declares no durable Schedule.Cron or "
                          "Schedule.Interval of that name (`telo schedules`, the Python API, the dashboard)",
                          "list the schedules with `telo schedules list MANIFEST`")
    SCHEDULE_LEDGER_PROTECTED = ("ERR_SCHEDULE_LEDGER_PROTECTED", "a run command (cancel, resume) was pointed at "
                                 "a schedule's ledger, the run <schedule>@ledger that records its ticks",
                                 "operate the schedule with `telo schedules pause|resume|trigger`")
    SCHEDULE_RANGE_INVALID = ("ERR_SCHEDULE_RANGE_INVALID", "a backfill's range is empty, reversed, or holds more "
                              "ticks than one backfill starts", "give FROM before TO, and split a long range")
    UI_UNAVAILABLE = ("ERR_UI_UNAVAILABLE", "`telo ui` lacks the dashboard's packages", "pip install 'telo-python[ui]'")
    UI_TOKEN_REQUIRED = ("ERR_UI_TOKEN_REQUIRED", "the dashboard was asked without its token, or would be exposed "
                         "beyond loopback without one", "send the token, or bind to a loopback host")
    UI_HOST_REFUSED = ("ERR_UI_HOST_REFUSED", "a token-less dashboard got a request for a non-loopback host name",
                       "open it via localhost, or give it a token")
    UI_CSRF = ("ERR_UI_CSRF", "the dashboard refused a cross-site POST", "POST from the dashboard's own pages, "
               "or send the token in an Authorization header")
    UI_NOT_FOUND = ("ERR_UI_NOT_FOUND", "the dashboard has no such page", "check the URL")
    UI_BIND_FAILED = ("ERR_UI_BIND_FAILED", "`telo ui` cannot listen where it was asked: the port is in use or "
                      "not allowed, or the host does not resolve to an address of this machine",
                      "pick another --port (0: any free port) or --host")

    # --- codes upstream named outside the ERR_ scheme (UPSTREAM_NAMED) ---------------------------------------
    INTERNAL = ("INTERNAL_ERROR", "a bug in telo: an exception that is not a TeloError (a catch sees it so, and a "
                "failed run whose record has no code shows it)", "report it with the message")
    # Upstream raises exactly "INVALID_THROW_STEP" (telo-reference §3 throw, §11) and manifests test it in a
    # catch (tests/manifests/steps/throw_invalid.yaml), so the wire value stays; the member follows our naming.
    THROW_STEP_INVALID = ("INVALID_THROW_STEP", "a throw step's `code` is not a non-empty string",
                          "write e.g. `throw: {code: ERR_OUT_OF_STOCK, message: …}`")
    LOOP_INVALID = ("INVALID_LOOP", "a Run.Loop has neither `condition` nor `maxIterations`, or a bad "
                    "maxIterations", "give a condition or an integer maxIterations ≥ 1")
    CONCURRENCY_INVALID = ("INVALID_CONCURRENCY", "a Run.Iteration concurrency is not an integer ≥ 1",
                           "give an integer ≥ 1")
    COLLECTION_INVALID = ("INVALID_COLLECTION", "a Run.Iteration collection is not a list", "iterate over a list")


#: The codes the upstream runtime named outside the ``ERR_`` scheme (telo-reference §11): the wire strings stay
#: because manifests test them in a ``catch`` and journals of failed runs hold them.
UPSTREAM_NAMED: frozenset[Code] = frozenset({
    Code.INTERNAL, Code.THROW_STEP_INVALID, Code.LOOP_INVALID, Code.CONCURRENCY_INVALID, Code.COLLECTION_INVALID,
})

#: The codes of spec §9 and §6.5, in the spec's order.
SPEC_CODES: tuple[Code, ...] = (
    Code.DURABLE_UNJOURNALABLE_VALUE,
    Code.JOURNAL_ENTRY_MISMATCH,
    Code.DURABLE_MANIFEST_CHANGED,
    Code.DURABLE_NO_RUN,
    Code.DURABLE_SUSPENDED,
    Code.DURABLE_SUSPENSION_SWALLOWED,
    Code.DURABLE_SUSPEND_FORBIDDEN,
    Code.DURABLE_TARGET_UNENCODABLE,
    Code.DURABLE_TARGET_UNDECODABLE,
    Code.DURABLE_ENTRY_UNDECODABLE,
    Code.TYPED_FRAME_UNENCODABLE,
    Code.TYPED_FRAME_UNDECODABLE,
)
