"""engines/policy.py: the loop / cut-off retry ladder every engine uses, branch by branch."""

from __future__ import annotations

from ocrserve.engines.policy import LOOP, Ladder, cut_off
from ocrserve.parse import is_repetition_loop
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


def test_a_cut_off_answer_is_kept_and_names_the_token_limit():
    ladder = Ladder("x", _profile())
    ladder.begin()
    assert ladder.judge("<p>half", "length", 64) == "ok"
    assert ladder.problems == [cut_off(64)]
    assert cut_off(64).startswith("the answer was cut off at max_tokens=64 (finish_reason length); kept")
    res = ladder.answer("<p>half", "length")
    assert res.ok and res.raw == "<p>half" and res.finish_reason == "length" and res.attempts == 1


def test_after_the_last_retry_the_longest_text_before_a_loop_is_kept():
    ladder = Ladder("x", _profile(max_retries=2))
    answers = [GOOD + LOOPING, GOOD + GOOD.replace("fine", "finer") + LOOPING, LOOPING]
    verdicts = []
    for text in answers:
        ladder.begin()
        verdicts.append(ladder.judge(text, "length", 50))
    assert verdicts == ["retry", "retry", "give_up"]
    res = ladder.gave_up(answers[-1], 7, 50)
    assert res.ok and res.finish_reason == "loop" and res.attempts == 3
    assert res.raw.startswith(GOOD + GOOD.replace("fine", "finer")) and not is_repetition_loop(res.raw)
    assert res.raw.count("the same words again") == 1
    assert res.error == "the answer still looped after 2 retries (3 attempts); the text before the loop is kept"
    assert res.extra["last_raw"] == LOOPING and res.extra["problems"] == [LOOP] * 3
    assert (res.prompt_tokens, res.completion_tokens) == (7, 50)


def test_a_loop_with_nothing_before_it_leaves_the_page_to_the_fallback():
    ladder = Ladder("x", _profile(max_retries=0))
    ladder.begin()
    assert ladder.judge(LOOPING, "length", 9) == "give_up"
    res = ladder.gave_up(LOOPING)
    assert not res.ok and res.raw == "" and res.finish_reason == "loop"
    assert res.error.endswith("nothing before the loop to keep")


def test_chandra_2_raises_the_retry_temperature_as_its_client_does():
    ladder = Ladder("x", load_profile("chandra-2").model_copy(update={"max_retries": 6}))
    temps = []
    for _ in range(7):
        ladder.begin()
        temps.append(ladder.sampling().temperature)
        ladder.judge(LOOPING, "length", 50)
    assert temps == [0.0] + [min(0.0 + 0.2 * (r + 1), 0.8) for r in range(6)]  # chandra-ocr 0.2.0's formula
    assert ladder.sampling().top_p == 0.95


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
