"""shared.ops.fragments: the pieces of SQL the read layer shares, as each dialect spells them."""

from __future__ import annotations

from types import SimpleNamespace

from shared.ops.fragments import one_of, storable


def store(nul_text: bool):
    return SimpleNamespace(
        dialect=SimpleNamespace(
            nul_text=nul_text, any_of="{col} = ANY({param})", list_param=lambda items: list(items)
        )
    )


def test_storable_drops_what_an_engines_text_cannot_hold():
    assert storable(store(nul_text=False), ["a", "b\x00c", "d"]) == ["a", "d"]
    assert storable(store(nul_text=True), iter(["a", "b\x00c"])) == ["a", "b\x00c"]


def test_one_of_is_an_equality_for_one_item_and_the_dialects_list_for_more():
    assert one_of(store(True), "id", ["x"]) == ("id = :ids", {"ids": "x"})
    assert one_of(store(True), "j.type", ("a", "b"), name="types") == (
        "j.type = ANY(:types)",
        {"types": ["a", "b"]},
    )
