"""engines/policy.py: the loop / cut-off retry ladder every engine uses, branch by branch."""

from __future__ import annotations

from ocrserve.engines.policy import LOOP, Ladder, cut_off
from ocrserve.profiles import load_profile

LOOPING = "<p>" + "the same words again " * 200
GOOD = '<div data-bbox="[1, 1, 9, 9]" data-label="Text"><p>fine</p></div>'


def _profile(max_retries: int = 2):
    return load_profile("chandra-1").model_copy(update={"max_retries": max_retries})


def test_a_good_first_answer_is_used_as_it_is():
    ladder = Ladder("x", _profile())
    assert ladder.begin() == 1
    assert ladder.sampling() is ladder.profile.sampling
    assert ladder.judge(GOOD, "stop", 100) == "ok"
    res = ladder.answer(GOOD, "stop", 10, 5)
    assert (res.ok, res.raw, res.engine, res.attempts, res.finish_reason) == (True, GOOD, "x", 1, "stop")
    assert (res.prompt_tokens, res.completion_tokens, res.error, res.extra) == (10, 5, None, {})


def test_a_loop_is_retried_with_the_retry_sampling_then_the_good_answer_wins():
    ladder = Ladder("x", _profile())
    ladder.begin()
    assert ladder.judge(LOOPING, "stop", 100) == "retry"
    assert ladder.sampling() is ladder.profile.retry_sampling
    ladder.begin()
    assert ladder.judge(GOOD, "stop", 100) == "ok"
    res = ladder.answer(GOOD, "stop")
    assert res.ok and res.attempts == 2 and res.error == LOOP == "the answer ended in a repetition loop"
    assert res.extra == {"retry_sampling": True, "problems": [LOOP]}


def test_a_cut_off_answer_names_the_token_limit():
    ladder = Ladder("x", _profile())
    ladder.begin()
    assert ladder.judge("<p>half", "length", 64) == "retry"
    assert ladder.problems == [cut_off(64)] == ["the answer was cut off at max_tokens=64 (finish_reason length)"]


def test_gives_up_after_max_retries_unusable_answers():
    ladder = Ladder("x", _profile(max_retries=2))
    verdicts = []
    for text, finish in ((LOOPING, "stop"), ("<p>half", "length"), (LOOPING, "length")):
        ladder.begin()
        verdicts.append(ladder.judge(text, finish, 50))
    assert verdicts == ["retry", "retry", "give_up"]
    res = ladder.gave_up(LOOPING, 7, 50)
    assert not res.ok and res.raw == "" and res.finish_reason == "loop" and res.attempts == 3
    assert res.error == f"gave up after 3 attempts (3 answers unusable); last: {LOOP}"
    assert res.extra["last_raw"] == LOOPING and res.extra["problems"] == [LOOP, cut_off(50), LOOP]
    assert (res.prompt_tokens, res.completion_tokens) == (7, 50)


def test_giving_up_on_a_cut_off_answer_says_length():
    ladder = Ladder("x", _profile(max_retries=0))
    ladder.begin()
    assert ladder.judge("<p>half", "length", 9) == "give_up"
    res = ladder.gave_up("<p>half")
    assert res.finish_reason == "length" and res.error.endswith(f"last: {cut_off(9)}")


def test_ignore_eos_judges_nothing():
    ladder = Ladder("x", _profile(max_retries=0), ignore_eos=True)
    ladder.begin()
    assert ladder.judge(LOOPING, "length", 10) == "ok" and ladder.problems == []


def test_an_engine_problem_is_kept_without_the_retry_sampling():
    # a failed request retried by the engine: the answer after it used the first sampling
    ladder = Ladder("x", _profile())
    ladder.begin()
    ladder.note("HTTP 503: busy")
    ladder.begin()
    assert ladder.sampling() is ladder.profile.sampling
    assert ladder.judge(GOOD, "stop", 100) == "ok"
    res = ladder.answer(GOOD, "stop")
    assert res.ok and res.attempts == 2 and res.error == "HTTP 503: busy"
    assert res.extra == {"retry_sampling": False, "problems": ["HTTP 503: busy"]}


def test_failed_and_the_engine_fields():
    ladder = Ladder("x", _profile())
    sizes = [4]
    ladder.extra["batch_sizes"] = sizes
    ladder.begin()
    res = ladder.failed("generation failed: boom")
    sizes.append(2)  # the result holds a copy
    assert (res.ok, res.raw, res.finish_reason, res.error) == (False, "", "error", "generation failed: boom")
    assert res.extra == {"batch_sizes": [4]}


def test_sampling_with_a_token_limit_override():
    ladder = Ladder("x", _profile())
    assert ladder.sampling(77).max_tokens == 77 and ladder.sampling(77).top_p == ladder.profile.sampling.top_p
    assert ladder.sampling(None) is ladder.profile.sampling
