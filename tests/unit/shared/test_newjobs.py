"""The one path every enqueue takes (``shared.producer.newjobs``): a template of everything but
the payload, checked once, then a job per payload; a known plain type skips its type's checks."""

from __future__ import annotations

import pytest

from shared.producer.newjobs import known_of, payload_text, plain_job, template, type_queue
from shared.producer.options import PLAIN, Options
from shared.settings.config import from_dict

NOW = 1_700_000_000.0
CONFIG = from_dict(
    {"types": {"mail": {"priority": 5, "queue": "emails", "key": "payload.to"}}},
)


class Refusing:
    """A type check that refuses every type (strict_types with nothing served)."""

    def check(self, jtype):
        raise ValueError(f"job type {jtype!r} is not served")

    def queue_of(self, jtype):
        return None


def test_a_template_holds_the_types_settings_and_each_job_reads_its_payload():
    settings = template(CONFIG, None, "mail", PLAIN, NOW)
    jobs = [settings.job(CONFIG, f"id{i}", "mail", {"to": f"u{i}"}) for i in range(2)]
    assert [(j.id, j.priority, j.queue, j.limit_key, j.run_at) for j in jobs] == [
        ("id0", 5, "emails", "u0", NOW),
        ("id1", 5, "emails", "u1", NOW),
    ]
    assert jobs[0].payload == '{"to":"u0"}'
    with pytest.raises(ValueError, match="has no payload.to"):
        settings.job(CONFIG, "id2", "mail", {})


def test_given_options_win_over_the_types_settings():
    options = Options(priority=1, queue="other", limit_key="k", after=["p"])
    job = template(CONFIG, None, "mail", options, NOW).job(CONFIG, "id", "mail", {})
    assert (job.priority, job.queue, job.limit_key, job.after) == (1, "other", "k", ("p",))


def test_the_type_is_checked_unless_a_plain_job_of_it_passed_before():
    with pytest.raises(ValueError, match="not served"):
        template(CONFIG, Refusing(), "mail", PLAIN, NOW)
    with pytest.raises(ValueError, match="job type"):
        template(CONFIG, None, "", PLAIN, NOW)
    known = known_of(CONFIG, None, "mail")
    assert known == (5, "emails", "payload.to")
    job = template(CONFIG, Refusing(), "mail", PLAIN, NOW, known=known).job(
        CONFIG, "id", "mail", {"to": 7}
    )
    assert (job.priority, job.queue, job.limit_key) == (5, "emails", "7")


def test_a_known_plain_job_is_the_one_its_template_makes_with_the_same_errors():
    known = known_of(CONFIG, None, "mail")
    for payload in ({"to": "u"}, {"to": 7, "x": [1, 2]}):
        via_template = template(CONFIG, None, "mail", PLAIN, NOW, known=known)
        assert plain_job(CONFIG, known, "id", "mail", payload, NOW) == via_template.job(
            CONFIG, "id", "mail", payload
        )
    assert plain_job(CONFIG, known_of(CONFIG, None, "t"), "id", "t", None, NOW) == template(
        CONFIG, None, "t", PLAIN, NOW
    ).job(CONFIG, "id", "t", None)
    with pytest.raises(ValueError, match="has no payload.to"):
        plain_job(CONFIG, known, "id", "mail", {}, NOW)
    with pytest.raises(ValueError, match="run_at must fall in the years 1 to 9999"):
        plain_job(CONFIG, known, "id", "mail", {"to": "u"}, 1e12)
    with pytest.raises(TypeError, match="payload of job type 'mail' is not JSON-serialisable"):
        plain_job(CONFIG, known, "id", "mail", {"to": "u", "x": object()}, NOW)


def test_everything_but_the_payload_is_checked_before_the_payload():
    with pytest.raises(ValueError, match="limit_key must be"):
        template(CONFIG, None, "mail", Options(limit_key=""), NOW)
    with pytest.raises(ValueError, match="queue"):
        template(CONFIG, None, "mail", Options(queue="a,b"), NOW)
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        template(CONFIG, None, "t", PLAIN, NOW).job(CONFIG, "id", "t", object())


def test_the_queue_is_the_given_one_else_the_types_else_the_handlers_else_default():
    class Routing(Refusing):
        def queue_of(self, jtype):
            return "handlers"

    assert type_queue(CONFIG, None, "mail", "given") == "given"
    assert type_queue(CONFIG, Routing(), "mail") == "emails"
    assert type_queue(CONFIG, Routing(), "other") == "handlers"
    assert type_queue(CONFIG, None, "other") == "default"


def test_the_payload_is_json_within_max_payload_bytes():
    small = CONFIG.replace(max_payload_bytes=10)
    assert payload_text(small, "t", "é" * 4) == '"éééé"'
    with pytest.raises(ValueError, match="11 bytes, above the limit of 10"):
        payload_text(small, "t", "é" * 4 + "a")
