"""telo.targets: target identity, its canonical encoding and replay comparison (spec §5.3, reference §10)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telo import targets
from telo.errors import (
    ERR_DURABLE_TARGET_UNDECODABLE,
    ERR_DURABLE_TARGET_UNENCODABLE,
    TargetUndecodable,
    TargetUnencodable,
)
from telo.targets import Scope, TargetIdentity

MAIL = '{"v":1,"kind":"Mail.Send","name":"sendMail","module":"oci://ghcr.io/acme/mail@1.2.0"}'
MODULE = "oci://ghcr.io/acme/mail@1.2.0"


def refuse_encode(identity: TargetIdentity) -> str:
    with pytest.raises(TargetUnencodable) as info:
        targets.encode_target(identity)
    assert info.value.code == ERR_DURABLE_TARGET_UNENCODABLE
    assert info.value.hint
    return info.value.message


def refuse_decode(text: str | bytes) -> str:
    with pytest.raises(TargetUndecodable) as info:
        targets.decode_target(text)
    assert info.value.code == ERR_DURABLE_TARGET_UNDECODABLE
    return info.value.message


# --- the 10 cases of reference §10 ------------------------------------------------------------------------
def test_1_module_level_round_trips() -> None:
    identity = targets.module_level("Mail.Send", "sendMail", MODULE)
    assert targets.encode_target(identity) == MAIL
    assert targets.decode_target(MAIL) == identity


def test_2_inline_keeps_its_pointer() -> None:
    identity = targets.inline("Run.Sequence", "orders", MODULE, "/steps/0/invoke")
    text = targets.encode_target(identity)
    assert text == ('{"v":1,"kind":"Run.Sequence","name":"orders","module":"oci://ghcr.io/acme/mail@1.2.0",'
                    '"pointer":"/steps/0/invoke"}')
    assert targets.decode_target(text).pointer == "/steps/0/invoke"
    assert targets.decode_target(text) == identity


def test_3_scoped_comes_back_with_its_scope_and_no_flag_key() -> None:
    identity = targets.scoped("Http.Server", "api", MODULE, owner="serve", site="with", step_path="steps/run")
    text = targets.encode_target(identity)
    assert text == ('{"v":1,"kind":"Http.Server","name":"api","module":"oci://ghcr.io/acme/mail@1.2.0",'
                    '"scope":{"owner":"serve","site":"with","stepPath":"steps/run"}}')
    assert "scoped" not in json.loads(text)
    decoded = targets.decode_target(text)
    assert decoded.scope == Scope("serve", "with", "steps/run")
    assert decoded == identity and decoded.scoped  # scoped follows from the scope, not from a flag


def test_4_shuffled_keys_give_the_same_bytes() -> None:
    rng = random.Random(7)
    for _ in range(20):
        items = list(json.loads(MAIL).items())
        rng.shuffle(items)
        assert targets.encode_target(targets.decode_target(json.dumps(dict(items)))) == MAIL


def test_5_scoped_flag_without_a_tuple_is_refused() -> None:
    message = refuse_encode(TargetIdentity("Http.Server", "api", MODULE, scoped=True))
    assert "declared inside a 'with:' scope but records no owner" in message
    assert "Http.Server 'api'" in message


def test_6_scope_with_an_empty_step_path_is_refused() -> None:
    message = refuse_encode(TargetIdentity("Http.Server", "api", MODULE, scope=Scope("serve", "with", "")))
    assert "records no stepPath" in message


def test_7_missing_module_is_refused() -> None:
    assert "carries no declaring module" in refuse_encode(TargetIdentity("Mail.Send", "sendMail"))


def test_8_scoped_plus_pointer_is_refused() -> None:
    flag = TargetIdentity("Mail.Send", "sendMail", MODULE, pointer="/x", scoped=True)
    tuple_ = TargetIdentity("Mail.Send", "sendMail", MODULE, pointer="/x", scope=Scope("o", "s", "steps/a"))
    assert "describes no declaration site" in refuse_encode(flag)
    assert "describes no declaration site" in refuse_encode(tuple_)


def test_9_unknown_version_is_refused() -> None:
    assert "encoding version 99" in refuse_decode(MAIL.replace('"v":1', '"v":99'))


@pytest.mark.parametrize(
    ("payload", "message"),
    [("not json", "not valid JSON"), ("[]", "not an object"),
     ('{"v":1,"kind":"Mail.Send"}', "without a kind, a name or a module")],
)
def test_10_malformed_payloads_are_refused(payload: str, message: str) -> None:
    assert message in refuse_decode(payload)


# --- refusal order and the remaining refusals ---------------------------------------------------------------
def test_encode_refusal_order() -> None:
    # kind/name first, even when everything else is also wrong
    assert "no kind or no name" in refuse_encode(TargetIdentity("", "x", None, pointer="/p", scoped=True))
    assert "no kind or no name" in refuse_encode(TargetIdentity("K", None))
    # then pointer+scoped, before the missing module
    assert "describes no declaration site" in refuse_encode(TargetIdentity("K", "n", None, "/p", scoped=True))
    # then module, before the incomplete scope
    assert "carries no declaring module" in refuse_encode(TargetIdentity("K", "n", "", scoped=True))
    # scope fields in the order owner, site, stepPath
    assert refuse_encode(TargetIdentity("K", "n", "m", scope=Scope(None, None, None))).endswith("no owner")
    assert refuse_encode(TargetIdentity("K", "n", "m", scope=Scope("o", "", None))).endswith("no site")
    assert refuse_encode(TargetIdentity("K", "n", "m", scope=Scope("o", "s", None))).endswith("no stepPath")


def test_encode_refuses_an_empty_pointer_and_a_lone_surrogate() -> None:
    assert "pointer is empty" in refuse_encode(TargetIdentity("K", "n", "m", pointer=""))
    assert "Unicode" in refuse_encode(TargetIdentity("K", "n\ud800", "m"))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{"kind":"K","name":"n","module":"m"}', "records no encoding version"),
        ('{"v":"1","kind":"K","name":"n","module":"m"}', 'encoding version "1"'),
        ('{"v":true,"kind":"K","name":"n","module":"m"}', "encoding version true"),
        ('{"v":2,"kind":"K","name":"n","module":"m"}', "encoding version 2"),
        ('{"v":1,"name":"n","module":"m"}', "without a kind, a name or a module ('kind' is missing)"),
        ('{"v":1,"kind":"K","name":"","module":"m"}', "'name' is not a non-empty string"),
        ('{"v":1,"kind":"K","name":"n","module":7}', "'module' is not a non-empty string"),
        ('{"v":1,"kind":"K","name":"n","module":"m","pointer":"/p","scope":{"owner":"o","site":"s",'
         '"stepPath":"steps/a"}}', "both a pointer and a scope"),
        ('{"v":1,"kind":"K","name":"n","module":"m","pointer":null}', "pointer is not a non-empty string"),
        ('{"v":1,"kind":"K","name":"n","module":"m","scope":[]}', "scope is not an object"),
        ('{"v":1,"kind":"K","name":"n","module":"m","scope":{"owner":"o","site":"s"}}',
         "scope records no stepPath"),
        ('{"v":1,"kind":"K","name":"n","module":"m","scope":{"site":"s","stepPath":"p"}}',
         "scope records no owner"),
        ('{"v":1,"kind":"K","kind":"L","name":"n","module":"m"}', "appears twice"),
        ('"text"', "not an object"),
        ("", "not valid JSON"),
    ],
)
def test_decode_refusals(payload: str, message: str) -> None:
    assert message in refuse_decode(payload)


def test_decode_ignores_unknown_fields_and_accepts_bytes() -> None:
    text = '{"future":{"x":1},"v":1,"kind":"Mail.Send","name":"sendMail","module":"' + MODULE + '"}'
    assert targets.encode_target(targets.decode_target(text)) == MAIL
    assert targets.decode_target(MAIL.encode()) == targets.decode_target(MAIL)
    assert not targets.decode_target('{"v":1,"kind":"K","name":"n","module":"m","scoped":true}').scoped


# --- properties ---------------------------------------------------------------------------------------------
text = st.text(min_size=1)
identities = st.one_of(
    st.builds(targets.module_level, text, text, text),
    st.builds(targets.inline, text, text, text, text),
    st.builds(lambda k, n, m, o, s, p: targets.scoped(k, n, m, owner=o, site=s, step_path=p),
              text, text, text, text, text, text),
)


@given(identities)
def test_every_form_round_trips(identity: TargetIdentity) -> None:
    encoded = targets.encode_target(identity)
    decoded = targets.decode_target(encoded)
    assert decoded == identity
    assert targets.encode_target(decoded) == encoded
    assert list(json.loads(encoded))[:4] == ["v", "kind", "name", "module"]


@given(identities, st.randoms())
def test_any_key_order_gives_the_canonical_bytes(identity: TargetIdentity, rng: random.Random) -> None:
    canonical = targets.encode_target(identity)

    def shuffle(value: object) -> object:
        if not isinstance(value, dict):
            return value
        items = [(k, shuffle(v)) for k, v in value.items()]
        rng.shuffle(items)
        return dict(items)

    shuffled = json.dumps(shuffle(json.loads(canonical)), ensure_ascii=rng.random() < 0.5,
                          indent=rng.choice([None, 2]))
    assert targets.encode_target(targets.decode_target(shuffled)) == canonical


def test_strings_are_escaped_like_json_stringify() -> None:
    identity = targets.module_level("K", 'a"\\\n\x01é\u2028', "m")
    expected = '{"v":1,"kind":"K","name":"a\\"\\\\\\n\\u0001é\u2028","module":"m"}'
    assert targets.encode_target(identity) == expected


# --- P() and the inline dispatch target's name (spec §5.3, reference §1) -----------------------------------
@pytest.mark.parametrize(
    ("raw", "expected"),
    [("test", "Test"), ("steps", "Steps"), ("1", "1"), ("Sequence", "Sequence"), ("my-seq_name", "MySeqName"),
     ("aSteps0", "ASteps0"), ("steps0B", "Steps0B"), ("--x--y--", "XY"), ("", ""), ("bulk load", "BulkLoad"),
     ("café", "Caf"), ("camelCase", "CamelCase")],
)
def test_pascal_piece(raw: str, expected: str) -> None:
    assert targets.pascal_piece(raw) == expected


def test_inline_target_name_examples() -> None:
    assert targets.inline_target_name("Sequence", "test", ["steps", 1], "start") == "SequenceTestSteps1Start"
    assert (targets.inline_target_name("Workflow", "order", ["steps", 0, "cases", "bulk-load", "then"], "go")
            == "WorkflowOrderSteps0CasesBulkLoadThenGo")
    assert (targets.inline_target_name("Sequence", "s", ["steps", 2, "elseif", 1, "then", 0], "x")
            == "SequenceSSteps2Elseif1Then0X")


def test_inline_target_name_is_not_injective() -> None:
    a = targets.inline_target_name("Sequence", "a", ["steps", 0], "steps0B")
    b = targets.inline_target_name("Sequence", "aSteps0", ["steps", 0], "b")
    assert a == b == "SequenceASteps0Steps0B"


# --- journal entry target and replay comparison (reference §4) ---------------------------------------------
def test_journal_target_stores_kind_name_and_module_only() -> None:
    scoped = targets.scoped("K", "n", "m", owner="o", site="s", step_path="steps/a")
    assert targets.journal_target(scoped) == {"kind": "K", "name": "n", "module": "m"}
    assert targets.journal_target(TargetIdentity("K", "n")) == {"kind": "K", "name": "n"}
    with pytest.raises(TargetUnencodable):
        targets.journal_target(TargetIdentity(None, "n"))


@pytest.mark.parametrize(
    ("recorded", "reached", "match"),
    [
        ({"kind": "K", "name": "n", "module": "m"}, {"kind": "K", "name": "n", "module": "m"}, True),
        ({"kind": "K", "name": "n"}, {"kind": "K", "name": "n", "module": "m"}, True),  # legacy entry
        ({"kind": "K", "name": "n", "module": "m"}, {"kind": "K", "name": "n"}, True),
        ({"kind": "K", "name": "n", "module": "m"}, {"kind": "K", "name": "n", "module": "other"}, False),
        ({"kind": "K", "name": "n"}, {"kind": "K", "name": "other"}, False),
        ({"kind": "K", "name": "n"}, {"kind": "L", "name": "n"}, False),
    ],
)
def test_targets_match(recorded: dict[str, str], reached: dict[str, str], match: bool) -> None:
    assert targets.targets_match(recorded, reached) is match
    assert targets.targets_match(reached, recorded) is match
