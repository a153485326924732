"""One scorer per benchmark (``SCORERS``): a response text -> prediction and correctness.

``SCORERS[name].score(sample, text, fallback=None) -> Score``. ``text`` is the answer
the model gave (the caller passes the answer part after the thinking split). Rules
first (:mod:`vlmrobust.score.extract`); only when they find nothing is ``fallback``
(an LLM extractor: ``(sample, text) -> str | None``) asked, and its value is read with
the same rules (``method == "llm"``). Nothing found -> ``prediction None``, wrong,
``method "none"`` and a ``reason``; an empty or malformed output never raises.

``Score.method`` is ``rule``, ``llm``, ``most-similar`` or ``none``; ``Score.rule`` names
the rule that found the prediction (``boxed``, ``cue``, ``last-number``, ... or ``llm``).

An unparsed multiple-choice answer (``unparsed_choice``, config ``scoring.unparsed_choice``
and ``datasets.<name>.unparsed_choice``): ``wrong`` (the default) keeps it wrong with
``method "none"``, an extraction failure; ``most-similar`` reproduces MathVista's official
scorer and lmms-eval, whose ``normalize_extracted_answer`` maps an extraction that is no
option letter to the option at the smallest Levenshtein distance
(:func:`most_similar_option`): the verdict is then the one the scorer gives that option,
recorded with ``method`` and ``rule`` ``most-similar`` and a ``reason`` naming the option
and the distance. It compares the text the LLM fallback returned when there was one (as
the official scorer compares its GPT extraction), else the response text read for scoring
(an empty response is the empty string: the shortest option). Only questions the scorer
reads as a choice among ``sample.choices`` are guessed (:meth:`Scorer.reads_options`); a
failed generation (``error``) never is.

Scoring choices, per scorer:

``mmmu``
    multiple choice: the option letter (explicit cues first, then MMMU's mentions); as
    MMMU's ``parse_multi_choice_response``, a hedged "C or D" gives the letter named
    last (rule ``hedge-last``), a letter standing as a word before a space or a period
    ("A is the threshold, ..., D is the repolarization") is read before any option text,
    the one found last (rule ``mmmu-letter``), and only when no letter is found a
    response of more than five words names the option whose text it contains, the one
    found last (rule ``mmmu-option-text``; numeric options too: "$7" -> the option "$7").
    open: MMMU's ``parse_open_response``/``eval_open``: the key sub-responses (after
    "is", "so", "therefore", "answer", "=" ...) or the final-answer marker when there
    is one, numbers rounded to 2 decimals, correct when a number equals a gold number
    or a gold string is a substring of a predicted string (gold may be a list literal).
    The sub-responses are cut as MMMU cuts them: the response is lower-cased first, so
    its sentence split (". " before a capital) never fires and only lines split.
``mathvista``
    multi_choice: letter -> option text, correct when it equals the answer text;
    free_form as MathVista's ``normalize_extracted_answer``: integer = ``int(float(x))``
    (truncation, as MathVista), float = rounded to ``precision`` and compared as numbers
    (so ``0.5`` equals ``0.50``), list = item by item, text = normalized equality.
``mathvision``
    options: the letter (or the option text); else the value: numbers equal within
    1e-6 relative (``\\frac{a}{b}`` read as its value), lists item by item, other
    LaTeX compared after a light normalization (``$``, ``\\left``, ``\\text``, spaces).
``chartqa``
    relaxed accuracy: the gold answer is a number only when the whole answer is one
    (``float()`` of it, as the official rule: "9 years and younger", "5G", "2017/2018"
    and "1,000" are text); then correct if the predicted number is within 5% of it,
    inclusive (``|p - g| <= 0.05 |g|``, with 1e-9 slack for float error; a gold 0 needs
    exactly 0). A percentage is divided by 100 on either side, as the official rule
    reads "24%" (0.24): "24%" does not match a gold 24, it matches "24%" and 0.24 (a
    number read from the middle of a sentence keeps its ``%``). Otherwise
    case-insensitive exact match (outer punctuation, LaTeX-light markup and repeated
    spaces ignored).
``infovqa``
    ANLS: score = max over the accepted answers of ``1 - NL`` (normalized Levenshtein
    distance on lowercased, space-collapsed text), set to 0 when below 0.5 (as
    lmms-eval and VLMEvalKit: a distance of exactly 0.5 keeps 0.5); correct = score
    >= 0.5, i.e. score > 0. ``accuracy`` of InfoVQA in the summary is therefore the
    share of answers above the ANLS threshold; the paper-comparable number is ``score``.
``textvqa``
    VQA accuracy: the prediction and the ten answers normalized as TextVQA's official
    evaluation and lmms-eval do (the EvalAI answer processor, :func:`vqa_normalize`:
    lower case, punctuation, a period no digit follows dropped so "2009." is "2009",
    number words, articles, contractions); score = mean over the ten
    leave-one-out subsets of ``min(1, matches / 3)``; correct = score > 0 (at least one
    annotator gave this answer). Paper-comparable number: ``score``. A ``$`` in the
    answer is kept as written, as the official processor keeps it in the answer and the
    golds (``$19.99`` matches a gold ``$19.99``, ``19.99`` does not), unless the
    answer's ``$`` pair up as LaTeX math delimiters (``$5$`` is 5).
``hallusionbench``
    yes/no extraction; correct when it equals the answer. A "no" of an idiom ("no
    doubt", "no question", "no wonder", "no matter") is no answer: "No doubt about it:
    yes." is yes (rule ``yesno-idiom`` where this changes the reading).
``mmstar``
    the option letter (valid letters from the parsed options, else the letters the
    question lists, else A-D); "option d" reads as D; a hedged "C or D" is unparsed
    (reason ``hedged answer``), as for every letter question except ``mmmu``.
``distract-bench``
    by the row's source style: a letter answer -> the letter; a MathVista-style row
    -> the ``mathvista`` rules (option text for multi_choice); otherwise the value, as
    ``mathvision``.
``imagenet9`` (Idis perception) and ``waterbirds``
    a class name read from one span: the last ``<answer>...</answer>`` or
    ``\\boxed{}`` when there is one (``answer-tag`` / ``boxed``; decisive: no other
    span is read then), else the last non-empty line (``last-line``), else, when the
    last line names no class, the whole answer text (``only-mention``). The span must
    name exactly one class, case-insensitively, as a whole word: a class label or
    another accepted name, optionally plural (``s`` / ``es``); none or several ->
    unparsed (``method "none"``, the reason says which). Accepted names
    (:data:`IMAGENET9_NAMES`, :data:`WATERBIRDS_NAMES`): the nine labels and the two
    ImageNet-9 folder class names "wheeled vehicle" and "musical instrument" (a folder
    name with its index, ``02_wheeled vehicle``, reads the same); no other synonym
    (car, truck, guitar, ... are NOT read as a class); "landbird" / "land bird" /
    "land-bird" and "waterbird" / "water bird" / "water-bird".
``mathverse`` (the rule-based offline judge, to compare with the two-stage LLM judge)
    multiple choice (a letter answer): the option letter, read as ``mmstar`` reads it
    (markers such as the last ``\\boxed{}`` first; an option's text names its letter);
    valid letters: one per parsed option, else those the question lists (at least
    A-D and up to the answer's). Free form: the span is the last ``\\boxed{}``
    (nested braces handled), else the last ``<answer>`` / "the answer is ..." cue;
    without one, the last number of the text (a numeric answer) or the last line.
    Numbers (plain, with units/°/%, ``\\frac``, ``\\sqrt``, ``\\pi``, ``^``, implicit
    products such as ``2\\sqrt{3}``; the part after the last ``=``) are compared by
    value: equal within half a unit of the last decimal either side states, i.e. to
    the precision of the less precise one (``3.46`` matches ``2\\sqrt{3}``, ``3.47``
    does not; ``14.0`` matches ``14``, ``14.3`` does not; ``14.32`` matches a gold
    ``14.3``), else within 1e-6 relative. Anything else: equal after a light LaTeX
    normalization (spaces, ``\\left``, ``\\text``, case), or equal right-hand sides
    when only one side is an equation (``y=2x+1`` vs ``2x+1``).
``logicvista``
    the set of option letters must equal the answer's (``"A, C"`` = ``"C and A"``): the
    last final-answer marker that names letters, else the whole text or its last line
    when they are only letters, else (a single-letter answer) the ``mmstar`` rules.
    Valid letters: A up to the last one the question names (``A-F``, ``A, B, C, D,
    and E``, ``(E)``) or the answer holds, at least A-D. An option-number answer
    (``3``) is read as a number.
``generic`` (demo data and anything else)
    by answer_type: letter -> letter; number -> numbers equal after rounding to the
    sample's precision (or within 1e-6 relative); text -> equal to the answer or one
    of ``meta["answers"]`` after the VQA normalization (or the same number / list);
    yes/no; list; label -> one of the choices (``<answer>X</answer>`` first).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..core.benchmarks import BENCHMARKS
from ..core.idis import IMAGENET9_CLASSES, WATERBIRDS_LABELS, option_letters
from ..core.records import Sample
from .extract import (
    Extraction,
    braced_group,
    clean_latex,
    extract_label,
    extract_letter,
    extract_list,
    extract_number,
    extract_short,
    extract_yesno,
    final_markers,
    find_boxed,
    find_numbers,
    fmt_number,
    letters_for,
    norm_text,
    numbers_equal,
    parse_list_value,
    same_text,
    to_number,
)

__all__ = [
    "IMAGENET9_NAMES",
    "SCORERS",
    "WATERBIRDS_NAMES",
    "UNPARSED_CHOICE",
    "Fallback",
    "Score",
    "Scorer",
    "anls",
    "chartqa_gold_number",
    "get_scorer",
    "levenshtein",
    "math_value",
    "most_similar_option",
    "relaxed_correct",
    "vqa_accuracy",
    "vqa_normalize",
]

Fallback = Callable[[Sample, str], "str | None"]

#: what an unparsed multiple-choice answer becomes (the first is the default)
UNPARSED_CHOICE = ("wrong", "most-similar")


@dataclass(frozen=True)
class Score:
    """The verdict on one response (see the module docstring for ``method``/``rule``)."""

    prediction: str | None
    correct: bool
    score: float
    method: str
    reason: str | None = None
    rule: str | None = None


def _failed(reason: str) -> Score:
    return Score(None, False, 0.0, "none", reason, None)


def _verdict(pred: str, correct: bool, ext: Extraction, score: float | None = None) -> Score:
    value = float(correct) if score is None else float(score)
    return Score(pred, bool(correct), value, "rule", None, ext.method)


class Scorer:
    """Base class: ``judge`` applies the rules; ``score`` adds the LLM fallback."""

    name = "?"

    def judge(self, sample: Sample, text: str) -> Score:  # pragma: no cover - abstract
        raise NotImplementedError

    def score(
        self,
        sample: Sample,
        text: str | None,
        fallback: Fallback | None = None,
        unparsed_choice: str = "wrong",
    ) -> Score:
        if unparsed_choice not in UNPARSED_CHOICE:
            raise ValueError(
                f"unparsed_choice {unparsed_choice!r} is not one of {', '.join(UNPARSED_CHOICE)}"
            )
        text = "" if text is None else str(text)
        result, extracted = self._extract(sample, text, fallback)
        if result.prediction is None and unparsed_choice == "most-similar":
            if extracted is not None:
                return self._most_similar(sample, extracted, result, "the LLM extraction")
            source = "the response" if text.strip() else "the empty response"
            return self._most_similar(sample, text, result, source)
        return result

    def _extract(
        self, sample: Sample, text: str, fallback: Fallback | None
    ) -> tuple[Score, str | None]:
        """The rules, then the fallback; and the fallback's text when it was unreadable."""
        if not text.strip():
            return _failed("empty output"), None
        result = self._safe(sample, text)
        if result.prediction is not None or fallback is None:
            return result, None
        try:
            value = fallback(sample, text)
        except Exception as exc:  # the fallback is an external call: never lose the row
            return replace(result, reason=f"{result.reason}; LLM extraction failed: {exc}"), None
        if value is None or not str(value).strip():
            return replace(result, reason=f"{result.reason}; LLM extraction found nothing"), None
        second = self._safe(sample, str(value))
        if second.prediction is None:
            reason = f"{result.reason}; LLM extraction {str(value)[:80]!r} could not be read"
            return replace(result, reason=reason), str(value)
        return replace(second, method="llm", rule="llm"), None

    def reads_options(self, sample: Sample) -> bool:
        """Whether this scorer reads the sample as a choice among ``sample.choices`` (a
        letter or a label answer); only such answers are mapped to the most similar option."""
        return bool(sample.choices) and sample.answer_type in ("letter", "label")

    def option_verdict(self, sample: Sample, index: int) -> Score | None:
        """The verdict on a response that names option ``index`` exactly (its letter, or
        the label itself for a label question), by this scorer's own rules; None when the
        sample is no choice question for this scorer."""
        letters = letters_for(len(sample.choices))
        if not self.reads_options(sample) or not 0 <= index < len(letters):
            return None
        option, letter = str(sample.choices[index]), letters[index]
        result = self._safe(sample, option if sample.answer_type == "label" else letter)
        return result if result.prediction in (letter, option) else None

    def _most_similar(self, sample: Sample, text: str, failed: Score, source: str) -> Score:
        if not self.reads_options(sample):
            return failed
        index = most_similar_option(text, sample.choices)
        verdict = self.option_verdict(sample, index)
        if verdict is None:
            return failed
        option = str(sample.choices[index])
        distance = levenshtein(text.strip(), option)
        reason = (
            f"{failed.reason or 'nothing extracted'}; guessed option "
            f"{letters_for(len(sample.choices))[index]} ({option[:80]!r}), the smallest "
            f"edit distance ({distance}) to {source} (unparsed_choice: most-similar)"
        )
        return replace(verdict, method="most-similar", rule="most-similar", reason=reason)

    def _safe(self, sample: Sample, text: str) -> Score:
        try:
            return self.judge(sample, text)
        except (
            ValueError,
            TypeError,
            IndexError,
            KeyError,
            ArithmeticError,
            RecursionError,
        ) as exc:
            return _failed(f"could not score the output ({type(exc).__name__}: {exc})")


# --------------------------------------------------------------------------- shared rules


def _valid_letters(sample: Sample) -> str:
    if sample.choices:
        return letters_for(len(sample.choices))
    found = re.findall(
        r"(?:^|\s|\()([A-Z])[:.)]\s", sample.meta.get("raw_question") or sample.question
    )
    letters = ""
    for i in range(26):
        letter = chr(ord("A") + i)
        if letter in found:
            letters += letter
        else:
            break
    return letters if len(letters) >= 2 else "ABCD"


def _judge_letter(
    sample: Sample, text: str, hedge: str = "unparsed", option_search: str = "mention"
) -> Score:
    letters = _valid_letters(sample)
    ext = extract_letter(text, sample.choices, letters, hedge=hedge, option_search=option_search)
    if not ext.ok:
        return _failed(ext.reason or "no option letter found")
    return _verdict(ext.value, ext.value == sample.answer.strip().upper(), ext)


def _gold_list(answer: str) -> list[str] | None:
    text = answer.strip()
    if re.match(r"^[\[(].*,.*[\])]$", text, re.S):
        return parse_list_value(text)
    return None


def _lists_equal(pred: list[str], gold: list[str]) -> bool:
    if len(pred) != len(gold):
        return False
    for p, g in zip(pred, gold, strict=True):
        pv, gv = to_number(p), to_number(g)
        if pv is not None and gv is not None:
            if not numbers_equal(pv, gv):
                return False
        elif not same_text(p, g):
            return False
    return True


def _judge_list(sample: Sample, text: str) -> Score:
    gold = _gold_list(sample.answer) or parse_list_value(f"[{sample.answer}]") or [sample.answer]
    ext = extract_list(text)
    if not ext.ok:
        return _failed(ext.reason or "no list found")
    pred = parse_list_value(ext.value) or []
    return _verdict(ext.value, _lists_equal(pred, gold), ext)


def _judge_number(sample: Sample, text: str, precision: int | None) -> Score:
    gold = to_number(sample.answer)
    if gold is None:
        raise ValueError(f"the answer {sample.answer!r} of {sample.sample_id} is not a number")
    ext = extract_number(text)
    if not ext.ok:
        return _failed(ext.reason or "no number found")
    value = float(ext.value)
    pred = ext.value if precision is None else fmt_number(round(value, precision))
    return _verdict(pred, numbers_equal(value, gold, precision), ext)


def _latex_key(text: str) -> str:
    s = clean_latex(text)
    s = re.sub(r"\\(?:quad|qquad)", " ", s)
    return re.sub(r"\s+", "", s).rstrip(".").lower()


def _judge_value(sample: Sample, text: str) -> Score:
    """MathVision-style open answer: number, list, or LaTeX/text equality."""
    if _gold_list(sample.answer) is not None:
        return _judge_list(sample, text)
    if to_number(sample.answer) is not None:
        return _judge_number(sample, text, None)
    ext = extract_short(text)
    if not ext.ok:
        return _failed(ext.reason or "no answer found")
    correct = _latex_key(ext.value) == _latex_key(sample.answer) or same_text(
        ext.value, sample.answer
    )
    return _verdict(ext.value, correct, ext)


def _judge_yesno(sample: Sample, text: str) -> Score:
    ext = extract_yesno(text)
    if not ext.ok:
        return _failed(ext.reason or "no yes/no found")
    return _verdict(ext.value, ext.value == sample.answer.strip().lower(), ext)


def _judge_label(sample: Sample, text: str) -> Score:
    labels = sample.choices or [sample.answer]
    ext = extract_label(text, labels)
    if not ext.ok:
        return _failed(ext.reason or "no label found")
    return _verdict(ext.value, same_text(ext.value, sample.answer), ext)


# --------------------------------------------------------------------------- VQA normalization

_PUNCT = list(';/[]"{}()=+\\_->@`,?!<')
_COMMA_STRIP = re.compile(r"(\d)(,)(\d)")
#: a period that no digit follows (the official ``periodStrip`` ``(?!<=\d)(\.)(?!\d)``,
#: whose first group is a lookahead that always holds: "2009." -> "2009", "3.5" kept)
_PERIOD_STRIP = re.compile(r"\.(?!\d)")
#: the official ``periodStrip.sub("", text, re.UNICODE)`` passes re.UNICODE (32) as the
#: count: at most 32 periods are removed
_PERIOD_COUNT = 32
_NUMBER_WORDS = {
    "none": "0",
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
}
_ARTICLES = {"a", "an", "the"}
#: the EvalAI answer processor's contractions that can apply to lower-cased words
#: (``written>contracted``; its capitalised keys "Im", "Ive", ... never match)
_CONTRACTION_PAIRS = """
'ow'sat>'ow's'at 'ows'at>'ow's'at aint>ain't arent>aren't cant>can't
couldn'tve>couldn't've couldnt>couldn't couldnt've>couldn't've couldve>could've
didnt>didn't doesnt>doesn't dont>don't hadn'tve>hadn't've hadnt>hadn't
hadnt've>hadn't've hasnt>hasn't havent>haven't he'dve>he'd've hed>he'd
hed've>he'd've hes>he's howd>how'd howll>how'll hows>how's isnt>isn't it'dve>it'd've
itd>it'd itd've>it'd've itll>it'll maam>ma'am mightn'tve>mightn't've
mightnt>mightn't mightnt've>mightn't've mightve>might've mustnt>mustn't
mustve>must've neednt>needn't notve>not've oclock>o'clock oughtnt>oughtn't
ow's'at>'ow's'at shant>shan't she'dve>she'd've shed've>she'd've
shouldn'tve>shouldn't've shouldnt>shouldn't shouldnt've>shouldn't've
shouldve>should've somebody'd>somebodyd somebody'dve>somebody'd've
somebodyd've>somebody'd've somebodyll>somebody'll somebodys>somebody's
someone'dve>someone'd've someoned>someone'd someoned've>someone'd've
someonell>someone'll someones>someone's something'dve>something'd've
somethingd>something'd somethingd've>something'd've somethingll>something'll
thats>that's there'dve>there'd've thered>there'd thered've>there'd've
therere>there're theres>there's they'dve>they'd've theyd>they'd theyd've>they'd've
theyll>they'll theyre>they're theyve>they've twas>'twas wasnt>wasn't we'dve>we'd've
wed've>we'd've werent>weren't weve>we've whatll>what'll whatre>what're whats>what's
whatve>what've whens>when's whered>where'd wheres>where's whereve>where've
who'dve>who'd've whod>who'd whod've>who'd've wholl>who'll whos>who's whove>who've
whyll>why'll whyre>why're whys>why's wont>won't wouldn'tve>wouldn't've
wouldnt>wouldn't wouldnt've>wouldn't've wouldve>would've y'all'dve>y'all'd've
y'alld've>y'all'd've y'allll>y'all'll yall>y'all yall'd've>y'all'd've
yall'll>y'all'll you'dve>you'd've youd>you'd youd've>you'd've youll>you'll
youre>you're youve>you've
"""
_CONTRACTIONS = dict(pair.split(">", 1) for pair in _CONTRACTION_PAIRS.split())


def vqa_normalize(text: str) -> str:
    """The answer normalization of the TextVQA evaluation (the EvalAI answer processor
    that TextVQA's official evaluation and lmms-eval apply to the prediction and to each
    of the ten answers): lower-case, ``,`` and ``?`` dropped, ``'s`` split off; the
    VQA eval's punctuation rule (a mark next to a space is dropped, else it becomes a
    space); a period that no digit follows dropped ("2009." -> "2009"); number words to
    digits, articles dropped, contractions restored ("dont" -> "don't")."""
    s = str(text).lower().replace(",", "").replace("?", "").replace("'s", " 's").strip()
    s = s.replace("\n", " ").replace("\t", " ").strip()
    keep_joined = bool(_COMMA_STRIP.search(s))
    out = s
    for p in _PUNCT:
        if (p + " " in s or " " + p in s) or keep_joined:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    out = _PERIOD_STRIP.sub("", out, count=_PERIOD_COUNT)
    words = []
    for word in out.lower().split():
        word = _NUMBER_WORDS.get(word, word)
        if word not in _ARTICLES:
            words.append(_CONTRACTIONS.get(word, word))
    return " ".join(words)


def vqa_accuracy(prediction: str, answers: list[str]) -> float:
    """Mean over leave-one-out subsets of ``min(1, matches / 3)`` (one answer: exact)."""
    gts = [vqa_normalize(a) for a in answers]
    pred = vqa_normalize(prediction)
    if not gts:
        return 0.0
    if len(gts) == 1:
        return float(gts[0] == pred)
    accs = []
    for i in range(len(gts)):
        matches = sum(1 for j, g in enumerate(gts) if j != i and g == pred)
        accs.append(min(1.0, matches / 3.0))
    return sum(accs) / len(accs)


def levenshtein(a: str, b: str) -> int:
    """The edit distance of two strings: fewest single-character insertions, deletions
    and substitutions turning one into the other (case-sensitive)."""
    if len(a) > len(b):
        a, b = b, a
    prev = list(range(len(a) + 1))
    for j, cb in enumerate(b, 1):
        cur = [j]
        for i, ca in enumerate(a, 1):
            cur.append(min(prev[i] + 1, cur[i - 1] + 1, prev[i - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def most_similar_option(text: str, options: Sequence[str]) -> int:
    """The index of the option closest to ``text`` by :func:`levenshtein`, as MathVista's
    official ``get_most_similar`` (also lmms-eval's): the absolute edit distance between
    the stripped text and each option as given (not normalized by length, case-sensitive),
    the first option on a tie. An empty text therefore picks the shortest option."""
    if not options:
        raise ValueError("no options to choose from")
    key = str(text).strip()
    distances = [levenshtein(key, str(option)) for option in options]
    return distances.index(min(distances))


def anls(prediction: str, answers: list[str], threshold: float = 0.5) -> float:
    """ANLS of one prediction: best ``1 - NL`` over the answers, 0 below ``threshold``."""
    pred = " ".join(str(prediction).strip().lower().split())
    best = 0.0
    for answer in answers:
        gold = " ".join(str(answer).strip().lower().split())
        length = max(len(gold), len(pred))
        sim = 1.0 if length == 0 else 1.0 - levenshtein(gold, pred) / length
        best = max(best, sim)
    return best if best >= threshold else 0.0


def chartqa_gold_number(target: str) -> float | None:
    """The value of a ChartQA gold answer when the whole answer is a number, as the
    official relaxed accuracy reads it (``float()`` of the whole text; a trailing ``%``
    divides by 100: ``"24%"`` is 0.24); None for a text answer (``"9 years and younger"``,
    ``"5G"``, ``"2017/2018"``, ``"1,000"``)."""
    s = str(target).strip()
    percent = s.endswith("%")
    try:
        value = float(s.rstrip("%")) if percent else float(s)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return value / 100.0 if percent else value


def _chartqa_prediction(prediction: str) -> float | None:
    """The value of a predicted ChartQA answer: one number (units and currency allowed,
    :func:`to_number`), divided by 100 when it is written with ``%`` (as the official
    rule reads ``"24%"``)."""
    value = to_number(prediction)
    if value is None:
        return None
    return value / 100.0 if re.search(r"\d\s*%", clean_latex(prediction)) else value


def relaxed_correct(prediction: str, target: str, tolerance: float = 0.05) -> bool:
    """ChartQA relaxed accuracy (see the module docstring)."""
    gold = chartqa_gold_number(target)
    if gold is not None:
        pred = _chartqa_prediction(prediction)
        if pred is None:
            return False
        if gold == 0:
            return pred == 0
        return abs(pred - gold) <= tolerance * abs(gold) + 1e-9 * abs(gold)
    return norm_text(prediction) == norm_text(target)


def _answers(sample: Sample) -> list[str]:
    answers = sample.meta.get("answers")
    if isinstance(answers, list) and answers:
        return [str(a) for a in answers]
    return [sample.answer]


# --------------------------------------------------------------------------- scorers


class LetterScorer(Scorer):
    name = "mmstar"

    def judge(self, sample: Sample, text: str) -> Score:
        return _judge_letter(sample, text)


class YesNoScorer(Scorer):
    name = "hallusionbench"

    def judge(self, sample: Sample, text: str) -> Score:
        return _judge_yesno(sample, text)


def _gold_open(answer: str) -> list[str]:
    text = answer.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            value = ast.literal_eval(text)
            if isinstance(value, list) and value:
                return [str(v) for v in value]
        except (ValueError, SyntaxError):
            pass
    return [text]


def _mmmu_norm(text: str) -> list[float | str]:
    s = text.strip()
    value = None
    if re.fullmatch(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+", s):
        value = float(s.replace(",", ""))
    if value is not None and math.isfinite(value):
        return [round(value, 2)]
    s = s.lower()
    return [" " + s, s + " "] if len(s) == 1 else [s]


_MMMU_KEYS = ("could be ", "so ", "is ", "thus ", "therefore ", "final ", "answer ", "result ")


def _mmmu_key_responses(text: str) -> list[str]:
    # As MMMU's get_key_subresponses: lower-case first, then split on ". " before an
    # upper-case letter or a newline; after lower-casing only the newlines split.
    response = text.strip().strip(".").lower()
    parts = re.split(r"\.\s(?=[A-Z])|\n", response)
    keys: list[str] = []
    for k, part in enumerate(parts):
        indicators = list(_MMMU_KEYS) + (["="] if k == len(parts) - 1 else [])
        shortest = None
        for ind in indicators:
            if ind in part:
                tail = part.split(ind)[-1].strip()
                if shortest is None or len(tail) < len(shortest):
                    shortest = tail
        if shortest and shortest not in (":", ",", ".", "!", "?", ";", "'"):
            keys.append(shortest)
    return keys or [response]


class MMMUScorer(Scorer):
    name = "mmmu"

    def judge(self, sample: Sample, text: str) -> Score:
        if sample.answer_type == "letter":
            # MMMU's parse_multi_choice_response: a response naming two letters ("C or
            # D") gives the one found last (hedge "last"), a letter standing as a word
            # comes before option texts, and only without one does an option's text found
            # in a response of more than five words name that option (the last found).
            return _judge_letter(sample, text, hedge="last", option_search="mmmu")
        marked = final_markers(text)
        if marked:
            keys = [clean_latex(marked[0].segment).lower()]
            rule = marked[0].method
        else:
            keys = _mmmu_key_responses(text)
            rule = "mmmu-open"
        preds: list[float | str] = []
        for key in keys:
            preds.extend(_mmmu_norm(key))
            for number in find_numbers(key):
                preds.append(round(number, 2))
        gold: list[float | str] = []
        for answer in _gold_open(sample.answer):
            gold.extend(_mmmu_norm(answer))
        correct = False
        for pred in preds:
            if isinstance(pred, str):
                if any(isinstance(g, str) and g in pred for g in gold):
                    correct = True
                    break
            elif pred in gold:
                correct = True
                break
        ext = Extraction(keys[-1] if rule == "mmmu-open" else keys[0], rule)
        return _verdict(ext.value, correct, ext)


def _mathvista_types(sample: Sample) -> tuple[str, str, int | None]:
    meta = sample.meta or {}
    qtype = str(meta.get("question_type") or "").strip()
    if qtype not in ("multi_choice", "free_form"):
        qtype = "multi_choice" if sample.choices else "free_form"
    atype = str(meta.get("answer_type") or "").strip()
    precision = sample.precision
    if precision is None and isinstance(meta.get("precision"), (int, float)):
        precision = int(meta["precision"])
    if atype not in ("integer", "float", "list", "text"):
        if sample.answer_type == "list" or _gold_list(sample.answer) is not None:
            atype = "list"
        elif sample.answer_type == "number":
            atype = "integer" if re.fullmatch(r"[-+]?\d+", sample.answer.strip()) else "float"
        else:
            atype = "text"
    return qtype, atype, precision


class MathVistaScorer(Scorer):
    name = "mathvista"

    def reads_options(self, sample: Sample) -> bool:
        return bool(sample.choices) and _mathvista_types(sample)[0] == "multi_choice"

    def judge(self, sample: Sample, text: str) -> Score:
        qtype, atype, precision = _mathvista_types(sample)
        if qtype == "multi_choice" and sample.choices:
            ext = extract_letter(text, sample.choices)
            if not ext.ok:
                return _failed(ext.reason or "no option found")
            option = sample.choices[ord(ext.value) - ord("A")]
            return _verdict(option, option.strip() == sample.answer.strip(), ext)
        if atype == "integer":
            gold = to_number(sample.answer)
            ext = extract_number(text)
            if not ext.ok:
                return _failed(ext.reason or "no number found")
            pred = str(int(float(ext.value)))
            ok = gold is not None and int(pred) == gold
            return _verdict(pred, ok, ext)
        if atype == "float":
            gold = to_number(sample.answer)
            if precision is None:
                part = sample.answer.strip().split(".")
                precision = len(part[1]) if len(part) == 2 else 0
            ext = extract_number(text)
            if not ext.ok:
                return _failed(ext.reason or "no number found")
            value = round(float(ext.value), precision)
            ok = gold is not None and value == round(gold, precision)
            return _verdict(fmt_number(value), ok, ext)
        if atype == "list":
            return _judge_list(sample, text)
        ext = extract_short(text)
        if not ext.ok:
            return _failed(ext.reason or "no answer found")
        return _verdict(ext.value, same_text(ext.value, sample.answer), ext)


class MathVisionScorer(Scorer):
    name = "mathvision"

    def judge(self, sample: Sample, text: str) -> Score:
        if sample.answer_type == "letter" or sample.choices:
            return _judge_letter(sample, text)
        return _judge_value(sample, text)


class ChartQAScorer(Scorer):
    name = "chartqa"

    def judge(self, sample: Sample, text: str) -> Score:
        ext = extract_short(text)
        numeric = chartqa_gold_number(sample.answer) is not None
        if numeric and (not ext.ok or to_number(ext.value) is None):
            ext = extract_number(text, keep_percent=True)
        if not ext.ok:
            return _failed(ext.reason or "no answer found")
        return _verdict(ext.value, relaxed_correct(ext.value, sample.answer), ext)


class InfoVQAScorer(Scorer):
    name = "infovqa"

    def judge(self, sample: Sample, text: str) -> Score:
        ext = extract_short(text)
        if not ext.ok:
            return _failed(ext.reason or "no answer found")
        value = anls(ext.value, _answers(sample))
        return _verdict(ext.value, value >= 0.5, ext, value)


#: stand in for ``$`` (a bare one, an escaped ``\\$``) while a TextVQA answer is read
_DOLLAR, _SIGN = "\ue000", "\ue001"


def _textvqa_short(text: str) -> Extraction:
    """:func:`extract_short` with ``$`` read as the official processor reads it: kept as
    written (the processor keeps it in the answer and in the golds alike: ``$19.99``),
    except where the answer's ``$`` pair up as LaTeX math delimiters (``$5$`` is 5); an
    escaped ``\\$`` is always kept. The LaTeX clean-up would drop every ``$``."""
    raw = str(text or "")
    if "$" not in raw:
        return extract_short(raw)
    ext = extract_short(raw.replace("\\$", _SIGN).replace("$", _DOLLAR))
    if not ext.ok:
        return ext
    value = ext.value
    value = value.replace(_DOLLAR, " " if value.count(_DOLLAR) % 2 == 0 else "$")
    value = " ".join(value.replace(_SIGN, "$").split())
    return replace(ext, value=value) if value else extract_short(raw)


class TextVQAScorer(Scorer):
    name = "textvqa"

    def judge(self, sample: Sample, text: str) -> Score:
        ext = _textvqa_short(text)
        if not ext.ok:
            return _failed(ext.reason or "no answer found")
        value = vqa_accuracy(ext.value, _answers(sample))
        return _verdict(ext.value, value > 0, ext, value)


_MATHVISTA = MathVistaScorer()


class DistractBenchScorer(Scorer):
    name = "distract-bench"

    def reads_options(self, sample: Sample) -> bool:
        if sample.answer_type != "letter" and sample.meta.get("source_style") == "mathvista":
            return _MATHVISTA.reads_options(sample)
        return super().reads_options(sample)

    def judge(self, sample: Sample, text: str) -> Score:
        if sample.answer_type == "letter":
            return _judge_letter(sample, text)
        if sample.meta.get("source_style") == "mathvista":
            return _MATHVISTA.judge(sample, text)
        return _judge_value(sample, text)


class GenericScorer(Scorer):
    name = "generic"

    def judge(self, sample: Sample, text: str) -> Score:
        atype = sample.answer_type
        if atype == "letter":
            return _judge_letter(sample, text)
        if atype == "number":
            return _judge_number(sample, text, sample.precision)
        if atype == "yes/no":
            return _judge_yesno(sample, text)
        if atype == "list":
            return _judge_list(sample, text)
        if atype == "label":
            return _judge_label(sample, text)
        ext = extract_short(text)
        if not ext.ok:
            return _failed(ext.reason or "no answer found")
        answers = _answers(sample)
        if sample.answer not in answers:
            answers = [sample.answer, *answers]
        pred = vqa_normalize(ext.value)
        correct = any(pred == vqa_normalize(a) or same_text(ext.value, a) for a in answers)
        if not correct and _gold_list(sample.answer) is not None:
            items = parse_list_value(ext.value)
            correct = items is not None and _lists_equal(items, _gold_list(sample.answer) or [])
        if not correct and to_number(sample.answer) is not None:
            value = to_number(ext.value)
            correct = value is not None and numbers_equal(value, to_number(sample.answer) or 0.0)
        return _verdict(ext.value, correct, ext)


# --------------------------------------------------------------------------- Idis: class names

#: ImageNet-9 label -> the names that read as it (module docstring): the label and the
#: class name of its ImageNet-9 folder (:data:`vlmrobust.core.idis.IMAGENET9_CLASSES`);
#: each may also be plural (``s`` / ``es``)
IMAGENET9_NAMES: dict[str, tuple[str, ...]] = {
    label: tuple(dict.fromkeys((label.lower(), name))) for name, label in IMAGENET9_CLASSES
}
#: Waterbirds label -> the names that read as it (optionally plural): the label, and
#: the label as two words (``land bird``, ``land-bird``)
WATERBIRDS_NAMES: dict[str, tuple[str, ...]] = {
    label: tuple(label.lower().replace("bird", f"{sep}bird") for sep in ("", " ", "-"))
    for label in WATERBIRDS_LABELS
}


def _name_patterns(names: dict[str, tuple[str, ...]]) -> dict[str, re.Pattern[str]]:
    out = {}
    for label, words in names.items():
        alternatives = "|".join(
            re.escape(w.lower()).replace(r"\ ", r"\s+").replace(r"\-", r"[\s-]?")
            for w in sorted(words, key=len, reverse=True)
        )
        out[label] = re.compile(rf"(?<![a-z0-9])(?:{alternatives})(?:s|es)?(?![a-z0-9])")
    return out


_IMAGENET9_PATTERNS = _name_patterns(IMAGENET9_NAMES)
_WATERBIRDS_PATTERNS = _name_patterns(WATERBIRDS_NAMES)
#: the markers that decide the ``imagenet9`` / ``waterbirds`` span (no cue is read)
_DECISIVE = {"answer-tag": "the last <answer>", "boxed": "the last \\boxed{}"}


def _named(span: str, patterns: dict[str, re.Pattern[str]]) -> list[str]:
    low = clean_latex(span).lower()
    return [label for label, rx in patterns.items() if rx.search(low)]


def _judge_named(sample: Sample, text: str, patterns: dict[str, re.Pattern[str]]) -> Score:
    """One class named in the decisive span (the ``imagenet9`` / ``waterbirds`` rules)."""
    gold = next((lab for lab in patterns if lab.lower() == sample.answer.strip().lower()), None)
    if gold is None:
        raise ValueError(
            f"the answer {sample.answer!r} of {sample.sample_id} is not one of "
            f"{', '.join(patterns)}"
        )
    last = next((m for m in final_markers(text) if m.method in _DECISIVE), None)
    if last is not None:
        candidates = [(last.segment, last.method, _DECISIVE[last.method])]
    else:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        candidates = [(lines[-1] if lines else "", "last-line", "the last line")]
        if not _named(candidates[0][0], patterns):
            candidates.append((text, "only-mention", "the answer"))
    for span, rule, where in candidates:
        hits = _named(span, patterns)
        if len(hits) == 1:
            return _verdict(hits[0], hits[0] == gold, Extraction(hits[0], rule))
        if hits:
            return _failed(f"{where} names several classes ({', '.join(hits)})")
    return _failed(f"{candidates[-1][2]} names none of {', '.join(patterns)}")


class ImageNet9Scorer(Scorer):
    name = "imagenet9"

    def judge(self, sample: Sample, text: str) -> Score:
        return _judge_named(sample, text, _IMAGENET9_PATTERNS)


class WaterbirdsScorer(Scorer):
    name = "waterbirds"

    def judge(self, sample: Sample, text: str) -> Score:
        return _judge_named(sample, text, _WATERBIRDS_PATTERNS)


# --------------------------------------------------------------------------- Idis: MathVerse

#: the names an arithmetic expression may hold (``_eval_node`` evaluates them)
_EXPR_NAMES = frozenset({"pi", "sqrt"})


def _latex_to_python(text: str) -> str | None:
    """A LaTeX-light arithmetic expression as Python source (``\\frac``, ``\\sqrt``,
    ``\\pi``, ``^``, implicit products), or None when it holds anything else."""
    s = text
    for _ in range(50):
        m = re.search(r"\\frac\s*(?=\{)|\\sqrt\s*(?:\[([^\]]*)\])?\s*(?=\{)", s)
        if not m:
            break
        first = braced_group(s, m.end())
        if first is None:
            return None
        if s[m.start() :].startswith("\\frac"):
            second = braced_group(s, first[1])
            if second is None:
                return None
            repl, end = f"(({first[0]})/({second[0]}))", second[1]
        elif m.group(1):
            repl, end = f"(({first[0]})**(1/({m.group(1)})))", first[1]
        else:
            repl, end = f"sqrt({first[0]})", first[1]
        s = s[: m.start()] + repl + s[end:]
    s = re.sub(r"\\sqrt\s*(\d+(?:\.\d+)?)", r"sqrt(\1)", s)
    s = re.sub(r"√\s*(\d+(?:\.\d+)?)", r"sqrt(\1)", s)
    s = re.sub(r"√\s*\(", "sqrt(", s)
    s = s.replace("\\pi", " pi ").replace("π", " pi ")
    for token, repl in (("\\cdot", "*"), ("\\times", "*"), ("×", "*"), ("·", "*"), ("÷", "/")):
        s = s.replace(token, repl)
    s = s.replace("{", "(").replace("}", ")").replace("^", "**").replace("°", "")
    s = re.sub(r"\s+", " ", s).strip()
    if not s or re.search(r"[^0-9.+\-*/() a-z]", s):
        return None
    if set(re.findall(r"[a-z]+", s)) - _EXPR_NAMES:
        return None
    s = re.sub(r"(?<=[\d.)])\s*(?=[(a-z])", "*", s)
    s = re.sub(r"(?<=pi)\s*(?=[\d(a-z])", "*", s)
    s = re.sub(r"\)\s*(?=\d)", ")*", s)
    return s


def _eval_node(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval_node(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Name) and node.id == "pi":
        return math.pi
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval_node(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "sqrt":
        if len(node.args) != 1 or node.keywords:
            raise ValueError("sqrt takes one argument")
        return math.sqrt(_eval_node(node.args[0]))
    if isinstance(node, ast.BinOp):
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.Div):
            return left / right
        if isinstance(node.op, ast.Pow):
            if abs(right) > 64 or abs(left) > 1e6:
                raise ValueError("power too large")
            return float(left**right)
    raise ValueError(f"not arithmetic: {type(node).__name__}")


def _value_part(text: str) -> str:
    """An answer as a reader sees it, without a final period; of an equation, the part
    after the last ``=``."""
    s = clean_latex(str(text)).strip().rstrip(".").strip()
    return s.rsplit("=", 1)[1].strip() if "=" in s else s


def math_value(text: str | None) -> float | None:
    """The value of an answer that is one number or a LaTeX-light arithmetic expression
    (``14 cm``, ``60°``, ``\\frac{1}{2}``, ``2\\sqrt{3}``, ``4\\pi``, ``3^2``; the part
    after the last ``=``), else None (a symbolic answer such as ``y=2x+1``)."""
    if text is None:
        return None
    s = _value_part(text)
    if not s:
        return None
    value = to_number(s)
    if value is not None:
        return value
    source = _latex_to_python(s)
    if source is None:
        return None
    try:
        result = _eval_node(ast.parse(source, mode="eval"))
    except (SyntaxError, ValueError, TypeError, ArithmeticError, RecursionError):
        return None
    if isinstance(result, complex) or math.isnan(result) or math.isinf(result):
        return None
    return float(result)


def _stated_decimals(text: str) -> int:
    """Decimals of an answer written as a plain decimal number (``3.46`` -> 2), else 0."""
    s = _value_part(text)
    m = re.fullmatch(r"(?:approximately|approx\.?|about|≈|~)?\s*[-+]?\d*\.(\d+)\s*\D*", s, re.I)
    return len(m.group(1)) if m else 0


def math_close(pred: float, gold: float, pred_text: str = "", gold_text: str = "") -> bool:
    """Equal within half a unit of the last decimal either side states, else within
    1e-6 relative (the ``mathverse`` rule)."""
    tol = 1e-6 * max(1.0, abs(gold))
    for t in (pred_text, gold_text):
        k = _stated_decimals(t)
        if k:
            tol = max(tol, 0.5 * 10.0**-k)
    return abs(pred - gold) <= tol + 1e-9


def _math_key(text: str) -> str:
    return _latex_key(text).replace("\\", "")


def _math_text_equal(pred: str, gold: str) -> bool:
    if _math_key(pred) == _math_key(gold) or same_text(pred, gold):
        return True
    if ("=" in pred) != ("=" in gold):
        return _math_key(pred.rsplit("=", 1)[-1]) == _math_key(gold.rsplit("=", 1)[-1])
    return False


def _mathverse_letters(sample: Sample) -> str:
    letters = letters_for(len(sample.choices)) if sample.choices else _valid_letters(sample)
    gold = sample.answer.strip().upper()
    if len(gold) == 1 and "A" <= gold <= "Z" and gold not in letters:
        letters = letters_for(ord(gold) - ord("A") + 1)
    return letters


def _mathverse_span(text: str) -> tuple[str, str] | None:
    """The answer span: the last ``\\boxed{}``, else the last answer tag / cue."""
    boxed = find_boxed(text)
    if boxed:
        return boxed[-1][1], "boxed"
    for marker in final_markers(text):
        if marker.segment.strip():
            return marker.segment, marker.method
    return None


class MathVerseScorer(Scorer):
    name = "mathverse"

    def judge(self, sample: Sample, text: str) -> Score:
        if sample.answer_type == "letter":
            letters = _mathverse_letters(sample)
            ext = extract_letter(text, sample.choices, letters)
            if not ext.ok:
                return _failed(ext.reason or "no option letter found")
            return _verdict(ext.value, ext.value == sample.answer.strip().upper(), ext)
        gold = sample.answer
        gold_value = math_value(gold)
        found = _mathverse_span(text)
        if found is None:
            if gold_value is not None:
                numbers = find_numbers(text)
                if not numbers:
                    return _failed("no \\boxed{} answer, answer cue or number found")
                pred = fmt_number(numbers[-1])
                ok = math_close(numbers[-1], gold_value, pred, gold)
                return _verdict(pred, ok, Extraction(pred, "last-number"))
            ext = extract_short(text)
            if not ext.ok:
                return _failed(ext.reason or "no answer found")
            found = (ext.value, ext.method)
        span, rule = found
        pred = clean_latex(span).strip().rstrip(".").strip()
        if not pred:
            return _failed(f"the {rule} answer is empty")
        if gold_value is not None:
            value = math_value(pred)
            if value is not None:
                ok = math_close(value, gold_value, pred, gold)
                return _verdict(pred, ok, Extraction(pred, rule))
        return _verdict(pred, _math_text_equal(pred, gold), Extraction(pred, rule))


# --------------------------------------------------------------------------- Idis: LogicVista

_LV_RANGE = re.compile(r"\b([A-Z])\s*(?:-|–|to)\s*([A-Z])\b")
_LV_PAREN = re.compile(r"\(([A-Z])\)")
_LV_LIST = re.compile(r"\b[A-Z](?:\s*,\s*[A-Z]\b)+(?:,?\s*(?:and|or)\s*[A-Z]\b)?")
_LV_LETTER = re.compile(r"(?<![A-Za-z0-9])\(?([A-Z])\)?(?![A-Za-z0-9])")


def _logicvista_letters(sample: Sample, gold: list[str]) -> str:
    question = sample.question
    named = [m.group(2) for m in _LV_RANGE.finditer(question)]
    named += _LV_PAREN.findall(question)
    for m in _LV_LIST.finditer(question):
        named += re.findall(r"\b[A-Z]\b", m.group(0))
    last = max(["D", *named, *gold])
    return letters_for(ord(last) - ord("A") + 1)


def _letters_in(segment: str, letters: str) -> list[str] | None:
    """The valid option letters a short span names (``A, C`` / ``(B) and (D)``), or None
    when it names none."""
    s = clean_latex(segment)
    s = re.sub(r"\b(?:options?|choices?|answers?)\b\s*[:：]?", " ", s, flags=re.I)
    found = {m.group(1) for m in _LV_LETTER.finditer(s) if m.group(1) in letters}
    return sorted(found) or None


def _only_letters(text: str, letters: str) -> list[str] | None:
    s = clean_latex(text).strip().strip(".")
    rest = _LV_LETTER.sub("", s)
    if re.sub(r"(?:\band\b|[,;&\s*])", "", rest, flags=re.I):
        return None
    return _letters_in(s, letters)


class LogicVistaScorer(Scorer):
    name = "logicvista"

    def judge(self, sample: Sample, text: str) -> Score:
        if sample.answer_type == "number":
            return _judge_number(sample, text, None)
        gold = option_letters(sample.answer)
        if gold is None:
            raise ValueError(
                f"the answer {sample.answer!r} of {sample.sample_id} is not option letters"
            )
        letters = _logicvista_letters(sample, gold)
        pred: list[str] | None = None
        rule = ""
        for marker in final_markers(text):
            pred = _letters_in(marker.segment, letters)
            if pred:
                rule = marker.method
                break
        if pred is None:
            lines = [ln for ln in text.splitlines() if ln.strip()]
            for candidate, name in ((text, "exact"), (lines[-1] if lines else "", "last-line")):
                pred = _only_letters(candidate, letters)
                if pred:
                    rule = name
                    break
        if pred is None and len(gold) == 1:
            ext = extract_letter(text, [], letters)
            if ext.ok:
                pred, rule = [ext.value], ext.method
        if not pred:
            return _failed(f"no option letters ({letters[0]}-{letters[-1]}) found")
        value = ", ".join(pred)
        return _verdict(value, pred == gold, Extraction(value, rule))


#: keyed by benchmark name (vlmrobust.core.benchmarks) or generic scorer name
SCORERS: dict[str, Scorer] = {
    "mmmu": MMMUScorer(),
    "mathvista": MathVistaScorer(),
    "mathvision": MathVisionScorer(),
    "chartqa": ChartQAScorer(),
    "hallusionbench": YesNoScorer(),
    "infovqa": InfoVQAScorer(),
    "mmstar": LetterScorer(),
    "textvqa": TextVQAScorer(),
    "distract-bench": DistractBenchScorer(),
    "imagenet9": ImageNet9Scorer(),
    "mathverse": MathVerseScorer(),
    "logicvista": LogicVistaScorer(),
    "waterbirds": WaterbirdsScorer(),
    "generic": GenericScorer(),
}


def get_scorer(name: str) -> Scorer:
    """The scorer ``name``; a benchmark without rules of its own (``demo``, ``visargs``,
    ``constructed``) maps to its record's scorer (``generic``)."""
    if name not in SCORERS and name in BENCHMARKS:
        name = BENCHMARKS[name].scorer
    if name not in SCORERS:
        raise ValueError(f"unknown scorer {name!r}; known scorers: {', '.join(sorted(SCORERS))}")
    return SCORERS[name]
