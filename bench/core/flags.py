"""Injection-like text in a model's answer: what a judge should never take as a verdict or an instruction.
Flags are a signal for reviewers, not a filter; patterns match a folded copy of the text (``_fold``)."""

from __future__ import annotations

import re
import unicodedata

_PATTERNS = {
    "verdict-like": [
        r'"\s*(?:scores?|verdict|grades?|rating)\s*"\s*:\s*[\[{"\d]',  # a JSON grade
        r"\[\[\s*[AB]\s*(?:>>|>|=|<<|<)\s*[AB]\s*\]\]",  # an arena verdict label
        r"\b(?:correct|final|right|true)\s+(?:grade|score|verdict|rating)\s+(?:is|=|:)",
        r"\b(?:give|grade|rate|score)\s+(?:this|the|my)\s+(?:answer|response|tip|reply)\s+(?:a\s+)?\d",
        r"\b\d\s*/\s*\d+\s+(?:reference\s+)?(?:answer|response)\b",  # "a 5/5 reference answer"
    ],
    "instruction-like": [
        r"\bignore\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?(?:previous\s+|prior\s+|above\s+)?"
        r"(?:instructions|rubric|rules|criteria|prompt)",
        r"\b(?:note|message|instructions?)\s+(?:to|for)\s+the\s+(?:evaluator|judge|grader|reviewer|assessor)",
        r"(?m)^\s*(?:system|assistant|developer)\s*:",
        r"\b(?:dear|attention)\s+(?:the\s+)?(?:evaluator|judge|grader)\b",
        r"\bgrade\s+(?:it|this)\s+accordingly\b",
    ],
    "delimiter": [
        r"</?\s*(?:answer|response|prompt)(?:-[0-9a-f]+)?\s*>",
    ],
}
_COMPILED = {kind: [re.compile(p, re.I) for p in pats] for kind, pats in _PATTERNS.items()}

_TAGS = re.compile("[\U000E0020-\U000E007E]")  # invisible "tag" copies of ASCII (0xE0000 + code point)
_HIDDEN = re.compile(  # zero-width, bidi, joiners, soft hyphen, variation selectors, fillers; Latin combining marks
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0001\U000e007f"
    "\U000e0100-\U000e01ef\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_LOOKALIKES = {  # Latin letter: its Cyrillic, Greek and other look-alikes (Unicode's confusables, the common ones)
    "a": "аαɑ", "b": "Ьƅ", "c": "сϲⅽ", "d": "ԁⅾ", "e": "еҽ", "g": "ɡ", "h": "һ", "i": "іιıɩ", "j": "јϳ",
    "k": "кκ", "l": "ӏⅼ", "n": "п", "o": "оοօ", "p": "рρ", "q": "ԛ", "r": "г", "s": "ѕ", "u": "υս", "v": "νѵ",
    "w": "ԝ", "x": "хχ", "y": "уγ", "A": "АΑ", "B": "ВΒ", "C": "СϹ", "E": "ЕΕ", "H": "НΗ", "I": "ІΙӀ", "J": "Ј",
    "K": "КΚ", "M": "МΜ", "N": "Ν", "O": "ОΟ", "P": "РΡ", "S": "Ѕ", "T": "ТΤ", "X": "ХΧ", "Y": "ҮΥ", "Z": "Ζ",
    "'": "‘’‚‛′‵ʼ", '"': "“”„‟″‶«»", "<": "‹〈⟨❮˂ᐸ", ">": "›〉⟩❯˃ᐳ", "/": "∕⁄⧸", "\n": "\u2028\u2029\x85\v\f\r",
}
_FOLD = str.maketrans({c: latin for latin, alikes in _LOOKALIKES.items() for c in alikes} | {"≫": ">>", "≪": "<<"})


def _fold(text: str) -> str:
    """Return ``text`` with its disguises undone (fullwidth, zero-width, look-alike, curly quotes), for matching."""
    text = _TAGS.sub(lambda m: chr(ord(m.group()) - 0xE0000), text)
    text = _HIDDEN.sub("", unicodedata.normalize("NFKD", text))
    return unicodedata.normalize("NFKC", text).translate(_FOLD)


def flags(text: str | None) -> list[str]:
    """Return the kinds of injection-like text in ``text`` (``verdict-like``, ``instruction-like``, ``delimiter``)."""
    if not text:
        return []
    folded = _fold(text)
    return [kind for kind, patterns in _COMPILED.items() if any(p.search(folded) for p in patterns)]
