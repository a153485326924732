"""Rule-based answer extraction: option letters, option text, numbers, yes/no, lists, labels.

Every extractor returns an :class:`Extraction` ``(value, method, reason)``. When nothing
can be extracted the value is ``None`` and ``reason`` says why — never a random guess
(the common harnesses pick a random letter there; we count it as an extraction
failure instead).

Explicit final-answer markers win over mere mentions, and among them the LAST one in
the text wins (models state the answer at the end; a later correction overrides an
earlier guess). The markers, tried from the last to the first until one parses:

- ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces handled) — method ``boxed``;
- ``<answer>...</answer>`` — method ``answer-tag``;
- a final-answer cue: "answer is", "answer:", "final answer", "the correct option
  is", "answer would be", "the answer to the question is", "the correct answer choice
  is", ... followed by the answer (up to the end of the line or
  sentence, or a whole ``\\[...\\]`` / ``\\(...\\)`` / ``$...$`` block; a cue inside a
  group, ``\\[\\text{Answer: C}\\]``, ends where that group closes) — method ``cue``.

Without a marker each extractor has its own fallbacks (in this order):

- letter: the whole text is a letter (``exact``), "B is the correct answer"
  (``cue``), the text starts with ``B.`` / ``(B)`` / ``B)`` / ``B:`` (``leading``), the
  last line is a letter (``last-line``), the whole text equals an option's text
  (``option-text``), the last ``(B)`` (``paren``), the option text mentioned last
  (``option-mention``, non-numeric options only), and — only in short texts (at
  most 20 words), where a capital letter is unlikely to be a point of a figure — the
  last standalone valid letter (``bare-letter``; an ``A`` followed by a lowercase word
  is the article). "option d" / "choice (b)" read as "option D" / "choice (B)" in
  every rule. A hedged answer, "C or D" (a marker's answer, or the whole short text or
  its last line), gives no letter (reason ``hedged answer``), or the later letter
  (``hedge-last``) where the scorer asks for it (MMMU, as its official parser); where
  the scorer asks for MMMU's rules, after ``paren`` come its letter rule (a letter
  standing as a word before a space or a period, the one found last: ``mmmu-letter``)
  and only then its option-content rule (``mmmu-option-text``), both before
  ``option-mention``, as its ``parse_multi_choice_response`` orders them;
- number: the whole text is a number (``exact``), else the last number (``last-number``;
  exponents ``^2`` and subscripts ``x_1`` are skipped);
- yes/no: the first word (``first-word``), the only one of yes/no that appears
  (``only-mention``), the only one in the last line (``last-line``); the "no" of "no
  doubt", "no question", "no wonder", "no matter" is not read (method ``yesno-idiom``
  where that changes the reading);
- short answer: the whole text when it is one line (``whole``), else the last line
  (``last-line``);
- list: the last bracketed list in the text (``last-list``);
- label: the whole text is a label (``exact``), the only label mentioned
  (``only-mention``), the only label in the last line (``last-line``).

Numbers: thousands separators, ``$``/``%``/``°`` and trailing units are stripped,
``\\frac{a}{b}`` and ``a/b`` become their value, the Unicode minus is a minus, and an
``x = 3`` answer reads the part after the last ``=``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "Extraction",
    "braced_group",
    "clean_latex",
    "extract_label",
    "extract_letter",
    "extract_list",
    "extract_number",
    "extract_short",
    "extract_yesno",
    "final_markers",
    "find_boxed",
    "find_numbers",
    "fmt_number",
    "letters_for",
    "match_option",
    "norm_text",
    "numbers_equal",
    "parse_list_value",
    "same_text",
    "to_number",
]


@dataclass(frozen=True)
class Extraction:
    """What an extractor found: ``value`` (None when nothing), how, and why not."""

    value: str | None
    method: str
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


def _fail(reason: str) -> Extraction:
    return Extraction(None, "none", reason)


# --------------------------------------------------------------------------- LaTeX-light

_UNWRAP = re.compile(
    r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mathsf|boxed|fbox|operatorname"
    r"|displaystyle|mbox|hbox)\s*\{([^{}]*)\}"
)
_DEGREE = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ\b|\\degree\b|\^\s*\{\s*°\s*\}")


def braced_group(text: str, start: int) -> tuple[str, int] | None:
    """The content of the ``{...}`` group opening at ``start`` (nested braces handled)
    and the index after its closing brace; None when no group opens there or it is
    never closed."""
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None


def find_boxed(text: str) -> list[tuple[int, str]]:
    """``(position, content)`` of every closed ``\\boxed{...}`` / ``\\fbox{...}``, in order."""
    out = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        group = braced_group(text, m.end() - 1)
        if group is not None:
            out.append((m.start(), group[0]))
    return out


def clean_latex(text: str) -> str:
    """Light LaTeX/markdown clean-up: the text a reader sees, whitespace collapsed."""
    s = str(text)
    for _ in range(5):
        new = _UNWRAP.sub(r"\1", s)
        if new == s:
            break
        s = new
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = _DEGREE.sub("°", s)
    s = s.replace("\\%", "%").replace("\\$", "$")
    s = re.sub(r"\\left\b|\\right\b", "", s)
    s = re.sub(r"\\[()\[\]]", " ", s)
    s = re.sub(r"\\[,;:! ]", " ", s)
    s = s.replace("$", " ").replace("~", " ").replace("−", "-").replace("–", "-")
    s = s.replace("**", "").replace("__", "")
    return re.sub(r"\s+", " ", s).strip()


def norm_text(text: str) -> str:
    """Comparison form of a short text: LaTeX-light, lowercase, outer punctuation off."""
    s = clean_latex(text).lower()
    s = s.strip(" \t\n.,;:!?\"'`*")
    return re.sub(r"\s+", " ", s)


def _compact(text: str) -> str:
    return re.sub(r"\s+", "", norm_text(text))


def same_text(a: str, b: str) -> bool:
    """Equal after :func:`norm_text`, spaces ignored."""
    return _compact(a) == _compact(b)


# --------------------------------------------------------------------------- numbers

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+"
_SIGNED = re.compile(rf"([-+]?)\s*({_NUM})")
_ONE_NUMBER = re.compile(
    rf"^(?:approximately|approx\.?|about|around|≈|=|~)?\s*(?:[$£€¥]\s*)?([-+]?)\s*({_NUM})"
    rf"(?:\s*/\s*([-+]?)\s*({_NUM}))?(.*)$",
    re.I,
)
_FRAC = re.compile(
    rf"^([-+]?)\s*\\frac\s*\{{\s*([-+]?)\s*({_NUM})\s*\}}\s*\{{\s*({_NUM})\s*\}}(.*)$"
)
_UNIT_EXP = re.compile(r"\^\s*\{?\s*-?\d+\s*\}?|[²³]")


def _float(text: str) -> float:
    return float(text.replace(",", ""))


def _unit_suffix(rest: str) -> bool:
    """Whether what follows a number is only a unit/percent/degree (no further number)."""
    if rest.lstrip().startswith("^"):
        return False  # a power of the number itself: 10^{-3}
    rest = _UNIT_EXP.sub("", rest).strip()
    if not rest:
        return True
    if rest[0] in "+-*×/^=,(" or rest.startswith(("\\times", "\\cdot", "\\sqrt", "\\pi", "x ")):
        return False
    return not re.search(r"\d", rest)


def to_number(text: str | None) -> float | None:
    """The value of a text that is one number (plus unit/currency/%/°), else None."""
    if text is None:
        return None
    s = clean_latex(text).strip().rstrip(".")
    if not s:
        return None
    m = _FRAC.match(s)
    if m:
        sign = -1.0 if (m.group(1) == "-") != (m.group(2) == "-") else 1.0
        den = _float(m.group(4))
        if den == 0 or not _unit_suffix(m.group(5)):
            return None
        return sign * _float(m.group(3)) / den
    m = _ONE_NUMBER.match(s)
    if not m or not _unit_suffix(m.group(5)):
        return None
    try:
        value = _float(m.group(2))
        if m.group(4):
            den = _float(m.group(4))
            if den == 0:
                return None
            value = value / den * (-1.0 if m.group(3) == "-" else 1.0)
    except (ValueError, OverflowError):
        return None
    if math.isinf(value) or math.isnan(value):
        return None
    return -value if m.group(1) == "-" else value


_IN_TEXT = re.compile(rf"(-?)\\frac\s*\{{\s*({_NUM})\s*\}}\s*\{{\s*({_NUM})\s*\}}|(-?)({_NUM})")


def _number_spans(s: str) -> list[tuple[float, int]]:
    """``(value, end)`` of each number of the cleaned text ``s`` (:func:`find_numbers`)."""
    out: list[tuple[float, int]] = []
    for m in _IN_TEXT.finditer(s):
        sign = m.group(1) if m.group(2) is not None else m.group(4)
        before = s[: m.start()]
        if re.search(r"[\^_]\s*\{?\s*$", before):
            continue  # an exponent or a subscript
        if not sign and re.search(r"[A-Za-z.]$", before):
            continue  # glued to a word: x2, v.2
        negative = bool(sign) and not re.search(r"[A-Za-z0-9)\]}]$", before)
        try:
            if m.group(2) is not None:
                den = _float(m.group(3))
                if den == 0:
                    continue
                value = _float(m.group(2)) / den
            else:
                value = _float(m.group(5))
        except (ValueError, OverflowError):
            continue
        if not math.isinf(value):
            out.append((-value if negative else value, m.end()))
    return out


def find_numbers(text: str) -> list[float]:
    """The numbers in a text, in order (``\\frac{a}{b}`` as one value; exponents ``^2``,
    subscripts ``x_1`` and digits glued to a letter skipped; a ``-`` is a sign unless it
    follows a letter, digit or closing bracket)."""
    return [value for value, _ in _number_spans(clean_latex(text))]


def fmt_number(value: float) -> str:
    """A number as text: integers without a decimal point, others with 12 significant digits."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".12g")


def numbers_equal(a: float, b: float, precision: int | None = None) -> bool:
    """Equal after rounding to ``precision`` decimals, else within 1e-6 relative."""
    if precision is not None:
        return round(a, precision) == round(b, precision)
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


# --------------------------------------------------------------------------- final-answer markers

_CUE = re.compile(
    r"\b(?:final\s+answer|(?:correct|right|best)\s+(?:answer|option|choice)|answer)\b"
    r"(?:\s+(?:choice|option))?(?:\s+to\s+(?:this|the)\s+(?:question|problem))?"
    r"\**\s*(?:(?:is|would\s+be|should\s+be|will\s+be)\b\s*[:：]?|[:：=])",
    re.I,
)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)


@dataclass(frozen=True)
class Marker:
    """A final-answer marker: where it is, the answer text it holds, its kind (method)."""

    pos: int
    segment: str
    method: str


def _segment_after(text: str, end: int) -> str:
    """The answer right after a cue: a math block, or up to the end of line/sentence."""
    rest = text[end : end + 400]
    rest = rest.lstrip(" \t\r\n*_:：")
    for opener, closer in (("\\[", "\\]"), ("$$", "$$"), ("\\(", "\\)"), ("$", "$")):
        if rest.startswith(opener):
            close = rest.find(closer, len(opener))
            return rest[len(opener) : close] if close >= 0 else rest[len(opener) :]
    line = _inside_group(rest.split("\n", 1)[0])
    m = re.search(r"\.(?=\s|$)", line)
    if m:
        line = line[: m.start()]
    return line.strip()


def _inside_group(line: str) -> str:
    """``line`` up to the end of the group the cue sits in: a ``}`` that closes a brace
    opened before the cue (``\\text{Answer: C}``), or a ``\\]`` / ``\\)`` that closes a
    math block opened before it (``\\[\\text{Answer: C}\\]``)."""
    depth = 0
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                return line[:i]
            depth -= 1
        elif ch == "\\" and line[i + 1 : i + 2] in ("[", "("):
            depth += 1
            i += 1
        elif ch == "\\" and line[i + 1 : i + 2] in ("]", ")"):
            if depth == 0:
                return line[:i]
            depth -= 1
            i += 1
        i += 1
    return line


def final_markers(text: str) -> list[Marker]:
    """Every final-answer marker of the text, the last one first."""
    found = [Marker(pos, content, "boxed") for pos, content in find_boxed(text)]
    found += [Marker(m.start(), m.group(1), "answer-tag") for m in _ANSWER_TAG.finditer(text)]
    for m in _CUE.finditer(text):
        seg = _segment_after(text, m.end())
        if seg.strip():
            found.append(Marker(m.start(), seg, "cue"))
    return sorted(found, key=lambda c: c.pos, reverse=True)


def _from_markers(text: str, read: Callable[[str], str | None]) -> Extraction | None:
    """The answer ``read`` finds in the first final-answer marker's segment
    (:func:`final_markers`) that has one, with that marker's method; None without one."""
    for cand in final_markers(text):
        value = read(cand.segment)
        if value:
            return Extraction(value, cand.method)
    return None


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


# --------------------------------------------------------------------------- letters

_OPTION_WORD = re.compile(r"\b((?i:option|choice)\s*\(?)([a-z])(?![\w'])")
_LEADING = re.compile(r"^\s*(?:\(([A-Z])\)|([A-Z])[.):])(?:\s|$)")
_EXACT_LETTER = re.compile(r"^\(?([A-Za-z])\)?[.:]?$")


def letters_for(n: int) -> str:
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: max(0, min(n, 26))]


def match_option(text: str, choices: Sequence[str]) -> int | None:
    """Index of the option whose text ``text`` is (normalized; or the same number)."""
    if not choices or not str(text).strip():
        return None
    hits = [i for i, c in enumerate(choices) if same_text(text, str(c))]
    if len(hits) == 1:
        return hits[0]
    if hits:
        return None
    value = to_number(text)
    if value is not None:
        hits = [
            i
            for i, c in enumerate(choices)
            if (cv := to_number(str(c))) is not None and numbers_equal(cv, value)
        ]
        if len(hits) == 1:
            return hits[0]
    return None


def _letter_from(segment: str, letters: str, choices: Sequence[str]) -> str | None:
    s = clean_latex(segment)
    s = re.sub(r"^(?:option|choice|answer)\s*[:：]?\s*", "", s, flags=re.I).strip()
    m = re.match(r"^\(?([A-Za-z])\)?(?=$|[\s.,:;)\]!?*])", s)
    if m:
        letter = m.group(1)
        if letter.isupper() and letter in letters:
            return letter
        if letter.islower() and letter.upper() in letters and len(s.strip(" .():*")) == 1:
            return letter.upper()
    if choices:
        i = match_option(s, choices)
        if i is not None:
            return letters[i]
    return None


def _upper_option_words(text: str, letters: str) -> str:
    """``option d`` / ``choice (b)`` with the valid letter upper-cased, so that every rule
    reads a lower-case option letter named by the word "option" as the upper-case one."""

    def up(m: re.Match[str]) -> str:
        letter = m.group(2)
        return m.group(1) + (letter.upper() if letter.upper() in letters else letter)

    return _OPTION_WORD.sub(up, text)


def _hedge_pattern(letters: str) -> str:
    one = rf"(?:(?:option|choice)\s+)?\(?([{letters}])\)?(?![A-Za-z0-9])"
    return rf"(?:either\s+)?{one}\s*,?\s*(?:\bor\b|/)\s*{one}"


def _hedged(span: str, letters: str, whole: bool) -> tuple[str, str] | None:
    """The two letters of a hedged answer (``C or D``, ``(C)/(D)``, ``either option C or
    D``): at the start of a marker's answer, or (``whole``) as the whole span."""
    s = clean_latex(span).strip()
    s = re.sub(r"^(?:(?:the\s+)?(?:final\s+)?answer\s*(?:is\s*)?[:：]?\s*)", "", s, flags=re.I)
    pattern = _hedge_pattern(letters)
    m = re.fullmatch(rf"\W*{pattern}[\s.!?*]*", s) if whole else re.match(pattern, s)
    if m and m.group(1) != m.group(2):
        return m.group(1), m.group(2)
    return None


def _hedge_result(pair: tuple[str, str], hedge: str) -> Extraction:
    if hedge == "last":
        return Extraction(pair[1], "hedge-last")
    return _fail(f"hedged answer: {pair[0]} or {pair[1]} (two options named, read as neither)")


def _mmmu_letter(text: str, letters: str) -> Extraction | None:
    """MMMU's ``parse_multi_choice_response`` letter rule, after its ``(A)`` (rule
    ``paren``): on the response stripped of outer ``,.!?;:'`` and padded with spaces, the
    valid letters standing as a word and followed by a space (``A is ...``), else those
    followed by a period (``A.``); of several, the one whose `` X `` comes last (the
    first listed on a tie, as the parser's ``argmax``). A letter ending a word ("DNA
    is") is no candidate, as in MMMU's own parser (lmms-eval's copy reads it)."""
    for char in ",.!?;:'":
        text = text.strip(char)
    padded = f" {text} "
    for after in (" ", "."):
        found = [c for c in letters if re.search(rf"(?<![A-Za-z0-9]){c}{re.escape(after)}", padded)]
        if found:
            best = max(found, key=lambda c: padded.rfind(f" {c} "))
            return Extraction(best, "mmmu-letter")
    return None


def _option_text_search(text: str, choices: Sequence[str], letters: str) -> Extraction | None:
    """MMMU's ``parse_multi_choice_response`` option-content rule: in a response of more
    than five words, the option whose text (case-insensitive, as given) occurs in it,
    the one found last when several do (the first option on a tie)."""
    low = text.lower()
    if len(text.split()) <= 5:
        return None
    best: tuple[int, int] | None = None
    for i, choice in enumerate(choices[: len(letters)]):
        key = choice.lower()
        if not key.strip():
            continue
        pos = low.rfind(key)
        if pos >= 0 and (best is None or pos > best[1]):
            best = (i, pos)
    if best is None:
        return None
    return Extraction(letters[best[0]], "mmmu-option-text")


def _option_mention(text: str, choices: Sequence[str], letters: str) -> Extraction | None:
    """The non-numeric option whose text (as words) the text mentions last."""
    low = norm_text(text)
    best: tuple[int, int] | None = None
    for i, c in enumerate(choices):
        key = norm_text(c)
        if len(key) < 2 or to_number(c) is not None:
            continue
        hits = [m.start() for m in re.finditer(rf"(?<!\w){re.escape(key)}(?!\w)", low)]
        if hits and (best is None or hits[-1] > best[1]):
            best = (i, hits[-1])
    return None if best is None else Extraction(letters[best[0]], "option-mention")


def extract_letter(
    text: str,
    choices: Sequence[str] | None = None,
    letters: str | None = None,
    *,
    hedge: str = "unparsed",
    option_search: str = "mention",
) -> Extraction:
    """The option letter a response gives (see the module docstring for the rules).

    ``letters`` are the valid letters (default: one per choice, else ``ABCD``).
    ``hedge``: what a hedged answer (``C or D``) gives: ``unparsed`` (the default: no
    letter, reason ``hedged answer``) or ``last`` (the later letter, method
    ``hedge-last``: MMMU's official parser). ``option_search``: ``mention`` (the
    default: option texts as words, non-numeric options only) or ``mmmu`` (MMMU's
    letter rule, method ``mmmu-letter``, then its option-content rule, method
    ``mmmu-option-text``, before the option mentions).
    """
    choices = [str(c) for c in (choices or [])]
    letters = letters or letters_for(len(choices)) or "ABCD"
    text = _upper_option_words(str(text or ""), letters)
    if not text.strip():
        return _fail("empty output")
    whole = clean_latex(text)
    m = _EXACT_LETTER.match(whole)
    if m and m.group(1).upper() in letters:
        return Extraction(m.group(1).upper(), "exact")
    for cand in final_markers(text):
        pair = _hedged(cand.segment, letters, whole=False)
        if pair is not None:
            return _hedge_result(pair, hedge)
        value = _letter_from(cand.segment, letters, choices)
        if value:
            return Extraction(value, cand.method)
    lines = _lines(text)
    for span in ([text] if len(whole.split()) <= 20 else []) + lines[-1:]:
        pair = _hedged(span, letters, whole=True)
        if pair is not None:
            return _hedge_result(pair, hedge)
    reverse = list(
        re.finditer(
            rf"(?:\b(?:option|choice)\s+)?\(?\b([{letters}])\b\)?\**\s+is\s+(?:the\s+)?"
            r"(?:correct|right|best)\b",
            text,
        )
    )
    if reverse:
        return Extraction(reverse[-1].group(1), "cue")
    m = _LEADING.match(whole)
    if m and (m.group(1) or m.group(2)) in letters:
        return Extraction(m.group(1) or m.group(2), "leading")
    if lines:
        m = _EXACT_LETTER.match(clean_latex(lines[-1]))
        if m and m.group(1).isupper() and m.group(1) in letters:
            return Extraction(m.group(1), "last-line")
    if choices:
        i = match_option(text, choices)
        if i is not None:
            return Extraction(letters[i], "option-text")
    return _letter_mentions(text, whole, choices, letters, option_search)


def _letter_mentions(
    text: str, whole: str, choices: Sequence[str], letters: str, option_search: str
) -> Extraction:
    """The last rules of :func:`extract_letter`, when no cue or layout gave the letter:
    ``paren``, MMMU's letter and option-content rules (``option_search`` ``mmmu``),
    ``option-mention``, ``bare-letter``; ``whole`` is the text's :func:`clean_latex`."""
    parens = [m.group(1) for m in re.finditer(r"\(([A-Z])\)", text) if m.group(1) in letters]
    if parens:
        return Extraction(parens[-1], "paren")
    if option_search == "mmmu":
        found = _mmmu_letter(text, letters)
        if found is None and choices:
            found = _option_text_search(text, choices, letters)
        if found is not None:
            return found
    if choices:
        found = _option_mention(text, choices, letters)
        if found is not None:
            return found
    if len(whole.split()) <= 20:
        bare = [
            m.group(1)
            for m in re.finditer(r"(?<![A-Za-z0-9\\{_^])([A-Z])(?![A-Za-z0-9])", whole)
            if m.group(1) in letters
            and not (m.group(1) == "A" and re.match(r"\s+[a-z]", whole[m.end() :]))
        ]
        if bare:
            return Extraction(bare[-1], "bare-letter")
    return _fail(f"no option letter ({letters[0]}-{letters[-1]}) or option text found")


# --------------------------------------------------------------------------- numbers


def _percent_after(s: str, end: int) -> str:
    """``%`` when the number ending at ``end`` of ``s`` is written as a percentage."""
    return "%" if s[end:].lstrip().startswith("%") else ""


def _number_from(segment: str) -> tuple[float, str] | None:
    s = clean_latex(segment)
    if "=" in s:
        s = s.rsplit("=", 1)[1]
    spans = _number_spans(s)
    value = to_number(s)
    if value is not None:
        return value, "%" if re.search(r"\d\s*%", s) else ""
    if spans:
        return spans[0][0], _percent_after(s, spans[0][1])
    return None


def extract_number(text: str, keep_percent: bool = False) -> Extraction:
    """The numeric answer: last marker, else the whole text, else the last number.

    With ``keep_percent`` a number written as a percentage keeps its ``%`` (``24%``), for
    a scorer that reads a percentage differently from the bare number (``chartqa``)."""
    text = str(text or "")
    if not text.strip():
        return _fail("empty output")

    def out(value: float, percent: str, method: str) -> Extraction:
        return Extraction(fmt_number(value) + (percent if keep_percent else ""), method)

    for cand in final_markers(text):
        found = _number_from(cand.segment)
        if found is not None:
            return out(*found, cand.method)
    value = to_number(text)
    if value is not None:
        return out(value, "%" if re.search(r"\d\s*%", clean_latex(text)) else "", "exact")
    s = clean_latex(text)
    spans = _number_spans(s)
    if spans:
        return out(spans[-1][0], _percent_after(s, spans[-1][1]), "last-number")
    return _fail("no number found")


# --------------------------------------------------------------------------- yes/no

_YN = re.compile(r"\b(yes|no)\b", re.I)


def _yesno_from(segment: str) -> str | None:
    m = re.match(r"^(yes|no)\b", norm_text(segment))
    return m.group(1) if m else None


#: a "no" that is part of an idiom, not an answer ("No doubt about it: yes.")
_NO_IDIOM = re.compile(r"\bno\s+(?:doubt|question|wonder|matter)\b", re.I)


def extract_yesno(text: str) -> Extraction:
    """``yes`` or ``no``: last marker, first word, the only one mentioned, last line.

    A "no" of an idiom (``no doubt``, ``no question``, ``no wonder``, ``no matter``) is
    not read as an answer; when that changes the reading the method is ``yesno-idiom``."""
    text = str(text or "")
    if not text.strip():
        return _fail("empty output")
    masked = _NO_IDIOM.sub(lambda m: "~" * len(m.group(0)), text)
    if masked == text:
        return _read_yesno(text)
    found = _read_yesno(masked)
    if found.ok and found.value != _read_yesno(text).value:
        return Extraction(found.value, "yesno-idiom")
    return found


def _read_yesno(text: str) -> Extraction:
    marked = _from_markers(text, _yesno_from)
    if marked is not None:
        return marked
    value = _yesno_from(text)
    if value:
        return Extraction(value, "first-word")
    found = {w.lower() for w in _YN.findall(text)}
    if len(found) == 1:
        return Extraction(found.pop(), "only-mention")
    lines = _lines(text)
    if lines:
        last = {w.lower() for w in _YN.findall(lines[-1])}
        if len(last) == 1:
            return Extraction(last.pop(), "last-line")
    if found:
        return _fail("both yes and no appear and no final-answer cue says which")
    return _fail("neither yes nor no found")


# --------------------------------------------------------------------------- short answers


def _short_from(segment: str) -> str | None:
    s = clean_latex(segment).strip().strip("\"'`").rstrip(".").strip()
    return s or None


def extract_short(text: str) -> Extraction:
    """A short free-text answer: last marker, else the whole one-line text, else the last line."""
    text = str(text or "")
    if not text.strip():
        return _fail("empty output")
    marked = _from_markers(text, _short_from)
    if marked is not None:
        return marked
    lines = _lines(text)
    if len(lines) == 1:
        value = _short_from(lines[0])
        if value:
            return Extraction(value, "whole")
    for line in reversed(lines):
        value = _short_from(line)
        if value:
            return Extraction(value, "last-line")
    return _fail("no answer text found")


# --------------------------------------------------------------------------- lists

_BRACKETED = re.compile(r"[\[(]([^\[\]()]*,[^\[\]()]*)[\])]")


def _list_items(inner: str) -> list[str]:
    items = []
    for part in inner.split(","):
        part = part.strip()
        value = to_number(part)
        items.append(fmt_number(value) if value is not None else norm_text(part))
    return items


def parse_list_value(text: str) -> list[str] | None:
    """The first bracketed, comma-separated list in a text, as normalized items."""
    m = _BRACKETED.search(clean_latex(text))
    if not m:
        return None
    return _list_items(m.group(1))


def extract_list(text: str) -> Extraction:
    """A list answer (``[1, 2]`` or ``(3, -4)``): last marker, else the last list in the text."""
    text = str(text or "")
    if not text.strip():
        return _fail("empty output")
    for cand in final_markers(text):
        items = parse_list_value(cand.segment)
        if items is not None:
            return Extraction("[" + ", ".join(items) + "]", cand.method)
    found = list(_BRACKETED.finditer(clean_latex(text)))
    if found:
        return Extraction("[" + ", ".join(_list_items(found[-1].group(1))) + "]", "last-list")
    return _fail("no bracketed list found")


# --------------------------------------------------------------------------- labels


def _label_pattern(label: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(norm_text(label))}(?:s|es)?(?!\w)")


def _labels_in(text: str, labels: Sequence[str]) -> list[str]:
    low = norm_text(text)
    return [lab for lab in labels if _label_pattern(lab).search(low)]


def extract_label(text: str, labels: Sequence[str]) -> Extraction:
    """One of ``labels``: last marker, the whole text, the only label mentioned, last line."""
    text = str(text or "")
    labels = [str(lab) for lab in labels]
    if not text.strip():
        return _fail("empty output")
    if not labels:
        return _fail("the sample lists no labels to choose from")
    for cand in final_markers(text):
        hits = _labels_in(cand.segment, labels)
        if len(hits) == 1:
            return Extraction(hits[0], cand.method)
    for lab in labels:
        if same_text(text, lab):
            return Extraction(lab, "exact")
    hits = _labels_in(text, labels)
    if len(hits) == 1:
        return Extraction(hits[0], "only-mention")
    lines = _lines(text)
    if lines:
        last = _labels_in(lines[-1], labels)
        if len(last) == 1:
            return Extraction(last[0], "last-line")
    if hits:
        return _fail(f"several labels mentioned ({', '.join(hits)}) and no final-answer cue")
    return _fail("no label from the list found")
