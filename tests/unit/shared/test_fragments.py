"""shared.ops.fragments: the pieces of SQL the read layer shares, as each dialect spells them."""

from __future__ import annotations

from types import SimpleNamespace

from shared.ops.fragments import one_of, storable


def store(nul_text: bool, uuid: bool = False):
    return SimpleNamespace(
        dialect=SimpleNamespace(
            nul_text=nul_text,
            any_of="{col} = ANY({param})",
            list_param=lambda items: list(items),
            json_lists=False,
            id_type="uuid" if uuid else "text",
            is_id=(lambda t: len(t) == 32) if uuid else (lambda t: True),
        )
    )


def test_storable_drops_what_an_engines_text_cannot_hold():
    assert storable(store(nul_text=False), ["a", "b\x00c", "d"]) == ["a", "d"]
    assert storable(store(nul_text=True), iter(["a", "b\x00c"])) == ["a", "b\x00c"]
    hexed = "0" * 32
    assert storable(store(nul_text=False, uuid=True), ["a", hexed]) == [hexed]


def test_one_of_is_an_equality_for_one_item_and_the_dialects_list_for_more():
    assert one_of(store(True), "id", ["x"]) == ("id = :ids", {"ids": "x"})
    assert one_of(store(True), "j.id", ("a", "b"), name="jids") == (
        "j.id = ANY(:jids::text[])",
        {"jids": ["a", "b"]},
    )
    assert one_of(store(True, uuid=True), "id", ("a", "b"))[0] == "id = ANY(:ids::uuid[])"
